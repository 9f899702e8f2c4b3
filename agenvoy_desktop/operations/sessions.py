"""The sessions list and what a person does to a session: create, rename, title, reset,
remove, import, export.

Reads return plain values; every write returns what it changed
(:mod:`~agenvoy_desktop.operations.changes`), so the window reloads exactly
the panels that show it and the CLI can ignore it.
"""

from __future__ import annotations

import dataclasses
import os
from bisect import bisect_right
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from agenvoy_desktop.core import lifecycle
from agenvoy_desktop.core.archive import first_title
from agenvoy_desktop.core.export import ExportFormat, write_export
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.session_settings import keep_title
from agenvoy_desktop.core.set_aside_copies import CopiesReport
from agenvoy_desktop.core.store import (
    Cancelled,
    MemoryStore,
    Progress,
    SessionInfo,
    UnknownSessionError,
    valid_session_id,
)
from agenvoy_desktop.core.timeutil import format_iso
from agenvoy_desktop.operations.changes import Changed, MemoryChanges, session_changes

CONTENT_HITS = 500
PAGE_SIZE = 50
"""Sessions per page of the list: a few screens of rows, sized in ~10 ms."""
UNTITLED = "New conversation"
"""What the list calls a session without a title (and so what a search for it finds)."""

PageKey = tuple[int, str]
"""A session's place in the list: ``(updated_ns, session_id)``, newest activity first."""


@dataclasses.dataclass(frozen=True, slots=True)
class SessionPage:
    """Some rows of the sessions list and what they need to say about the rest."""

    infos: list[SessionInfo]
    total: int
    """Sessions in the whole listing: every session, or every one the search found."""
    more: bool
    """Whether sessions follow the last row of this page."""
    hits: dict[str, int] = dataclasses.field(default_factory=dict)
    """A content search's hit counts per session (empty when not searching)."""


# -- reads ------------------------------------------------------------------------------
def list_sessions(store: MemoryStore, *, vectors: bool = True) -> list[SessionInfo]:
    """Every session, newest first, with its sizes (storage thread).

    ``vectors=False`` leaves each row's vector count out (``None``): the plain
    ``sessions`` listing does not print it, and at 100 sessions it costs 0.1 s.
    """
    return store.sessions(vectors=vectors)


def page_key(info: SessionInfo) -> PageKey:
    """Where *info* stands in the list (what the next page continues after)."""
    return (info.updated_ns, info.session_id)


def _rank(key: PageKey) -> tuple[int, str]:
    """The sort key of the list order: newest activity first, then by id."""
    return (-key[0], key[1])


def _folders_only(store: MemoryStore, known: Collection[str]) -> set[str]:
    """Session folders the archive does not list (``scandir``: no stat call per folder)."""
    with os.scandir(store.paths.sessions_dir) as entries:
        names = {e.name for e in entries if e.name not in known and e.is_dir()}
    return {name for name in names if valid_session_id(name)}


def _listing(store: MemoryStore, title: str, matches: Collection[str]) -> list[PageKey]:
    """Every session's key in list order, from one query and one folder scan: no sizes.

    The sizes (history file, message and vector counts) are what costs when a
    profile holds thousands of sessions, so they are read per page only.
    A non-empty *title* keeps the sessions whose title contains it, and those
    in *matches* (the sessions a content search found).
    """
    titles = {m.session_id: (m.updated_ns, m.title) for m in store.archive.sessions()}
    for sid in _folders_only(store, titles):
        titles[sid] = (0, None)
    needle = title.strip().casefold()
    keys = [
        (updated, sid)
        for sid, (updated, name) in titles.items()
        if not needle or sid in matches or needle in (name or UNTITLED).casefold()
    ]
    return sorted(keys, key=_rank)


def _infos(store: MemoryStore, keys: Sequence[PageKey]) -> list[SessionInfo]:
    """The rows of *keys*, sizes included; a session removed meanwhile is left out."""
    infos = []
    for _updated, sid in keys:
        try:
            infos.append(store.info(sid, vectors=False))  # the list never shows it
        except UnknownSessionError:
            continue
    return infos


