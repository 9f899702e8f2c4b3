"""The SQLite plumbing shared by the archive and the error memory.

Both stores keep one WAL-mode connection to their own file, store the schema
version in ``PRAGMA user_version``, migrate it forward with a table of SQL
scripts and refuse a database written by a newer app *before* switching it
to WAL, so such a file is left exactly as it was.  Environment failures
(disk full, read-only, locked, damaged, not a database) reach the user as
the store's own error type with a short reason, chosen by SQLite's primary
result code (the known-error idea of qutebrowser's ``misc/sql.py``).  Every
other ``sqlite3`` error — a misspelt column, a syntax error, a constraint,
a misused connection — is a bug and leaves unchanged, so it is reported as
one rather than as something wrong with the user's file.
A damaged file (SQLITE_CORRUPT, SQLITE_NOTADB) gets the store's *damaged*
type, a subclass of both its error type and :class:`StoreDamagedError`, so a
caller can tell "set the file aside and rebuild" from "free some disk space".

A store subclasses :class:`SqliteStore`, names itself with the class
attributes, and does its own work after the schema is current in
:meth:`SqliteStore._opened`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn, Self

from agenvoy_desktop.core.errors import KnownError

_REASONS = {
    sqlite3.SQLITE_FULL: "the disk is full",
    sqlite3.SQLITE_READONLY: "the file is read-only",
    sqlite3.SQLITE_CANTOPEN: "the file cannot be opened",
    sqlite3.SQLITE_CORRUPT: "the file is damaged",
    sqlite3.SQLITE_BUSY: "another program holds it locked",
    sqlite3.SQLITE_LOCKED: "another program holds it locked",
    sqlite3.SQLITE_IOERR: "a disk read or write failed",
}
"""The primary result codes that are the environment's doing, with the reason a user reads.

SQLITE_NOTADB is one too; its reason names the store (``_not_a_db``).
"""

UTF8_DAMAGE = "Could not decode to UTF-8"
"""Python's sqlite3 (not SQLite) says this, with no result code, when stored text is not UTF-8."""


def primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of *exc* (extended codes folded), or None when it has none.

    Python's own checks (a closed connection, a wrong parameter count) carry
    no code.  An error built by hand may carry only ``sqlite_errorname``.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        code = getattr(sqlite3, str(getattr(exc, "sqlite_errorname", "")), None)
    return code & 0xFF if isinstance(code, int) else None


WAL_AUTOCHECKPOINT_PAGES = 4000
"""Pages (4 KiB) the write-ahead log may grow to before a commit copies it back itself.

SQLite's default, 1000, made every ~15th turn's archive write pay for a
checkpoint (5-24 ms, fsyncs included) in the middle of the turn.  The app
checkpoints after each answer instead (:meth:`SqliteStore.checkpoint`); this
is the safety net for long runs of writes with no pause (a big import).
"""


DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
"""SQLite's primary codes that mean the file itself is damaged (not the disk, not a lock)."""


class StoreDamagedError(KnownError, RuntimeError):
    """Mixed into a store's damaged-file error: the file must be set aside and rebuilt."""


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether *exc* says the database file is damaged (rather than busy, full, read-only).

    Text that is not UTF-8 is damage too: the app only ever stores UTF-8,
    and Python's sqlite3 (not SQLite) is the one that notices.
    """
    if primary_code(exc) in DAMAGE_CODES:
        return True
    return UTF8_DAMAGE in str(exc)


def is_environment(exc: sqlite3.Error) -> bool:
    """Whether *exc* is the disk, a lock or the file speaking (else: a bug in our SQL or code)."""
    code = primary_code(exc)
    return code in _REASONS or code == sqlite3.SQLITE_NOTADB or is_damage(exc)


COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps next to a database; they belong to it and move with it."""


