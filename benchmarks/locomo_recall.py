"""Retrieval quality on LoCoMo: turn-level recall@k of search_chat_history per mode.

Each of the 10 LoCoMo conversations is imported as one session through
``MemoryStore.import_messages`` (speaker_a = user, speaker_b = assistant,
content ``"<speaker>: <text>"`` plus ``[shares <blip caption>]`` for photo
turns, one timestamp per LoCoMo session + 5 s per turn, ``ref`` = dia_id), with
the real MiniLM embedder and a history limit large enough that nothing is
compacted.  Every question of categories 1-4 is asked in its conversation's
session (scope = session) in each mode, top 10; recall@k = the fraction of
the question's evidence turns among the top-k hits, averaged over questions.

Then the fusion is explored offline on deeper rankings (the same semantic and
keyword routes, limit 100): RRF constant k, candidate depth and per-route
weights, to say which change to ``core/search.py`` makes hybrid beat both.

Acceptance: hybrid recall@10 > semantic and > keyword (overall).

    .venv/bin/python benchmarks/locomo_recall.py [--quick]
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import benchlib
from benchlib import Stopwatch, fmt_stats, verdict

import agenvoy_desktop.core.search as search_mod
from agenvoy_desktop.core.search import MODES, Hit, Mode, SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import local_date
from agenvoy_desktop.operations.search import run_search
from agenvoy_desktop.paths import AppPaths

KS = (1, 5, 10)
LIMIT = 10
DEEP = 100
CATEGORIES = (1, 2, 3, 4)
_SHIPPED_WEIGHTS = getattr(search_mod, "HYBRID_WEIGHTS", (1.0, 1.0))
CURRENT_FUSION = {
    "k": search_mod.RRF_K,
    "depth": 40,  # search_chat_history: max(limit * 4, 40)
    "w_sem": float(_SHIPPED_WEIGHTS[0]),
    "w_kw": float(_SHIPPED_WEIGHTS[1]),
}
RRF_KS = (1, 3, 5, 10, 20, 30, 60, 100)
DEPTHS = (10, 20, 40, 100)
SEM_WEIGHTS = (0.25, 0.35, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
# (RRF k, semantic weight, neighbour sum) re-run through the real hybrid route (keyword
# weight 1): the round-1 fusion, the round-2 one without the neighbour sum, and as shipped.
VERIFY = ((1, 0.75, False), (3, 0.5, False), (3, 0.5, True))


@dataclass(slots=True)
class Asked:
    """One question with the refs each route returned, best first."""

    category: int
    conversation: int  # index in the LoCoMo file, for the held-out check
    evidence: frozenset[str]
    top: dict[str, list[str | None]]  # mode -> refs of the top LIMIT hits
    deep_sem: list[Hit]
    deep_kw: list[Hit]


def recall(refs: Sequence[str | None], evidence: frozenset[str], k: int) -> float:
    return len(evidence & set(refs[:k])) / len(evidence)


def summarize(rows: Sequence[tuple[int, Sequence[str | None], frozenset[str]]]) -> dict[str, Any]:
    """recall@k overall and per category from (category, ranked, evidence) rows."""
    return benchlib.recall_by_category(rows, recall, KS)


# -- import and ask -------------------------------------------------------------------------
def import_all(store: MemoryStore, convs: Sequence[benchlib.Conversation]) -> dict[str, Any]:
    n = 0
    with Stopwatch() as sw:
        for conv in convs:
            messages = benchlib.conversation_messages(conv)
            store.import_messages(messages, conv.session_id, title=conv.sample_id)
            n += len(messages)
    for conv in convs:
        info = store.info(conv.session_id)
        assert info.vectors == info.history_messages == len(conv.turns), "nothing may be compacted"
    print(f"imported {n:,} turns in {sw.seconds:.1f} s ({n / sw.seconds:.0f} msg/s, embedded)")
    return {"messages": n, "import_s": round(sw.seconds, 2)}


def refs_of(hits: Sequence[Hit]) -> list[str | None]:
    return [h.item.message.ref for h in hits]


def asked_on(conv: benchlib.Conversation) -> dt.date:
    """The day a question is asked: the day after the conversation's last message."""
    return local_date(max(turn.time_ns for turn in conv.turns)) + dt.timedelta(days=1)


