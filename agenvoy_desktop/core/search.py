"""search_chat_history: one query, three routes.

- ``semantic`` — meaning: the query's embedding against the vector index of
  the messages still in history.json (a message in several parts ranks by
  its best part, less a little for each part: :mod:`retrieval.parts`);
- ``keyword`` — exact text: the FTS5 archive (which also holds everything in
  history.json, so nothing is listed twice);
- ``hybrid`` — both lists fused by reciprocal rank (:mod:`retrieval.fusion`
  holds the rule and the constants measured on LoCoMo), then each message
  gains a share of its neighbours' scores (:mod:`retrieval.neighbours`), and
  a message in several parts keeps only part of its own
  (:func:`retrieval.parts.fused_share`) unless the query asks for what the
  assistant said (:func:`asks_for_replies`).

Hits are widened into excerpts (2 messages before, 1 after, overlapping
excerpts merged, time order).  The agent passes ``exclude_window`` so the
model is not shown what it already has in context; the CLI searches all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.embedding import PART_TOKENS, embed_queries, split_parts
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.retrieval.fusion import (
    HYBRID_WEIGHTS,
    POINTED_WEIGHTS,
    RRF_K,
    rrf_scores,
)
from agenvoy_desktop.core.retrieval.neighbours import (
    CHAT_NEIGHBOURS,
    NeighbourWeights,
    neighbour_sum,
)
from agenvoy_desktop.core.retrieval.parts import fused_share, ranking_score
from agenvoy_desktop.core.retrieval.widen import fetch_enough
from agenvoy_desktop.core.vectors import from_blobs, message_of
from agenvoy_desktop.language.patterns import compiled, cue

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore

Mode = Literal["semantic", "keyword", "hybrid"]
MODES: tuple[Mode, ...] = ("semantic", "keyword", "hybrid")
NO_MATCHES = "no matching messages"
"""What search_chat_history tells the model when nothing matched."""
EXCERPT_BEFORE = 2
EXCERPT_AFTER = 1


class SearchError(KnownError, ValueError):
    """A search that cannot run (empty query, no embedding model, bad mode)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching message, with a mode-specific score (higher is better).

    ``score`` orders hits within one route and is not comparable across
    modes (a fused score is a rank sum).  The evidence fields are: ``cosine``,
    the best cosine similarity between the query and any of the message's
    vectors, set whenever the semantic route scored it; ``bm25``, the keyword
    route's relevance (higher is better), set whenever the keyword route found
    it.  A fused hit keeps both, so a caller can apply one relevance floor
    whatever the mode.
    """

    item: ArchivedMessage
    score: float
    cosine: float | None = None
    bm25: float | None = None


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Consecutive messages of one session around one or more hits."""

    session_id: str
    messages: list[ArchivedMessage]
    hit_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class Withheld:
    """What a search must not find although the store still holds it.

    The window removes, resets and deletes with an undo window: the view
    drops the session or message at once and the store follows only when
    the window ends.  Meanwhile a search (the agent's recall, its search
    tool) leaves them out as the view does, and Undo brings them back.
    """

    sessions: frozenset[str] = frozenset()
    """Sessions removed or reset whose operation has not run yet (all their messages)."""
    messages: frozenset[str] = frozenset()
    """Messages deleted whose delete has not run yet (ids are unique across sessions)."""

    def __bool__(self) -> bool:
        return bool(self.sessions or self.messages)

    def __or__(self, other: Withheld) -> Withheld:
        return Withheld(self.sessions | other.sessions, self.messages | other.messages)

    def hides(self, session_id: str, message_id: str) -> bool:
        """Whether the message *message_id* of *session_id* is withheld."""
        return session_id in self.sessions or message_id in self.messages


