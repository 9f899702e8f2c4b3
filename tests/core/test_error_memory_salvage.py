"""A damaged error memory keeps every record still on an intact page (salvage, then fresh)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agenvoy_desktop.core.error_memory import ErrorMemory, open_error_memory
from agenvoy_desktop.core.error_memory.salvage import ERROR_COLUMNS
from agenvoy_desktop.core.sqlite_pages import varint
from tests.conftest import FakeClock
from tests.fakes import HashingEmbedder

RECORDS = 300
FILLER = "the tool said the path was refused while reading the notes folder " * 6

Damage = Callable[[bytes, int], bytes]
"""The file's bytes and its page size -> the damaged bytes."""


def _write_store(path: Path, clock: FakeClock) -> dict[int, tuple[object, ...]]:
    """A real error memory with records on many pages; id -> its ``errors`` row."""
    with ErrorMemory(path, HashingEmbedder(dim=64), clock=clock) as memory:
        for i in range(RECORDS):
            memory.add(
                "read_file",
                f"failure {i}: {FILLER}",
                cause=f"cause {i}",
                action=f"action {i}",
                outcome="resolved",
                keywords=[f"kw{i}", "notes"],
            )
    return _rows(path)


def _rows(path: Path) -> dict[int, tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return {row[0]: row for row in db.execute(f"SELECT {ERROR_COLUMNS} FROM errors")}
    finally:
        db.close()


def _leaf_pages(path: Path) -> tuple[int, dict[int, set[int]]]:
    """The page size and, for each leaf page of ``errors``, the rowids on it."""
    db = sqlite3.connect(path)
    try:
        size = int(db.execute("PRAGMA page_size").fetchone()[0])
        pages = [
            int(r[0])
            for r in db.execute(
                "SELECT pageno FROM dbstat WHERE name = 'errors' AND pagetype = 'leaf'"
            )
        ]
    finally:
        db.close()
    data = path.read_bytes()
    return size, {p: _rowids_on(data[(p - 1) * size : p * size], p == 1) for p in pages}


def _rowids_on(page: bytes, first: bool) -> set[int]:
    """The rowids of a table-leaf page's cells: the payload length, then the rowid."""
    start = 100 if first else 0
    cells = int.from_bytes(page[start + 3 : start + 5], "big")
    out: set[int] = set()
    for index in range(cells):
        at = int.from_bytes(page[start + 8 + 2 * index : start + 10 + 2 * index], "big")
        _length, at = varint(page, at)
        rowid, _ = varint(page, at)
        out.add(rowid)
    return out


def _cut(pages_short: int) -> Damage:
    return lambda data, size: data[: len(data) - pages_short * size]


def _half(data: bytes, size: int) -> bytes:
    return data[: (len(data) // size // 2) * size + size // 3]  # mid-page, as a crash leaves it


def _garbage(data: bytes, size: int) -> bytes:
    middle = (len(data) // size // 2) * size
    junk = bytes((i * 37 + 11) % 256 for i in range(3 * size))
    return data[:middle] + junk + data[middle + len(junk) :]


@pytest.mark.parametrize(
    ("damage", "reaches_records"),
    [(_half, True), (_cut(3), False), (_cut(1), False), (_garbage, True)],
    ids=["half", "three-pages-short", "one-page-short", "garbage-in-the-middle"],
)
def test_every_record_on_an_intact_page_is_kept(
    tmp_path: Path, damage: Damage, reaches_records: bool
) -> None:
    path = tmp_path / "memory" / "errors.sqlite3"
    clock = FakeClock()
    original = _write_store(path, clock)
    size, leaves = _leaf_pages(path)
    intact = path.read_bytes()
    damaged = damage(intact, size)
    path.write_bytes(damaged)

    def untouched(page: int) -> bool:
        start, end = (page - 1) * size, page * size
        return end <= len(damaged) and damaged[start:end] == intact[start:end]

    must_keep = set().union(*(ids for page, ids in leaves.items() if untouched(page)))
    assert must_keep
    assert (len(must_keep) < RECORDS) is reaches_records  # the last pages hold derived rows

    memory, notice = open_error_memory(path, HashingEmbedder(dim=64), clock=clock)
    with memory:
        kept = {r.id for r in memory.list(include_expired=True)}
        salvaged = _rows(path)  # before a search renews the records it returns
        assert memory.search("notes folder", limit=5)  # the full-text index came back too
    assert must_keep <= kept
    assert all(salvaged[i] == original[i] for i in kept)  # nothing misread, nothing invented
    [aside] = path.parent.glob("errors.sqlite3.damaged-*")
    assert aside.read_bytes() == damaged  # the damaged original is kept as it was
    assert notice is not None
    assert "errors.sqlite3 was damaged (" in notice
    assert f"; {len(kept)} of " in notice
    assert f"records kept, the file set aside as {aside}" in notice


def test_vectors_and_keywords_come_back_with_their_records(tmp_path: Path) -> None:
    path = tmp_path / "memory" / "errors.sqlite3"
    clock = FakeClock()
    _write_store(path, clock)
    size, _leaves = _leaf_pages(path)
    path.write_bytes(_cut(2)(path.read_bytes(), size))
    embedder = HashingEmbedder(dim=64)
    memory, notice = open_error_memory(path, embedder, clock=clock)
    with memory:
        assert notice is not None
        kept = memory.list(include_expired=True)
        assert kept
        with_vector = [r for r in kept if r.has_vector]
        assert len(with_vector) > len(kept) // 2
        record = with_vector[0]
        hints = memory.lookup_for_failure("read_file", record.symptom)
        assert record.id in {h.record.id for h in hints}
        keyword_hit = memory.search(f"kw{kept[-1].id - 1}")
        assert kept[-1].id in {h.record.id for h in keyword_hit}


def test_nothing_readable_still_starts_fresh_with_the_old_notice(tmp_path: Path) -> None:
    path = tmp_path / "memory" / "errors.sqlite3"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database at all " * 400)
    memory, notice = open_error_memory(path, None)
    with memory:
        assert memory.count() == 0
    assert notice is not None
    assert "fresh one started" in notice
    assert not list(path.parent.glob("*.salvage*"))  # the working copy is gone
