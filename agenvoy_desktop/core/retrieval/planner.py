"""Which of a query's words a full-text search looks for: the rarest, under a postings budget.

FTS5's bm25 costs ~1.5 µs per matching document (on a 2-core laptop), so
one common word ("file", "what") would cost more than the rest of a search.
The planner takes terms rarest first until *budget* documents would be
scored; the store that owns the index counts each term's documents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agenvoy_desktop.core.retrieval.fts_text import query_terms

DocFreq = Callable[[str, int], int]
"""``doc_freq(expr, cap)``: documents matching one quoted FTS5 term, counted up to *cap*."""


@dataclass(frozen=True, slots=True)
class MatchPlan:
    """An FTS5 MATCH expression and the documents it matches at most."""

    expr: str
    """The chosen terms joined by ``OR`` (each already quoted by :func:`query_terms`)."""
    postings: int
    """The sum of the chosen terms' (capped) document counts."""


def count_cap(budget: int) -> int:
    """How far one term's documents are counted for a plan of *budget* postings.

    Counting is the plan's cost, so it stops at 2 × budget: past that a term
    is too common to be taken with another one anyway, and all it could
    still decide is which of several very common terms goes alone (then the
    longer word, usually the rarer one).  Counting on to 8 × budget cost half
    of an archive-wide query in the 1M-message benchmark and changed no
    recall figure.
    """
    return 2 * budget + 1


def plan_match(query: str, doc_freq: DocFreq, budget: int) -> MatchPlan | None:
    """The terms of *query* to match, rarest first, within *budget* postings (None: none).

    Stopwords are dropped unless nothing else is left; terms that occur
    nowhere are dropped (they cannot match).  The rarest term is always
    taken, however common; each further one only while the sum of counts
    stays within *budget*.  Ties go to the longer term.
    """
    terms = query_terms(query)
    content = [t for t in terms if not t.is_stopword] or terms
    cap = count_cap(budget)
    scored: list[tuple[int, int, str]] = []
    for term in content:
        df = doc_freq(term.expr, cap)
        if df > 0:
            scored.append((df, -len(term.expr), term.expr))
    if not scored:
        return None
    scored.sort()
    chosen: list[str] = []
    total = 0
    for df, _longer_first, expr in scored:
        if chosen and total + df > budget:
            break
        chosen.append(expr)
        total += df
    return MatchPlan(" OR ".join(chosen), total)
