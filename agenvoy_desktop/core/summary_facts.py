"""The summary's facts: sentences that carry names, numbers, dates and choices, kept as said.

A 0.5B model asked to summarise sixteen messages keeps a topic or two and
drops the rest: the hotel, the dates, the shop, the cat's name.  What such
a model does badly, code can do: this module picks, from every message a
summary pass folds, the sentences that carry something a person would want
kept — a name, a number, a date or time, a place, a choice, a preference —
and keeps them word for word, each with the message it came from and the
day it was said.  The model's part of the summary (topics, one line of
gist each, the current discussion) stays; the facts sit beside it, and the
Summary tab links each one to its message.

Three rules keep the list true and short:

* a fact that a newer one changes ("we're moving to Oak Lane" after "to
  Rose Street": the same words around a different name or number) is
  replaced, and the new one remembers what it replaced;
* the list holds at most :data:`MAX_FACTS` facts and :data:`MAX_FACT_CHARS`
  characters; when full, the oldest of the least telling facts go, and
  each pass records what it dropped and why (the archive still has them);
* nothing is invented: a fact is a sentence of a message, cut at a word
  when long, with relative days ("yesterday") given their date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

from agenvoy_desktop.core.decision_cues import states_decision
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.timeutil import local_date
from agenvoy_desktop.language.calendar_names import full_months, full_weekdays
from agenvoy_desktop.language.patterns import compiled, cue, every

MAX_FACTS = 40
"""Facts a summary keeps; the oldest of the least telling go first."""
MAX_FACT_CHARS = 4000
"""Characters of all facts together (about 1,000 tokens of the system prompt)."""
FACT_CHARS = 220
"""One fact: a longer sentence is cut at a word."""
MIN_SCORE = 3.0
"""What a sentence must carry to be kept (see :func:`score`)."""
PER_MESSAGE = 3
"""Sentences one message may give: a long answer must not fill the list alone."""
ECHO_WINDOW = 6
"""How far back a fact that only repeats an earlier one is looked for (an answer echoing the
question's facts follows it closely)."""
MIN_SLOT_WORDS = 2
"""Words two facts must share around their values; and they may differ in one word at most
("my new phone number"), so "The bread costs 3 euros" and "The milk costs 5 euros" stay two."""
SAME_SLOT_SHARE = 0.6
"""Share of an older fact's words (not names, not numbers) a newer one repeats to replace it."""

_SENTENCE = re.compile(r"(?<=[.!?。！？])(?<!\d\.)\s+|\n+")
"""Sentence ends; a dot after a digit is an ordinal ("am 14. März") or a list number."""
_WORD = re.compile(r"[^\W\d_][\w'’-]*|\d[\d.,:/]*")
_SPEAKER = re.compile(r"^([A-Z][\w'’-]{1,30}(?: [A-Z][\w'’-]{1,30})?): ")
_NUMBER = re.compile(r"\d")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_TIME_WORDS = frozenset(
    w.lower() for w in (*full_months(), *full_weekdays(), *every("summary.time_words"))
)
"""Words that date a sentence: the months and weekdays, "yesterday", "next week"."""
_SELF = compiled(cue("summary.self"), re.IGNORECASE)
"""The speaker talking of themselves ("I", "my", 我)."""
_LIKING = compiled(cue("summary.liking"), re.IGNORECASE)
"""A like or a dislike ("I love…", "I can't stand…"), a diet, a habit."""
_NOT_NAMES = frozenset(w.lower() for w in every("summary.not_names"))
"""Words that are no name when capitalised, and no content word ("The", "Thanks")."""
_PLANS = compiled(cue("summary.plans"), re.IGNORECASE)
"""A plan or an intention ("I'm going to…", "we signed up for…"): the future a person
expects their assistant to keep in mind."""
_PEOPLE = compiled(cue("summary.people"), re.IGNORECASE)
"""The people (and pets) of someone's life: "my daughter", "our dog"."""


def _opening(name: str, head: str = "", tail: str = "") -> re.Pattern[str]:
    """The cue *name* at a sentence's start (never matching when no language lists it)."""
    words = cue(name)
    return compiled(f"^{head}(?:{words}){tail}" if words else "", re.IGNORECASE)


_EVENTS = compiled(cue("summary.events"), re.IGNORECASE)
"""What happens in a life: married, a new job, moved, an injury, a project, a trip."""
_TO_YOU = _opening("summary.listener", head=r"(?:[^\W\d_]+, )?")
"""A sentence about the listener ("Your project will be great!"): praise, not a life event."""
_REMARK = _opening("summary.remarks")
"""A sentence that opens as a greeting or an exclamation ("Thanks!", "Sounds great")."""
_OPENING = _opening("summary.openings", tail=r"[\s,!.\u2014-]*")
"""An answer's first word ("Yeah, I got the job."): a remark only when nothing follows it."""
_RELATIVE_DAYS = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}
_RELATIVE = re.compile(r"\b(yesterday|today|tonight|tomorrow)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Fact:
    """A sentence of a folded message, kept as said.

    ``source`` is the message's id (the Summary tab links to it), ``said_on``
    its local date, ``role`` who said it.  ``replaced`` is the text of the
    earlier fact this one changed, so a person sees what changed.
    """

    text: str
    source: str
    said_on: str
    role: str
    score: float = 0.0
    replaced: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "source": self.source,
            "said_on": self.said_on,
            "role": self.role,
            "score": round(self.score, 2),
        }
        if self.replaced is not None:
            data["replaced"] = self.replaced
        return data


