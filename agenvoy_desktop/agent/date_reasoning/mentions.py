"""The dates a message refers to: "yesterday", "last Tuesday", "on the 10th of April".

:func:`event_dates` finds every date phrase in a line and resolves it
against the local day the line was said, as a :class:`DatedMention` (the
phrase, its best single day, the span it covers and how sharp it is);
:func:`best_mention` and :func:`when_it_happened` pick the one that dates
the event a line describes.  Each kind of phrase is a pattern and a
resolver (``_FAMILIES``); the question parser reuses them to read the date
a question points at (:func:`date_phrases`, :func:`located_mentions`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from agenvoy_desktop.agent.date_reasoning.days import add_months, local_date, month_length
from agenvoy_desktop.language import LanguageDataError, languages
from agenvoy_desktop.language.calendar_names import full_months, month_numbers, weekday_numbers
from agenvoy_desktop.language.patterns import compiled, either, every

Precision = Literal["day", "week", "month", "year"]


@dataclass(frozen=True)
class DatedMention:
    """A date a message refers to: ``phrase`` as written, ``date`` the best single day.

    ``first``..``last`` is the span the phrase covers ("last week": that
    Monday to Sunday); ``precision`` says how sharp ``date`` is, so that an
    answer can say "in May 2023" rather than invent a day.
    """

    phrase: str
    date: dt.date
    precision: Precision
    first: dt.date
    last: dt.date


# --- words ------------------------------------------------------------------------------
# Every word comes from the language files (``dates.*``); the patterns below are the phrase
# shapes that hold them.  A phrase of the files matches with one space between its words,
# as the shapes around it do.


def _literal(words: Iterable[str]) -> str:
    """*words* as a regex alternation, each matched as written (duplicates once)."""
    return "|".join(dict.fromkeys(map(re.escape, words)))


def _count_words() -> dict[str, int]:
    """Every language's counts (``dates.count_words``), lower case, and the number each says;
    the first language to list a word gives its number."""
    counts: dict[str, int] = {}
    for lang in languages():
        for word, number in lang.pairs("dates.count_words"):
            if not (number.isascii() and number.isdigit()):
                raise LanguageDataError(
                    f"language file {lang.code}.toml: dates.count_words gives {word!r} "
                    f"{number!r}, not a number"
                )
            counts.setdefault(word.lower(), int(number))
    return counts


_WEEKDAYS = weekday_numbers()
_MONTHS = month_numbers()
_NUMBERS = _count_words()
_FULL_MONTHS = frozenset(full_months())
_VAGUE = frozenset(word.lower() for word in every("dates.vague_counts"))
"""Counts that blur a number of days into a week ("a few days ago")."""
_MONTH_VERBS = frozenset(every("dates.month_verbs"))
"""Month names that are verbs when written in lower case ("may", "march")."""

_WD = "(?P<wd>" + "|".join(map(re.escape, _WEEKDAYS)) + ")"
_ANY_MONTH = "(?:" + "|".join(map(re.escape, sorted(_MONTHS, key=len, reverse=True))) + ")"
_MON = f"(?P<mon>{_ANY_MONTH[3:]}"
_NUM = "(?P<n>" + either(r"\d{1,3}", _literal(sorted(_NUMBERS, key=len, reverse=True))) + ")"
_UNIT_WORD = r"(?P<u>day|week|month|year)s?"
_ORD = r"(?P<o>st|nd|rd|th)?"

_NOT_DAY = _literal(every("dates.not_days"))
_NOT_NTH = either(f",? (?:of )?{_ANY_MONTH}", rf" (?:{_NOT_DAY})\b" if _NOT_DAY else "")
"""What makes "on the 2nd" no day of this month: a month after it ("on the 2nd of May" is
read whole), or a word such as "floor" or "try" ("on the 2nd floor", "on the 3rd try")."""


def _future_pattern() -> str:
    """The future words as whole words, then the future patterns (``dates.future``)."""
    words = _literal(every("dates.future.words"))
    return either(rf"\b(?:{words})\b" if words else "", *every("dates.future.patterns"))


_FUTURE = compiled(_future_pattern(), re.IGNORECASE)
"""Words that make a sentence look ahead, so "on Friday" is the coming Friday."""

# --- calendar helpers -------------------------------------------------------------------


def _day(day: dt.date) -> tuple[dt.date, Precision, dt.date, dt.date]:
    return day, "day", day, day


def _week(day: dt.date) -> tuple[dt.date, Precision, dt.date, dt.date]:
    monday = day - dt.timedelta(days=day.weekday())
    return day, "week", monday, monday + dt.timedelta(days=6)


def _month(day: dt.date) -> tuple[dt.date, Precision, dt.date, dt.date]:
    end = day.replace(day=month_length(day.year, day.month))
    return day, "month", day.replace(day=1), end


def _year(day: dt.date) -> tuple[dt.date, Precision, dt.date, dt.date]:
    return day, "year", dt.date(day.year, 1, 1), dt.date(day.year, 12, 31)


def _weekday_before(said: dt.date, weekday: int) -> dt.date:
    """The last *weekday* strictly before *said* (a week back if *said* is one)."""
    return said - dt.timedelta(days=(said.weekday() - weekday - 1) % 7 + 1)


def _weekday_after(said: dt.date, weekday: int) -> dt.date:
    """The next *weekday* strictly after *said*."""
    return said + dt.timedelta(days=(weekday - said.weekday() - 1) % 7 + 1)


def _in_year_facing(said: dt.date, month: int, day: int, future: bool) -> dt.date | None:
    """Month and day without a year: the last one on or before *said*, or the next one
    on or after it when the sentence looks ahead.  None for a day the month lacks."""
    year = said.year
    if (month, day) > (said.month, said.day) and not future:
        year -= 1
    elif (month, day) < (said.month, said.day) and future:
        year += 1
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


# --- what a message's words refer to ----------------------------------------------------

_Span: TypeAlias = tuple[dt.date, Precision, dt.date, dt.date]
_Resolve: TypeAlias = Callable[[re.Match[str], dt.date, bool], _Span | None]


def named_group(match: re.Match[str], name: str) -> str | None:
    """A named group's text, None when the pattern lacks it or it did not take part."""
    return match.groupdict().get(name) or None


