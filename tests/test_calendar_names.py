"""The one month and weekday table its three readers share (``language/calendar_names.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agenvoy_desktop.language import LanguageDataError, calendar_names
from agenvoy_desktop.language.catalog import Language, language, parse

_READERS = (
    calendar_names.month_numbers,
    calendar_names.weekday_numbers,
    calendar_names.full_months,
    calendar_names.full_weekdays,
    calendar_names.month_starts,
    calendar_names.capitalized_names,
)


@pytest.fixture
def only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Language]]:
    """The readers over the languages the test puts in the list, their caches cleared."""
    chosen: list[Language] = []
    monkeypatch.setattr(calendar_names, "languages", lambda: tuple(chosen))
    _clear()
    yield chosen
    _clear()


def _clear() -> None:
    for reader in _READERS:
        reader.cache_clear()


def test_every_form_reads_as_its_month_and_every_weekday_as_date_weekday() -> None:
    months = calendar_names.month_numbers()
    assert (months["jan"], months["may"], months["sept"], months["sep"]) == (1, 5, 9, 9)
    assert calendar_names.weekday_numbers()["monday"] == 0
    assert calendar_names.weekday_numbers()["sunday"] == 6


def test_each_reader_takes_its_part_of_the_one_table() -> None:
    assert calendar_names.full_months()[:5] == ("january", "february", "march", "april", "may")
    assert calendar_names.month_starts()[8] == "sep"
    assert calendar_names.full_weekdays()[::6] == ("monday", "sunday")
    names = calendar_names.capitalized_names()
    assert (names[4], names[12], len(names)) == ("May", "Monday", 19)


def test_a_month_list_of_the_wrong_length_is_named(only: list[Language]) -> None:
    only.append(
        parse("xx", '[language]\nname = "X"\nscript = "latin"\n[dates]\nmonths = ["jan"]\n')
    )
    with pytest.raises(LanguageDataError, match=r"xx\.toml: dates\.months must list 12"):
        calendar_names.month_numbers()


def test_a_language_without_the_table_adds_nothing(only: list[Language]) -> None:
    only.append(language("de"))
    assert calendar_names.month_numbers() == {}
    assert calendar_names.capitalized_names() == ()
