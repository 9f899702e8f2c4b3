"""Where a profile's error memory lives, and opening it checked (a damaged file is set aside)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.core.error_memory.exceptions import ErrorMemoryDamagedError
from agenvoy_desktop.core.error_memory.store import ErrorMemory
from agenvoy_desktop.core.sqlite_db import set_aside_database

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
    """Open the error memory, checked; a damaged file is set aside and a fresh one started.

    Returns the store and, when it had to start fresh, a notice for the
    user.  The check is SQLite's ``quick_check`` (every page read once: a
    few milliseconds for the few thousand records this store holds), so a
    damaged page cannot fail a turn later.  *options* go to
    :class:`ErrorMemory`; *repair* False raises :class:`ErrorMemoryDamagedError`.
    """
    try:
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


def start_fresh(path: Path, reason: str) -> str:
    """Set a damaged error-memory file aside (never deleted); returns the notice for the user."""
    moved = set_aside_database(path)
    notice = (
        f"the error memory was damaged ({reason}); it was set aside as {moved}"
        " and a fresh one started"
    )
    log.info("%s", notice)  # the caller tells the user
    return notice
