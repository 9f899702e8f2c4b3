"""Planning a keyword query remembers the counts of common words, never of rare ones."""

from __future__ import annotations

import pytest

import agenvoy_desktop.core.archive as archive_mod
from agenvoy_desktop.core.archive import Archive
from tests.conftest import T0
from tests.core.conftest import add_texts, hit_ids


def test_a_rare_word_said_just_now_is_found(archive: Archive) -> None:
    add_texts(archive, ["the weather is nice"] * 5)
    archive.keyword_search("weather zanzibar", limit=5)
    new = add_texts(archive, ["we fly to zanzibar"], start=T0 + 10**12)
    hits = archive.keyword_search("zanzibar weather", limit=1)
    assert hit_ids(hits) == [new[0].id]


def test_common_counts_are_remembered_until_rows_change(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_mod, "COMMON_DF", 3)
    monkeypatch.setattr(archive_mod, "DF_MEMO_ROWS", 2)
    add_texts(archive, ["coffee in the morning"] * 4)
    counted: list[str] = []
    original = archive._doc_freq

    def counting(expr: str, cap: int, scope: str = "", columns: str = "body") -> int:
        counted.append(expr)
        return original(expr, cap, scope, columns)

    monkeypatch.setattr(archive, "_doc_freq", counting)
    archive.keyword_search("coffee", limit=3)
    archive.keyword_search("coffee", limit=3)
    assert counted == ['"coffee"']  # the second plan used the remembered count
    add_texts(archive, ["more coffee"] * 3, start=T0 + 10**12)  # past DF_MEMO_ROWS new rows
    archive.keyword_search("coffee", limit=3)
    assert counted == ['"coffee"', '"coffee"']
    archive.delete_session_rows("s1", drop_session=False)
    assert archive.keyword_search("coffee", limit=3) == []
    assert counted[-1] == '"coffee"'
    assert len(counted) == 3  # deleting rows forgot the count