NOTHING_WITHHELD = Withheld()


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
    window_step: int = 0  # the agent's window step (``take_window``); 0 = the plain last N
    current_session: str | None = None  # whose window to exclude (default: session_id)
    include_tool: bool = False
    points_at: tuple[int, int] | None = None
    """A past time the query names ("two months ago", "in February"; UTC ns, both ends
    included), read from its words by the caller: in hybrid mode what was said then is
    searched as well and ranks higher; what was told later still ranks by the whole
    search.  Ignored when the query has a time range of its own."""
    withheld: Withheld = NOTHING_WITHHELD
    """Sessions and messages in an undo window: found by no route, shown in no excerpt."""
    keyword_also: tuple[str, ...] = ()
    """More words the keyword route looks for (any of them), not the semantic one: the
    caller's other names for what the text asks about ("shellfish" for "shrimp")."""


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
    sessions = [sid for sid in sessions if sid not in query.withheld.sessions]
    window_of = query.current_session or query.session_id
    excluded = _window_ids(store, window_of, query.exclude_window, query.window_step)
    excluded |= query.withheld.messages
    if query.mode == "keyword":
        hits = _keyword(store, query, excluded, query.limit)
    elif query.mode == "semantic":
        hits = _semantic(store, query, sessions, excluded, query.limit)
    else:
        depth = max(query.limit * 4, 40)
        routes = [
            _semantic(store, query, sessions, excluded, depth),
            _keyword(store, query, excluded, depth),
        ]
        weights = list(HYBRID_WEIGHTS)
        then = _pointed(query)
        if then is not None:
            routes += [
                _semantic(store, then, _said_then(store, sessions, then), excluded, depth),
                _keyword(store, then, excluded, depth),
            ]
            weights += POINTED_WEIGHTS
        fused = fuse(routes, weights=weights)
        summed = with_neighbours(store, fused, query, excluded, CHAT_NEIGHBOURS)
        if not asks_for_replies(query.text):
            summed = discount_parts(store, summed)
        hits = summed[: query.limit]
    excerpts = build_excerpts(store, hits, excluded, include_tool=query.include_tool)
    return SearchResult(hits=hits, excerpts=excerpts)


def _pointed(query: SearchQuery) -> SearchQuery | None:
    """The query limited to the time it points at, when it points at one and has no range."""
    if query.points_at is None or query.time_from_ns is not None or query.time_to_ns is not None:
        return None
    lo, hi = query.points_at
    return replace(query, time_from_ns=lo, time_to_ns=hi)


def _said_then(store: MemoryStore, sessions: Sequence[str], query: SearchQuery) -> list[str]:
    """The *sessions* with a message inside the query's time range."""
    lo = query.time_from_ns if query.time_from_ns is not None else -(2**63)
    hi = query.time_to_ns if query.time_to_ns is not None else 2**63 - 1
    return store.archive.sessions_between(sessions, lo, hi)


def _window_ids(
    store: MemoryStore, session_id: str | None, n: int, step: int = 0
) -> frozenset[str]:
    """Ids of the messages already in *session_id*'s context window (N, moving *step* at a time)."""
    if n <= 0 or session_id is None:
        return frozenset()
    return frozenset(m.id for m in store.window(store.require(session_id), n, step))


def _keyword(
    store: MemoryStore, query: SearchQuery, excluded: frozenset[str], limit: int
) -> list[Hit]:
    withheld = query.withheld.sessions

    def page(fetch: int) -> tuple[list[tuple[ArchivedMessage, float]], bool]:
        found = store.archive.keyword_search(
            " ".join((query.text, *query.keyword_also)),
            limit=fetch,
            session_id=query.session_id,
            time_from_ns=query.time_from_ns,
            time_to_ns=query.time_to_ns,
            include_tool=query.include_tool,
            exclude_msg_ids=excluded,
            with_context=True,
        )
        return [hit for hit in found if hit[0].session_id not in withheld], len(found) < fetch

    # a withheld session's hits are dropped here, so the archive is asked for more until
    # enough others survive (the archive widens the same way for excluded ids)
    found = fetch_enough(page, limit, limit) if withheld else page(limit)[0]
    return [
        Hit(item, score, bm25=score)
        for item, score in found
        if query.include_tool or is_recallable(item)
    ]


