"""Searching memory as the Recall tab does: hits, session titles and index counts."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace

from agenvoy_desktop.agent.date_reasoning.pointed import pointed_span
from agenvoy_desktop.core.search import SearchQuery, SearchResult, search_chat_history
from agenvoy_desktop.core.store import MemoryStore, SessionInfo


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What the memory layers hold for the scope searched."""

    sessions: int
    archived: int
    vectors: int
    history: int
    start_at_ns: int
    """Compaction cut of this session (0 = history.json holds it all); 0 for all sessions."""


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    query: SearchQuery
    result: SearchResult
    titles: dict[str, str] = field(default_factory=dict)


def index_stats(store: MemoryStore, session_id: str | None) -> IndexStats:
    """Counts for one session, or summed over all sessions (storage thread)."""
    infos: list[SessionInfo] = (
        [store.info(session_id)] if session_id is not None else store.sessions()
    )
    return IndexStats(
        sessions=len(infos),
        archived=sum(i.archived_messages for i in infos),
        vectors=sum(i.vectors or 0 for i in infos),
        history=sum(i.history_messages for i in infos),
        start_at_ns=infos[0].start_at_ns if session_id is not None and infos else 0,
    )


def run_search(
    store: MemoryStore, query: SearchQuery, today: dt.date | None = None
) -> RecallAnswer:
    """The search plus the titles of the sessions its excerpts come from (storage thread).

    A query that names a past time ("what did I do with Rachel two months
    ago") is told which days it points at, seen from *today* (default: the
    local date), unless it carries a time range or points somewhere already.
    """
    if query.points_at is None and query.time_from_ns is None and query.time_to_ns is None:
        span = pointed_span(query.text, today or dt.date.today())
        query = replace(query, points_at=span)
    result = search_chat_history(store, query)
    titles: dict[str, str] = {}
    for sid in {e.session_id for e in result.excerpts}:
        meta = store.archive.session(sid)
        titles[sid] = (meta.title if meta else None) or sid
    return RecallAnswer(query, result, titles)
