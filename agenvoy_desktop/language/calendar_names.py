"""The names of the months and the weekdays: one table per language, three readers.

A language file lists its months under ``dates.months``, January first, each entry
the month's written forms with the full name first (``"september sept sep"``),
and its weekdays under ``dates.weekdays``, Monday first, as ``datetime`` counts
them.  Three readers take what they need from that one table, so a month
spelled one way in one of them cannot be missing from another:

- the date parser (``agent/date_reasoning/mentions.py``) reads every form as
  its month's number (:func:`month_numbers`, :func:`weekday_numbers`), and a
  full name as a date without a dot or a day's ordinal (:func:`full_months`);
- recall's value pattern (``agent/recall_lines.py``) takes the full names,
  capitalized, as a sign of a date (:func:`capitalized_names`);
- the number reader (``agent/number_answers.py``) takes each month's shortest
  form as the start of any way of writing it (:func:`month_starts`).

Every reader takes the union over every language, in the catalog's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from agenvoy_desktop.language.catalog import Language, LanguageDataError, languages

MONTHS = 12
WEEKDAYS = 7


def _entries(lang: Language, key: str, count: int) -> tuple[str, ...]:
    """*lang*'s entries under *key*: none, or exactly *count* (one per month or weekday)."""
    entries = lang.words(key)
    if entries and len(entries) != count:
        raise LanguageDataError(
            f"language file {lang.code}.toml: {key} must list {count} entries, not {len(entries)}"
        )
    return entries


def _forms(key: str, count: int) -> list[tuple[int, tuple[str, ...]]]:
    """Every language's entries under *key*, each as (its position from 0, its forms)."""
    return [
        (position, tuple(entry.lower().split()))
        for lang in languages()
        for position, entry in enumerate(_entries(lang, key, count))
    ]


@cache
def month_numbers() -> Mapping[str, int]:
    """Every written form of a month, lower case, and its number (1 = January)."""
    return {
        form: position + 1 for position, forms in _forms("dates.months", MONTHS) for form in forms
    }


@cache
def weekday_numbers() -> Mapping[str, int]:
    """Every weekday's name, lower case, and its number (0 = Monday, as ``date.weekday``)."""
    return {
        form: position for position, forms in _forms("dates.weekdays", WEEKDAYS) for form in forms
    }


@cache
def full_months() -> tuple[str, ...]:
    """Each month's full name (its first form), lower case."""
    return tuple(forms[0] for _, forms in _forms("dates.months", MONTHS))


@cache
def full_weekdays() -> tuple[str, ...]:
    """Each weekday's full name (its first form), lower case."""
    return tuple(forms[0] for _, forms in _forms("dates.weekdays", WEEKDAYS))


@cache
def month_starts() -> tuple[str, ...]:
    """Each month's shortest form ("jan", "sep"), which every way of writing it starts with."""
    return tuple(min(forms, key=len) for _, forms in _forms("dates.months", MONTHS))


@cache
def capitalized_names() -> tuple[str, ...]:
    """The full names of the months, then of the weekdays, capitalized ("May", "Friday")."""
    return tuple(name[:1].upper() + name[1:] for name in (*full_months(), *full_weekdays()))
