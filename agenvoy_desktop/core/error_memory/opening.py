"""Where a profile's error memory lives, and opening it checked (a damaged file is set aside,
what it still holds copied into a fresh one)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.core.error_memory.exceptions import ErrorMemoryDamagedError, ErrorMemoryError
from agenvoy_desktop.core.error_memory.salvage import Salvaged, restore, salvage
from agenvoy_desktop.core.error_memory.store import ErrorMemory
from agenvoy_desktop.core.sqlite_db import is_damage, primary_code, set_aside_database

if TYPE_CHECKING:
    from agenvoy_desktop.core.embedding import TextEmbedder
    from agenvoy_desktop.paths import AppPaths

log = logging.getLogger(__name__)


def error_db_path(paths: AppPaths) -> Path:
    """Where a profile keeps its error memory."""
    return paths.memory_dir / "errors.sqlite3"


def open_error_memory(
    path: Path,
    embedder: TextEmbedder | None,
    *,
    repair: bool = True,
    **options: Any,
) -> tuple[ErrorMemory, str | None]:
    """Open the error memory, checked; a damaged file is set aside and a fresh one started
    with the records it still holds.

    Returns the store and, when it had to start fresh, a notice for the
    user.  The check is SQLite's ``quick_check`` (every page read once: a
    few milliseconds for the few thousand records this store holds), so a
    damaged page cannot fail a turn later.  *options* go to
    :class:`ErrorMemory`; *repair* False raises :class:`ErrorMemoryDamagedError`.
    """
    try:
        problem = _damage_before_open(path)
        if problem is not None:
            raise ErrorMemoryDamagedError(f"error memory {path}: {problem}")
        memory = ErrorMemory(path, embedder, **options)
        problems = memory.integrity_problems(quick=True)
        if problems:
            memory.close()
            raise ErrorMemoryDamagedError(f"error memory {path}: {problems[0]}")
    except ErrorMemoryDamagedError as exc:
        if not repair:
            raise
        notice = start_fresh(path, str(exc).rsplit(": ", 1)[-1])
        return ErrorMemory(path, embedder, **options), notice
    return memory, None


def _damage_before_open(path: Path) -> str | None:
    """What ``quick_check`` finds wrong with an existing file, read before the store opens it.

    Opening writes (the purge of expired records, the schema's stamps):
    a damaged file must be set aside exactly as it was found, and a write
    to a bad page could spread the damage.  None: sound, absent, or a
    failure that is not damage (the store's own open reports that one).
    """
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(path)
    except sqlite3.Error:
        return None
    try:
        rows = db.execute("PRAGMA quick_check(20)").fetchall()
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            return None
        if primary_code(exc) == sqlite3.SQLITE_NOTADB:
            return ErrorMemory._not_a_db
        return "the file is damaged"
    finally:
        db.close()
    problems = [str(row[0]) for row in rows]
    return None if problems == ["ok"] else problems[0]


def start_fresh(path: Path, reason: str) -> str:
    """Set a damaged error-memory file aside (never deleted) and start a fresh one with
    every record still readable in it (:mod:`.salvage`); returns the notice for the user.
    """
    moved = set_aside_database(path)
    found = salvage(moved)
    kept = _restore(path, found) if found.records else 0
    if found.known or kept:
        total = max(len(found.known), kept)
        notice = (
            f"{path.name} was damaged ({reason}); {kept} of {total} records kept,"
            f" the file set aside as {moved}"
        )
    else:
        notice = (
            f"the error memory was damaged ({reason}); it was set aside as {moved}"
            " and a fresh one started"
        )
    log.info("%s", notice)  # the caller tells the user
    return notice


def _restore(path: Path, found: Salvaged) -> int:
    """Write the salvaged records into a fresh file at *path*; how many went in.

    A fresh file that cannot take them (a full disk) stays empty: the
    records are still in the set-aside file, and the caller's own open
    reports the disk's problem.
    """
    try:
        with ErrorMemory(path, None, purge_on_open=False) as memory, memory.transaction() as db:
            return restore(db, found)
    except ErrorMemoryError as exc:
        log.warning("could not copy the salvaged error records into %s: %s", path, exc)
        return 0
