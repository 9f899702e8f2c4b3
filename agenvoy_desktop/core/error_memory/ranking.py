"""How a failure or a search picks its records: vectors, keywords and full text, ranked.

Pure reads over the in-memory :class:`VectorIndex` and the store's
:mod:`.candidates` queries; the store renews what these pick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.error_memory import candidates
from agenvoy_desktop.core.error_memory.candidates import Query
from agenvoy_desktop.core.error_memory.index import FloatArray, VectorIndex, type_code
from agenvoy_desktop.core.error_types import (
    HintReason,
    classify_error,
    error_text,
    lookup_query,
    rank_for_failure,
)
from agenvoy_desktop.core.retrieval.fusion import (
    ERROR_SEARCH_RRF_K,
    ERROR_SEARCH_WEIGHTS,
    rrf_scores,
)

LOOKUP_MIN_SIMILARITY = 0.45
"""A failure "resembles" a symptom from this cosine on (MiniLM: paraphrases ≈ 0.5-0.9)."""
SEARCH_MIN_SIMILARITY = 0.3
"""Searches are short phrases, whose cosine with a whole record runs lower."""

Embed = Callable[[Sequence[str]], FloatArray | None]
"""``embed(texts)``: one vector per text, or None without a (working) model."""
Picks = dict[int, tuple[float, HintReason]]
"""Record id → (score, why it was picked), best first."""


def similarities(
    index: VectorIndex,
    matrix: FloatArray,
    rows: npt.NDArray[np.intp],
    text: str,
    embed: Embed,
) -> npt.NDArray[np.float32]:
    """Cosine of *text* with each of *rows* (zeros without a model)."""
    query = embed([text]) if text.strip() else None
    if query is None or matrix.shape[1] != query.shape[1]:
        return np.zeros(rows.size, np.float32)
    return index.similarities(matrix, rows, query[0])


def failure_picks(
    query: Query,
    embed: Embed,
    index: VectorIndex,
    rows: npt.NDArray[np.intp],
    *,
    tool: str,
    error: BaseException | str | None,
    limit: int,
) -> Picks:
    """The records among *rows* (live, of *tool*) that resemble this failure.

    Records whose symptom is similar to the error (cosine ≥
    LOOKUP_MIN_SIMILARITY) by similarity; then records of the same
    error_type, by keyword overlap; then records sharing keywords.
    """
    sims = similarities(index, index.symptom, rows, lookup_query(tool, error), embed)
    error_type = classify_error(error)
    same = index.types[rows] == type_code(error_type)
    if error_type == "other":  # "unclassified" twice is no resemblance
        same[:] = False
    if np.count_nonzero(sims >= LOOKUP_MIN_SIMILARITY) >= limit:
        overlap = np.zeros(rows.size, np.int64)  # similar records fill the answer
    else:
        overlap = candidates.keyword_overlap(query, tool, error_text(error), index, rows)
    ranked = rank_for_failure(
        sims,
        same,
        overlap,
        index.ids[rows],
        min_similarity=LOOKUP_MIN_SIMILARITY,
        limit=limit,
    )
    return {
        int(index.ids[rows[i]]): (float(sims[i]) if why == "similar" else 0.0, why)
        for i, why in ranked
    }


def search_scores(
    query: Query,
    embed: Embed,
    index: VectorIndex,
    rows: npt.NDArray[np.intp],
    text: str,
    *,
    tool: str | None,
    now: int,
    limit: int,
) -> dict[int, float]:
    """The best *limit* records among *rows* for a free-text search, with their fused scores.

    Vector similarity to symptom + cause + action fused by reciprocal rank
    with the full-text match; when full text finds nothing, a plain
    substring match.
    """
    sims = similarities(index, index.detail, rows, text, embed)
    keep = np.flatnonzero(sims >= SEARCH_MIN_SIMILARITY)
    best = keep[np.argsort(-sims[keep], kind="stable")][: 3 * limit]
    semantic = [int(index.ids[rows[i]]) for i in best]
    fetch = 3 * limit
    keyword = candidates.fts_ids(
        query, text, index, tool=tool, now=now, limit=fetch
    ) or candidates.like_ids(query, text, tool=tool, now=now, limit=fetch)
    scores = rrf_scores((semantic, keyword), ERROR_SEARCH_WEIGHTS, ERROR_SEARCH_RRF_K)
    top = sorted(scores, key=lambda i: scores[i], reverse=True)[:limit]
    return {i: scores[i] for i in top}
