"""Operation journals: ``memory/ops/<session>.json``, one per session at most.

An operation that changes several layers of a session (a reset, a remove, a
message action) first writes what it is about to do here, then does it in
idempotent steps, then deletes the entry.  Start-up finds the entries a
crash left and runs their steps again (:func:`lifecycle.finish_pending`);
reconciliation leaves a session with an entry alone until then.  Every
operation holds the session's write lock, so one entry per session suffices.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.core.atomic import atomic_write_text, fsync_dir

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore


def ops_dir(store: MemoryStore) -> Path:
    return store.paths.memory_dir / "ops"


def journal_path(store: MemoryStore, session_id: str) -> Path:
    return ops_dir(store) / f"{session_id}.json"


def open_entry(store: MemoryStore, session_id: str, entry: dict[str, Any]) -> Path:
    """Write the entry durably (before the first step); returns its path."""
    path = journal_path(store, session_id)
    atomic_write_text(path, json.dumps(entry, ensure_ascii=False))
    return path


def close_entry(path: Path) -> None:
    """Delete the entry durably (after the last step)."""
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)