def session_page(
    store: MemoryStore,
    after: PageKey | None = None,
    limit: int = PAGE_SIZE,
    *,
    title: str = "",
    matches: Collection[str] = (),
) -> SessionPage:
    """One page of the list, newest activity first, with the total (storage thread).

    Only this page's sessions are sized.  *after* is the key of the last row
    already shown: the page continues from there even when sessions were
    created or moved to the top meanwhile (an offset would repeat or skip
    rows).  *title* and *matches* narrow the list to a search's results.
    """
    keys = _listing(store, title, matches)
    start = 0 if after is None else bisect_right(keys, _rank(after), key=_rank)
    return SessionPage(
        _infos(store, keys[start : start + limit]), len(keys), start + limit < len(keys)
    )


def session_window(
    store: MemoryStore, through: PageKey, *, title: str = "", matches: Collection[str] = ()
) -> SessionPage:
    """The list from the top down to *through* (the last row loaded), sized again.

    A reload that keeps every page the person has scrolled through: the rows
    loaded stay loaded, however many moved or appeared above them.
    """
    keys = _listing(store, title, matches)
    end = bisect_right(keys, _rank(through), key=_rank)
    return SessionPage(_infos(store, keys[:end]), len(keys), end < len(keys))


def sessions_by_id(store: MemoryStore, session_ids: Collection[str]) -> SessionPage:
    """The named sessions that still exist, newest first, and how many sessions there are.

    What a change to a few sessions needs: their rows again, not the whole
    list.  ``more`` is always False (the page is not a slice of the list).
    """
    keys = _listing(store, "", ())
    wanted = [key for key in keys if key[1] in session_ids]
    return SessionPage(_infos(store, wanted), len(keys), False)


def search_sessions(store: MemoryStore, text: str, limit: int = PAGE_SIZE) -> SessionPage:
    """The first page of sessions whose title or messages contain *text*, with hit counts.

    Searches every session, loaded in the list or not; the next pages come
    from :func:`session_page` with ``title=text, matches=page.hits``.
    """
    hits = content_matches(store, text)
    page = session_page(store, None, limit, title=text, matches=hits)
    return dataclasses.replace(page, hits=hits)


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
        "vectors": sum(i.vectors or 0 for i in infos),
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
    """Give the session the title the person typed (a copy is kept for a rebuilt archive)."""
    store.archive.set_title(session_id, title)
    keep_title(store.folder(session_id), title)
    return MemoryChanges(sessions=True, session_id=session_id)


def auto_title(store: MemoryStore, session_id: str) -> Changed[str | None]:
    """Title an untitled session after its first user message (None: nothing to do)."""
    meta = store.archive.session(session_id)
    if meta is None or meta.title:
        return Changed(None, MemoryChanges())
    title = first_title(r.message for r in store.archive.messages(session_id, 0, 20))
    if title is None:
        return Changed(None, MemoryChanges())
    store.archive.set_title(session_id, title)
    return Changed(title, MemoryChanges(sessions=True, session_id=session_id))


def reset_session(
    store: MemoryStore, session_id: str, *, clear_summary: bool = False
) -> Changed[CopiesReport]:
    """Clear the session's messages, vectors, archive rows and everything made from them.

    Its summary stays unless *clear_summary*; a title made from its messages
    goes (one the person typed stays).  No copy of the text is left in the
    profile's files (:mod:`~agenvoy_desktop.core.lifecycle`) but in an archive
    copy set aside earlier that could not be read: the value names those
    (:attr:`CopiesReport.not_cleaned`), for the person to delete.
    """
    report = lifecycle.reset_session(store, session_id, clear_summary=clear_summary)
    return Changed(report, session_changes(session_id))


def remove_session(store: MemoryStore, session_id: str) -> Changed[CopiesReport]:
    """Delete the session and everything remembered of it, leaving no copy in the profile
    (but in the unreadable copies the value names, as for :func:`reset_session`)."""
    report = lifecycle.remove_session(store, session_id)
    return Changed(report, session_changes(session_id))


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