def set_aside_path(path: Path, label: str = "damaged") -> Path:
    """A free name next to *path* for keeping it aside: ``name.damaged-20260101T120000Z``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.{label}-{stamp}")
    number = 1
    while any(target.with_name(target.name + end).exists() for end in ("", *COMPANIONS)):
        number += 1
        target = path.with_name(f"{path.name}.{label}-{stamp}-{number}")
    return target


def set_aside_database(path: Path, label: str = "damaged") -> Path:
    """Move a database file and its companions aside, unchanged; returns the new name.

    The write-ahead log keeps its ``-wal`` suffix after the new name, so the
    set-aside file still opens with everything it had committed.  Nothing is
    ever deleted: a repair works on what it could read, and the user keeps
    the rest.
    """
    target = set_aside_path(path, label)
    for end in ("", *COMPANIONS):
        source = path.with_name(path.name + end)
        if source.exists():
            os.replace(source, target.with_name(target.name + end))
    return target


class SqliteStore:
    """One versioned SQLite file behind one connection, guarded by one lock.

    Subclasses set the class attributes below.  The lock makes a connection
    opened with ``check_same_thread=False`` safe to share between threads;
    a store used on one thread only keeps sqlite3's same-thread check on, so
    misuse fails loudly instead of corrupting anything.
    """

    _kind: ClassVar[str]
    """What the user calls the file: starts every message ("archive ...")."""
    _not_a_db: ClassVar[str]
    """The reason given for SQLITE_NOTADB ("the file is not an archive database")."""
    _error: ClassVar[type[RuntimeError]]
    """The store's own error type for environment failures."""
    _damaged: ClassVar[type[RuntimeError] | None] = None
    """The store's error for a damaged file (a subclass of ``_error`` and StoreDamagedError)."""
    _schema_version: ClassVar[int]
    _migrations: ClassVar[Mapping[int, str]]
    """``_migrations[v]`` upgrades a database at version v-1 to v."""
    _tx_friendly: ClassVar[type[sqlite3.Error]] = sqlite3.DatabaseError
    """Failures inside :meth:`transaction` that :meth:`_raise` may report as ``_error``."""

    def __init__(self, path: Path, *, check_same_thread: bool = True) -> None:
        """Open (creating or migrating) the file, then run :meth:`_opened`.

        Any failure closes the connection again; SQLite's environment
        failures become ``_error``.
        """
        self.path = path
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                path, check_same_thread=check_same_thread, isolation_level=None
            )
        except sqlite3.Error as exc:
            self._raise(exc)
        try:
            self._db.execute("PRAGMA busy_timeout=5000")
            self._check_version()  # before WAL: a newer app's file is left as it was
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
            self._migrate()
            self._opened()
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                self._raise(exc)
            raise

    def _opened(self) -> None:
        """The store's own start-up work, once the schema is current."""

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA analysis_limit = 400")  # a sampled ANALYZE: ms, not 1 s at 1M
            self._db.execute("PRAGMA optimize")
            self._db.close()

    def checkpoint(self) -> int:
        """Copy the write-ahead log into the database now, at a moment of our choosing.

        PASSIVE: never waits for readers; what a reader still needs stays in
        the log for the next checkpoint.  Meant for quiet moments (after an
        answer), so that no commit in a turn pays for it.  Returns how many
        log frames are still to copy (0: all done).
        """
        with self._lock:
            try:
                _busy, log_frames, copied = self._db.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                self._raise(exc)
        return max(0, int(log_frames) - int(copied))

    def truncate_log(self) -> bool:
        """Copy the whole write-ahead log into the database and cut the log to zero bytes.

        After deleting private text: the log still holds the pages as they
        were before the delete.  TRUNCATE waits (``busy_timeout``) for other
        connections' readers to finish; one still reading after that keeps
        the log as it is until a later checkpoint, which is logged, not
        raised (the delete itself is done).  Returns whether the log is empty.
        """
        with self._lock:
            try:
                busy, log_frames, copied = self._db.execute(
                    "PRAGMA wal_checkpoint(TRUNCATE)"
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                self._raise(exc)
        done = not busy and int(log_frames) <= 0 and int(copied) <= 0
        if not done:
            logging.getLogger(type(self).__module__).warning(
                "%s %s: another program is reading it; its log is emptied at the next checkpoint",
                self._kind,
                self.path,
            )
        return done

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _friendly(self, exc: sqlite3.Error) -> RuntimeError:
        """*exc* (an environment failure, see :func:`is_environment`) as the store's error."""
        code = primary_code(exc)
        reasons = {**_REASONS, sqlite3.SQLITE_NOTADB: self._not_a_db}
        reason = reasons.get(code, str(exc)) if code is not None else str(exc)
        damaged = is_damage(exc)
        if damaged and code is None:
            reason = "the file is damaged (text that is not UTF-8)"
        error = self._damaged if self._damaged is not None and damaged else self._error
        return error(f"{self._kind} {self.path}: {reason}")

    def _raise(self, exc: sqlite3.Error) -> NoReturn:
        """Raise *exc* as the store's error when the environment caused it; else unchanged.

        Called inside the ``except`` that caught *exc*: a bug keeps its own
        type and traceback, so it is reported as a bug, not as a bad file.
        """
        if is_environment(exc):
            raise self._friendly(exc) from exc
        raise exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit of work (nested calls join the outer one)."""
        with self._lock:
            if self._db.in_transaction:
                yield self._db
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if isinstance(exc, self._tx_friendly):
                    self._raise(exc)  # IntegrityError (a constraint) is never the environment
                raise

    def _query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:  # also SQLITE_CORRUPT ("malformed")
                self._raise(exc)

    def integrity_problems(self, *, quick: bool = False) -> list[str]:
        """What SQLite's own check finds wrong with the file ([] when it is sound).

        ``quick`` runs ``quick_check`` (no index-content comparison; still
        reads every page, so meant for small files or ``doctor``).  A file
        too damaged to be checked at all is one problem, never an exception.
        """
        pragma = "quick_check" if quick else "integrity_check"
        try:
            with self._lock:
                rows = self._db.execute(f"PRAGMA {pragma}(20)").fetchall()
        except sqlite3.DatabaseError as exc:
            if not is_environment(exc):
                raise
            return [str(self._friendly(exc))]
        problems = [str(row[0]) for row in rows]
        return [] if problems == ["ok"] else problems

    def _check_version(self) -> int:
        version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > self._schema_version:
            raise self._error(
                f"{self._kind} {self.path} was written by a newer Agenvoy Desktop "
                f"(schema {version} > {self._schema_version}); update the app"
            )
        return version

    def _migrate(self) -> None:
        version = self._check_version()
        log = logging.getLogger(type(self).__module__)  # the store's own logger
        for target in range(version + 1, self._schema_version + 1):
            with self.transaction() as db:
                # Re-read under the write lock: another process opening the same new
                # profile at the same moment may have migrated it already.
                if db.execute("PRAGMA user_version").fetchone()[0] >= target:
                    continue
                log.info("migrating %s %s to schema %d", self._kind, self.path, target)
                for statement in self._migrations[target].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {target}")

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
