"""Checking an answer against what memory showed the model, before the user reads it as final.

A 0.5B model reads a recall block and still answers against it.  Seen in
the window: under "Remembered 1 thing you said before: I'm allergic to
penicillin." the starter answered "Am I allergic to anything?" with "No, I
am not allergic to anything." — twice, also after Regenerate.  On long
histories it answered "How many projects have I finished?" with the older
of two recalled values, "How long did I wait for my asylum decision?" with
"2. 5. 28", and once wrote a tool call out as prose ("The function
`date_calc` was called with …").  A health fact denied under its own
evidence is the worst answer a memory-keeping assistant can give, so the
turn checks each final answer that memory informed (:func:`check`):

- **a tool call as prose**: the answer quotes a tool's JSON or names a
  tool being called;
- **the notes copied**: the answer is the recall block itself, its header
  or its dated lines (:func:`copies_notes`);
- **polarity**: a yes/no question ("Am I / Do I / Have I …", 吗, か,
  "Bin ich …") whose words one remembered line holds: the line's polarity
  (negated or not, in the clause that holds them) is the expected answer,
  and an answer that clearly says the opposite contradicts it;
- **an older value**: the line marked as the latest restates an earlier
  one with another value, and the answer carries only the earlier value;
- **nothing drawn from memory**: a question whose words one line clearly
  holds, answered without any of that line's values (a number, a name, a
  word the question did not contain); a count or a time answered with no
  number where the line has one; "where / who / what brand" answered with
  none of the names the lines about the question's thing give; advice
  refused under the user's own lines (asked again, never quoted).

A failed check says what a sharper prompt should tell the model
(:attr:`Verdict.instruction`) and what to show if the model fails again:
an extractive answer quoting the line with its date (:func:`quoted`).  The
rules are plain word lists and err towards letting an answer through: an
answer the check cannot read is never replaced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agenvoy_desktop.agent.date_reasoning import local_date
from agenvoy_desktop.agent.never_said import asked_things
from agenvoy_desktop.agent.not_remembered import language_of
from agenvoy_desktop.agent.recall import (
    NAME_WORD,
    POSSESSIVE,
    asks_for_advice,
    content_terms,
    names_in,
)
from agenvoy_desktop.agent.recall_lines import focus, light_stem, term_in, values_in
from agenvoy_desktop.agent.speech_act import SENTENCE_LEAD, sentences
from agenvoy_desktop.core.retrieval.fts_text import STOPWORDS, normalize
from agenvoy_desktop.language import FALLBACK, language, languages
from agenvoy_desktop.language.patterns import (
    alternatives,
    compiled,
    cue,
    either,
    every,
    group,
    spaced,
    unspaced,
    whole_words,
)

Polarity = Literal["yes", "no"]
Problem = Literal[
    "",
    "tool call",
    "copied notes",
    "never told",
    "contradicts",
    "older value",
    "not drawn",
    "not worked out",
]


class Computed(Protocol):
    """A result code worked out for the question (``agent/date_answers.WorkedOut``)."""

    @property
    def sentence(self) -> str: ...
    @property
    def values(self) -> frozenset[str]: ...
    @property
    def words(self) -> tuple[str, ...]: ...
    @property
    def later(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Evidence:
    """One line memory showed the model: a remembered message or a document passage."""

    text: str
    time_ns: int = 0
    role: str = "user"
    """``user`` (the user said it), ``assistant`` (the assistant did) or ``document``."""
    source: str = ""
    """A document passage's citation (``path:lines``)."""
    latest: bool = False
    """Marked as the latest of lines that say the same thing with other values."""
    context: bool = False
    """A neighbour's sentence shown under a remembered line (never the line asked about)."""
    closeness: float = 0.0
    """How close recall found the line in meaning to the question (its cosine; 0: unknown)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`check` found: ``problem`` is "" when the answer may be shown."""

    problem: Problem = ""
    instruction: str = ""
    """One paragraph for the prompt of a second try."""
    fallback: str = ""
    """The answer to show when the second try fails too (the line, quoted and dated)."""

    @property
    def ok(self) -> bool:
        return not self.problem


OK = Verdict()
SUPPORT_SHARE = 0.5
"""The share of the question's content words a line must hold to be the one it asks about."""


