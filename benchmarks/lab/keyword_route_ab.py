"""Keyword search over 1,000,000 messages: round 3's route against the shipped one, interleaved.

The VM's speed drifts by ±25 % between blocks of a run, so two routes are
compared on two stores over the same cached archive (``keyword_latency.py``
builds it), alternating per query and measured in thread CPU time:

* round 3 (commit 08b4b25): a session-scoped query names its session with
  the session token's phrase, and FTS5 sorts every match (``ORDER BY rank``);
* shipped: a large session whose rows lie together is bounded by its rowid
  span (``Archive._session_span``), and bm25 is called by name so SQLite keeps
  only the best LIMIT matches (``RANK_SQL``).

Both the archive route (``Archive.keyword_search``) and the whole tool path
(``search_chat_history``) are timed, scope all and scope one 100k-message
session; every query's hits and scores are compared between the two routes.

    .venv/bin/python benchmarks/lab/keyword_route_ab.py [--quick]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib
from benchlib import stats_ms
from keyword_latency import ACCEPT_P95_MS, LIMIT, cached_archive, filler_ids, query_set, sizes

from agenvoy_desktop.core.archive import _MSG_COLS, Archive, ArchivedMessage, _row_to_archived
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore

Hits = list[tuple[int, float]]
Ranked = tuple[list[tuple[ArchivedMessage, float]], bool]


def round3_route(archive: Archive) -> None:
    """Make *archive* rank as round 3 did: the session's phrase, FTS5's sorted ``rank``."""

    def session_span(_session_id: str) -> None:
        return None

    def ranked(
        expr: str,
        rowids: tuple[int, int],
        fetch: int,
        where: tuple[str, list[Any]],
        exclude_msg_ids: frozenset[str],
    ) -> Ranked:
        rows = archive._query(
            "SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH ?"
            " AND rowid >= ? ORDER BY rank LIMIT ?",
            (expr, rowids[0], fetch),
        )
        score = {int(rowid): -float(rank) for rowid, rank in rows}
        sql, params = where
        found = archive._query(
            f"SELECT {_MSG_COLS} FROM messages m"
            f" WHERE m.id IN ({','.join('?' * len(score))}) AND {sql}",
            [*score, *params],
        )
        hits = [(_row_to_archived(r), score[r[0]]) for r in found if r[3] not in exclude_msg_ids]
        hits.sort(key=lambda hit: hit[1], reverse=True)
        return hits, len(rows) < fetch

    archive._session_span = session_span  # type: ignore[method-assign,assignment]
    archive._ranked = ranked  # type: ignore[method-assign]


def searches(store: MemoryStore) -> dict[str, Callable[[str, str | None], Hits]]:
    """The archive route and the tool path, each returning (rowid, score) per hit."""

    def archive(q: str, sid: str | None) -> Hits:
        found = store.archive.keyword_search(q, limit=LIMIT, session_id=sid, with_context=True)
        return [(h.rowid, round(score, 9)) for h, score in found]

    def tool(q: str, sid: str | None) -> Hits:
        result = search_chat_history(
            store, SearchQuery(q, mode="keyword", limit=LIMIT, session_id=sid)
        )
        return [(hit.item.rowid, round(hit.score, 9)) for hit in result.hits]

    return {"archive": archive, "tool": tool}


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    paths, build = cached_archive(args.quick)
    sids = filler_ids(sizes(args.quick)[0])
    queries = query_set(args.quick)
    shipped, round3 = MemoryStore(paths, None), MemoryStore(paths, None)
    round3_route(round3.archive)
    routes = {"shipped": searches(shipped), "round3": searches(round3)}
    times: dict[str, list[float]] = {}
    identical: dict[str, list[bool]] = {}
    try:
        for timed in (False, True):  # a warm-up pass over every query, then the measured one
            for i, q in enumerate(queries):
                for scope, sid in (("all", None), ("session", sids[i % len(sids)])):
                    for path in ("archive", "tool"):
                        order = ("shipped", "round3") if i % 2 else ("round3", "shipped")
                        hits: dict[str, Hits] = {}
                        for name in order:
                            c0 = time.thread_time()
                            hits[name] = routes[name][path](q, sid)
                            if timed:
                                key = f"{path}/{scope}/{name}"
                                times.setdefault(key, []).append(time.thread_time() - c0)
                        if timed:
                            same = hits["shipped"] == hits["round3"]
                            identical.setdefault(f"{path}/{scope}", []).append(same)
    finally:
        shipped.close()
        round3.close()
    stats = {key: stats_ms(samples) for key, samples in sorted(times.items())}
    for key, row in stats.items():
        print(f"  {key:28s} p50 {row['p50_ms']:6.2f} ms  p95 {row['p95_ms']:6.2f} ms")
    same = {key: [sum(flags), len(flags)] for key, flags in identical.items()}
    print(f"identical hits and scores: {same}")
    worst = max(row["p95_ms"] for key, row in stats.items() if key.endswith("/shipped"))
    print(f"shipped worst p95 {worst:.2f} ms (thread CPU; limit {ACCEPT_P95_MS} ms)")
    benchlib.write_result(
        "keyword_route_ab",
        {
            "build": build,
            "queries": len(queries),
            "limit": LIMIT,
            "cpu_time": stats,
            "ratio_p95": {
                key.removesuffix("/shipped"): round(
                    row["p95_ms"] / stats[key.replace("shipped", "round3")]["p95_ms"], 3
                )
                for key, row in stats.items()
                if key.endswith("/shipped")
            },
            "identical": same,
            "shipped_worst_p95_ms": worst,
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
