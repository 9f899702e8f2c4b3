"""Retrieval quality on LongMemEval_S: turn-level recall@k of search_chat_history per mode.

Each question's haystack (about 50 dated sessions, 500 messages) is the
profile ``longmemeval_qa.py`` imports and caches (``build_profile``: the real
MiniLM embedder through ``MemoryStore.import_messages``; a cached profile is
copied, never searched in place).  The question is searched over all
sessions, as ``agenvoy-desktop search`` does by default, in each mode
(hybrid / keyword / semantic), top 10.  The evidence is the messages the
data marks ``has_answer`` (user turns, and the assistant's own turn for
single-session-assistant questions); a question without any (most
abstention questions) is not scored.

Two recall figures per k, averaged over questions:

- **R@k** (the headline, LongMemEval's ``recall_any``): 1 when at least one
  evidence message is among the top k hits;
- **all@k**: the fraction of the question's evidence messages among the top k.

Also reported: where the first evidence message ranks in each route's deep
list (limit 100) and, for the semantic route, the roles and parts of the
messages ranked above it (what crowds it out).

Acceptance (issue 42): hybrid R@5 >= 0.93 and semantic R@5 and R@10 >= 0.70.

    .venv/bin/python benchmarks/longmemeval_recall.py [--quick] [--ids ID,...] [--types T,...]
        [--cached-only] [--tag NAME]
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import benchlib
from benchlib import verdict
from longmemeval_qa import (
    TYPES,
    Built,
    Item,
    build_profile,
    copied_profile,
    is_cached,
    load_items,
    parse_date,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.search import MODES, Hit, Mode, SearchQuery
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import local_date
from agenvoy_desktop.operations.search import run_search
from agenvoy_desktop.settings import Settings

KS = (1, 5, 10)
LIMIT = 10
DEEP = 100
QUICK_EVERY = 4
"""``--quick`` asks every 4th question (16 of 64, every type)."""
GOALS = {"hybrid@5": 0.93, "semantic@5": 0.70, "semantic@10": 0.70}


@dataclass(slots=True)
class Asked:
    """One question's ranked message ids per mode, with its evidence."""

    qid: str
    qtype: str
    evidence: frozenset[str]
    top: dict[str, list[str]]  # mode -> message ids of the top LIMIT hits
    deep_rank: dict[str, int | None]  # route -> rank (from 1) of the first evidence, limit DEEP
    crowd: list[tuple[str, int]]  # (role, parts) of the semantic hits above the evidence


def recall_any(ranked: Sequence[str], evidence: frozenset[str], k: int) -> float:
    return 1.0 if evidence & set(ranked[:k]) else 0.0


def recall_all(ranked: Sequence[str], evidence: frozenset[str], k: int) -> float:
    return len(evidence & set(ranked[:k])) / len(evidence)


def table(asked: Sequence[Asked], mode: str) -> dict[str, dict[str, float]]:
    """R@k and all@k overall and per question type for one mode."""
    groups: dict[str, list[Asked]] = {"overall": list(asked)}
    for qtype in TYPES:
        rows = [a for a in asked if a.qtype == qtype]
        if rows:
            groups[qtype] = rows
    out: dict[str, dict[str, float]] = {}
    for name, rows in groups.items():
        cells: dict[str, float] = {"n": len(rows)}
        for k in KS:
            cells[f"R@{k}"] = round(
                statistics.fmean(recall_any(a.top[mode], a.evidence, k) for a in rows), 4
            )
        for k in KS:
            cells[f"all@{k}"] = round(
                statistics.fmean(recall_all(a.top[mode], a.evidence, k) for a in rows), 4
            )
        out[name] = cells
    return out


# -- asking ---------------------------------------------------------------------------------
def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.item.message.id for h in hits]


def _parts(store: MemoryStore, hit: Hit) -> int:
    """How many vectors a message has (a long message is embedded in parts)."""
    return store.vectors(hit.item.session_id).parts(hit.item.rowid)


def ask(store: MemoryStore, item: Item, built: Built) -> Asked:
    """Every mode's top hits, each route's deep list, who crowds the evidence (storage thread)."""
    evidence = frozenset(built.evidence_ids)

    today = local_date(parse_date(item.question_date))

    def run(mode: Mode, limit: int) -> list[Hit]:
        # as `agenvoy-desktop search` asks, on the question's day
        return run_search(
            store, SearchQuery(item.question, mode=mode, limit=limit), today
        ).result.hits

    top = {mode: _ids(run(mode, LIMIT)) for mode in MODES}
    deep_rank: dict[str, int | None] = {}
    crowd: list[tuple[str, int]] = []
    for mode in ("semantic", "keyword"):
        hits = run(mode, DEEP)
        rank = next((i for i, h in enumerate(hits, start=1) if h.item.message.id in evidence), None)
        deep_rank[mode] = rank
        if mode == "semantic":
            above = hits[: (rank - 1) if rank else LIMIT][:LIMIT]
            crowd = [(h.item.message.role, _parts(store, h)) for h in above]
    return Asked(item.qid, item.qtype, evidence, top, deep_rank, crowd)


def chosen(args: Any) -> list[Item]:
    """The questions asked: ``--ids``, ``--types``, then every 4th with ``--quick``."""
    items = load_items()
    if args.ids:
        wanted = set(args.ids.split(","))
        items = [i for i in items if i.qid in wanted]
    if args.types:
        kinds = set(args.types.split(","))
        items = [i for i in items if i.qtype in kinds]
    return items[::QUICK_EVERY] if args.quick else items


