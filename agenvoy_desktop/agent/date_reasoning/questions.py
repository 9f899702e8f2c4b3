"""Which questions need date arithmetic, and the events to look up for them.

:func:`parse_temporal_question` recognises the few English question shapes
that need date arithmetic (how long ago, how long between, which first,
when, what on a given day) and cuts out the event phrases to search for.
It is deliberately narrow: a question it misreads costs more than one it
leaves to the model, so "How long is my commute?" (a duration the user
said) is not temporal.  :func:`day_range` resolves the date phrase an
"on_day" question points at.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agenvoy_desktop.agent.date_reasoning.mentions import (
    date_phrases,
    located_mentions,
    named_group,
)
from agenvoy_desktop.agent.date_reasoning.verbs import PAST_FORMS, gerund

Kind = Literal["ago", "between", "first", "when", "on_day"]
Unit = Literal["days", "weeks", "months", "years"]


@dataclass(frozen=True)
class TemporalQuestion:
    """A question that needs date arithmetic, and the events to look up for it.

    ``events`` are phrases cut from the question, to search memory with: a
    verb phrase without its subject ("attended the gardening workshop",
    "harvest my first batch of fresh herbs") or a noun phrase ("my attendance
    at a cultural festival").  "How many days did it take me to finish X?" is
    a "between" question over ("start X", "finish X").

    ``action`` (kind "first" only) is what the options share: "purchase" when
    the user did it to each option ("Which item did I purchase first, A or
    B?"), or a predicate each option did ("Who became a parent first, Tom or
    Alex?": action "became a parent", events "Tom became a parent", ...).

    ``anchor`` (kind "on_day" only) is the date phrase the question points at
    ("the Wednesday two months ago"); :func:`day_range` resolves it.
    """

    kind: Kind
    unit: Unit | None
    events: tuple[str, ...]
    action: str | None = None
    anchor: str | None = None


_I = re.IGNORECASE
_UNIT = r"(?P<unit>days|weeks|months|years)"
_HOW = rf"how (?:many {_UNIT}|long|much time)"
_FILLER = re.compile(
    r"^(?:(?:hey|hi|ok|okay|so|and|also|please)[,!]?\s+)*"
    r"(?:(?:can|could|would) you (?:please )?(?:tell|remind) me|(?:please )?(?:tell|remind) me|"
    r"do you (?:know|remember)|i (?:wonder|want to know))[,:]?\s+",
    _I,
)
_BETWEEN = re.compile(
    rf"^{_HOW} (?:(?:have|had|has) )?(?:(?:passed|elapsed|gone by|went by|were there|are there|"
    r"was there|is there|was it|is it) )?between (?P<rest>.+)$",
    _I,
)
_TOOK = re.compile(
    rf"^{_HOW} did it take (?:me|us|for me|for us) to (?P<what>.+?)(?: after (?P<after>.+))?$", _I
)
_SINCE = re.compile(
    rf"^{_HOW} (?:(?:has|had|have) (?:it )?(?:been|passed|elapsed|gone by) |(?:is|was) it |"
    r"it(?:'s| has| is) been |(?:passed|elapsed|gone by) )?since (?P<a>.+?)(?: when (?P<b>.+))?$",
    _I,
)
_BEFORE_AFTER = re.compile(
    rf"^how many {_UNIT} (?:before|after) (?P<a>.+?) did (?:i|we) (?P<b>.+)$", _I
)
_AGO_DID = re.compile(rf"^how (?:many {_UNIT}|long) ago (?:did )?(?:i|we) (?P<e>.+)$", _I)
_AGO_WAS = re.compile(
    rf"^how (?:many {_UNIT}|long) ago (?:was|were) (?:(?P<me>i|we) )?(?P<e>.+)$", _I
)
_FIRST = re.compile(
    r"^(?P<wh>which|what|who)(?P<head>(?: [^,:;]+?)?) (?:first|earlier|sooner)"
    r"\s*(?:[,:;\u2014]|\s-)\s*(?P<options>.+)$",
    _I,
)
_FIRST_DID = re.compile(r"^did (?:i|we) (?P<verb>\w+) (?P<options>.+? or .+?) first$", _I)
_FIRST_BETWEEN = re.compile(
    r"^between (?P<options>.+?),? (?P<wh>which|what|who)(?P<head>(?: [^,:;]+?)?) "
    r"(?:first|earlier)$",
    _I,
)
_WHEN = re.compile(
    r"^(?:when|on what (?:day|date)|what date) did (?:i|we) (?P<e>.+)$"
    r"|^when was the (?:last|first|most recent) time (?:that )?(?:i|we) (?P<t>.+)$"
    r"|^when was (?P<n>(?:my|our) (?:last|first|most recent) .+)$",
    _I,
)
_WHEN_EMBEDDED = re.compile(r"^when (?:i|we) (?P<e>.+)$", _I)
_ON_DAY_HEAD = re.compile(
    r"^(?:what|where|who|whom|which \w+|how much|how many (?P<n>\w+(?:,?\s+[\w'-]+){0,5}?)) "
    r"(?:did|was|were) (?:i|we)\b"
    r"(?P<e>.*?)(?:\s+on)?$",
    _I,
)
_UNITS_COUNTED = frozenset(str.split("days weeks months years hours minutes times nights weekends"))
_ADVICE_HEAD = re.compile(
    r"\b(?:should|shall|would|could|can|must|will|does|am|is|are|to)\b|^(?:\w+ )?do\b", _I
)
"""A "which ... first" head asking for advice ("Which should I read first, A or B?")."""
_PAST_HEAD = re.compile(r"\b(?:did|was|were|had|happened|came|occurred|took place)\b|\w\wed\b", _I)


def parse_temporal_question(question: str) -> TemporalQuestion | None:
    """The date arithmetic *question* asks for, or None for any other question."""
    text = re.sub(r"\s+", " ", question.replace("\u2019", "'").replace("\u201c", '"'))
    text = text.replace("\u201d", '"').strip().rstrip("?.! ")
    embedded = _FILLER.match(text)
    if embedded:
        text = text[embedded.end() :]
    for parse in (_parse_between, _parse_took, _parse_since, _parse_before_after, _parse_ago):
        found = parse(text)
        if found is not None:
            return found
    return _parse_first(text) or _parse_when(text, bool(embedded)) or _parse_on_day(text)


_UNITS: dict[str, Unit] = {"days": "days", "weeks": "weeks", "months": "months", "years": "years"}


def _unit(match: re.Match[str]) -> Unit | None:
    unit = named_group(match, "unit")
    return None if unit is None else _UNITS[unit.lower()]


def _event(phrase: str) -> str:
    """An event phrase without its lead-in: "the day I attended X" -> "attended X"."""
    phrase = phrase.strip(" ,")
    phrase = re.sub(
        r"^(?:the (?:day|date|time|week|month|moment)|when)\s+(?:when\s+|that\s+|on which\s+)?",
        "",
        phrase,
        flags=_I,
    )
    return re.sub(r"^(?:that\s+)?(?:i|we)\s+", "", phrase, flags=_I)


def _split_pair(text: str) -> tuple[str, str] | None:
    """Two events split at the "and" whose right side starts most like the left side
    ("the day I X and the day I Y"); None when that is not clear."""
    cuts = [m.start() for m in re.finditer(r" and ", text)]
    if len(cuts) == 1:
        return text[: cuts[0]], text[cuts[0] + 5 :]
    left = text.lower().split()
    scores = [_common_prefix(left, text[c + 5 :].lower().split()) for c in cuts]
    best = max(scores, default=0)
    if best == 0 or scores.count(best) != 1:
        return None
    cut = cuts[scores.index(best)]
    return text[:cut], text[cut + 5 :]


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    count = 0
    while count < min(len(a), len(b)) and a[count] == b[count]:
        count += 1
    return count


def _two_events(kind: Kind, unit: Unit | None, a: str, b: str) -> TemporalQuestion | None:
    first, second = _event(a), _event(b)
    if not first or not second:
        return None
    return TemporalQuestion(kind, unit, (first, second))


def _parse_between(text: str) -> TemporalQuestion | None:
    match = _BETWEEN.match(text)
    pair = _split_pair(match.group("rest")) if match else None
    return _two_events("between", _unit(match), *pair) if match and pair else None


def _parse_took(text: str) -> TemporalQuestion | None:
    """Two events from "How many days did it take me to finish X (after Y)?"; not from
    "How long did it take me to drive to work?", a duration the user said."""
    match = _TOOK.match(text)
    if match is None:
        return None
    unit, what = _unit(match), match.group("what")
    if match.group("after"):
        return _two_events("between", unit, match.group("after"), what)
    if unit is None:
        return None
    verb, _, rest = what.partition(" ")
    if verb.lower() in ("finish", "complete"):
        return TemporalQuestion("between", unit, (f"start {rest}", what))
    doing = f"{gerund(verb)} {rest}".strip()
    return TemporalQuestion("between", unit, (f"start {doing}", f"finish {doing}"))


def _parse_since(text: str) -> TemporalQuestion | None:
    match = _SINCE.match(text)
    if match is None:
        return None
    if match.group("b"):
        return _two_events("between", _unit(match), match.group("a"), match.group("b"))
    return TemporalQuestion("ago", _unit(match), (_event(match.group("a")),))


def _parse_before_after(text: str) -> TemporalQuestion | None:
    match = _BEFORE_AFTER.match(text)
    return _two_events("between", _unit(match), match["a"], match["b"]) if match else None


def _parse_ago(text: str) -> TemporalQuestion | None:
    match = _AGO_DID.match(text)
    if match:
        return TemporalQuestion("ago", _unit(match), (match.group("e"),))
    match = _AGO_WAS.match(text)
    if match is None:
        return None
    event = f"was {match.group('e')}" if match.group("me") else match.group("e")
    return TemporalQuestion("ago", _unit(match), (event,))


def _parse_first(text: str) -> TemporalQuestion | None:
    """The options of "Which item did I purchase first, A or B?", "Who became a parent first, Tom or
    Alex?", "Did I buy A or B first?", "Between A and B, which did I do first?"."""
    match = _FIRST.match(text) or _FIRST_BETWEEN.match(text)
    if match is not None:
        wh, head = match.group("wh").lower(), match.group("head").strip()
        if head and (_ADVICE_HEAD.search(head) or not _is_past_head(head)):
            return None
        if text.lower().startswith("between"):
            pair = _split_pair(match.group("options"))
            options = None if pair is None else _clean_options(pair)
        else:
            options = _split_options(match.group("options"))
        return None if options is None else _first(wh, head, options)
    match = _FIRST_DID.match(text)
    options = _split_options(match.group("options")) if match else None
    if match is None or options is None:
        return None
    return TemporalQuestion("first", None, options, action=_action(match.group("verb")))


def _is_past_head(head: str) -> bool:
    """Whether a "which ... first" head is about the past ("did I join", "became")."""
    return bool(_PAST_HEAD.search(head)) or any(w in PAST_FORMS for w in head.lower().split())


def _first(wh: str, head: str, options: tuple[str, ...]) -> TemporalQuestion:
    did = re.match(r"^(?:\w+ )?(?:did|have|had) (?:i|we) (?P<verb>.+)$", head, _I)
    if did:
        return TemporalQuestion("first", None, options, action=_action(did.group("verb")))
    if wh == "who" and head:
        return TemporalQuestion("first", None, tuple(f"{o} {head}" for o in options), action=head)
    return TemporalQuestion("first", None, options)


def _action(verb: str) -> str | None:
    """The verb the options share, or None for "do" ("Which did I do first?")."""
    return None if verb.lower() in ("do", "do the") else verb


def _split_options(text: str) -> tuple[str, ...] | None:
    """The options of "A or B" / "A, B, or C"; None unless 2-4 short ones."""
    return _clean_options(re.split(r",\s*(?:or\s+)?|\s+or\s+", text))


def _clean_options(parts: Sequence[str]) -> tuple[str, ...] | None:
    options = tuple(part.strip(" ,") for part in parts)
    if not 2 <= len(options) <= 4 or any(not o or len(o.split()) > 12 for o in options):
        return None
    return options


def _parse_when(text: str, embedded: bool) -> TemporalQuestion | None:
    match = _WHEN.match(text) or (_WHEN_EMBEDDED.match(text) if embedded else None)
    if match is None:
        return None
    event = next(group for group in match.groups() if group)
    return TemporalQuestion("when", None, (event,))


def _parse_on_day(text: str) -> TemporalQuestion | None:
    """A past question that ends in a date phrase ("What did I do with Rachel on the
    Wednesday two months ago?")."""
    matches = date_phrases(text)
    if not matches:
        return None
    anchor, family = matches[-1]
    if anchor.end() != len(text) or family.ahead:
        return None
    head = _ON_DAY_HEAD.match(text[: anchor.start()].rstrip())
    if head is None:
        return None
    # "How many different museums or galleries did I visit …": the things counted belong
    # to the event searched for ("visit different museums or galleries")
    counted = head.group("n") or ""
    counted = "" if counted.casefold() in _UNITS_COUNTED else counted  # "how many days"
    event = " ".join(part for part in (head.group("e").strip(), counted) if part)
    phrase = re.sub(r"^on\s+", "", anchor.group(0), flags=_I)
    return TemporalQuestion("on_day", None, (event,) if event else (), anchor=phrase)


def day_range(question: TemporalQuestion, today: dt.date) -> tuple[dt.date, dt.date] | None:
    """The first and last day an "on_day" question points at, seen from *today*."""
    if question.anchor is None:
        return None
    mentions = located_mentions(question.anchor, today)
    return (mentions[0][1].first, mentions[0][1].last) if mentions else None
