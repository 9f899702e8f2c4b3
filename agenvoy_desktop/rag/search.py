"""search_documents: one query over one collection's index, by words, by meaning, or both.

- ``keyword`` — FTS5 with bm25, over the terms :func:`plan_match` picks
  (the rarest, under a postings budget), each quoted: what a user types is
  never FTS5 syntax;
- ``semantic`` — the query's embedding against the collection's hnswlib
  index;
- ``hybrid`` — both lists fused by weighted reciprocal rank with the
  constants of the chat-history search (measured on conversations, not on
  documents); without an embedding model it is keyword search.

Every hit cites its place (``path:start-end`` or ``path p. N``) so an
answer built on it can be checked.  Bad input is a :class:`DocumentSearchError`
with one line, never an SQL error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agenvoy_desktop.core.embedding import TextEmbedder, embed_queries
from agenvoy_desktop.core.retrieval.fusion import HYBRID_WEIGHTS, RRF_K, rrf_scores
from agenvoy_desktop.core.search import SearchError
from agenvoy_desktop.rag.index import DocumentIndex
from agenvoy_desktop.rag.index_schema import ChunkRow

DocMode = Literal["keyword", "semantic", "hybrid"]
DOC_MODES: tuple[DocMode, ...] = ("keyword", "semantic", "hybrid")
MAX_QUERY_CHARS = 1000
"""A longer query is cut: no question needs more, and every word costs a frequency count."""
MAX_LIMIT = 100
FUSION_DEPTH = 40
"""Candidates each route gives the fusion at least (more for a larger *limit*)."""


class DocumentSearchError(SearchError):
    """A document search that cannot run (empty query, unknown mode, no embedding model)."""


@dataclass(frozen=True, slots=True)
class DocumentHit:
    """One matching chunk.  ``score`` orders hits within one mode (a fused score is a rank sum)."""

    collection: str
    path: str
    start_line: int | None
    end_line: int | None
    page: int | None
    heading: str
    text: str
    score: float
    citation: str


def clean_query(query: object) -> str:
    """*query* as safe text: NULs and control characters become spaces, the length is bounded."""
    if not isinstance(query, str):
        raise DocumentSearchError("the search text must be text")
    text = "".join(" " if (ord(c) < 32 or c == "\x7f") else c for c in query[: MAX_QUERY_CHARS * 4])
    text = " ".join(text.split())
    if not text:
        raise DocumentSearchError("type some words to search for")
    return text[:MAX_QUERY_CHARS]


def search_documents(
    index: DocumentIndex,
    query: str,
    mode: str = "hybrid",
    limit: int = 8,
    embedder: TextEmbedder | None = None,
) -> list[DocumentHit]:
    """The best *limit* chunks for *query* in *index*, best first (see the module docstring)."""
    text = clean_query(query)
    if mode not in DOC_MODES:
        raise DocumentSearchError(f"unknown search mode {mode!r}: use keyword, semantic or hybrid")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise DocumentSearchError(f"the number of results must be between 1 and {MAX_LIMIT}")
    if mode == "semantic" and embedder is None:
        raise DocumentSearchError(
            "searching by meaning needs the embedding model: use keyword search, or install it"
        )
    if mode == "keyword" or embedder is None:
        ranked = index.keyword_ranked(text, limit)
    elif mode == "semantic":
        ranked = _semantic(index, text, limit, embedder)
    elif index.vectors_of_another_model(embedder):
        ranked = index.keyword_ranked(text, limit)  # another model's vectors: words for now
    else:
        depth = max(limit * 4, FUSION_DEPTH)
        semantic = [rowid for rowid, _ in _semantic(index, text, depth, embedder)]
        keyword = [rowid for rowid, _ in index.keyword_ranked(text, depth)]
        fused = rrf_scores([semantic, keyword], HYBRID_WEIGHTS, RRF_K)
        ranked = sorted(fused.items(), key=lambda pair: pair[1], reverse=True)[:limit]
    return _hits(index, ranked)


def _semantic(
    index: DocumentIndex, text: str, limit: int, embedder: TextEmbedder
) -> list[tuple[int, float]]:
    dim = index.dim
    if dim is None:
        return []  # nothing embedded yet
    if not index.vectors_match(embedder):
        raise DocumentSearchError(
            f"collection {index.collection!r} was indexed with another embedding model:"
            " index it again to search it by meaning"
        )
    vector = embed_queries(embedder, [text])[0]
    return index.semantic_ranked(vector, limit)


def hit_of(collection: str, row: ChunkRow, score: float = 0.0) -> DocumentHit:
    """A stored chunk as a search hit of *collection*."""
    return DocumentHit(
        collection=collection,
        path=row.path,
        start_line=row.start_line,
        end_line=row.end_line,
        page=row.page,
        heading=row.heading,
        text=row.text,
        score=score,
        citation=row.citation(),
    )


def _hits(index: DocumentIndex, ranked: list[tuple[int, float]]) -> list[DocumentHit]:
    rows = index.chunk_rows([rowid for rowid, _ in ranked])
    # a chunk removed by a re-index since the ranking is skipped
    return [hit_of(index.collection, rows[r], score) for r, score in ranked if r in rows]
