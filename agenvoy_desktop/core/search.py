"""search_chat_history: one query, three routes (DESIGN.md §1.4).

- ``semantic`` — meaning: the query's embedding against the vector index of
  the messages still in history.json;
- ``keyword`` — exact text: the FTS5 archive (which also holds everything in
  history.json, so nothing is listed twice);
- ``hybrid`` — both lists fused by reciprocal rank.

Hits are widened into excerpts (2 messages before, 1 after, overlapping
excerpts merged, time order).  The agent passes ``exclude_window`` so the
model is not shown what it already has in context; the CLI searches all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.vectors import from_blobs

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore

Mode = Literal["semantic", "keyword", "hybrid"]
MODES: tuple[Mode, ...] = ("semantic", "keyword", "hybrid")
# Fusion measured on LoCoMo (benchmarks/locomo_recall.py, RESULTS.md): the
# textbook k=60 ranks items found by both routes at middling ranks above each
# route's own best hit and lost to keyword search alone; a small k with the
# keyword list weighted slightly higher keeps both routes' top hits on top.
RRF_K = 1
HYBRID_WEIGHTS = (0.75, 1.0)  # (semantic, keyword)
EXCERPT_BEFORE = 2
EXCERPT_AFTER = 1


class SearchError(ValueError):
    """A search that cannot run (empty query, no embedding model, bad mode)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching message, with a mode-specific score (higher is better)."""

    item: ArchivedMessage
    score: float


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Consecutive messages of one session around one or more hits."""

    session_id: str
    messages: list[ArchivedMessage]
    hit_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """Everything a search_chat_history call can say."""

    text: str
    mode: Mode = "semantic"
    limit: int = 5
    session_id: str | None = None  # None = all sessions
    time_from_ns: int | None = None
    time_to_ns: int | None = None
    exclude_window: int = 0  # the agent's N; 0 = exclude nothing
    current_session: str | None = None  # whose window to exclude (default: session_id)
    include_tool: bool = False


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    excerpts: list[Excerpt] = field(default_factory=list)


def search_chat_history(store: MemoryStore, query: SearchQuery) -> SearchResult:
    """Run one search; see the module docstring."""
    if not query.text.strip():
        raise SearchError("empty query")
    if query.mode not in MODES:
        raise SearchError(f"unknown mode {query.mode!r}; use one of {', '.join(MODES)}")
    if query.limit <= 0:
        raise SearchError("limit must be at least 1")
    sessions = [store.require(query.session_id)] if query.session_id else store.session_ids()
    window_of = query.current_session or query.session_id
    excluded = _window_ids(store, window_of, query.exclude_window)
    if query.mode == "keyword":
        hits = _keyword(store, query, excluded, query.limit)
    elif query.mode == "semantic":
        hits = _semantic(store, query, sessions, excluded, query.limit)
    else:
        depth = max(query.limit * 4, 40)
        hits = fuse(
            [
                _semantic(store, query, sessions, excluded, depth),
                _keyword(store, query, excluded, depth),
            ],
            weights=HYBRID_WEIGHTS,
        )[: query.limit]
    return SearchResult(hits=hits, excerpts=build_excerpts(store, hits, excluded))


def _window_ids(store: MemoryStore, session_id: str | None, n: int) -> frozenset[str]:
    """Ids of the messages already in *session_id*'s context window."""
    if n <= 0 or session_id is None:
        return frozenset()
    return frozenset(m.id for m in store.window(store.require(session_id), n))


def _keyword(
    store: MemoryStore, query: SearchQuery, excluded: frozenset[str], limit: int
) -> list[Hit]:
    found = store.archive.keyword_search(
        query.text,
        limit=limit,
        session_id=query.session_id,
        time_from_ns=query.time_from_ns,
        time_to_ns=query.time_to_ns,
        include_tool=query.include_tool,
        exclude_msg_ids=excluded,
    )
    return [Hit(item, score) for item, score in found]


