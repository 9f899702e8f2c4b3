"""The answer in words: spans of time, and one sentence in the second person.

:func:`difference`, :func:`ago` and :func:`age_phrase` word spans of time
("3 weeks (23 days)", "4 days ago"); :func:`explain` writes the finished
answer sentence a small model phrases from, or code shows as it is, saying
the user's events back to them (:func:`to_second_person`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import TypeAlias

from agenvoy_desktop.agent.date_reasoning.days import add_months
from agenvoy_desktop.agent.date_reasoning.mentions import DatedMention
from agenvoy_desktop.agent.date_reasoning.questions import TemporalQuestion, Unit, day_range
from agenvoy_desktop.agent.date_reasoning.verbs import past_tense
from agenvoy_desktop.agent.pronouns import swap_person

FoundDate: TypeAlias = dt.date | DatedMention
"""What the caller found for an event: a day, or the mention that dated it."""

_SINGULAR = {"days": "day", "weeks": "week", "months": "month", "years": "year"}


def _plural(count: int, unit: Unit) -> str:
    return f"{count} {_SINGULAR[unit] if count == 1 else unit}"


def _whole_months(lo: dt.date, hi: dt.date) -> int:
    """Calendar months from *lo* to *hi*, rounded down (Jan 31 to Feb 28 is one)."""
    months = (hi.year - lo.year) * 12 + hi.month - lo.month
    return months - (add_months(lo, months) > hi)


def _calendar_steps(lo: dt.date, hi: dt.date, months: int) -> tuple[int, bool]:
    """Steps of *months* from *lo* to *hi*, rounded to the nearest, and whether exact."""
    whole = _whole_months(lo, hi) // months
    start, after = add_months(lo, whole * months), add_months(lo, (whole + 1) * months)
    rest = (hi - start).days
    return whole + (2 * rest >= (after - start).days), rest == 0


def _auto_unit(days: int) -> Unit:
    """The unit a person would use for a span of *days* (see :func:`age_phrase`)."""
    if days < 14:
        return "days"
    if days < 56:
        return "weeks"
    return "months" if days < 730 else "years"


def difference(a: dt.date, b: dt.date, unit: Unit | None = None) -> str:
    """The span between two days in *unit* ("6 days", "3 weeks (23 days)", "4 months").

    Weeks and months are rounded to the nearest whole one (months and years
    by the calendar); when that is not exact the days follow in brackets, so
    neither the model nor the user is handed a rounded number as exact.
    """
    lo, hi = sorted((a, b))
    days = (hi - lo).days
    unit = unit or _auto_unit(days)
    if unit == "days":
        return _plural(days, "days")
    if unit == "weeks":
        count, exact = (days + 3) // 7, days % 7 == 0
    else:
        count, exact = _calendar_steps(lo, hi, 1 if unit == "months" else 12)
    text = _plural(count, unit)
    return text if exact else f"{text} ({_plural(days, 'days')})"


def ago(day: dt.date, today: dt.date, unit: Unit | None = None) -> str:
    """How long before *today* *day* was: "today", "yesterday", "4 days ago", "in 3 days"."""
    delta = (today - day).days
    named = {0: "today", 1: "yesterday", -1: "tomorrow"}
    if delta in named:
        return named[delta]
    span = difference(day, today, unit)
    return f"{span} ago" if delta > 0 else f"in {span}"


def age_phrase(said: dt.date, today: dt.date) -> str:
    """A compact age for a remembered line ("3 days ago", "2 weeks ago", "1 year ago").

    Rounded down, without the days in brackets: it labels a line, it is not
    an answer.  A day after *today* (a clock that was ahead) reads "today".
    """
    days = (today - said).days
    if days < 2:
        return "yesterday" if days == 1 else "today"
    unit = _auto_unit(days)
    if unit == "days":
        count = days
    elif unit == "weeks":
        count = days // 7
    else:
        months = _whole_months(said, today)
        count = months if unit == "months" else months // 12
    return f"{_plural(count, unit)} ago"


_DETERMINERS = frozenset(
    re.findall(r"\S+", "the my our a an his her their this that these those your its")
)
_ADVERBS = frozenset(
    re.findall(r"\S+", "last first finally actually ever recently just also officially")
)


def _is_noun_phrase(event: str) -> bool:
    first = event.split(maxsplit=1)[0]
    quoted_or_named = first[0] in "'\"" or first[0].isupper()
    return first.lower() in _DETERMINERS or quoted_or_named or first.lower().endswith("ing")


def to_second_person(event: str) -> str:
    """An event phrase said back to the user: "harvest my herbs" -> "you harvested your
    herbs", "my attendance at a festival" -> "your attendance at a festival"."""
    if not event or _is_noun_phrase(event):
        return swap_person(event)
    words = event.split()
    at = 0
    while at < len(words) - 1 and words[at].lower() in _ADVERBS:
        at += 1
    words[at] = "were" if words[at].lower() == "was" else past_tense(words[at])
    return "you " + swap_person(" ".join(words))


def _date_text(found: FoundDate) -> str:
    """The date alone: "2023-04-14", or as sharp as a mention allows: "May 2023", "2019"."""
    if isinstance(found, dt.date):
        return found.isoformat()
    if found.precision == "week":
        return f"the week of {found.first.isoformat()}"
    if found.precision == "month":
        return f"{found.date:%B %Y}"
    return str(found.date.year) if found.precision == "year" else found.date.isoformat()