# -- the checks ---------------------------------------------------------------------------------
def check(
    question: str,
    answer: str,
    evidence: Sequence[Evidence],
    *,
    tool_names: Sequence[str] = (),
    computed: Computed | None = None,
    never_said: Sequence[str] = (),
    unknown: bool = False,
    tool_results: bool = False,
) -> Verdict:
    """The first problem of *answer* to *question* given what memory showed (:data:`OK` if none).

    *computed*: the result code worked out for a question about time; the
    answer must repeat its number (or name the event that came first).
    *never_said*: words of the question the user never said (``agent/never_said.py``);
    *unknown*: memory found nothing for a question about the user's own life.
    Either way the answer must say it does not know.  *tool_results*: the turn's
    tools returned something, which the answer may draw on instead of a line.
    """
    line = supporting(question, evidence)
    never = never_said or unknown
    if tool_call_as_prose(answer, tool_names):
        if never:
            told = _never_told(question, never_said)
            return Verdict("tool call", told.instruction, told.fallback)
        fallback = computed.sentence if computed is not None else ""
        if not fallback:
            # never the call itself: a plain sentence when memory has no line to quote
            fallback = quoted(question, line) if line is not None else _reply(question, "no_words")
        return Verdict(
            "tool call", "Answer in plain words; do not write a tool call or JSON.", fallback
        )
    if copies_notes(answer):
        if never:
            return _never_told(question, never_said)
        fallback = quoted(question, line) if line is not None else _reply(question, "no_words")
        return Verdict(
            "copied notes",
            "Answer the user's message in your own words; do not copy the notes above.",
            fallback,
        )
    if never and not admits_not_knowing(answer):
        return _never_told(question, never_said)
    if computed is not None and (computed.values or computed.words):
        if _misses(answer, computed):
            return Verdict(
                "not worked out",
                f"Worked out from these dates: {computed.sentence} Answer with this result.",
                computed.sentence,
            )
        return OK
    return _against_lines(question, answer, evidence, line, tool_results=tool_results)


def _against_lines(
    question: str,
    answer: str,
    evidence: Sequence[Evidence],
    line: Evidence | None,
    *,
    tool_results: bool,
) -> Verdict:
    """:func:`check` where no result was worked out: the answer against the lines shown,
    *line* the one the question asks about (:func:`supporting`), if any."""
    if refuses(answer) and asks_for_advice(question):
        # "As an AI language model, I don't have the ability to buy a NAS device…" under
        # the user's own lines about their storage: asked once more, with no quote to fall
        # back on (a remembered line answers no "What do you think?")
        near = line or _closest(question, evidence)
        if near is None:
            return OK
        return Verdict(
            "not drawn", _instruction(near, "Give your advice with this in mind; do not refuse.")
        )
    if (named := _unnamed(question, answer, evidence)) is not None:
        return Verdict(
            "not drawn",
            _instruction(named, "Answer the question with the name this line gives."),
            quoted(question, named),
        )
    if line is None:
        return _without_a_line(question, answer, evidence)
    if refuses(answer):
        # "As an AI language model, I don't have personal experiences or information about
        # living in current apartments…" over "I've been living in Harajuku for 3 months":
        # it repeats the question's words, so it would pass for drawing on the line below
        return Verdict(
            "not drawn",
            _instruction(line, "Answer the question from this line."),
            quoted(question, line),
        )
    if asks_yes_no(question):
        return _polarity_verdict(question, answer, line)
    if _older_value(question, answer, line, evidence):
        return Verdict(
            "older value",
            _instruction(line, "This is the latest thing the user said about it; answer with it."),
            quoted(question, line),
        )
    if _lacks_number(question, answer, line, content_terms(question)):
        return Verdict(
            "not drawn",
            _instruction(line, "Answer the question with the number this line gives."),
            quoted(question, line),
        )
    choice = _CHOICE.search(question) is not None  # "more water or less?": an option is the answer
    advice = asks_for_advice(question)  # advice need not repeat a line, only fit it
    lines = eligible(question, evidence)
    if not (tool_results or choice or advice or any(draws_on(answer, e, question) for e in lines)):
        return Verdict(
            "not drawn",
            _instruction(line, "Answer the question from this line."),
            quoted(question, line),
        )
    return OK


def _without_a_line(question: str, answer: str, evidence: Sequence[Evidence]) -> Verdict:
    """No line holds half of the question's words: a CJK yes/no question is held to the
    line sharing a run of its characters, a refusal to the closest line."""
    if asks_yes_no(question) and (cjk := _cjk_line(question, evidence)) is not None:
        return _polarity_verdict(question, answer, cjk)
    line = _closest(question, evidence) if refuses(answer) else None
    if line is None:
        return OK
    # a refusal under lines of the user's ("I'm sorry, but I can't assist with that.")
    return Verdict(
        "not drawn",
        _instruction(line, "Answer the question from this line."),
        quoted(question, line),
    )


def _words(key: str) -> str:
    """The words under *key* of every language: whole words where words are spaced,
    anywhere in a CJK text."""
    return either(whole_words(spaced(key)), alternatives(unspaced(key)))


