"""Totals and differences over two remembered numbers, worked out by code.

"What is the total number of comments on my Facebook Live session and my
most popular YouTube video?" is answered from two lines said on different
days ("…which got 12 comments", "My most popular video has 21 comments"),
and a 0.5B model adds them up wrong or picks one.  As for dates
(``agent/date_answers.py``), the turn looks each of the two things up on its
own, takes from its line the number that goes with the question's unit
(comments, dollars, minutes, years), and hands the model the sum or the
difference to phrase: "Worked out from these lines: 12 + 21 = 33 comments."

Two shapes are read (:func:`parse_number_question`), and nothing else:

- a total: "What is the total number/amount of U on/for/by A and B?";
- a difference: "How much more/faster/older … A than / compared to B?",
  "How many U older/more … is A than B?".

A line without a number for its thing, or a question of another shape,
leaves the turn as it was: a wrong sum is worse than none.  The shapes'
words ("total", "more expensive", "compared to" …) are the language files'
``numbers.*`` keys; only English has them so far.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agenvoy_desktop.agent import recall
from agenvoy_desktop.agent.recall import RecallFloor, RecallItem
from agenvoy_desktop.agent.speech_act import sentences
from agenvoy_desktop.core.retrieval.fts_text import normalize
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.language import languages
from agenvoy_desktop.language.calendar_names import month_starts
from agenvoy_desktop.language.patterns import NEVER, compiled, every, group, whole_words

Operation = Literal["sum", "difference"]
WORKED_OUT = "Worked out from these lines:"
EVENT_CANDIDATES = 20
THING_SHARE = 0.34
"""The share of a thing's content words its line must hold ("influencer" of "Instagram
influencer collaboration" in "an influencer who promoted my product to her 10,000
followers")."""


@dataclass(frozen=True, slots=True)
class NumberQuestion:
    """A question that adds or subtracts two remembered numbers."""

    operation: Operation
    things: tuple[str, str]
    """What each number belongs to, as search phrases ("my recent Facebook Live session")."""
    unit: str
    """The question's unit words ("comments", "years", "" when it names none)."""
    money: bool = False


def _one_of(key: str) -> str:
    """The words under *key* of every language as one group, in the files' order (an
    alternation takes its first word that fits: "more expensive" before "more"), or
    :data:`NEVER` when no language has any, so that a shape missing a word matches nothing."""
    return group("", every(key)) or NEVER


