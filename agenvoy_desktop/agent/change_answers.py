"""Which way a remembered amount changed, worked out by code.

"For the coffee-to-water ratio in my French press, did I switch to more
water per tablespoon of coffee, or less?" is answered from two dated lines
("1 tablespoon of coffee for every 6 ounces of water", months later "…for
every 5 ounces of water", marked the latest).  Shown both, the 0.5B starter
answered "more": comparing two numbers said months apart, in the order they
were said, is the step it gets wrong.  As for totals (``agent/number_answers.py``),
code takes the numbers and hands the model the result to phrase:
"Worked out from these lines: Less: from 6 ounces of water (2023-02-11) to 5
ounces of water (2023-06-30, the latest)."

One shape is read (:func:`parse_change_question`): a question that offers
two opposite comparatives joined by "or" ("more … or less", "higher or
lower", "increase or decrease"; the pairs are the language files'
``numbers.opposites``, English only so far).  The numbers come from the
lines recall already shows, not a search of their own: the amount must be
written with the same measure word ("ounces", "followers", "km") in the
earliest and the latest line that hold it, near a word of the question, and
be the only such amount that differs between them.  Anything less certain
leaves the turn as it was: a wrong direction stated as worked out is worse
than none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agenvoy_desktop.agent import recall
from agenvoy_desktop.agent.date_reasoning import local_date
from agenvoy_desktop.agent.number_answers import Number, is_date_or_time
from agenvoy_desktop.agent.recall import RecallItem
from agenvoy_desktop.agent.recall_lines import light_stem
from agenvoy_desktop.agent.speech_act import sentences
from agenvoy_desktop.core.retrieval.fts_text import normalize
from agenvoy_desktop.language import languages
from agenvoy_desktop.language.patterns import NEVER, alternatives, compiled, every, word_pattern

AFTER_WORDS = 3
"""How many words after the measure may name what is measured ("ounces OF WATER")."""


@dataclass(frozen=True, slots=True)
class ChangeQuestion:
    """A question that asks which way an amount went."""

    up: str
    """The question's word for a rise ("more")."""
    down: str
    """Its word for a fall ("less")."""
    terms: tuple[str, ...]
    """The content words of what changed ("water", "tablespoon", "coffee"), the one right
    after the first comparative first."""


_OPPOSITES = {
    pair: direction
    for lang in languages()
    for rise, fall in lang.pairs("numbers.opposites")
    for pair, direction in (
        ((rise.lower(), fall.lower()), "up"),
        ((fall.lower(), rise.lower()), "down"),
    )
}
"""Both orders of every opposite pair, with the direction the first word names."""
_WORDS = sorted({word for pair in _OPPOSITES for word in pair}, key=len, reverse=True)
_ALTERNATION = "|".join(word_pattern(word) for word in _WORDS)
_OR = alternatives(every("numbers.or")) or NEVER
_ARTICLE = alternatives(every("numbers.determiners")) or NEVER
_SHAPE = compiled(
    rf"\b(?P<a>{_ALTERNATION})\b(?P<thing>[^?]*?)[,;]?\s+(?:{_OR})\s+(?:(?:{_ARTICLE})\s+)?"
    rf"(?P<b>{_ALTERNATION})\b",
    re.IGNORECASE,
)


def parse_change_question(question: str) -> ChangeQuestion | None:
    """The change *question* asks about (None for any other question)."""
    if not _WORDS:
        return None
    text = " ".join(question.split())
    match = _SHAPE.search(text)
    if match is None:
        return None
    a, b = match["a"].lower(), match["b"].lower()
    direction = _OPPOSITES.get((a, b))
    if direction is None:
        return None
    up, down = (a, b) if direction == "up" else (b, a)
    after = recall.content_terms(match["thing"])
    before = recall.content_terms(text[: match.start()])
    terms = tuple(dict.fromkeys([*after, *before]))
    return ChangeQuestion(up, down, terms) if terms else None


# -- amounts in a line ---------------------------------------------------------------------------
_NUMBER = compiled(r"(?P<money>\$)?(?P<value>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)")
_MEASURE = compiled(r"\s*(?P<measure>[^\W\d_][\w'-]*)")