def ask(
    store: MemoryStore, conv: benchlib.Conversation, question: benchlib.Question, index: int
) -> Asked:
    today = asked_on(conv)

    def run(mode: Mode, limit: int) -> list[Hit]:
        # as `agenvoy-desktop search` asks: a named past time ("in May 2023") is searched too
        query = SearchQuery(question.question, mode=mode, limit=limit, session_id=conv.session_id)
        return run_search(store, query, today).result.hits

    return Asked(
        category=question.category,
        conversation=index,
        evidence=frozenset(question.evidence),
        top={mode: refs_of(run(mode, LIMIT)) for mode in MODES},
        deep_sem=run("semantic", DEEP),
        deep_kw=run("keyword", DEEP),
    )


def selected_questions(conv: benchlib.Conversation, quick: bool) -> list[benchlib.Question]:
    """Categories 1-4 (every 5th with --quick)."""
    questions = [q for q in conv.questions if q.category in CATEGORIES]
    return questions[::5] if quick else questions


def ask_all(
    store: MemoryStore, convs: Sequence[benchlib.Conversation], quick: bool
) -> tuple[list[Asked], dict[str, int]]:
    asked: list[Asked] = []
    counts = {"questions": 0, "asked": 0, "no_valid_evidence": 0, "dropped_evidence_ids": 0}
    for index, conv in enumerate(convs):
        questions = selected_questions(conv, quick)
        for question in questions:
            counts["questions"] += 1
            counts["dropped_evidence_ids"] += len(question.dropped_evidence)
            if not question.evidence:
                counts["no_valid_evidence"] += 1
                continue
            asked.append(ask(store, conv, question, index))
        print(f"  {conv.session_id}: {len(questions)} questions")
    counts["asked"] = len(asked)
    return asked, counts


# -- fusion experiments --------------------------------------------------------------------------
def weighted_rrf(
    sem: Sequence[Hit], kw: Sequence[Hit], *, k: int, depth: int, w_sem: float, w_kw: float
) -> list[str | None]:
    """RRF with per-route weights, score = w / (k + rank), ties in first-seen order
    (the same arithmetic as ``search.fuse``; checked against the real route)."""
    scores: dict[int, float] = {}
    refs: dict[int, str | None] = {}
    for weight, ranking in ((w_sem, sem), (w_kw, kw)):
        for rank, hit in enumerate(ranking[:depth], start=1):
            scores[hit.item.rowid] = scores.get(hit.item.rowid, 0.0) + weight / (k + rank)
            refs[hit.item.rowid] = hit.item.message.ref
    order = sorted(scores, key=lambda r: scores[r], reverse=True)[:LIMIT]
    return [refs[r] for r in order]


Row = tuple[int, Sequence[str | None], frozenset[str]]


def fusion_rows(asked: Sequence[Asked], **cfg: Any) -> list[Row]:
    return [(a.category, weighted_rrf(a.deep_sem, a.deep_kw, **cfg), a.evidence) for a in asked]


def fusion_grid(asked: Sequence[Asked]) -> list[dict[str, Any]]:
    """Every (RRF k, depth, semantic weight) with its overall recall, best first."""
    grid: list[dict[str, Any]] = []
    for k in RRF_KS:
        for depth in DEPTHS:
            for w_sem in SEM_WEIGHTS:
                cfg = {"k": k, "depth": depth, "w_sem": w_sem, "w_kw": 1.0}
                overall = summarize(fusion_rows(asked, **cfg))["overall"]
                grid.append({**cfg, **{f"recall@{x}": overall[f"recall@{x}"] for x in KS}})
    grid.sort(key=lambda g: (g["recall@10"], g["recall@5"], g["recall@1"]), reverse=True)
    return grid


def held_out_check(asked: Sequence[Asked]) -> list[dict[str, Any]]:
    """Two folds over the conversations (even / odd): tune the fusion on one half,
    measure on the other.  The shipped settings were chosen on all ten; this says
    whether hybrid still beats both routes on questions the choice never saw."""
    folds = []
    for tune_parity in (0, 1):
        tune = [a for a in asked if a.conversation % 2 == tune_parity]
        test = [a for a in asked if a.conversation % 2 != tune_parity]
        best = fusion_grid(tune)[0]
        cfg = {key: best[key] for key in ("k", "depth", "w_sem", "w_kw")}

        def r10(rows: Sequence[Row]) -> float:
            return float(summarize(rows)["overall"]["recall@10"])

        folds.append(
            {
                "tuned_on": sorted({a.conversation for a in tune}),
                "measured_on": sorted({a.conversation for a in test}),
                "questions": len(test),
                "best_on_tune_half": cfg,
                "recall@10": {
                    "hybrid_as_shipped": r10(
                        [(a.category, a.top["hybrid"], a.evidence) for a in test]
                    ),
                    "fusion_tuned_on_other_half": r10(fusion_rows(test, **cfg)),
                    "semantic": r10([(a.category, a.top["semantic"], a.evidence) for a in test]),
                    "keyword": r10([(a.category, a.top["keyword"], a.evidence) for a in test]),
                },
            }
        )
    return folds


