"""The neighbour sum: a message also scores for the messages around it.

In a conversation the answer to a question is often split over turns: "Did
you book it?" / "Yes, for the 16th."  Either route may rank one of the two
and miss the other, and the message a question asks about is often the one
*before* a strong hit (the hit is the reply that repeats its words).  So
after fusion every message's score gains a share of its neighbours' fused
scores: ``s + previous · s(i-1) + next · s(i+1) + two_away · (s(i-2) +
s(i+2))``, over the readable messages of one session in order.  A message no
route found can enter the list through a strong neighbour; it then carries no
cosine or bm25 of its own (callers that apply a relevance floor read those).

Measured on LoCoMo (``benchmarks/lab/retrieval_lab.py``, held-out halves):
R@10 0.684 / 0.716 -> 0.696 / 0.741 with the weights tuned on the other half;
the weights below are the best on all ten conversations and stable across
the halves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class NeighbourWeights:
    """Shares of the neighbours' fused scores a message gains."""

    previous: float = 0.25
    next: float = 0.5
    two_away: float = 0.1

    @property
    def reach(self) -> int:
        """How many messages away a score travels (0: the sum is off)."""
        if self.two_away:
            return 2
        return 1 if self.previous or self.next else 0


CHAT_NEIGHBOURS = NeighbourWeights()
"""search_chat_history's hybrid mode (chosen on LoCoMo, see the module docstring)."""


def neighbour_sum(
    runs: Sequence[Sequence[K]], scores: Mapping[K, float], weights: NeighbourWeights
) -> dict[K, float]:
    """Every message of *runs* with a score after the sum (those left at 0 are left out).

    *runs* are stretches of consecutive messages, in conversation order
    (one per session part fetched); *scores* holds the fused score of the
    messages a route found (absent: 0).
    """
    out: dict[K, float] = {}
    two = weights.two_away
    shares = ((-1, weights.previous), (1, weights.next), (-2, two), (2, two))
    for run in runs:
        base = [scores.get(key, 0.0) for key in run]
        for i, key in enumerate(run):
            total = base[i]
            for offset, share in shares:
                j = i + offset
                if share and 0 <= j < len(run):
                    total += share * base[j]
            if total > 0.0:
                out[key] = total
    return out