@dataclass(frozen=True, slots=True)
class DroppedFact:
    """A fact the list let go, and why (the pass record keeps these for the Summary tab)."""

    text: str
    source: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "source": self.source, "reason": self.reason}


# -- picking ---------------------------------------------------------------------------
_ABBREVIATION = re.compile(
    r"(?:\b(?:dr|mr|mrs|ms|prof|st|mt|vs|etc|e\.g|i\.e|jr|sr|dept|approx)|\b[A-Z])\.$",
    re.IGNORECASE,
)
"""A dot that ends "Dr." or an initial ("J.") does not end the sentence."""


def split_sentences(text: str) -> list[str]:
    """*text* cut at sentence ends and line breaks, blank pieces left out.

    "My dentist is Dr. Okafor." stays one sentence: a cut after a title or
    an initial would keep the name apart from what it is the name of.
    """
    pieces: list[str] = []
    start = 0
    for end in _SENTENCE.finditer(text):
        if "\n" in end.group() or not _ABBREVIATION.search(text[start : end.start()]):
            pieces.append(text[start : end.start()])
            start = end.end()
    pieces.append(text[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def content_words(text: str) -> list[str]:
    """Lower-cased words of three or more letters and numbers; CJK runs as bigrams."""
    found: list[str] = []
    for word in _WORD.findall(text):
        lower = word.lower()
        if _CJK.search(lower):
            found.extend(lower[i : i + 2] for i in range(max(1, len(lower) - 1)))
        elif lower[0].isdigit() or (len(lower) >= 3 and lower not in _NOT_NAMES):
            found.append(lower)
    return found


def _names(words: Sequence[str]) -> int:
    """Capitalised words that are not the sentence's first word nor common words."""
    return sum(
        1
        for i, word in enumerate(words)
        if i > 0 and word[:1].isupper() and word.lower().strip("'’") not in _NOT_NAMES
    )


def _values_in(words: Sequence[str]) -> int:
    """Names, numbers and time words of a sentence (what a summary must not lose unseen)."""
    names = min(2, _names(words))
    numbers = min(2, sum(1 for w in words if _NUMBER.search(w)))
    times = 1 if any(w.lower() in _TIME_WORDS for w in words) else 0
    return names + numbers + times


def judge(sentence: str) -> tuple[float, str | None]:
    """How much a sentence carries, and why it is left out when it is (None when kept).

    Names, numbers (up to two each), a time word, a choice settled each
    count 2; a like or dislike 1.5; the speaker talking of themselves, a
    plan, someone of their life, something that happened in it (married,
    a new job, a trip; not said of the listener: "your project will be
    great" is praise) — the language files' ``summary.*`` — 1 each;
    content words a quarter each, up to 12.  A question, a short piece,
    and a remark that opens with a greeting or an exclamation and carries
    no name, number or time score 0: what the summary leaves out.  An
    answer's first word ("Yeah, I got the job.") does not make the rest a
    remark: what follows it is judged.
    """
    words = _WORD.findall(sentence)
    content = content_words(sentence)
    if sentence.rstrip().endswith(("?", "？")):
        return 0.0, "a question"
    if len(content) < 3:
        return 0.0, "too short to tell anything"
    values = _values_in(words)
    if _REMARK.match(sentence) and values == 0:
        rest = _OPENING.sub("", sentence, count=1)
        if rest == sentence or not rest:
            return 0.0, "a greeting or remark"
        return judge(rest)
    value = 2.0 * values
    value += 2.0 if states_decision(sentence) else 0.0
    value += 1.5 if _LIKING.search(sentence) else 0.0
    value += 1.0 if _SELF.search(sentence) else 0.0
    value += 1.0 if _PLANS.search(sentence) else 0.0
    value += 1.0 if _PEOPLE.search(sentence) else 0.0
    value += 1.0 if _EVENTS.search(sentence) and not _TO_YOU.match(sentence) else 0.0
    value += 0.25 * min(12, len(content))
    if value < MIN_SCORE:
        return value, f"says too little to keep on its own (scores {value:.2g} of {MIN_SCORE:g})"
    return value, None


def score(sentence: str) -> float:
    """:func:`judge`'s score alone."""
    return judge(sentence)[0]


def _with_dates(sentence: str, said: date) -> str:
    """ "yesterday" → "yesterday (7 May 2023)": the fact outlives the day it was said on."""

    def dated(match: re.Match[str]) -> str:
        day = said + timedelta(days=_RELATIVE_DAYS[match.group(1).lower()])
        return f"{match.group(1)} ({day_text(day)})"

    return _RELATIVE.sub(dated, sentence, count=1)


def day_text(day: date) -> str:
    """A date as people write it: "7 May 2023"."""
    return f"{day.day} {day.strftime('%B')} {day.year}"


def _cut(text: str, limit: int = FACT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:-")
    return head + "\u2026"


@dataclass(slots=True)
class Picked:
    """A pass's facts, and the sentences with a name, number or date that were left out."""

    facts: list[Fact] = field(default_factory=list)
    left_out: list[DroppedFact] = field(default_factory=list)


def facts_of(message: Message, into: Picked | None = None) -> Picked:
    """The sentences of one message worth keeping, at most :data:`PER_MESSAGE`, in order.

    Only what the user and the assistant said: tool traffic is in the
    timeline.  A "Name: " prefix (imported group chats) is put before
    every fact of the message, so each fact says who.  A sentence with a
    name, number or date that is not kept is noted in ``left_out`` with
    the reason, so the Summary tab can show it was let go on purpose.
    """
    picked = into if into is not None else Picked()
    if message.role not in ("user", "assistant") or not message.content.strip():
        return picked
    said = local_date(message.time_ns)
    text = message.content.strip()
    speaker = _SPEAKER.match(text)
    prefix = speaker.group(0) if speaker else ""
    good: list[tuple[float, int, str]] = []
    for at, sentence in enumerate(split_sentences(text[len(prefix) :])):
        value, why = judge(sentence)
        if why is None:
            good.append((value, at, sentence))
        elif _values_in(_WORD.findall(sentence)):
            picked.left_out.append(DroppedFact(_cut(prefix + sentence), message.id, why))
    best = sorted(good, key=lambda item: -item[0])
    for _, _, sentence in best[PER_MESSAGE:]:
        reason = f"one message gives at most {PER_MESSAGE} facts; others told more"
        picked.left_out.append(DroppedFact(_cut(prefix + sentence), message.id, reason))
    picked.facts.extend(
        Fact(
            text=_cut(prefix + _with_dates(sentence, said)),
            source=message.id,
            said_on=said.isoformat(),
            role=message.role,
            score=value,
        )
        for value, _, sentence in sorted(best[:PER_MESSAGE], key=lambda item: item[1])
    )
    return picked


def pick_facts(messages: Iterable[Message]) -> Picked:
    """Every folded message's facts, in the order they were said, and what was left out."""
    picked = Picked()
    for message in messages:
        facts_of(message, picked)
    return picked


# -- merging ---------------------------------------------------------------------------
def _slot(text: str) -> set[str]:
    """What a fact is about, without its values: content words that are not names or numbers."""
    words = _WORD.findall(text)
    return {
        w.lower()[:5]
        for i, w in enumerate(words)
        if not _NUMBER.search(w)
        and not (i > 0 and w[:1].isupper())
        and len(w) >= 3
        and w.lower() not in _NOT_NAMES
    }


def _values(text: str) -> set[str]:
    """A fact's values: its names and numbers."""
    words = _WORD.findall(text)
    return {
        w.lower() for i, w in enumerate(words) if _NUMBER.search(w) or (i > 0 and w[:1].isupper())
    }


def replaces(new: Fact, old: Fact) -> bool:
    """Whether *new* changes *old*: the same words around other names or numbers.

    "We're moving to 5 Oak Lane on Friday" replaces "We're moving to 12 Rose
    Street on Friday": the words around the values are the same (one more
    or one fewer at most), and the values differ.  Facts without values
    never replace each other.
    """
    if new.role != old.role:
        return False
    old_slot, new_slot = _slot(old.text), _slot(new.text)
    old_values, new_values = _values(old.text), _values(new.text)
    if len(old_slot) < MIN_SLOT_WORDS or not old_values or not new_values:
        return False
    if old_values <= new_values:
        return False
    shared = len(old_slot & new_slot)
    if len(old_slot ^ new_slot) > 1:  # "bread" → "milk": another thing, not a change
        return False
    return shared >= MIN_SLOT_WORDS and shared >= SAME_SLOT_SHARE * len(old_slot)


def merge_facts(
    earlier: Sequence[Fact], new: Sequence[Fact]
) -> tuple[tuple[Fact, ...], list[DroppedFact]]:
    """The summary's facts after a pass: *earlier* updated by *new*, then cut to the budget.

    A new fact that repeats an earlier one word for word is not added twice,
    nor one whose words are all in one of the last few facts (an answer that
    says the user's fact back); one that changes an earlier fact takes its
    place (see :func:`replaces`).
    Over :data:`MAX_FACTS` or :data:`MAX_FACT_CHARS`, the lowest-scoring
    facts go, the oldest first among equals.
    """
    kept = list(earlier)
    dropped: list[DroppedFact] = []
    seen = {_key(f.text) for f in kept}
    for fact in new:
        if _key(fact.text) in seen:
            continue
        seen.add(_key(fact.text))
        echoed = next((k for k in kept[-ECHO_WINDOW:] if _echoes(fact, k)), None)
        if echoed is not None:
            reason = f"says again what was just said: {echoed.text}"
            dropped.append(DroppedFact(fact.text, fact.source, reason))
            continue
        changed = next((at for at, old in enumerate(kept) if replaces(fact, old)), None)
        if changed is None:
            kept.append(fact)
            continue
        old = kept.pop(changed)
        dropped.append(DroppedFact(old.text, old.source, f"changed: {fact.text}"))
        kept.append(replace(fact, replaced=old.text))
    return _within_budget(kept, dropped)


def _within_budget(
    kept: list[Fact], dropped: list[DroppedFact]
) -> tuple[tuple[Fact, ...], list[DroppedFact]]:
    order = sorted(range(len(kept)), key=lambda i: (kept[i].score, i))
    gone: set[int] = set()
    chars = sum(len(f.text) for f in kept)
    for i in order:
        if len(kept) - len(gone) <= MAX_FACTS and chars <= MAX_FACT_CHARS:
            break
        gone.add(i)
        chars -= len(kept[i].text)
        reason = (
            f"the summary keeps {MAX_FACTS} facts; this one told least "
            "(still in the archive: search finds it)"
        )
        dropped.append(DroppedFact(kept[i].text, kept[i].source, reason))
    return tuple(f for i, f in enumerate(kept) if i not in gone), dropped


def _stems(text: str) -> set[str]:
    return {word[:5] for word in content_words(text)}


def _echoes(new: Fact, earlier: Fact) -> bool:
    """*new* only says again what *earlier* said ("Blue Wagon Movers at 640 euros." after
    "I booked Blue Wagon Movers, they quoted 640 euros."): all its words are in it."""
    words = _stems(new.text)
    return len(words) >= 2 and words < _stems(earlier.text)


def _key(text: str) -> str:
    return " ".join(content_words(text))


# -- reading and showing ---------------------------------------------------------------
def fact_from_json(data: object) -> Fact:
    """A stored fact; raises ValueError when it is not one."""
    if not isinstance(data, dict):
        raise ValueError("a fact must be an object")
    text, source, said_on, role = (data.get(k) for k in ("text", "source", "said_on", "role"))
    if not all(isinstance(v, str) and v for v in (text, source, said_on, role)):
        raise ValueError("a fact needs text, source, said_on and role")
    replaced = data.get("replaced")
    raw_score = data.get("score", 0.0)
    return Fact(
        text=str(text)[: FACT_CHARS + 1],
        source=str(source),
        said_on=str(said_on),
        role=str(role),
        score=float(raw_score) if isinstance(raw_score, int | float) else 0.0,
        replaced=replaced if isinstance(replaced, str) else None,
    )


FACTS_HEADER = "Said earlier in this conversation (word for word, oldest first):"


def render_facts(facts: Sequence[Fact]) -> str:
    """The facts as system-prompt lines: ``- 8 May 2023, you: …``; "" when there are none."""
    if not facts:
        return ""
    lines = [FACTS_HEADER]
    for fact in facts:
        who = "you" if fact.role == "user" else "I (the assistant)"
        lines.append(f"- {_day(fact.said_on)}, {who}: {fact.text}")
    return "\n".join(lines)


def _day(iso: str) -> str:
    try:
        return day_text(date.fromisoformat(iso))
    except ValueError:
        return iso