def explore_fusion(asked: Sequence[Asked]) -> dict[str, Any]:
    """Grid over RRF k, depth and semantic weight; recall@10 overall for each."""
    grid = fusion_grid(asked)
    current_rows = fusion_rows(asked, **CURRENT_FUSION)
    agree = sum(
        1 for a, (_, refs, _) in zip(asked, current_rows, strict=True) if a.top["hybrid"] == refs
    )
    by_k = [g for g in grid if g["depth"] == CURRENT_FUSION["depth"] and g["w_sem"] == 1.0]
    return {
        "current_config": CURRENT_FUSION,
        "by_k_at_current_depth": sorted(by_k, key=lambda g: g["k"]),
        "grid": grid,
        "simulated_current": summarize(current_rows)["overall"],
        "simulation_matches_hybrid": round(agree / max(len(asked), 1), 4),
        "best": grid[:10],
        "equal_weight_best": [g for g in grid if g["w_sem"] == 1.0][:5],
        "grid_size": len(grid),
        "held_out": held_out_check(asked),
    }


def best_summary(asked: Sequence[Asked], cfg: dict[str, Any]) -> dict[str, Any]:
    keys = ("k", "depth", "w_sem", "w_kw")
    return summarize(fusion_rows(asked, **{key: cfg[key] for key in keys}))


# -- main ------------------------------------------------------------------------------------
@contextmanager
def fusion_settings(k: int, w_sem: float, neighbours: bool = True) -> Iterator[None]:
    """Make the real hybrid route fuse with RRF constant *k* and semantic weight *w_sem*
    (and without the neighbour sum unless *neighbours*)."""
    original = search_mod.fuse
    saved_weights = getattr(search_mod, "HYBRID_WEIGHTS", None)
    saved_neighbours = getattr(search_mod, "CHAT_NEIGHBOURS", None)
    if saved_neighbours is not None and not neighbours:
        search_mod.CHAT_NEIGHBOURS = type(saved_neighbours)(0.0, 0.0, 0.0)

    def patched(rankings: Sequence[Sequence[Hit]], *_args: Any, **_kw: Any) -> list[Hit]:
        return original(rankings, k, (w_sem, 1.0))

    search_mod.fuse = patched
    if saved_weights is not None:
        search_mod.HYBRID_WEIGHTS = (w_sem, 1.0)
    try:
        yield
    finally:
        search_mod.fuse = original
        if saved_weights is not None:
            search_mod.HYBRID_WEIGHTS = saved_weights
        if saved_neighbours is not None:
            search_mod.CHAT_NEIGHBOURS = saved_neighbours


def verify_settings(
    store: MemoryStore, convs: Sequence[benchlib.Conversation], quick: bool
) -> list[dict[str, Any]]:
    """Recall and search time of the real hybrid route (search_chat_history) under each
    of :data:`VERIFY`, overall and per half of the conversations (even / odd, as the
    held-out check).  The settings take turns question by question, so a drift in the
    machine's speed reaches them alike."""
    rows: dict[int, list[Row]] = {i: [] for i in range(len(VERIFY))}
    halves: dict[int, dict[str, list[Row]]] = {i: {"even": [], "odd": []} for i in rows}
    seconds: dict[int, list[float]] = {i: [] for i in rows}
    for index, conv in enumerate(convs):
        for question in selected_questions(conv, quick):
            if not question.evidence:
                continue
            query = SearchQuery(
                question.question, mode="hybrid", limit=LIMIT, session_id=conv.session_id
            )
            for number, (k, w_sem, neighbours) in enumerate(VERIFY):
                with fusion_settings(k, w_sem, neighbours):
                    started = time.perf_counter()
                    hits = search_chat_history(store, query).hits
                    seconds[number].append(time.perf_counter() - started)
                row = (question.category, refs_of(hits), frozenset(question.evidence))
                rows[number].append(row)
                halves[number]["odd" if index % 2 else "even"].append(row)
    return [
        {
            "rrf_k": k,
            "w_sem": w_sem,
            "w_kw": 1.0,
            "depth": "shipped",
            "neighbour_sum": neighbours,
            "recall": summarize(rows[number]),
            "recall@10_by_half": {
                half: summarize(part)["overall"]["recall@10"]
                for half, part in halves[number].items()
            },
            "search_ms": benchlib.stats_ms(seconds[number]),
        }
        for number, (k, w_sem, neighbours) in enumerate(VERIFY)
    ]