def _negated(key: str, within: int) -> str:
    """A negation of *key* (``…negations``) and, at most *within* characters on in the same
    sentence, one of its verbs (``…verbs``): "I don't really know", "you never told me"."""
    negations, verbs = whole_words(every(f"{key}.negations")), whole_words(every(f"{key}.verbs"))
    return f"{negations}[^.?!]{{0,{within}}}{verbs}" if negations and verbs else ""


_NOT_KNOWING = compiled(
    either(_negated("answer.not_knowing", 40), _words("answer.not_knowing.words")), re.IGNORECASE
)


def admits_not_knowing(answer: str) -> bool:
    """The answer says it does not know or was never told ("I don't know: …", 不知道)."""
    return _NOT_KNOWING.search(answer) is not None


def _reply(question: str, key: str) -> str:
    """The wording *key* (``reply.*`` in the language files) in the question's language."""
    worded = language(language_of(question)).text(f"reply.{key}")
    if worded is None:  # every reply language has it; a new file may not yet
        worded = language(FALLBACK).text(f"reply.{key}")
    assert worded is not None, key
    return worded


def _never_told(question: str, words: Sequence[str]) -> Verdict:
    named = ", ".join(f'"{w}"' for w in words)
    told = "Nothing the user told you answers this"
    instruction = (
        f"The user never mentioned {named}. Say that you don't know; do not guess."
        if words
        else f"{told}. Say that you don't know; do not guess."
    )
    if words:
        fallback = _reply(question, "never_told_about").format(words=", ".join(words))
    else:
        fallback = _reply(question, "never_told")
    return Verdict("never told", instruction, fallback)


def _misses(answer: str, computed: Computed) -> bool:
    """The answer repeats none of the result's numbers, or none of the first event's words,
    or names a later event first without an "after" ("The festival came before the start
    of my Spanish classes" under "The start of your Spanish classes came before…")."""
    if computed.values:
        return not computed.values & values_in(_without_dates(answer))
    said = normalize(answer)
    first = [said.find(word) for word in computed.words if word in said]
    if not first:
        return True
    later = [said.find(word) for word in computed.later if word in said]
    if not later or min(first) < min(later):
        return False
    return _AFTER.search(said) is None


_AFTER = compiled(whole_words(every("answer.after")))


def _polarity_verdict(question: str, answer: str, line: Evidence) -> Verdict:
    terms = content_terms(question)
    clause = deciding_clause(line.text, terms)
    expected = None if clause is None else _polarity(clause)
    if expected is not None and (
        _REVERSES.search(question) or _asks_if_safe(question, clause, line.text)
    ):
        # "Did I quit smoking?" over "I no longer smoke": a denial answers yes;
        # "Can I take penicillin?" over "I'm allergic to penicillin": no
        expected = "yes" if expected == "no" else "no"
    said = answer_polarity(answer, terms)
    if expected is None or said is None:
        return OK
    if said == expected and _body_polarity(question, answer, terms) in (None, expected):
        if _PARROTS.search(answer) is None:
            return OK
        # "Yes, the answer to the question is yes.": the second try's instruction, said back
        return Verdict("not drawn", "", quoted(question, line, expected))
    word = "yes" if expected == "yes" else "no"
    return Verdict(
        "contradicts",
        _instruction(line, f"So the answer to the question is {word}."),
        quoted(question, line, expected),
    )


_PARROTS = re.compile(r"\bthe answer to the question is\b", re.IGNORECASE)
"""The wording of the second try's instruction (below), which the starter once answered with."""


def _instruction(line: Evidence, then: str) -> str:
    who = _who(line)
    return f'{who} on {local_date(line.time_ns).isoformat()}: "{line.text}" {then}'.strip()


def _who(line: Evidence) -> str:
    if line.role == "assistant":
        return "You told the user"
    if line.role == "document":
        return f"The user's document [{line.source}] says" if line.source else "A document says"
    return "The user told you"


# -- which line the question is about -------------------------------------------------------------
def supporting(question: str, evidence: Sequence[Evidence]) -> Evidence | None:
    """The line the question asks about: of the lines holding at least half of its content
    words (:func:`eligible`), one marked latest (it restates an older line, which must not
    answer), else the one holding the most, then the newer one; a line of the user's (or a
    document's) before a neighbour's sentence shown under it."""
    terms = content_terms(question)
    lines = eligible(question, evidence)
    if asks_quantity(question) and any(values_in(_without_dates(e.text)) for e in lines):
        # "How many followers…": the line that answers holds a number
        lines = [e for e in lines if values_in(_without_dates(e.text))]
    elif asks_name(question) and any(_new_names(question, e.text) for e in lines):
        # "Where did I buy my new bookshelf?": the line that answers names a place
        lines = [e for e in lines if _new_names(question, e.text)]
    safety = asks_yes_no(question) and _ASKS_SAFE.search(question) is not None
    keyed = [
        (
            (
                not line.context,
                line.latest,
                held_terms(terms, line.text),
                safety and _ALLERGY.search(line.text) is not None,
            ),
            line,
        )
        for line in lines
    ]
    top = max((key for key, _ in keyed), default=None)
    tied = [line for key, line in keyed if key == top]
    return _clearly_closest(tied) or max(tied, key=lambda e: e.time_ns, default=None)


