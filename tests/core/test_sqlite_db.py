"""The shared SQLite plumbing, through a minimal store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop.core.errors import KnownError, is_known
from agenvoy_desktop.core.sqlite_db import (
    WAL_AUTOCHECKPOINT_PAGES,
    SqliteStore,
    StoreDamagedError,
    is_environment,
)


class ToyError(KnownError, RuntimeError):
    pass


class ToyDamagedError(ToyError, StoreDamagedError):
    pass


TOY_MIGRATIONS = {
    1: "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    2: "CREATE TABLE items (name TEXT PRIMARY KEY)",
}


class Toy(SqliteStore):
    _kind = "toy store"
    _not_a_db = "the file is not a toy database"
    _error = ToyError
    _damaged = ToyDamagedError
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


# -- environment failures vs bugs ----------------------------------------------------------
def _error(kind: type[sqlite3.Error], name: str, text: str = "failed") -> sqlite3.Error:
    """An sqlite3 error carrying SQLite's result code, as the sqlite3 module raises them."""
    exc = kind(text)
    exc.sqlite_errorcode = getattr(sqlite3, name)
    exc.sqlite_errorname = name
    return exc


class _Failing:
    """A connection whose every statement fails with *exc*."""

    def __init__(self, exc: sqlite3.Error) -> None:
        self.exc = exc
        self.in_transaction = False

    def execute(self, *_args: object) -> sqlite3.Cursor:
        raise self.exc


ENVIRONMENT = [
    ("SQLITE_FULL", "the disk is full", ToyError),
    ("SQLITE_READONLY", "the file is read-only", ToyError),
    ("SQLITE_READONLY_DBMOVED", "the file is read-only", ToyError),
    ("SQLITE_CANTOPEN", "the file cannot be opened", ToyError),
    ("SQLITE_CANTOPEN_ISDIR", "the file cannot be opened", ToyError),
    ("SQLITE_BUSY", "another program holds it locked", ToyError),
    ("SQLITE_BUSY_SNAPSHOT", "another program holds it locked", ToyError),
    ("SQLITE_LOCKED", "another program holds it locked", ToyError),
    ("SQLITE_IOERR", "a disk read or write failed", ToyError),
    ("SQLITE_IOERR_SHORT_READ", "a disk read or write failed", ToyError),
    ("SQLITE_IOERR_FSYNC", "a disk read or write failed", ToyError),
    ("SQLITE_CORRUPT", "the file is damaged", ToyDamagedError),
    ("SQLITE_CORRUPT_VTAB", "the file is damaged", ToyDamagedError),
    ("SQLITE_NOTADB", "the file is not a toy database", ToyDamagedError),
]

BUGS = [
    (sqlite3.OperationalError, "SQLITE_ERROR"),  # no such column, syntax error
    (sqlite3.IntegrityError, "SQLITE_CONSTRAINT"),
    (sqlite3.IntegrityError, "SQLITE_CONSTRAINT_UNIQUE"),
    (sqlite3.InterfaceError, "SQLITE_MISUSE"),
    (sqlite3.DataError, "SQLITE_TOOBIG"),
    (sqlite3.OperationalError, "SQLITE_RANGE"),
]


@pytest.mark.parametrize(("name", "reason", "kind"), ENVIRONMENT)
def test_environment_codes_become_the_store_error(
    tmp_path: Path, name: str, reason: str, kind: type[ToyError]
) -> None:
    """Every primary code the environment causes, extended codes included."""
    exc = _error(sqlite3.OperationalError, name)
    assert is_environment(exc)
    with Toy(tmp_path / "toy.db") as toy:
        real, toy._db = toy._db, _Failing(exc)  # type: ignore[assignment]
        try:
            with pytest.raises(kind) as info:
                toy._query("SELECT 1")
        finally:
            toy._db = real
    assert type(info.value) is kind
    assert str(info.value) == f"toy store {tmp_path / 'toy.db'}: {reason}"
    assert info.value.__cause__ is exc
    assert is_known(info.value)


@pytest.mark.parametrize(("kind", "name"), BUGS)
def test_other_codes_are_bugs_and_leave_unchanged(
    tmp_path: Path, kind: type[sqlite3.Error], name: str
) -> None:
    exc = _error(kind, name)
    assert not is_environment(exc)
    with Toy(tmp_path / "toy.db") as toy:
        real, toy._db = toy._db, _Failing(exc)  # type: ignore[assignment]
        try:
            with pytest.raises(kind) as info:
                toy._query("SELECT 1")
            assert info.value is exc
            with pytest.raises(kind), toy.transaction():
                pass
        finally:
            toy._db = real