def run(paths: AppPaths, quick: bool) -> dict[str, Any]:
    convs = benchlib.load_locomo()
    model = benchlib.install_model(paths, benchlib.embedding_model())
    embedder = benchlib.open_embedder(model)
    store = MemoryStore(paths, embedder, max_history_bytes=1 << 30)
    try:
        imported = import_all(store, convs)
        with Stopwatch() as sw:
            asked, counts = ask_all(store, convs, quick)
        fusion = explore_fusion(asked)
        verified = verify_settings(store, convs, quick)
    finally:
        store.close()
        embedder.close()
    modes = {
        mode: summarize([(a.category, a.top[mode], a.evidence) for a in asked]) for mode in MODES
    }
    best = fusion["best"][0]
    return {
        "import": imported,
        "counts": counts,
        "ask_s": round(sw.seconds, 1),
        "modes": modes,
        "fusion": fusion,
        "best_fusion_by_category": best_summary(asked, best),
        "verified_rrf_k_changes": verified,
    }


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--tag", default="", help="suffix of the result file")
    args = ap.parse_args()
    with benchlib.temp_profile("locomo") as paths:
        data = run(paths, args.quick)
    modes, fusion = data["modes"], data["fusion"]
    benchlib.print_recall_table(KS, modes)
    r10 = {mode: modes[mode]["overall"]["recall@10"] for mode in MODES}
    ok = r10["hybrid"] > r10["semantic"] and r10["hybrid"] > r10["keyword"]
    best = fusion["best"][0]
    print(f"\ncounts: {data['counts']}")
    print(f"fusion simulation reproduces hybrid on {fusion['simulation_matches_hybrid']:.1%}")
    print(f"best fusion: {best}")
    print(f"best equal-weight: {fusion['equal_weight_best'][0]}")
    for verified in data["verified_rrf_k_changes"]:
        vr = verified["recall"]["overall"]
        halves = verified["recall@10_by_half"]
        print(
            f"real hybrid route, RRF k={verified['rrf_k']}, weights "
            f"({verified['w_sem']}, 1.0), depth as shipped, neighbour sum "
            f"{'on' if verified['neighbour_sum'] else 'off'}: "
            + "  ".join(f"R@{x} {vr[f'recall@{x}']:.4f}" for x in KS)
            + f"  (R@10 even {halves['even']:.4f} / odd {halves['odd']:.4f}; "
            f"search {fmt_stats(verified['search_ms'])})"
        )
    print(f"shipped fusion: {CURRENT_FUSION}")
    for fold in fusion["held_out"]:
        cells = "  ".join(f"{name} {value:.4f}" for name, value in fold["recall@10"].items())
        print(
            f"held out: tuned on conversations {fold['tuned_on']}, measured on "
            f"{fold['measured_on']} ({fold['questions']} questions): R@10 {cells}"
        )
    print(f"RRF k at the shipped depth {CURRENT_FUSION['depth']}, equal weights:")
    for g in fusion["by_k_at_current_depth"]:
        cells = "  ".join(f"R@{x} {g[f'recall@{x}']:.4f}" for x in KS)
        print(f"  k={g['k']:<4d} {cells}")
    print(
        f"{verdict(ok)}: recall@10 hybrid {r10['hybrid']:.4f} vs semantic {r10['semantic']:.4f}"
        f" / keyword {r10['keyword']:.4f}"
    )
    data["acceptance"] = {
        "criterion": "hybrid recall@10 > semantic and > keyword (overall, categories 1-4)",
        "recall@10": r10,
        "pass": ok,
        "best_fusion_pass": best["recall@10"] > max(r10["semantic"], r10["keyword"]),
        "verified_rrf_k": {
            f"k={v['rrf_k']} w_sem={v['w_sem']} neighbours={v['neighbour_sum']}": {
                "recall@10": v["recall"]["overall"]["recall@10"],
                "pass": v["recall"]["overall"]["recall@10"] > max(r10["semantic"], r10["keyword"]),
            }
            for v in data["verified_rrf_k_changes"]
        },
    }
    name = f"locomo_recall.{args.tag}" if args.tag else "locomo_recall"
    benchlib.write_result(name, data, quick=args.quick)


if __name__ == "__main__":
    main()