def _when_text(found: FoundDate) -> str:
    """The date with its preposition: "on 2023-04-14", "in May 2023", "in 2019"."""
    precise = isinstance(found, dt.date) or found.precision == "day"
    return f"{'on' if precise else 'in'} {_date_text(found)}"


def _date_of(found: FoundDate) -> dt.date:
    return found if isinstance(found, dt.date) else found.date


def _rough(found: Sequence[FoundDate]) -> str:
    """The word "about" when any of the dates is coarser than a day."""
    coarse = any(isinstance(f, DatedMention) and f.precision != "day" for f in found)
    return "about " if coarse else ""


def _fact(event: str, found: FoundDate) -> str:
    """One event and its date: "you attended the workshop on 2023-04-15", "your visit to
    X was on 2023-04-15"."""
    if _is_noun_phrase(event):
        return f"{swap_person(event)} was {_when_text(found)}"
    return f"{to_second_person(event)} {_when_text(found)}"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:].rstrip(".") + "."


def explain(
    question: TemporalQuestion, found: Sequence[tuple[str, FoundDate]], today: dt.date
) -> str:
    """One sentence with the answer worked out, for the model to phrase or code to show.

    *found* pairs event phrases (as in ``question.events``) with the day, or
    the mention, that dates them; an event missing from it is said to have no
    date.  An "on_day" question is answered with the day(s) it points at.
    """
    if question.kind == "on_day":
        return _explain_on_day(question, today)
    dates = dict(found)
    missing = [event for event in question.events if event not in dates]
    if missing:
        known = [_fact(event, dates[event]) for event in question.events if event in dates]
        unknown = "; ".join(f'"{swap_person(event)}"' for event in missing)
        return " ".join([*(_sentence(k) for k in known), f"I found no date for {unknown}."])
    known_dates = [(event, dates[event]) for event in question.events]
    if question.kind == "between":
        return _explain_between(question, known_dates)
    if question.kind == "first":
        return _explain_first(question, known_dates)
    event, when = known_dates[0]
    rough = _rough([when])
    return _sentence(f"{_fact(event, when)}, {rough}{ago(_date_of(when), today, question.unit)}")


def _explain_between(question: TemporalQuestion, found: Sequence[tuple[str, FoundDate]]) -> str:
    (a, when_a), (b, when_b) = found[0], found[-1]
    span = difference(_date_of(when_a), _date_of(when_b), question.unit)
    if _date_of(when_a) == _date_of(when_b):
        span = "the same day"
    else:
        span = f"{_rough([when_a, when_b])}{span} apart"
    second = _fact(b, when_b)
    if not _is_noun_phrase(a) and second.startswith("you "):
        second = second[4:]  # "you attended X on … and planted Y on …"
    return _sentence(f"{_fact(a, when_a)} and {second}: {span}")


def _explain_first(question: TemporalQuestion, found: Sequence[tuple[str, FoundDate]]) -> str:
    ordered = sorted(found, key=lambda pair: _date_of(pair[1]))
    action = question.action
    by_subject = bool(action) and all(event.endswith(f" {action}") for event, _ in ordered)
    names = [swap_person(event) for event, _ in ordered]
    if by_subject and action:
        names = [name[: -len(action) - 1] for name in names]
    dated = [f"{name} ({_date_text(when)})" for name, (_, when) in zip(names, ordered, strict=True)]
    if len({_date_of(when) for _, when in ordered}) == 1:
        return _same_day(action if by_subject else None, action, names, ordered[0][1])
    then = "".join(f", then {text}" for text in dated[1:])
    if by_subject:
        return _sentence(f"{names[0]} {action} first ({_date_text(ordered[0][1])}){then}")
    if action:
        verb, _, rest = action.partition(" ")
        done = " ".join(part for part in ("you", past_tense(verb), rest, names[0]) if part)
        return _sentence(f"{done} first ({_date_text(ordered[0][1])}){then}")
    if len(dated) == 2:
        return _sentence(f"{dated[0]} came before {dated[1]}")
    return _sentence(f"{dated[0]} came first{then}")


def _same_day(
    predicate: str | None, action: str | None, names: Sequence[str], when: FoundDate
) -> str:
    """Options dated the same day: "Tom and Alex became a parent…", "You joined A and B…"."""
    together = " and ".join(names)
    on = f"on the same day ({_date_text(when)})"
    if predicate:
        return _sentence(f"{together} {predicate} {on}")
    if action:
        verb, _, rest = action.partition(" ")
        return _sentence(" ".join(p for p in ("you", past_tense(verb), rest, together, on) if p))
    return _sentence(f"{together} were {on}")


def _explain_on_day(question: TemporalQuestion, today: dt.date) -> str:
    days = day_range(question, today)
    if days is None or question.anchor is None:
        return "I could not tell which day that is."
    first, last = days
    anchor = swap_person(question.anchor)
    if first == last:
        return _sentence(f"{anchor} was {first:%A}, {first.isoformat()}")
    return _sentence(f"{anchor} was {first.isoformat()} to {last.isoformat()}")