def test_a_missing_column_is_a_bug_not_a_bad_file(tmp_path: Path) -> None:
    with Toy(tmp_path / "toy.db") as toy:
        with pytest.raises(sqlite3.OperationalError, match="no such column") as info:
            toy._query("SELECT nope FROM items")
        assert not isinstance(info.value, ToyError)
        assert not is_known(info.value)
        with (
            pytest.raises(sqlite3.OperationalError, match="no such table"),
            toy.transaction() as db,
        ):
            db.execute("INSERT INTO nowhere VALUES (1)")
        with pytest.raises(sqlite3.OperationalError, match="syntax error"):
            toy._query("SELEKT 1")
        with pytest.raises(sqlite3.ProgrammingError):
            toy._query("SELECT ?", (1, 2))
        toy.set_meta("k", "v")  # the connection is still good
        assert toy.get_meta("k") == "v"


def test_a_constraint_through_query_stays_raw(tmp_path: Path) -> None:
    with Toy(tmp_path / "toy.db") as toy:
        toy._query("INSERT INTO items VALUES ('a')")
        with pytest.raises(sqlite3.IntegrityError):
            toy._query("INSERT INTO items VALUES ('a')")


def test_a_full_disk_is_the_store_error(tmp_path: Path) -> None:
    """SQLITE_FULL for real: the file may not grow past its current pages."""
    with Toy(tmp_path / "toy.db") as toy:
        toy.checkpoint()
        pages = toy._query("PRAGMA page_count")[0][0]
        toy._query(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(ToyError, match="the disk is full"), toy.transaction() as db:
            db.executemany(
                "INSERT INTO items VALUES (?)", [("x" * 500 + str(i),) for i in range(200)]
            )
        assert toy._query("SELECT count(*) FROM items") == [(0,)]


def test_a_lock_held_elsewhere_is_the_store_error(tmp_path: Path) -> None:
    path = tmp_path / "toy.db"
    with Toy(path) as toy:
        toy._db.execute("PRAGMA busy_timeout = 0")
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(ToyError, match="another program holds it locked") as info:
                toy.set_meta("k", "v")
            assert not isinstance(info.value, StoreDamagedError)
        finally:
            other.close()
        toy.set_meta("k", "v")


def test_a_folder_in_the_way_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / "toy.db").mkdir()
    with pytest.raises(ToyError, match="cannot be opened"):
        Toy(tmp_path / "toy.db")


def _damage(path: Path) -> None:
    """Overwrite every page after the first (the schema survives; the rows do not)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)
    path.write_bytes(bytes(data))


def test_a_damaged_file_is_the_damaged_error_and_an_integrity_problem(tmp_path: Path) -> None:
    path = tmp_path / "toy.db"
    with Toy(path) as toy:
        with toy.transaction() as db:
            db.executemany(
                "INSERT INTO items VALUES (?)", [(f"item {i}" * 20,) for i in range(300)]
            )
        toy._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _damage(path)
    with Toy(path) as toy:  # the first page, with the schema, is intact
        with pytest.raises(ToyDamagedError, match="the file is damaged"):
            toy._query("SELECT count(*), max(length(name)) FROM items")
        problems = toy.integrity_problems()
        assert problems
        assert all(isinstance(p, str) for p in problems)


def test_text_that_is_not_utf8_is_damage(tmp_path: Path) -> None:
    with Toy(tmp_path / "toy.db") as toy:
        toy._query("INSERT INTO meta VALUES ('k', CAST(x'ff' AS TEXT))")
        with pytest.raises(ToyDamagedError, match="not UTF-8"):
            toy.get_meta("k")


def test_integrity_check_reports_damage_and_raises_bugs(tmp_path: Path) -> None:
    with Toy(tmp_path / "toy.db") as toy:
        real = toy._db
        try:
            toy._db = _Failing(_error(sqlite3.DatabaseError, "SQLITE_CORRUPT"))  # type: ignore[assignment]
            assert toy.integrity_problems() == [
                f"toy store {tmp_path / 'toy.db'}: the file is damaged"
            ]
            toy._db = _Failing(_error(sqlite3.OperationalError, "SQLITE_ERROR"))  # type: ignore[assignment]
            with pytest.raises(sqlite3.OperationalError):
                toy.integrity_problems()
        finally:
            toy._db = real
        assert toy.integrity_problems() == []
