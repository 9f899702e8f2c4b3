"""Weighted reciprocal rank fusion, and the constants each search was tuned with.

A route's ranked list gives each item ``weight / (k + rank)`` (rank from 1);
an item's fused score is the sum over the lists that hold it.  A small *k*
keeps each route's top hits on top; the weights say how far each route is
trusted.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

# Chat history (search_chat_history), measured on LoCoMo (benchmarks/locomo_recall.py,
# RESULTS.md): the textbook k=60 ranks items found by both routes at middling ranks
# above each route's own best hit and lost to keyword search alone.  With the
# stemmed, context-aware keyword route (R@10 0.69) far ahead of the semantic one
# (0.47), a small k with the semantic list at half weight keeps keyword's top hits
# on top and lets semantic add what keyword misses.
RRF_K = 3
HYBRID_WEIGHTS = (0.5, 1.0)  # (semantic, keyword)
# A query that names a past time ("two months ago", "in February") also searches what
# was said then, with the same two routes; their lists join the fusion at these weights
# (semantic, keyword), measured on LongMemEval's dated questions (RESULTS.md).
POINTED_WEIGHTS = (0.5, 1.0)

# The error memory's search: the chat fusion of the first LoCoMo round (k 1,
# semantic 0.75), never measured on error records themselves.
ERROR_SEARCH_RRF_K = 1
ERROR_SEARCH_WEIGHTS = (0.75, 1.0)  # (vector, keyword)


def rrf_scores(
    rankings: Sequence[Sequence[K]], weights: Sequence[float] | None, k: float
) -> dict[K, float]:
    """Fused scores of every ranked item: score = Σ w / (k + rank).

    *weights* holds one weight per ranking (None: all 1).  The dict lists
    items in the order they were first seen, so a stable sort by score keeps
    the first ranking's order among ties.
    """
    scores: dict[K, float] = {}
    for number, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[number]
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return scores