def _semantic(
    store: MemoryStore,
    query: SearchQuery,
    sessions: Sequence[str],
    excluded: frozenset[str],
    limit: int,
) -> list[Hit]:
    if store.embedder is None:
        raise SearchError("semantic search needs the embedding model, which is not available")
    vector = embed_queries(store.embedder, [query.text])[0]
    timed = query.time_from_ns is not None or query.time_to_ns is not None
    scored: list[tuple[int, float, float]] = []  # (rowid, ranking score, best part's cosine)
    for sid in sessions:
        if timed:
            scored += _exact_in_range(store, sid, vector, query)
        else:
            # Over-fetch: excluded window messages and tool traffic are dropped below,
            # and a message in many parts may fall behind one fetched after it.
            index = store.vectors(sid)
            scored += [
                (rowid, ranking_score(cosine, index.parts(rowid)), cosine)
                for rowid, cosine in index.search(vector, limit * 2 + len(excluded) + 8)
            ]
    scored.sort(key=lambda row: row[1], reverse=True)
    rows = store.archive.by_rowids([r for r, _, _ in scored])
    hits: list[Hit] = []
    for rowid, score, cosine in scored:
        item = rows.get(rowid)
        if item is None or item.message.id in excluded:
            continue
        if not query.include_tool and not is_recallable(item):
            continue
        hits.append(Hit(item, score, cosine=cosine))
        if len(hits) == limit:
            break
    return hits


def _exact_in_range(
    store: MemoryStore, sid: str, vector: np.ndarray, query: SearchQuery
) -> list[tuple[int, float, float]]:
    """Brute force over one session's vectors inside a time range (exact):
    (rowid, ranking score, best part's cosine) per message.

    A message with several vectors (a long message in parts) scores its best
    part, less :func:`parts.part_penalty` for the number of parts.
    """
    lo = query.time_from_ns if query.time_from_ns is not None else -(2**63)
    hi = query.time_to_ns if query.time_to_ns is not None else 2**63 - 1
    keep = store.archive.vectors_between(sid, lo, hi)
    if not keep:
        return []
    sims = from_blobs([b for _, b in keep], vector.shape[0]) @ vector
    best: dict[int, float] = {}
    parts: dict[int, int] = {}
    for (label, _), sim in zip(keep, sims, strict=True):
        rowid = message_of(label)
        best[rowid] = max(best.get(rowid, -2.0), float(sim))
        parts[rowid] = parts.get(rowid, 0) + 1
    return [(rowid, ranking_score(cosine, parts[rowid]), cosine) for rowid, cosine in best.items()]


