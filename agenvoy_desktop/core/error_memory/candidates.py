"""The SQL side of retrieval: which records share a failure's keywords or match a search's text.

Each function takes the store's query function and returns record ids (or
per-row counts) for :mod:`.store` to rank; none renews or changes anything.
Query text never reaches SQL or FTS5 as syntax: it is bound as a parameter,
and an FTS5 expression is built only by :func:`planner.plan_match`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.error_memory.index import VectorIndex
from agenvoy_desktop.core.error_types import MAX_SYMPTOM_CHARS, MAX_TEXT_CHARS, text_terms
from agenvoy_desktop.core.retrieval.planner import plan_match
from agenvoy_desktop.core.retrieval.widen import fetch_enough

Query = Callable[[str, Sequence[Any] | dict[str, Any]], list[Any]]
"""``query(sql, params)``: the rows of one read (``SqliteStore._query``)."""

FTS_POSTINGS_BUDGET = 500
"""A search's full-text match scores at most about this many records (see :mod:`planner`)."""
OVERLAP_CANDIDATES = 256


def keyword_overlap(
    query: Query, tool: str, text: str, index: VectorIndex, rows: npt.NDArray[np.intp]
) -> npt.NDArray[np.int64]:
    """How many of each record's keywords occur in the error text, per row of *rows*.

    Only the OVERLAP_CANDIDATES records with the most shared keywords
    count (the rest read as 0): a generic keyword ("file") shared by
    thousands of records would otherwise cost more than the whole lookup.
    """
    terms = text_terms(text)
    if not terms:
        return np.zeros(rows.size, np.int64)
    found = query(
        "SELECT record_id, count(*) AS n FROM error_keywords WHERE tool = ?"
        " AND term IN (SELECT value FROM json_each(?)) GROUP BY record_id"
        " ORDER BY n DESC, record_id DESC LIMIT ?",
        (tool, json.dumps(sorted(terms), ensure_ascii=False), OVERLAP_CANDIDATES),
    )
    counts = np.zeros(index.size, np.int64)
    if found:
        pairs = np.asarray(found, dtype=np.int64)
        at = index.rows(pairs[:, 0])
        counts[at[at >= 0]] = pairs[at >= 0, 1]
    return counts[rows]


def fts_ids(
    query: Query, text: str, index: VectorIndex, *, tool: str | None, now: int, limit: int
) -> list[int]:
    """Full-text hits, best first: FTS5 ranks alone, the index filters after."""
    plan = plan_match(text, lambda expr, cap: _doc_freq(query, expr, cap), FTS_POSTINGS_BUDGET)
    if plan is None:
        return []

    def page(fetch: int) -> tuple[list[int], bool]:
        rows = query(
            "SELECT rowid FROM errors_fts WHERE errors_fts MATCH ? ORDER BY rank LIMIT ?",
            (plan.expr, fetch),
        )
        ids = [int(r[0]) for r in rows if index.is_live(int(r[0]), now, tool)]
        return ids, len(rows) < fetch

    return fetch_enough(page, limit, 3 * limit)


def _doc_freq(query: Query, expr: str, cap: int) -> int:
    """Records matching one quoted term, counted up to *cap*."""
    rows = query(
        "SELECT count(*) FROM (SELECT 1 FROM errors_fts WHERE errors_fts MATCH ? LIMIT ?)",
        (expr, cap),
    )
    return int(rows[0][0])


def like_ids(query: Query, text: str, *, tool: str | None, now: int, limit: int) -> list[int]:
    """Live records whose texts contain *text* verbatim, newest first (for no full-text hit).

    Text longer than any stored field cannot be inside one; it is not sent
    at all (SQLite refuses LIKE patterns over 50,000 bytes as "too complex").
    """
    if len(text.strip()) > max(MAX_SYMPTOM_CHARS, MAX_TEXT_CHARS):
        return []
    escaped = text.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = query(
        "SELECT id FROM errors WHERE expires_ns > :now AND (:tool IS NULL OR tool = :tool)"
        " AND (symptom LIKE :pat ESCAPE '\\' OR cause LIKE :pat ESCAPE '\\'"
        " OR action LIKE :pat ESCAPE '\\')"
        " ORDER BY updated_ns DESC, id DESC LIMIT :limit",
        {"now": now, "tool": tool, "pat": f"%{escaped}%", "limit": limit},
    )
    return [int(r[0]) for r in rows]
