"""How the semantic route ranks a message embedded in several parts.

A long message is embedded in parts (``core.embedding.split_parts``) and
scores the cosine of its best part.  The best of *n* draws is higher than
one draw even when none of them is about the question, so a message in
eight parts outranked short messages that were: on LongMemEval, whose
assistant turns run to several parts each, 132 of the 213 messages the
route ranked above a question's evidence (top 10) were such turns, and the
semantic route's R@5 stood at 0.695 (benchmarks/RESULTS.md, "LongMemEval
retrieval").

The ranking score is therefore the best part's cosine less
``PART_PENALTY * ln(parts)``: nothing for a message in one part (every
LoCoMo turn), 0.035 for two parts, 0.104 for eight.  The cosine itself is
kept unchanged on the hit, since recall's floors are cosines of the model.
"""

from __future__ import annotations

import math

PART_PENALTY = 0.05
"""Measured on LongMemEval's 59 dev questions with evidence (semantic R@5 / R@10):
0 -> 0.695 / 0.831, 0.03 -> 0.763 / 0.864, 0.05 -> 0.763 / 0.864, 0.08 -> 0.780 / 0.864;
the middle of the flat stretch, not its best point (a held-out set exists)."""


def part_penalty(parts: int) -> float:
    """What a message in *parts* vectors loses from its best part's cosine when ranked."""
    return PART_PENALTY * math.log(parts) if parts > 1 else 0.0


def ranking_score(cosine: float, parts: int) -> float:
    """The semantic route's ranking score of a message whose best part has *cosine*."""
    return cosine - part_penalty(parts)


# -- the hybrid route --------------------------------------------------------------------------
FUSED_PART_DISCOUNT = 1.0
"""How much of its hybrid score a message in several parts gives up (see :func:`fused_share`).

Measured on 38 LongMemEval dev questions (hybrid R@5; queries that ask for
a reply left alone): 0 -> 0.763, 0.25 -> 0.842, 0.5 and 1.0 -> 0.868,
1.5 and 2.0 -> 0.895; the middle of the flat stretch, not its best point.
LoCoMo is unchanged at any value (every turn is one part)."""


def fused_share(parts: int) -> float:
    """The share of its hybrid score (fused, neighbours summed) a message in *parts* parts keeps.

    The part penalty above corrects the semantic route only.  A long message
    also leads the keyword route (more words to match, and the words of the
    message before it as context), and then passes its score on to that
    message through the neighbour sum: the reply outranks the turn it
    answers, and the replies of one session fill the first places.  So after
    the neighbour sum a message keeps ``1 / (1 + FUSED_PART_DISCOUNT *
    ln(parts))`` of its score (1 for one part, 0.59 for two, 0.33 for
    eight), while its neighbours keep the full share of it: the turn a long
    reply answers still gains from the reply, and an excerpt around that turn
    shows the reply after it.
    """
    return 1.0 / (1.0 + FUSED_PART_DISCOUNT * math.log(parts)) if parts > 1 else 1.0