CLEARLY_CLOSER = 0.15
"""How much closer in meaning than every other line a line must be to answer before a newer
one that holds as many of the question's words."""


def _clearly_closest(lines: Sequence[Evidence]) -> Evidence | None:
    """The line much closer to the question in meaning than every other (None: none is).

    Among lines that hold the same words the newer one answers: it is the
    update.  Unless one is far the closest: "Do I own a car?" over four
    lines of chat about a friend's new car (0.29-0.39) and "I don't own a
    car, I cycle everywhere." (0.68) asks about the last, whenever it was said.
    """
    ranked = sorted(lines, key=lambda e: e.closeness, reverse=True)
    if len(ranked) < 2 or ranked[0].closeness < ranked[1].closeness + CLEARLY_CLOSER:
        return None
    return ranked[0]


def _closest(question: str, evidence: Sequence[Evidence]) -> Evidence | None:
    """The user's (or a document's) line holding the most of the question's words, if any."""
    terms = content_terms(question)
    return _best_line(evidence, lambda text: held_terms(terms, text), 1)


def _best_line(
    evidence: Sequence[Evidence], score: Callable[[str], int], least: int
) -> Evidence | None:
    """The user's (or a document's) line scoring highest, the newer on a tie, if it scores
    at least *least* (neighbours' sentences shown as context never count)."""
    scored = [(score(e.text), e.time_ns, e) for e in evidence if not e.context]
    best = max(scored, key=lambda s: s[:2], default=None)
    return best[2] if best is not None and best[0] >= least else None


CJK_RUN = 3
"""Characters a CJK question and line must share in a row for the line to be about it."""


def _cjk_line(question: str, evidence: Sequence[Evidence]) -> Evidence | None:
    """The user's line sharing the longest run of CJK characters (≥ :data:`CJK_RUN`) with
    the question, or a kanji word of it: its bigrams are too many for half of them to be
    in any line ("我可以吃青霉素吗？" over "我对青霉素过敏。" shares 青霉素 only)."""
    if not _CJK_CHAR.search(question):
        return None
    words = [t for t in content_terms(question) if len(t) == 1 and _CJK_CHAR.match(t)]

    def about(text: str) -> int:
        # a kanji word of the question (猫 in 家に猫はいますか) the line holds is enough
        held = any(word in text for word in words)
        return max(_shared_run(question, text), CJK_RUN if held else 0)

    return _best_line(evidence, about, CJK_RUN)


def _shared_run(question: str, text: str) -> int:
    """The longest run of CJK characters *question* and *text* share that is not all
    hiragana: "っていま" is in "車を持っていますか" and "猫を飼っていません", grammar both."""
    longest = 0
    previous = [0] * (len(text) + 1)
    for a in question:
        current = [0] * (len(text) + 1)
        if _CJK_CHAR.match(a):
            for j, b in enumerate(text, 1):
                if a == b:
                    current[j] = previous[j - 1] + 1
                    if current[j] > longest and not _HIRAGANA.fullmatch(text[j - current[j] : j]):
                        longest = current[j]
        previous = current
    return longest


_HIRAGANA = re.compile("[\u3040-\u309f]+")


_REFUSAL = compiled(
    either(
        group(r"^\W*", every("answer.refusal.openings"), r"\b[^.!?]{0,40}")
        + whole_words(every("answer.refusal.cannot")),
        group(r"^\W*", every("answer.refusal.starts"), r"\s+")
        + group("", every("answer.refusal.verbs"), r"\b"),
    ),
    re.IGNORECASE,
)


def refuses(answer: str) -> bool:
    """The answer refuses or disowns the question ("I'm sorry, but I can't assist with that.",
    "As an AI language model, I don't have…")."""
    return _REFUSAL.search(answer) is not None


def held_terms(terms: Sequence[str], text: str) -> int:
    """How many of the question's *terms* *text* holds ("smoker" held by "I quit smoking")."""
    folded = normalize(text)
    return sum(1 for term in terms if term_in(term, folded))


def eligible(question: str, evidence: Sequence[Evidence]) -> list[Evidence]:
    """The lines holding at least half of the question's content words."""
    terms = content_terms(question)
    if not terms:
        return []
    return [
        line
        for line in evidence
        if (held := held_terms(terms, line.text)) and held >= SUPPORT_SHARE * len(terms)
    ]