_OF = _one_of("numbers.of")
_TOTAL = compiled(
    rf"\b{_one_of('numbers.total')}\s+{_one_of('numbers.total_measures')}?\s*"
    rf"(?:{_OF}\s+)?(?P<unit>.*?)\s+(?P<sep>{_one_of('numbers.total_prepositions')})\s+"
    rf"(?P<a>.+?),?\s+{_one_of('numbers.and')}\s+(?P<b>.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
_HOW_MUCH = compiled(
    rf"\b(?:{_one_of('numbers.how_much')}|{_one_of('numbers.how_many')}\s+(?P<unit>\w+))\s+"
    rf"(?P<adj>{_one_of('numbers.comparatives')})\s+(?P<a>.+?)\s+"
    rf"{_one_of('numbers.than')}\s+(?P<b>.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
_LEAD_VERB = compiled(
    rf"^{_one_of('numbers.lead_verbs')}\s+(?:{_one_of('numbers.lead_subjects')}\s+)?",
    re.IGNORECASE,
)
_MONEY = compiled(whole_words(every("numbers.money_words")), re.IGNORECASE)
_MONEY_COMPARATIVE = compiled(whole_words(every("numbers.money_comparatives")), re.IGNORECASE)
_NOT_UNITS = frozenset(word.lower() for word in every("numbers.not_units"))
_DETERMINERS = tuple(f"{word.lower()} " for word in every("numbers.determiners"))
_SHARED_LEAD = compiled(rf"^(.*?\b{_one_of('numbers.possessives')})\s+\S+$", re.IGNORECASE)


def parse_number_question(question: str) -> NumberQuestion | None:
    """The total or difference *question* asks for (None for any other question)."""
    text = " ".join(question.split())
    if match := _TOTAL.search(text):
        unit = _clean_unit(match["unit"])
        a, b = match["a"].strip(), match["b"].strip()
        lead = _shared_lead(a)
        if lead and not b.lower().startswith(_DETERMINERS):
            b = f"{lead} {b}"  # "gifts for my coworker and brother": "gifts for my brother"
        money = bool(_MONEY.search(text))
        return NumberQuestion("sum", (a, b), unit, money)
    if match := _HOW_MUCH.search(text):
        a = _LEAD_VERB.sub("", match["a"].strip())
        unit = _clean_unit(match["unit"] or "")
        money = bool(_MONEY_COMPARATIVE.search(match["adj"]))
        return NumberQuestion("difference", (a, match["b"].strip()), unit, money)
    return None


def _clean_unit(unit: str) -> str:
    words = [w for w in unit.split() if w.lower() not in _NOT_UNITS]
    return " ".join(words[:2])


def _shared_lead(phrase: str) -> str:
    """The words of *phrase* up to its possessive ("gifts for my coworker" → "gifts for my")."""
    match = _SHARED_LEAD.match(phrase)
    return match.group(1) if match else ""


# -- numbers in a line ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Number:
    value: float
    text: str
    """As written ("$12", "2,000", "75th")."""


_ORDINAL = _one_of("numbers.ordinal_suffixes")
_NUMBER = compiled(rf"(?P<money>\$)?(?P<value>\d{{1,3}}(?:,\d{{3}})+|\d+(?:\.\d+)?){_ORDINAL}?")


def number_for(line: str, thing: str, unit: str, *, money: bool) -> Number | None:
    """The number of *line* that belongs to *thing*: in the sentence holding most of its
    words, the one right before the unit word, else a money amount for a money question,
    else the only number there is."""
    best = _sentence_for(line, thing)
    if best is None:
        return None
    found = [
        (m, Number(float(m["value"].replace(",", "")), m.group(0))) for m in _NUMBER.finditer(best)
    ]
    found = [(m, n) for m, n in found if not is_date_or_time(best, m)]
    if not found:
        return None
    unit_words = [_stem(w) for w in unit.split()]
    for match, number in found:
        after = normalize(best[match.end() : match.end() + 24])
        if unit_words and any(w in after for w in unit_words):
            return number
    if money:
        amounts = [n for m, n in found if m["money"]]
        if len(amounts) == 1:
            return amounts[0]
    return found[0][1] if len(found) == 1 else None


def _sentence_for(line: str, thing: str) -> str | None:
    """The sentence with a number that holds most of *thing*'s words, or whose sentence
    before does ("I was at a baby shower … my coworker … . I purchased her a set of baby
    clothes, totaling $100."), a sentence's own words first."""
    terms = recall.content_terms(thing)
    parts = sentences(line)

    def held(text: str) -> int:
        folded = normalize(text)
        return sum(1 for t in terms if t in folded)

    scored: list[tuple[float, str]] = []
    for index, sentence in enumerate(parts):
        if not re.search(r"\d", sentence):
            continue
        own = held(sentence)
        before = held(parts[index - 1]) if index else 0
        score = own if own else before - 0.5
        if score > 0:
            scored.append((score, sentence))
    return max(scored, key=lambda pair: pair[0])[1] if scored else None


_MONTH = rf"(?:{group('', month_starts()) or NEVER}[a-z]*\.?)"
"""A month written any way ("Sep", "Sept.", "September"): its shortest form and any ending."""
_DATE_BEFORE = compiled(rf"{_MONTH}\s+$|\d:$")
_DATE_AFTER = compiled(rf"^{_ORDINAL}?\s+(?:{_OF}\s+)?{_MONTH}(?:\s|$|[,.])")
_TIME_AFTER = compiled(rf"^\s*{_one_of('numbers.day_halves')}\b|^:\d\d")


def is_date_or_time(sentence: str, match: re.Match[str]) -> bool:
    """The number is part of a date ("May 3", "the 10th of April", "2023") or a time."""
    before = sentence[max(0, match.start() - 12) : match.start()].lower()
    after = sentence[match.end() : match.end() + 14].lower()
    value = match["value"]
    return bool(
        _DATE_BEFORE.search(before)
        or _DATE_AFTER.match(after)
        or _TIME_AFTER.match(after)
        or (len(value) == 4 and value[:2] in ("19", "20") and not match["money"])
    )


def _stem(word: str) -> str:
    word = normalize(word)
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


# -- the turn's part -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NumbersWorkedOut:
    """Both numbers and the result, for the block's last line and the answer check."""

    question: NumberQuestion
    sentence: str
    items: tuple[RecallItem, ...]
    values: frozenset[str]
    words: tuple[str, ...] = ()
    later: tuple[str, ...] = ()


def work_out(
    store: MemoryStore,
    session_id: str,
    text: str,
    window_messages: int,
    *,
    floor: RecallFloor,
    window_step: int = 0,
) -> NumbersWorkedOut | None:
    """Storage thread: the total or difference the question asks for (None: not one, or a
    number missing)."""
    question = parse_number_question(text)
    if question is None:
        return None
    found: list[tuple[RecallItem, Number]] = []
    for thing, other in (question.things, question.things[::-1]):
        hit = _line_with_number(
            store,
            session_id,
            thing,
            question,
            window=(window_messages, window_step),
            floor=floor,
            other=other,
        )
        if hit is None:
            return None
        found.append(hit)
    (line_a, a), (line_b, b) = found
    if line_a.message_id == line_b.message_id and a.text == b.text:
        return None  # one number found for both things: nothing to work out
    return NumbersWorkedOut(
        question,
        explain(question, a, b),
        (line_a, line_b),
        frozenset({_plain(_result(question, a, b))}),
    )


def _line_with_number(
    store: MemoryStore,
    session_id: str,
    thing: str,
    question: NumberQuestion,
    *,
    window: tuple[int, int],
    floor: RecallFloor,
    other: str = "",
) -> tuple[RecallItem, Number] | None:
    """The strongest line that holds a fair share of *thing*'s words, one of the words that
    tell it from *other* ("coworker" of "gifts for my coworker" against "gifts for my
    brother": "I spent $500 on gifts" is neither's), and a number for it."""
    phrase = f"{thing} {question.unit}".strip()
    own = [t for t in recall.content_terms(thing) if t not in recall.content_terms(other)]
    candidates = recall.recall_candidates(
        store, session_id, phrase, window[0], EVENT_CANDIDATES, window_step=window[1]
    )
    terms = recall.content_terms(thing)
    for item in recall.apply_floor(candidates, floor, kind="personal"):
        folded = normalize(item.text)
        held = sum(1 for term in terms if term in folded)
        if terms and (not held or held < THING_SHARE * len(terms)):
            continue
        if own and not any(term in folded for term in own):
            continue
        number = number_for(item.text, thing, question.unit, money=question.money)
        if number is not None:
            return item, number
    return None


def _result(question: NumberQuestion, a: Number, b: Number) -> float:
    return a.value + b.value if question.operation == "sum" else abs(a.value - b.value)


def _plain(value: float) -> str:
    return (
        f"{value:,.2f}".rstrip("0").rstrip(".").replace(",", "") if value % 1 else str(int(value))
    )


def explain(question: NumberQuestion, a: Number, b: Number) -> str:
    """``12 (…) + 21 (…) = 33 comments.`` — the numbers with what they belong to."""
    result = _result(question, a, b)
    unit = question.unit
    shown = f"{result:,.2f}".rstrip("0").rstrip(".") if result % 1 else f"{int(result):,}"
    shown = f"${shown}" if question.money else shown
    tail = f" {unit}" if unit and not question.money else ""
    sign = "+" if question.operation == "sum" else "−"
    first, second = (a, b) if question.operation == "sum" or a.value >= b.value else (b, a)
    things = dict(zip((id(a), id(b)), question.things, strict=True))
    return (
        f"{first.text} ({_yours(things[id(first)])}) {sign} {second.text} "
        f"({_yours(things[id(second)])}) = {shown}{tail}."
    )


_YOURS = tuple(
    (compiled(whole_words([word]), re.IGNORECASE), you.replace("\\", "\\\\"))
    for lang in languages()
    for word, you in lang.pairs("numbers.yours")
)
"""The user's words as said to them ("me" → "you", "my" → "your"), in the files' order."""


def _yours(phrase: str) -> str:
    for word, you in _YOURS:
        phrase = word.sub(you, phrase)
    return phrase
