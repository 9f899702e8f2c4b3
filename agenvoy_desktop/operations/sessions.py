"""The sessions list and what a person does to a session: create, rename, title, reset,
remove, import, export.

Reads return plain values; every write returns what it changed
(:mod:`~agenvoy_desktop.operations.changes`), so the window reloads exactly
the panels that show it and the CLI can ignore it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agenvoy_desktop.core import lifecycle
from agenvoy_desktop.core.export import ExportFormat, write_export
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import Cancelled, MemoryStore, Progress, SessionInfo
from agenvoy_desktop.core.timeutil import format_iso
from agenvoy_desktop.operations.changes import Changed, MemoryChanges, session_changes

TITLE_CHARS = 48
CONTENT_HITS = 500


# -- reads ------------------------------------------------------------------------------
def list_sessions(store: MemoryStore) -> list[SessionInfo]:
    """Every session, newest first, with its sizes (storage thread)."""
    return store.sessions()


def content_matches(store: MemoryStore, text: str) -> dict[str, int]:
    """Sessions whose messages contain *text* (keyword index), with hit counts."""
    counts: dict[str, int] = {}
    for item, _score in store.archive.keyword_search(text, limit=CONTENT_HITS):
        counts[item.session_id] = counts.get(item.session_id, 0) + 1
    return counts


def session_stats(store: MemoryStore, session_id: str) -> dict[str, Any]:
    """One session's sizes and every event of its timeline (``stats --session``)."""
    data: dict[str, Any] = dataclasses.asdict(store.info(session_id))
    data["events"] = [
        {"time": format_iso(t), "kind": k, **d} for t, k, d in store.archive.events(session_id)
    ]
    return data


def profile_stats(store: MemoryStore) -> dict[str, Any]:
    """The whole profile's sizes (``stats``)."""
    infos = store.sessions()
    return {
        "sessions": len(infos),
        "history_messages": sum(i.history_messages for i in infos),
        "archived_messages": store.archive.count(),
        "vectors": sum(i.vectors for i in infos),
        "archive_bytes": store.paths.archive_db.stat().st_size,
    }


def export_session(
    store: MemoryStore, session_id: str, path: Path, fmt: ExportFormat, now_ns: int
) -> Path:
    """Write the session to *path* as Markdown or JSON, atomically; memory is unchanged."""
    return write_export(store, session_id, path, fmt, now_ns)


# -- writes ------------------------------------------------------------------------------
def create_session(
    store: MemoryStore, title: str | None = None, session_id: str | None = None
) -> Changed[str]:
    """A new, empty session (named *session_id*, else a fresh id); its id."""
    session_id = store.create_session(title, session_id)
    return Changed(session_id, MemoryChanges(sessions=True, session_id=session_id))


def rename_session(store: MemoryStore, session_id: str, title: str) -> MemoryChanges:
    """Give the session the title the person typed."""
    store.archive.set_title(session_id, title)
    return MemoryChanges(sessions=True, session_id=session_id)


def auto_title(store: MemoryStore, session_id: str) -> Changed[str | None]:
    """Title an untitled session after its first user message (None: nothing to do)."""
    meta = store.archive.session(session_id)
    if meta is None or meta.title:
        return Changed(None, MemoryChanges())
    first = next(
        (
            r.message
            for r in store.archive.messages(session_id, 0, 20)
            if r.message.role == "user" and r.message.content.strip()
        ),
        None,
    )
    if first is None:
        return Changed(None, MemoryChanges())
    flat = " ".join(first.content.split())
    title = flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1].rstrip() + "…"
    store.archive.set_title(session_id, title)
    return Changed(title, MemoryChanges(sessions=True, session_id=session_id))


def reset_session(store: MemoryStore, session_id: str) -> MemoryChanges:
    """Clear the session's messages, vectors and archive rows; its summary stays."""
    lifecycle.reset_session(store, session_id)
    return session_changes(session_id)


def remove_session(store: MemoryStore, session_id: str) -> MemoryChanges:
    """Delete the session and everything remembered of it."""
    lifecycle.remove_session(store, session_id)
    return session_changes(session_id)


def import_conversation(
    store: MemoryStore,
    messages: Sequence[Message],
    session_id: str | None = None,
    *,
    title: str | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> Changed[str]:
    """Import *messages* (validated first) as a new session, or appended to *session_id*."""
    session_id = store.import_messages(
        messages, session_id, title=title, progress=progress, cancelled=cancelled
    )
    return Changed(session_id, session_changes(session_id))