_CHOICE = compiled(
    either(
        group(r"\w,?\s+", every("answer.choice_between"), r"\s+\w[^?]*\?"), _words("answer.choice")
    ),
    re.IGNORECASE,
)
_COUNTS = _words("answer.counts")
"""A question for a count or a clock time: its answer is a number."""
_QUANTITY = compiled(either(_COUNTS, _words("answer.quantities")), re.IGNORECASE)


def asks_quantity(question: str) -> bool:
    """The question asks for a number ("How many…", "What time…", 多少)."""
    return _QUANTITY.search(question) is not None


def draws_on(answer: str, line: Evidence, question: str) -> bool:
    """The answer repeats something of *line* the question did not say: a number, or a word.

    Dates are not values here: the block's "2023-05-28" is no answer.
    """
    asked = set(content_terms(question)) | values_in(question)
    line_values = values_in(_without_dates(line.text)) - asked
    said_values = values_in(_without_dates(answer))
    if line_values & said_values:
        return True
    line_words = _plain_words(line.text) - _plain_words(question) - asked
    said = normalize(answer)
    return any(word in said for word in line_words)


_PLAIN_WORD = re.compile(r"[^\W\d_]{4,}")


def _plain_words(text: str) -> set[str]:
    """The words of four letters or more, stopwords out, CJK as bigrams (any word counts:
    "year" is no topic of a question, but it is an answer)."""
    folded = normalize(text)
    words = {w[:-1] if w.endswith("s") else w for w in _PLAIN_WORD.findall(folded)}
    return {w for w in words if w not in STOPWORDS} | set(content_terms(text))


def _older_value(question: str, answer: str, line: Evidence, evidence: Sequence[Evidence]) -> bool:
    """*line* is the latest, and the answer holds a value of an older line but none of its own
    (the values of the sentences that hold the question's words: "a meeting from 2-3pm. …
    yoga classes, which is three times a week" answers "How often do I do yoga?" with 3)."""
    if not line.latest:
        return False
    terms = content_terms(question)
    said = values_in(_without_dates(answer))
    own = _values_about(line.text, terms)
    if said & own:
        return False
    older = set().union(  # a line said since (in the window) is no older value
        *(
            _values_about(e.text, terms)
            for e in evidence
            if e is not line and not e.latest and e.time_ns <= line.time_ns
        )
    )
    return bool(said & (older - own))


def _values_about(text: str, terms: Sequence[str]) -> frozenset[str]:
    """The values of *text*'s sentences that hold any of *terms* (all of them if none does)."""
    about = [s for s in sentences(text) if any(t in normalize(s) for t in terms)]
    return values_in(_without_dates(" ".join(about) if about else text))


def _lacks_number(question: str, answer: str, line: Evidence, terms: Sequence[str]) -> bool:
    """A question for a count or a time ("How many…", "What time…") answered without the
    number the line it asks about gives where the question's words are.

    Either no number at all, or only numbers of the line's other sentences: "What time do
    I usually go to the gym?" over "I think Tuesday afternoon at 2:00 pm could work well.
    I need to be done before I head to the gym, which is usually at 6:00 pm." was answered
    "on Tuesday afternoon at 2:00 pm".
    """
    if _COUNT_OR_TIME.search(question) is None:
        return False
    about = _values_about(line.text, terms) - _MINUTES_ZERO
    said = values_in(_without_dates(answer)) - _MINUTES_ZERO
    if not said:
        return bool(about)
    elsewhere = values_in(_without_dates(line.text)) - about - _MINUTES_ZERO
    return bool(about) and not said & about and bool(said & elsewhere)


_MINUTES_ZERO = frozenset({"00"})
"""The ":00" of a time, which every time shares."""


_ASKS_NAME = compiled(
    either(
        group(r"^\W*", every("answer.name_openings"), r"\b"),
        group(r"\b", every("answer.name_which"), r"\s+")
        + group("", every("answer.name_things"), r"\b"),
    ),
    re.IGNORECASE,
)


def asks_name(question: str) -> bool:
    """The question asks for a place, a brand or a person ("Where did I…", "What brand…")."""
    return _ASKS_NAME.search(question) is not None


def _new_names(question: str, text: str) -> frozenset[str]:
    """Names *text* holds that *question* does not, folded ("IKEA", "Trader", "Joe")."""
    found = {n.casefold() for n in names_in(text)}
    found |= {w.casefold() for w in _ACRONYM.findall(text)}
    return frozenset(found - {w.casefold() for w in NAME_WORD.findall(question)})


_ACRONYM = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z]{3,}\b")