def _count(match: re.Match[str]) -> int:
    said = match.group("n").lower()
    return int(said) if said.isdigit() else _NUMBERS[said]


def _back(match: re.Match[str], said: dt.date) -> _Span:
    """The same day N days/weeks/months/years back ("two weeks ago"), and the span it names
    ("a few days ago" blurs into the days around it)."""
    n, unit = _count(match), match.group("u").lower()
    if unit == "day":
        back = said - dt.timedelta(days=n)
        if match.group("n").lower() in _VAGUE:
            return back, "week", back - dt.timedelta(days=3), back + dt.timedelta(days=1)
        return _day(back)
    if unit == "week":
        return _week(said - dt.timedelta(weeks=n))
    return _month(add_months(said, -n)) if unit == "month" else _year(add_months(said, -12 * n))


def _ago(match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
    return _back(match, said)


def _weekday_ago(match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
    """The weekday nearest to the day N units back ("the Wednesday two months ago")."""
    centre = _back(match, said)[0]
    ahead = (_WEEKDAYS[match.group("wd").lower()] - centre.weekday()) % 7
    return _day(centre + dt.timedelta(days=ahead - 7 if ahead > 3 else ahead))


def _weekday_named(match: re.Match[str], said: dt.date, future: bool) -> _Span | None:
    """A named weekday: "last Friday", "on Friday" (the coming one in a sentence that looks
    ahead), "next Friday" (the next one), "the Friday before last"."""
    weekday = _WEEKDAYS[match.group("wd").lower()]
    phrase = match.group(0).lower()
    if phrase.startswith("next") or (phrase.startswith("on") and future):
        return _day(_weekday_after(said, weekday))
    back = _weekday_before(said, weekday)
    return _day(back - dt.timedelta(days=7) if phrase.endswith("before last") else back)


def _fixed(days: int) -> _Resolve:
    def resolve(_match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
        return _day(said + dt.timedelta(days=days))

    return resolve


def _weekend(_match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
    """The Saturday and Sunday before the week *said* is in (on a Sunday: a week back)."""
    saturday = said - dt.timedelta(days=said.weekday() + 2)
    return saturday, "week", saturday, saturday + dt.timedelta(days=1)


def _relative_period(match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
    """The same day one period away, and its span ("last week", "next month", "last year")."""
    step = 1 if match.group(0).lower().startswith("next") else -1
    period = match.group("p").lower()
    if period == "week":
        return _week(said + dt.timedelta(weeks=step))
    return (
        _month(add_months(said, step)) if period == "month" else _year(add_months(said, 12 * step))
    )


def _earlier_this(match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
    """Halfway between the week's or month's start and *said* ("earlier this month")."""
    period = match.group("p").lower()
    start = said.replace(day=1) if period == "month" else said - dt.timedelta(days=said.weekday())
    if start >= said:
        return None
    precision: Precision = "month" if period == "month" else "week"
    return start + (said - start) / 2, precision, start, said - dt.timedelta(days=1)


def _iso(match: re.Match[str], _said: dt.date, _future: bool) -> _Span | None:
    try:
        day = dt.date(int(match.group("y")), int(match.group("m")), int(match.group("d")))
    except ValueError:
        return None
    return _day(day)


def _month_name(match: re.Match[str]) -> int | None:
    """The month a name stands for; a lower-case "may"/"march" is the verb, not a month."""
    name = match.group("mon")
    if name in _MONTH_VERBS:
        return None
    return _MONTHS[name.lower()]


def _month_day(match: re.Match[str], said: dt.date, future: bool) -> _Span | None:
    """A month and day ("May 3rd", "3 May 2023"); an abbreviation needs a dot, an ordinal
    or a year, so "I met Jan 3 times" is no date."""
    month, day, year = _month_name(match), int(match.group("d")), named_group(match, "y")
    marked = year or named_group(match, "o") or named_group(match, "dot")
    if month is None or (match.group("mon").lower() not in _FULL_MONTHS and not marked):
        return None
    if year is None:
        found = _in_year_facing(said, month, day, future)
        return None if found is None else _day(found)
    try:
        return _day(dt.date(int(year), month, day))
    except ValueError:
        return None


def _month_only(match: re.Match[str], said: dt.date, future: bool) -> _Span | None:
    """A month ("in May", "May 2022"): its 15th, or halfway to *said* in the current month."""
    month = _month_name(match)
    if month is None:
        return None
    year = named_group(match, "y")
    if year is not None:
        middle = dt.date(int(year), month, 15)
    else:
        middle = _in_year_facing(said, month, 15, future) or said
    if (middle.year, middle.month) == (said.year, said.month) and middle > said:
        middle = said.replace(day=1) + (said - said.replace(day=1)) / 2
    return _month(middle)


def _year_only(match: re.Match[str], said: dt.date, _future: bool) -> _Span | None:
    year = int(match.group("y"))
    if not 1950 <= year <= said.year + 5:
        return None
    middle = dt.date(year, 7, 1)
    if year == said.year and middle > said:
        middle = dt.date(year, 1, 1) + (said - dt.date(year, 1, 1)) / 2
    return _year(middle)


def _nth(match: re.Match[str], said: dt.date, future: bool) -> _Span | None:
    """The 14th of this month or the last ("on the 14th"), or the next when looking ahead."""
    day, month = int(match.group("d")), said.month
    if day > said.day and not future:
        month -= 1
    elif day < said.day and future:
        month += 1
    base = add_months(said.replace(day=1), month - said.month)
    return _day(base.replace(day=day)) if day <= month_length(base.year, base.month) else None


def _slashed(match: re.Match[str], said: dt.date, future: bool) -> _Span | None:
    """5/23/2023 (US month first, unless the first number cannot be a month); without a
    year only when unambiguous ("on 5/23"), as "on 5/3" could be either."""
    a, b, year = int(match.group("a")), int(match.group("b")), named_group(match, "y")
    month, day = (b, a) if a > 12 else (a, b)
    if year is None:
        if (a <= 12) == (b <= 12):
            return None
        found = _in_year_facing(said, month, day, future) if month <= 12 else None
        return None if found is None else _day(found)
    full = int(year) + (2000 if len(year) == 2 else 0)
    try:
        return _day(dt.date(full, month, day))
    except ValueError:
        return None


@dataclass(frozen=True)
class _Family:
    pattern: re.Pattern[str]
    resolve: _Resolve
    ahead: bool = False
    """True for phrases that point forward ("tomorrow"), which a past question never means."""


def _family(pattern: str, resolve: _Resolve, *, ahead: bool = False) -> _Family:
    return _Family(re.compile(pattern, re.IGNORECASE), resolve, ahead)


_FAMILIES = (
    _family(r"\bthe day before yesterday\b", _fixed(-2)),
    _family(r"\bthe day after tomorrow\b", _fixed(2), ahead=True),
    _family(r"\b(?:yesterday|last night)\b", _fixed(-1)),
    _family(r"\btomorrow\b", _fixed(1), ahead=True),
    _family(
        r"\b(?:earlier today|today|this morning|this afternoon|this evening|tonight)\b", _fixed(0)
    ),
    _family(rf"\b(?:on )?(?:the )?{_WD} {_NUM} {_UNIT_WORD} ago\b", _weekday_ago),
    _family(rf"\b(?:on )?(?:the )?{_WD} before last\b", _weekday_named),
    _family(rf"\b(?:last|this past|on) {_WD}(?!s)\b", _weekday_named),
    _family(rf"\bnext {_WD}\b", _weekday_named, ahead=True),
    _family(rf"\b{_NUM} {_UNIT_WORD} ago\b", _ago),
    # "taking Spanish classes for the past three months": it started that long ago
    _family(rf"\bfor (?:the )?(?:past|last) {_NUM} {_UNIT_WORD}\b", _ago),
    _family(r"\b(?:last|this past) weekend\b|\bover the weekend\b", _weekend),
    _family(r"\blast (?P<p>week|month|year)\b", _relative_period),
    _family(r"\bnext (?P<p>week|month|year)\b", _relative_period, ahead=True),
    _family(r"\bearlier this (?P<p>week|month)\b", _earlier_this),
    _family(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b", _iso),
    _family(rf"\b{_MON}(?P<dot>\.)? (?P<d>\d{{1,2}}){_ORD}\b(?:,? (?P<y>\d{{4}})\b)?", _month_day),
    _family(
        rf"\b(?:the )?(?P<d>\d{{1,2}}){_ORD} (?:of )?{_MON}\b(?:,? (?P<y>\d{{4}})\b)?", _month_day
    ),
    _family(rf"\b{_MON},? (?P<y>\d{{4}})\b", _month_only),
    _family(rf"\b(?:in|during) {_MON}\b(?!,? \d)", _month_only),
    _family(r"\b(?:in|during|since) (?P<y>(?:19|20)\d\d)\b(?!-)", _year_only),
    _family(rf"\bon the (?P<d>\d{{1,2}})(?:st|nd|rd|th)\b(?!{_NOT_NTH})", _nth),
    _family(r"\b(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})\b", _slashed),
    _family(r"\bon (?P<a>\d{1,2})/(?P<b>\d{1,2})\b(?!/)", _slashed),
)


def date_phrases(text: str) -> list[tuple[re.Match[str], _Family]]:
    """Every date phrase in *text*, longest first where two overlap, in text order."""
    found = [(m, family) for family in _FAMILIES for m in family.pattern.finditer(text)]
    found.sort(key=lambda pair: (pair[0].start(), pair[0].start() - pair[0].end()))
    kept: list[tuple[re.Match[str], _Family]] = []
    for match, family in found:
        if not kept or match.start() >= kept[-1][0].end():
            kept.append((match, family))
    return kept


def _sentence_around(text: str, at: int, marks: str = ".!?\n") -> tuple[int, int]:
    """Where the sentence holding position *at* starts and ends."""
    start = max(text.rfind(mark, 0, at) for mark in marks) + 1
    ends = [i for i in (text.find(mark, at) for mark in marks) if i >= 0]
    return start, min(ends, default=len(text))


def _looks_ahead(text: str, at: int) -> bool:
    """Whether the sentence around position *at* talks about the future."""
    return _FUTURE.search(text, *_sentence_around(text, at)) is not None


def located_mentions(text: str, said: dt.date) -> list[tuple[int, DatedMention]]:
    located: list[tuple[int, DatedMention]] = []
    for match, family in date_phrases(text):
        span = family.resolve(match, said, _looks_ahead(text, match.start()))
        if span is not None:
            located.append((match.start(), DatedMention(match.group(0), *span)))
    return located


def event_dates(text: str, said_ns: int) -> list[DatedMention]:
    """The dates *text* refers to, in order, resolved against the local day it was said."""
    return [mention for _, mention in located_mentions(text, local_date(said_ns))]


_PRECISION_RANK = {"day": 0, "week": 1, "month": 2, "year": 3}
_STOPWORDS = frozenset(word.lower() for word in every("dates.stopwords"))
"""Words that say nothing of which event a sentence tells (:func:`_nearness`)."""


def best_mention(text: str, said_ns: int, event: str | None = None) -> DatedMention:
    """The mention that dates the event *text* describes, else the day it was said
    (with phrase "").

    The sharpest mention wins (a day over a week), the first of equals; with
    *event*, mentions in the sentence sharing most words with it come first,
    so "Last week I started yoga; today was class five." dates "started yoga"
    to last week.
    """
    said = local_date(said_ns)
    located = located_mentions(text, said)
    if not located:
        return DatedMention("", said, "day", said, said)
    nearness = _nearness(text, event, [at for at, _ in located]) if event else [0] * len(located)
    order = sorted(
        range(len(located)),
        key=lambda i: (-nearness[i], _PRECISION_RANK[located[i][1].precision], i),
    )
    return located[order[0]][1]


def _nearness(text: str, event: str, positions: Sequence[int]) -> list[int]:
    """For each position, how many of *event*'s words its sentence holds."""
    wanted = {word[:5] for word in _words(event)}
    scores: list[int] = []
    for at in positions:
        start, end = _sentence_around(text, at, ".!?;\n")
        scores.append(len(wanted & {word[:5] for word in _words(text[start:end])}))
    return scores


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z']{4,}", text.lower()) if w not in _STOPWORDS]


def when_it_happened(text: str, said_ns: int, event: str | None = None) -> dt.date:
    """The best single day for the event a line describes (see :func:`best_mention`)."""
    return best_mention(text, said_ns, event).date
