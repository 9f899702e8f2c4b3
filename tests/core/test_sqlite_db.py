"""The shared SQLite plumbing, through a minimal store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop.core.sqlite_db import WAL_AUTOCHECKPOINT_PAGES, SqliteStore


class ToyError(RuntimeError):
    pass


TOY_MIGRATIONS = {
    1: "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    2: "CREATE TABLE items (name TEXT PRIMARY KEY)",
}


class Toy(SqliteStore):
    _kind = "toy store"
    _not_a_db = "the file is not a toy database"
    _error = ToyError
    _schema_version = 2
    _migrations = TOY_MIGRATIONS


def test_creates_migrates_and_keeps_meta(tmp_path: Path) -> None:
    with Toy(tmp_path / "sub" / "toy.db") as toy:
        toy.set_meta("k", "v")
        assert toy.get_meta("k") == "v"
        assert toy.get_meta("missing") is None
        assert toy._query("PRAGMA user_version") == [(2,)]
        assert toy._query("PRAGMA journal_mode") == [("wal",)]


def test_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "toy.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 3")
    db.close()
    with pytest.raises(ToyError, match=r"toy store .* newer Agenvoy Desktop \(schema 3 > 2\)"):
        Toy(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_not_a_database_gets_the_store_wording(tmp_path: Path) -> None:
    path = tmp_path / "toy.db"
    path.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ToyError, match="the file is not a toy database"):
        Toy(path)


def test_nested_transactions_join_and_roll_back_together(tmp_path: Path) -> None:
    def nested(toy: Toy) -> None:
        with toy.transaction() as db:
            db.execute("INSERT INTO items VALUES ('a')")
            with toy.transaction() as inner:
                inner.execute("INSERT INTO items VALUES ('b')")
            raise ValueError("boom")

    with Toy(tmp_path / "toy.db") as toy:
        with pytest.raises(ValueError, match="boom"):
            nested(toy)
        assert toy._query("SELECT count(*) FROM items") == [(0,)]


def test_integrity_errors_stay_raw(tmp_path: Path) -> None:
    with Toy(tmp_path / "toy.db") as toy:
        toy.set_meta("k", "v")
        with pytest.raises(sqlite3.IntegrityError), toy.transaction() as db:
            db.execute("INSERT INTO meta VALUES ('k', 'w')")
        assert toy.get_meta("k") == "v"


def test_write_failures_become_the_store_error(tmp_path: Path) -> None:
    with Toy(tmp_path / "toy.db") as toy:
        toy._db.execute("PRAGMA query_only = 1")
        with pytest.raises(ToyError, match=r"^toy store .*toy\.db: "):
            toy.set_meta("k", "v")
        toy._db.execute("PRAGMA query_only = 0")
        assert toy.get_meta("k") is None


def test_checkpoints_happen_when_we_ask(tmp_path: Path) -> None:
    """A commit no longer pays for a checkpoint every 1000 pages; checkpoint() does it."""
    with Toy(tmp_path / "toy.db") as toy:
        assert toy._query("PRAGMA wal_autocheckpoint") == [(WAL_AUTOCHECKPOINT_PAGES,)]
        with toy.transaction() as db:
            db.executemany("INSERT INTO items VALUES (?)", [(f"item {i}",) for i in range(500)])
        wal = tmp_path / "toy.db-wal"
        assert wal.stat().st_size > 0
        assert toy.checkpoint() == 0
        reader = sqlite3.connect(f"file:{tmp_path / 'toy.db'}?mode=ro", uri=True)
        assert reader.execute("SELECT count(*) FROM items").fetchone() == (500,)
        reader.close()