@dataclass(frozen=True, slots=True)
class Amount:
    """A number of a line with the word it counts and the words after it."""

    number: Number
    """As written with its measure ("6 ounces", "$12")."""
    measure: str
    """The measure word as a content word ("ounc"), or "$" for money."""
    after: tuple[str, ...]
    """The :data:`AFTER_WORDS` words after it, as written ("of", "water", "is")."""

    @property
    def near(self) -> frozenset[str]:
        """The measure and the words after it, as the question's content words are."""
        return frozenset([self.measure, *(_term(word) for word in self.after)])

    def named(self, terms: frozenset[str]) -> str:
        """The amount with its words up to the last one in *terms* ("6 ounces of water",
        not "6 ounces of water is")."""
        keep = [i for i, word in enumerate(self.after) if _term(word) in terms]
        return " ".join([self.number.text, *self.after[: keep[-1] + 1 if keep else 0]])


def amounts_in(line: str) -> list[Amount]:
    """Every number of *line* with a measure word or a dollar sign, dates, times and places
    ("my 5th project") left out."""
    found: list[Amount] = []
    for sentence in sentences(line):
        for match in _NUMBER.finditer(sentence):
            if is_date_or_time(sentence, match):
                continue
            unit = None if match["money"] else _MEASURE.match(sentence, match.end())
            written = unit["measure"] if unit else ""
            if written.lower() in _ORDINAL_SUFFIXES:
                continue
            measure = "$" if match["money"] else _term(written)
            if not measure:
                continue
            end = unit.end() if unit else match.end()
            after = tuple(_WORD.findall(sentence, end))[:AFTER_WORDS]
            value = float(match["value"].replace(",", ""))
            found.append(Amount(Number(value, sentence[match.start() : end]), measure, after))
    return found


_WORD = compiled(r"[^\W\d_][\w'-]*")
_ORDINAL_SUFFIXES = frozenset(word.lower() for word in every("numbers.ordinal_suffixes"))


def _term(word: str) -> str:
    """*word* as the question's content words are compared (folded, lightly stemmed)."""
    return light_stem(normalize(word))


# -- the turn's part -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ChangeWorkedOut:
    """Both amounts and the direction, for the block's last line and the answer check
    (``answer_check.Computed``)."""

    question: ChangeQuestion
    sentence: str
    items: tuple[RecallItem, ...]
    values: frozenset[str] = frozenset()
    words: tuple[str, ...] = ()
    """The word the answer must say (the direction: "less")."""
    later: tuple[str, ...] = ()
    """The opposite word, which it must not say first ("more")."""


def work_out(text: str, items: Sequence[RecallItem]) -> ChangeWorkedOut | None:
    """Which way the amount *text* asks about went between the earliest and the latest of
    the user's lines in *items* that hold it (None: not such a question, or not certain)."""
    question = parse_change_question(text)
    if question is None:
        return None
    lines = sorted((i for i in items if i.role == "user"), key=lambda i: (i.time_ns, i.seq))
    changes = _changes(question, lines)
    if len(changes) != 1:
        return None  # none, or more than one amount changed: which is asked is not certain
    (first_item, first), (last_item, last) = changes[0]
    terms = frozenset(question.terms)
    word = question.up if last.number.value > first.number.value else question.down
    other = question.down if word == question.up else question.up
    sentence = (
        f"{word.capitalize()}: from {first.named(terms)} ({_day(first_item)}) "
        f"to {last.named(terms)} ({_day(last_item)}, the latest)."
    )
    return ChangeWorkedOut(
        question, sentence, (first_item, last_item), words=(word,), later=(other,)
    )


def _day(item: RecallItem) -> str:
    return local_date(item.time_ns).isoformat()


Said = tuple[RecallItem, Amount]


def _changes(question: ChangeQuestion, lines: Sequence[RecallItem]) -> list[tuple[Said, Said]]:
    """Per measure near the question's words: its amount in the earliest and the latest line
    that hold it, where the two differ and were said on different days."""
    said: dict[str, list[Said]] = {}
    terms = set(question.terms)
    for item in lines:
        for amount in amounts_in(item.text):
            if amount.near & terms:
                said.setdefault(amount.measure, []).append((item, amount))
    changes: list[tuple[Said, Said]] = []
    for found in said.values():
        (first_item, first), (last_item, last) = found[0], found[-1]
        if first_item.message_id == last_item.message_id:
            continue
        if local_date(first_item.time_ns) == local_date(last_item.time_ns):
            continue
        if first.number.value != last.number.value:
            changes.append(((first_item, first), (last_item, last)))
    return changes