def _unnamed(question: str, answer: str, evidence: Sequence[Evidence]) -> Evidence | None:
    """For a question asking for a place, brand or person: the line that answers it, when
    the answer holds none of the names the lines about the question's thing give ("What
    brand of shampoo…" → "Lavender" over "… at Trader Joe's"; "Where did I buy my new
    bookshelf?" → the bulbs "I bought from Home Depot", over "The new bookshelf is from
    IKEA").  A line is about the thing when it holds every word the question names a
    thing with (``agent/never_said.asked_things``) and some of its words."""
    if not asks_name(question) or _CJK_CHAR.search(question):
        return None
    things = [light_stem(normalize(word)) for word, _ in asked_things(question)]
    terms = content_terms(question)

    def score(text: str) -> int:
        folded = normalize(text)
        if not _new_names(question, text) or not all(t in folded for t in things):
            return 0
        return sum(1 for term in terms if term in folded)

    about = [e for e in evidence if not e.context and score(e.text)]
    said = {POSSESSIVE.sub("", w).casefold() for w in NAME_WORD.findall(answer)}
    if not about or any(_new_names(question, e.text) & said for e in about):
        return None
    return _best_line(about, score, 1)


_COUNT_OR_TIME = compiled(_COUNTS, re.IGNORECASE)


_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def _without_dates(text: str) -> str:
    return _DATE.sub(" ", text)


# -- yes / no -------------------------------------------------------------------------------------
_YES_NO_START = compiled(
    group(SENTENCE_LEAD, spaced("answer.yes_no_openings"), r"\b"), re.IGNORECASE
)
_CJK_YES_NO = compiled(
    either(
        group("", unspaced("answer.yes_no_endings"), r"[\s。？?！!]*$"),
        alternatives(unspaced("answer.yes_no_words")),
    )
)


def asks_yes_no(question: str) -> bool:
    """The question is answered by yes or no ("Am I allergic to anything?", 我喝咖啡吗？)."""
    parts = [s for s in sentences(question) if s.endswith(("?", "？")) or _CJK_YES_NO.search(s)]
    last = parts[-1] if parts else question.strip()
    if _CJK_YES_NO.search(last):
        return True
    return bool(_YES_NO_START.match(last))


_NEGATION = compiled(cue("answer.negation"), re.IGNORECASE)
_REVERSES = compiled(cue("answer.reverses"), re.IGNORECASE)
"""Words of a question that ask about an ending ("Did I quit…?"): a line that denies the
habit ("I no longer smoke") then answers yes."""
_ALLERGY = compiled(cue("answer.allergy"), re.IGNORECASE)
_ASKS_SAFE = compiled(cue("answer.asks_safe"), re.IGNORECASE)


def _asks_if_safe(question: str, clause: str | None, line: str) -> bool:
    """The question asks whether the user may eat or take what the deciding clause of *line*
    says they are allergic to: an allergy answers no, and "not allergic" yes.  A clause that
    speaks of the eating itself ("…coeliac disease, so I can't eat gluten") is read as it
    stands; one that borrows its verb ("…, only to shellfish") has the line's allergy."""
    if clause is None or _ALLERGY.search(question):
        return False
    if not _ALLERGY.search(clause) and not (_ELLIPTIC.match(clause) and _ALLERGY.search(line)):
        return False
    return _ASKS_SAFE.search(question) is not None


_ELLIPTIC = compiled(rf"^\W*(?:{cue('answer.elliptic')})", re.IGNORECASE)
"""A clause that borrows its verb from the one before ("I'm not allergic to nuts, *only to
shellfish*"): an allergy the line names is the clause's too."""


_CLAUSE = re.compile(
    either(r"[,;:]\s*", group(r"\s+", every("answer.clause_joins"), r"\s+"), "[，；、]")
)


def polarity_of(line: str, terms: Sequence[str]) -> Polarity | None:
    """Whether *line* affirms or denies what the question's *terms* name (None: cannot tell)."""
    clause = deciding_clause(line, terms)
    return None if clause is None else _polarity(clause)


def _polarity(clause: str) -> Polarity:
    return "no" if _NEGATION.search(clause) else "yes"


def deciding_clause(line: str, terms: Sequence[str]) -> str | None:
    """The clause of *line* that speaks of what the question's *terms* name (None: none does).

    The clause holding most of the terms decides, a term counting more the
    later it comes in the question (its object: "Am I allergic to
    *shellfish*?" over "I'm not allergic to nuts, only to shellfish" is
    decided by "only to shellfish", not by "not allergic to nuts").
    """
    if not terms:
        return None
    weights = {term: 1.0 + index / len(terms) for index, term in enumerate(terms)}
    clauses = [c for c in _CLAUSE.split(line) if c.strip()]
    if len(clauses) > 1 and _CJK_CHAR.search(line):
        return _cjk_clause(clauses, weights)
    scored = [(sum(w for t, w in weights.items() if term_in(t, normalize(c))), c) for c in clauses]
    held, clause = max(scored, key=lambda s: s[0], default=(0.0, ""))
    return clause if held else None