def fuse(
    rankings: Sequence[Sequence[Hit]],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """Weighted reciprocal rank fusion of hit lists (:func:`fusion.rrf_scores`).

    Each route's evidence (``cosine``, ``bm25``) survives the fusion: a
    message both routes found carries both.
    """
    scores = rrf_scores([[hit.item.rowid for hit in r] for r in rankings], weights, k)
    first: dict[int, Hit] = {}
    cosine: dict[int, float] = {}
    bm25: dict[int, float] = {}
    for hit in (hit for ranking in rankings for hit in ranking):
        rowid = hit.item.rowid
        first.setdefault(rowid, hit)
        if hit.cosine is not None:
            cosine[rowid] = max(cosine.get(rowid, hit.cosine), hit.cosine)
        if hit.bm25 is not None:
            bm25[rowid] = max(bm25.get(rowid, hit.bm25), hit.bm25)
    order = sorted(scores, key=lambda rowid: scores[rowid], reverse=True)
    return [Hit(first[r].item, scores[r], cosine=cosine.get(r), bm25=bm25.get(r)) for r in order]


NEIGHBOUR_SLACK = 6
"""Rows read past a hit's neighbours each way, so tool traffic between readable
messages does not cut a conversation's turns apart."""


def with_neighbours(
    store: MemoryStore,
    hits: Sequence[Hit],
    query: SearchQuery,
    excluded: frozenset[str],
    weights: NeighbourWeights = CHAT_NEIGHBOURS,
) -> list[Hit]:
    """*hits* (fused, best first) re-scored by :func:`neighbours.neighbour_sum`.

    The neighbours are the readable messages around each hit in its session
    (all messages with ``include_tool``).  A neighbour no route found joins
    the list when it may be shown (not in the excluded window, inside the
    query's time range), without cosine or bm25.
    """
    if not hits or not weights.reach:
        return list(hits)
    span = weights.reach + (0 if query.include_tool else NEIGHBOUR_SLACK)
    ranges: dict[str, list[tuple[int, int, set[str]]]] = {}
    for hit in hits:
        ranges.setdefault(hit.item.session_id, []).append(
            (hit.item.seq - span, hit.item.seq + span, set())
        )
    runs: list[list[int]] = []
    rows: dict[int, ArchivedMessage] = {}
    for sid, spans in ranges.items():
        for lo, hi, _ids in _merge(spans):
            run = [
                r
                for r in store.archive.messages(sid, max(lo, 0), hi + 1)
                if query.include_tool or is_recallable(r)
            ]
            runs.append([r.rowid for r in run])
            rows.update((r.rowid, r) for r in run)
    found = {hit.item.rowid: hit for hit in hits}
    summed = neighbour_sum(runs, {rowid: hit.score for rowid, hit in found.items()}, weights)
    lo_ns = query.time_from_ns if query.time_from_ns is not None else -(2**63)
    hi_ns = query.time_to_ns if query.time_to_ns is not None else 2**63
    out: list[Hit] = []
    for rowid, known in found.items():
        score = summed.pop(rowid, known.score)  # a hit outside every run keeps its score
        out.append(Hit(known.item, score, cosine=known.cosine, bm25=known.bm25))
    for rowid, score in summed.items():
        row = rows[rowid]
        if row.message.id not in excluded and lo_ns <= row.message.time_ns <= hi_ns:
            out.append(Hit(row, score))
    rank = {rowid: i for i, rowid in enumerate(found)}
    out.sort(key=lambda h: (-h.score, rank.get(h.item.rowid, len(rank)), h.item.rowid))
    return out


_ASSISTANT_POINTER = compiled(cue("recall.assistant"), re.IGNORECASE)


def asks_for_replies(text: str) -> bool:
    """The query points at what the assistant said ("you recommended…", "remind me…",
    "in our previous conversation…", in every language the cue lists).

    Such a question is answered by a reply, and replies are the long
    messages :func:`discount_parts` discounts, so the hybrid route leaves
    them their whole score (the agent's recall reads the same cue).
    """
    return _ASSISTANT_POINTER.search(text) is not None


def discount_parts(store: MemoryStore, hits: Sequence[Hit]) -> list[Hit]:
    """*hits* (neighbours summed, best first) re-ranked by :func:`parts.fused_share`.

    Each score is scaled by the share its message keeps for its number of
    parts; ties keep the order of *hits*.
    """
    counts = _part_counts(store, [hit.item for hit in hits])
    scaled = [replace(h, score=h.score * fused_share(counts[h.item.rowid])) for h in hits]
    order = {hit.item.rowid: i for i, hit in enumerate(hits)}
    scaled.sort(key=lambda h: (-h.score, order[h.item.rowid]))
    return scaled


def _part_counts(store: MemoryStore, items: Sequence[ArchivedMessage]) -> dict[int, int]:
    """How many parts each message is embedded in (rowid -> parts).

    Read from the session's vectors; a message without any (archived past
    history.json, or not embedded yet) is counted by cutting its text as
    embedding would, which only a text longer than one part's tokens needs
    (an estimated token is at least one character).
    """
    counts: dict[int, int] = {}
    by_session: dict[str, list[ArchivedMessage]] = {}
    for item in items:
        by_session.setdefault(item.session_id, []).append(item)
    for sid, members in by_session.items():
        vectors = store.vectors(sid)
        for item in members:
            parts = vectors.parts(item.rowid)
            if not parts:
                text = item.message.content
                parts = len(split_parts(text)) if len(text) > PART_TOKENS else 1
            counts[item.rowid] = parts
    return counts


def is_recallable(item: ArchivedMessage) -> bool:
    """Whether a message may be shown as memory: not tool traffic, not empty.

    Tool results, the assistant's tool-call stubs and empty messages carry no
    conversation; shown to a small model they read as ``you answered: ""``.
    """
    return not item.message.is_tool_traffic and bool(item.message.content.strip())


# How far past an excerpt's edge to look for readable neighbours, when the
# adjacent messages are tool traffic or empty.
_EXCERPT_SLACK = 8


def build_excerpts(
    store: MemoryStore,
    hits: Sequence[Hit],
    excluded: frozenset[str] = frozenset(),
    *,
    include_tool: bool = False,
) -> list[Excerpt]:
    """Widen hits to 2-before / 1-after excerpts, merge overlaps, order by time.

    Unless *include_tool*, the neighbours counted and shown are readable
    messages only: tool traffic and empty messages are skipped, and the
    excerpt reaches past them for its context.
    """
    spans: dict[str, list[tuple[int, int, set[str]]]] = {}
    for hit in hits:
        lo, hi = _span(store, hit.item, include_tool)
        spans.setdefault(hit.item.session_id, []).append((lo, hi, {hit.item.message.id}))
    excerpts: list[Excerpt] = []
    for sid, ranges in spans.items():
        for lo, hi, ids in _merge(ranges):
            rows = store.archive.messages(sid, max(lo, 0), hi + 1)
            rows = [
                r
                for r in rows
                if r.message.id in ids
                or (r.message.id not in excluded and (include_tool or is_recallable(r)))
            ]
            if rows:
                excerpts.append(Excerpt(sid, rows, frozenset(ids)))
    excerpts.sort(key=lambda e: (e.messages[0].message.time_ns, e.messages[0].seq))
    return excerpts


def _span(store: MemoryStore, item: ArchivedMessage, include_tool: bool) -> tuple[int, int]:
    """Seq range holding EXCERPT_BEFORE shown messages before *item* and EXCERPT_AFTER after."""
    lo, hi = item.seq - EXCERPT_BEFORE, item.seq + EXCERPT_AFTER
    if include_tool:
        return lo, hi
    near = store.archive.messages(
        item.session_id, max(lo - _EXCERPT_SLACK, 0), hi + _EXCERPT_SLACK + 1
    )
    before = [r.seq for r in near if r.seq < item.seq and is_recallable(r)]
    after = [r.seq for r in near if r.seq > item.seq and is_recallable(r)]
    lo = before[-EXCERPT_BEFORE] if len(before) >= EXCERPT_BEFORE else (before or [item.seq])[0]
    hi = after[EXCERPT_AFTER - 1] if len(after) >= EXCERPT_AFTER else item.seq
    return lo, hi


def _merge(ranges: list[tuple[int, int, set[str]]]) -> list[tuple[int, int, set[str]]]:
    """Merge overlapping or touching seq ranges, uniting their hit ids."""
    merged: list[tuple[int, int, set[str]]] = []
    for lo, hi, ids in sorted(ranges, key=lambda r: (r[0], r[1])):
        if merged and lo <= merged[-1][1] + 1:
            plo, phi, pids = merged[-1]
            merged[-1] = (plo, max(phi, hi), pids | ids)
        else:
            merged.append((lo, hi, ids))
    return merged
