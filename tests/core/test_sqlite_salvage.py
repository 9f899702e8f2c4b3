"""The range reader both salvages share keeps every row off a damaged page, in either read size."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agenvoy_desktop.core.sqlite_salvage import RangeReader

ROWS = 400
PAGE = 1024


def _write_table(path: Path) -> dict[int, tuple[int, str]]:
    """A table of ROWS rows a few to a page; rowid -> (id, body)."""
    db = sqlite3.connect(path)
    try:
        db.execute(f"PRAGMA page_size = {PAGE}")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        rows = [(i, f"row {i} " + "x" * 180) for i in range(1, ROWS + 1)]
        db.executemany("INSERT INTO t VALUES (?, ?)", rows)
        db.commit()
    finally:
        db.close()
    return {row[0]: row for row in rows}


def _leaf_pages(path: Path) -> list[tuple[int, range]]:
    """(page number, rowids on it) of each leaf page of ``t``, in rowid order.

    The rowids run 1..ROWS without a gap, so each leaf holds the next
    ``ncell`` of them.
    """
    db = sqlite3.connect(path)
    try:
        query = "SELECT pageno, ncell FROM dbstat WHERE name = 't' AND pagetype = 'leaf'"
        leaves = db.execute(query + " ORDER BY path").fetchall()
    finally:
        db.close()
    out: list[tuple[int, range]] = []
    first = 1
    for page, cells in leaves:
        out.append((int(page), range(first, first + int(cells))))
        first += int(cells)
    assert first == ROWS + 1
    return out


def _zero_page(path: Path, leaf: tuple[int, range]) -> set[int]:
    """Overwrite the leaf page with zeros (no page type SQLite accepts); the rowids it held."""
    page, rowids = leaf
    data = bytearray(path.read_bytes())
    data[(page - 1) * PAGE : page * PAGE] = bytes(PAGE)
    path.write_bytes(bytes(data))
    return set(rowids)


@contextmanager
def _opened(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA cell_size_check = ON")
        yield db
    finally:
        db.close()


@pytest.mark.parametrize("chunk", [None, 16])
def test_only_the_rows_of_a_damaged_page_are_left_out(tmp_path: Path, chunk: int | None) -> None:
    path = tmp_path / "t.sqlite3"
    rows = _write_table(path)
    leaves = _leaf_pages(path)
    assert len(leaves) > 10
    damaged = _zero_page(path, leaves[len(leaves) // 2])
    assert damaged

    with _opened(path) as db:
        reader = RangeReader(db, max_failed_reads=1_000, max_gap_lookups=1_000, chunk=chunk)
        found = reader.rows("t", "id, body")

    assert found == {rowid: row for rowid, row in rows.items() if rowid not in damaged}
    assert reader.failed > 0
    assert reader.lost == len(damaged)


def test_a_failing_max_rowid_asks_the_fallback_for_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    rows = _write_table(path)
    damaged = _zero_page(path, _leaf_pages(path)[-1])  # max(rowid) reads the last leaf
    asked: list[str] = []

    def bound(table: str) -> int:
        asked.append(table)
        return ROWS

    with _opened(path) as db:
        walked = RangeReader(db, max_failed_reads=1_000, max_gap_lookups=1_000)
        walked_rows = walked.rows("t", "id, body")
        told = RangeReader(db, max_failed_reads=1_000, max_gap_lookups=1_000, fallback_bound=bound)
        told_rows = told.rows("t", "id, body")

    kept = {rowid: row for rowid, row in rows.items() if rowid not in damaged}
    # the walk stops at the damaged page: nothing past it is tried
    assert walked_rows.items() <= kept.items()
    assert len(walked_rows) >= len(kept) - 1  # python's read-ahead may miss the last one
    assert (walked.failed, walked.lost) == (1, 0)
    assert asked == ["t"]
    assert told_rows == kept
    assert told.lost == len(damaged)  # up to the fallback's bound, each rowid was looked up


def test_an_intact_table_is_read_whole_without_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    rows = _write_table(path)

    with _opened(path) as db:
        reader = RangeReader(db, max_failed_reads=1, max_gap_lookups=0, chunk=7)
        found = reader.rows("t", "rowid, id, body")

    assert found == {rowid: (rowid, *row) for rowid, row in rows.items()}
    assert (reader.failed, reader.lost) == (0, 0)