_NAME_BIGRAM = re.compile("^[\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{2}$")


def _cjk_clause(clauses: Sequence[str], weights: dict[str, float]) -> str | None:
    """The clause of a CJK line that holds most of the question's kanji/katakana bigrams.

    CJK terms are bigrams, and those with kana in them are grammar ("住んで",
    "でい") that any clause may hold: the names and things asked about
    (東京, 大阪, 抽烟) pick the clause, the rest of the terms only break a tie.
    "私は去年東京から大阪に引っ越したので、もう東京には住んでいません" is "yes" to
    "私は大阪に住んでいますか" and "no" to "私は今も東京に住んでいますか".
    """
    names = [t for t in weights if _NAME_BIGRAM.match(t)]
    scored = [
        (
            sum(1 for t in names if t in normalize(c)),
            sum(w for t, w in weights.items() if t in normalize(c)),
            c,
        )
        for c in clauses
    ]
    best = max(scored, key=lambda s: (s[0], s[1]))
    ties = [s for s in scored if (s[0], s[1]) == (best[0], best[1])]
    if best[0] == 0 or len(ties) > 1:
        return None
    return best[2]


_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_ANSWER_START = r"^[\s\"'*]*"
_ANSWER_YES = compiled(group(_ANSWER_START, every("answer.yes"), r"\b"), re.IGNORECASE)
_ANSWER_NO = compiled(group(_ANSWER_START, every("answer.no"), r"\b"), re.IGNORECASE)
_CJK_START = compiled(
    either(
        group(_ANSWER_START + "(?P<no>", every("answer.no_prefixes"), ")"),
        group(_ANSWER_START, every("answer.yes_prefixes")),
    )
)
"""An answer that opens with 是 or 不 (``answer.yes_prefixes``, ``answer.no_prefixes``): its
first word decides, whatever follows ("是的", "不是")."""


_DONT_KNOW = compiled(_negated("answer.unsure", 30), re.IGNORECASE)


def answer_polarity(answer: str, terms: Sequence[str]) -> Polarity | None:
    """Whether *answer* says yes or no (None: it does not clearly say either).

    Its first word decides when it is yes or no (是/不 …); otherwise its
    first sentence that holds the question's words, negated or not.
    """
    head = answer.strip()
    cjk = _CJK_START.match(head)
    if cjk:
        return "no" if cjk.group("no") else "yes"
    if _ANSWER_NO.match(head):
        return "no"
    if _ANSWER_YES.match(head):
        return "yes"
    for sentence in sentences(head)[:3]:
        if any(term_in(term, normalize(sentence)) for term in terms):
            if _DONT_KNOW.search(sentence):
                return None  # "I don't know": no claim either way
            return "no" if _NEGATION.search(sentence) else "yes"
    return None


def _body_polarity(question: str, answer: str, terms: Sequence[str]) -> Polarity | None:
    """What an answer that opens with yes or no then says in words (None: it opens otherwise,
    or says nothing more about the question's words).

    "Did I quit smoking?" was answered "Yes, according to your statement, you did not quit
    smoking.": right in its first word, wrong in its sentence.  A false alarm costs a second
    try, then the line quoted with the right polarity.  For a question about an ending
    ("Did I quit…?") the sentence answers it directly, so "quit" itself is no negation
    there: "you quit" is yes, "you did not quit" no.
    """
    head = answer.strip()
    opener = _ANSWER_YES.match(head) or _ANSWER_NO.match(head)
    if opener is None or _CJK_START.match(head):
        return None
    rest = head[opener.end() :].lstrip(" ,.!;:—-")
    if _REVERSES.search(question):
        rest = _REVERSES.sub("", rest)
    return answer_polarity(rest, terms) if rest.strip() else None


# -- the fallback -------------------------------------------------------------------------------
_ELLIPSES = re.compile(r"…(?:\s*…)+")
QUOTE_CHARS = 240
"""A quoted message is cut to its sentences with the question's words, about this long:
quoted whole, "How many projects have I completed?" was answered with 300 characters
of a request for painting ideas around "I just finished my 5th project"."""


def quoted(question: str, line: Evidence, polarity: Polarity | None = None) -> str:
    """The extractive answer: the line quoted with its date ("You told me on 2026-12-03: '…'"),
    in the question's language, led by yes or no for a yes/no question."""
    day = local_date(line.time_ns).isoformat() if line.time_ns else ""
    role = line.role if line.role in ("assistant", "document") else "user"
    said = line.text
    if role != "document":  # a passage is cited whole; a message is cut to what answers
        terms = dict.fromkeys(content_terms(question), 1.0)
        said = focus(line.text, terms, QUOTE_CHARS, trim=True)
        said = _ELLIPSES.sub("…", said)  # a line recall had cut already is cut again
    text = _reply(question, f"quote_{role}").format(
        on=_reply(question, "quote_on").format(day=day) if day else "",
        source=f" [{line.source}]" if line.source else "",
        text=said,
    )
    if polarity is not None and asks_yes_no(question):
        spaced = language(language_of(question)).spaced
        text = _reply(question, polarity) + (" " if spaced else "") + text
    return text