def _semantic(
    store: MemoryStore,
    query: SearchQuery,
    sessions: Sequence[str],
    excluded: frozenset[str],
    limit: int,
) -> list[Hit]:
    if store.embedder is None:
        raise SearchError("semantic search needs the embedding model, which is not available")
    vector = np.asarray(store.embedder.embed([query.text])[0], dtype=np.float32)
    timed = query.time_from_ns is not None or query.time_to_ns is not None
    scored: list[tuple[int, float]] = []
    for sid in sessions:
        if timed:
            scored += _exact_in_range(store, sid, vector, query)
        else:
            # Over-fetch: excluded window messages and tool traffic are dropped below.
            scored += store.vectors(sid).search(vector, limit * 2 + len(excluded))
    scored.sort(key=lambda pair: pair[1], reverse=True)
    rows = store.archive.by_rowids([r for r, _ in scored])
    hits: list[Hit] = []
    for rowid, score in scored:
        item = rows.get(rowid)
        if item is None or item.message.id in excluded:
            continue
        if not query.include_tool and item.message.is_tool_traffic:
            continue
        hits.append(Hit(item, score))
        if len(hits) == limit:
            break
    return hits


def _exact_in_range(
    store: MemoryStore, sid: str, vector: np.ndarray, query: SearchQuery
) -> list[tuple[int, float]]:
    """Brute force over one session's vectors inside a time range (exact)."""
    pairs = store.archive.vectors(sid)
    if not pairs:
        return []
    rows = store.archive.by_rowids([r for r, _ in pairs])
    lo = query.time_from_ns if query.time_from_ns is not None else -(2**63)
    hi = query.time_to_ns if query.time_to_ns is not None else 2**63
    keep = [(r, b) for r, b in pairs if r in rows and lo <= rows[r].message.time_ns <= hi]
    if not keep:
        return []
    matrix = from_blobs([b for _, b in keep], vector.shape[0])
    sims = matrix @ vector
    return [(r, float(s)) for (r, _), s in zip(keep, sims, strict=True)]


def fuse(
    rankings: Sequence[Sequence[Hit]],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """Weighted reciprocal rank fusion: score = Σ w / (k + rank)."""
    scores: dict[int, float] = {}
    items: dict[int, ArchivedMessage] = {}
    for number, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[number]
        for rank, hit in enumerate(ranking, start=1):
            gain = weight / (k + rank)
            scores[hit.item.rowid] = scores.get(hit.item.rowid, 0.0) + gain
            items[hit.item.rowid] = hit.item
    order = sorted(scores, key=lambda rowid: scores[rowid], reverse=True)
    return [Hit(items[rowid], scores[rowid]) for rowid in order]


def build_excerpts(
    store: MemoryStore, hits: Sequence[Hit], excluded: frozenset[str] = frozenset()
) -> list[Excerpt]:
    """Widen hits to 2-before / 1-after excerpts, merge overlaps, order by time."""
    spans: dict[str, list[tuple[int, int, set[str]]]] = {}
    for hit in hits:
        lo, hi = hit.item.seq - EXCERPT_BEFORE, hit.item.seq + EXCERPT_AFTER
        spans.setdefault(hit.item.session_id, []).append((lo, hi, {hit.item.message.id}))
    excerpts: list[Excerpt] = []
    for sid, ranges in spans.items():
        ranges.sort()
        merged: list[tuple[int, int, set[str]]] = []
        for lo, hi, ids in ranges:
            if merged and lo <= merged[-1][1] + 1:
                plo, phi, pids = merged[-1]
                merged[-1] = (plo, max(phi, hi), pids | ids)
            else:
                merged.append((lo, hi, ids))
        for lo, hi, ids in merged:
            rows = store.archive.messages(sid, max(lo, 0), hi + 1)
            rows = [r for r in rows if r.message.id not in excluded or r.message.id in ids]
            if rows:
                excerpts.append(Excerpt(sid, rows, frozenset(ids)))
    excerpts.sort(key=lambda e: (e.messages[0].message.time_ns, e.messages[0].seq))
    return excerpts