def ask_all(
    items: Sequence[Item], embedder: Any, rebuild: bool
) -> tuple[list[Asked], dict[str, Any]]:
    """Each question asked on a copy of its cached profile (built first when missing)."""
    asked: list[Asked] = []
    counts = {"questions": len(items), "no_evidence": 0, "built_now": 0}
    seconds: list[float] = []
    for number, item in enumerate(items, start=1):
        if rebuild or not is_cached(item):
            counts["built_now"] += 1
        built = build_profile(item, embedder, rebuild)
        if not built.evidence_ids:
            counts["no_evidence"] += 1
            continue
        with copied_profile(built) as paths:
            services = AppServices.open(
                paths, settings=Settings(), embedder=embedder, chat_model=None
            )
            try:
                started = time.perf_counter()
                row = services.storage.run_sync(ask, services.store, item, built)
                seconds.append(time.perf_counter() - started)
            finally:
                services.embedder = None  # shared: not closed here
                services.close()
        asked.append(row)
        marks = " ".join(
            f"{mode[:3]} {'+' if recall_any(row.top[mode], row.evidence, 5) else '-'}"
            for mode in MODES
        )
        print(
            f"[{number}/{len(items)}] {item.qtype[:24]:24s} R@5 {marks}  deep sem "
            f"{row.deep_rank['semantic']!s:>4s} kw {row.deep_rank['keyword']!s:>4s} "
            f"| {item.question[:60]}",
            flush=True,
        )
    counts["asked"] = len(asked)
    counts["ask_s_per_question"] = round(statistics.fmean(seconds), 2) if seconds else None
    return asked, counts


def crowd_summary(asked: Sequence[Asked]) -> dict[str, Any]:
    """Who outranks the evidence in the semantic route's top 10 (roles, parts)."""
    roles: Counter[str] = Counter()
    parts: list[int] = []
    for a in asked:
        for role, n in a.crowd:
            roles[role] += 1
            parts.append(n)
    return {
        "messages": sum(roles.values()),
        "roles": dict(roles),
        "median_parts": statistics.median(parts) if parts else None,
        "multi_part_share": round(sum(n > 1 for n in parts) / len(parts), 3) if parts else None,
    }


def print_tables(modes: dict[str, dict[str, dict[str, float]]]) -> None:
    heads = [f"R@{k}" for k in KS] + [f"all@{k}" for k in KS]
    print(f"\n{'mode':9s} {'type':26s} {'n':>3s}  " + "  ".join(f"{h:6s}" for h in heads))
    for mode, rows in modes.items():
        for name, cells in rows.items():
            print(
                f"{mode:9s} {name:26s} {int(cells['n']):3d}  "
                + "  ".join(f"{cells[h]:.3f} " for h in heads)
            )


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--ids", default="", help="comma-separated question ids")
    ap.add_argument("--types", default="", help="comma-separated question types")
    ap.add_argument("--rebuild", action="store_true", help="import the haystacks again")
    ap.add_argument("--tag", default="", help="suffix of the result file")
    ap.add_argument(
        "--cached-only",
        action="store_true",
        help="only questions whose profile is cached (while another run builds the rest)",
    )
    args = ap.parse_args()
    items = chosen(args)
    if args.cached_only:
        items = [item for item in items if is_cached(item)]
    with benchlib.temp_profile("longmemeval-models") as model_paths:
        embedder = benchlib.open_embedder(
            benchlib.install_model(model_paths, benchlib.embedding_model())
        )
    try:
        asked, counts = ask_all(items, embedder, args.rebuild)
    finally:
        embedder.close()
    modes = {mode: table(asked, mode) for mode in MODES}
    print_tables(modes)
    deep = {
        route: {
            "median_rank": statistics.median(
                r for a in asked if (r := a.deep_rank[route]) is not None
            )
            if any(a.deep_rank[route] is not None for a in asked)
            else None,
            "missing_in_top_100": sum(a.deep_rank[route] is None for a in asked),
        }
        for route in ("semantic", "keyword")
    }
    crowd = crowd_summary(asked)
    print(f"\ncounts: {counts}")
    print(f"first evidence in the deep lists (limit {DEEP}): {deep}")
    print(f"semantic hits above the evidence (top {LIMIT}): {crowd}")
    got = {
        "hybrid@5": modes["hybrid"]["overall"]["R@5"],
        "semantic@5": modes["semantic"]["overall"]["R@5"],
        "semantic@10": modes["semantic"]["overall"]["R@10"],
    }
    ok = all(got[key] >= goal for key, goal in GOALS.items())
    print(
        f"{verdict(ok)}: hybrid R@5 {got['hybrid@5']:.3f} (goal {GOALS['hybrid@5']}), semantic "
        f"R@5 {got['semantic@5']:.3f} / R@10 {got['semantic@10']:.3f} (goal {GOALS['semantic@5']})"
    )
    data = {
        "counts": counts,
        "modes": modes,
        "deep_lists": deep,
        "semantic_crowd": crowd,
        "rows": [
            {
                "qid": a.qid,
                "type": a.qtype,
                "evidence": len(a.evidence),
                "deep_rank": a.deep_rank,
                **{f"{mode}_R@5": recall_any(a.top[mode], a.evidence, 5) for mode in MODES},
            }
            for a in asked
        ],
        "acceptance": {
            "criterion": "hybrid R@5 >= 0.93, semantic R@5 and R@10 >= 0.70 "
            "(recall_any, turn level)",
            "goals": GOALS,
            "measured": got,
            "pass": ok,
        },
    }
    name = f"longmemeval_recall.{args.tag}" if args.tag else "longmemeval_recall"
    benchlib.write_result(name, data, quick=args.quick)


if __name__ == "__main__":
    main()