# -- tool calls written out ---------------------------------------------------------------
_CALL_JSON = re.compile(
    r"\{\s*\"(?:name|function)\"\s*:\s*\"[\w.-]+\"\s*,\s*\"(?:arguments|parameters)\""
)
_CALL_WORDS = re.compile(
    r"\b(?:function|tool)\s+`?[\w.-]+`?\s+(?:was|is|has been|will be)\s+called\b"
    r"|\bcall(?:ed|ing)?\s+the\s+`?[a-z]+_[a-z_]+`?\s+(?:function|tool)\b"
    r"|<tool_call>",
    re.IGNORECASE,
)


# The error a call to a tool that was never offered hears (``agent/tools.py``).
_TOOL_ERROR_ECHO = re.compile(
    r"\bunknown tool\b.{0,80}\bavailable tools\b", re.IGNORECASE | re.DOTALL
)


def copies_notes(answer: str) -> bool:
    """The answer copies the recall block instead of answering: its header's bracket, or a
    line's dated opening ("On 2023-01-20 (3 years ago) you said: …").

    Seen in a 16-turn walk: "Remind me, where am I going next month?" was answered
    "Based on your message (from past conversations; use it only if it answers your
    message): - On 2023-01-20 (3 years ago) you said: 'Yeah definitely! …'" — the
    block's lines with "the user" turned to "you", which the other checks let through.
    """
    return _BLOCK_LINE.search(answer) is not None or any(
        bracket in answer for bracket in _HEADER_BRACKETS
    )


_BLOCK_LINE = re.compile(
    r"(?:\b\d{4}-\d{2}-\d{2}\s*\((?:[^()\n]{0,40})\)|^\W*the same day)\s*(?:the user|you|I)\s+"
    r"(?:said|had said|went on|replied)\s*:",
    re.IGNORECASE | re.MULTILINE,
)


def _header_brackets() -> frozenset[str]:
    """What the recall blocks' headers say in brackets, in every language, up to the first
    semicolon or full stop inside: "from past conversations;", "过去的对话；"
    (a plain "from past conversations" is an answer's own words)."""
    found: set[str] = set()
    for lang in languages():
        for key in ("recall.header", "recall.advice_header", "recap.header"):
            header = lang.text(key) or ""
            inside = re.search(r"[(（]([^)）]+)[)）]", header)
            if inside is None:
                continue
            cut = re.search(r"[;；。]", inside.group(1))
            found.add(inside.group(1)[: cut.end()] if cut else inside.group(1))
    return frozenset(b for b in found if len(b) >= 5)


_HEADER_BRACKETS = _header_brackets()


def tool_call_as_prose(answer: str, tool_names: Sequence[str] = ()) -> bool:
    """The answer writes out a tool call instead of answering ("The function `date_calc` was
    called with the arguments …", ``{"name": "date_calc", "arguments": …}``).

    Also an answer that is nothing but a JSON object, or that repeats a tool's
    error: told "unknown tool 'theme_park_weekend'; available tools: …", the starter
    answered ``{"name": "unknown tool 'theme_park_weekend'; …"}``, which a person
    must never see as an answer.
    """
    if _CALL_JSON.search(answer) or _CALL_WORDS.search(answer):
        return True
    if _TOOL_ERROR_ECHO.search(answer) or _only_json(answer):
        return True
    for name in tool_names:
        if re.search(rf"`?\b{re.escape(name)}\b`?\s*\(", answer):
            return True
        if _looks_like_call(answer, name):
            return True
    return False


_CALL_KEYS = frozenset({"name", "function", "arguments", "parameters", "tool", "error"})


def _only_json(answer: str) -> bool:
    """The whole answer is one JSON object shaped like a call or a tool's error.

    Only those keys: JSON the user asked for ("write the packing list as JSON") is an answer.
    """
    text = answer.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    if not (text.startswith("{") and text.endswith("}")):
        return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data) and set(data) <= _CALL_KEYS


def _looks_like_call(answer: str, name: str) -> bool:
    """A JSON object in the answer naming *name* (the model wrote the call as text)."""
    for match in re.finditer(r"\{.*?\}", answer, re.DOTALL):
        try:
            data = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(data, dict) and name in (data.get("name"), data.get("function")):
            return True
    return False
