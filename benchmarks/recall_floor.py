"""Calibrate proactive recall's relevance floor: hit rate against false injections.

Setup as ``memory_qa.py`` (one earlier session of 60 LoCoMo turns per fact of
``memory_facts.FACTS``, the fact said once by the user, imported with the
real MiniLM embedder), but no chat model: each question only runs the
recall search (``agent.recall.recall_candidates``) from a new session, and
the floor is applied offline, so a whole grid costs one search per question.

- **hit rate**: facts whose planted message lands in the recall block
  (after the floor and the block's item/character budget);
- **false injection**: unrelated questions (``UNRELATED``) and small talk
  (``CHITCHAT``) whose block is not empty; with ``--unknown``, questions about
  the user's own life whose answer was never told (``UNKNOWN_FACTS``), the
  hardest negatives: they share "my", "code", "son" with planted facts.

``--everything`` plants every fact set in one profile (60 earlier sessions)
and asks every question and negative twice, with CJK questions searched as
one phrase per run (before 2026-12-02) and also bigram by bigram
(``fts_text.CJK_BIGRAM_TERMS``), scored with the shipped floor per query
kind (``results/recall_floor_everything.json``).

The shipped floor (``recall.floor_for`` the embedding model: MiniLM's, or
e5's under ``AGENVOY_BENCH_EMBEDDING=e5``) is reported first, then one-parameter
sweeps around it; ``--everything`` also scores whole floors per fact set
(``FLOORS_BY_SET``).  Results: ``benchmarks/results/recall_floor.json``.

    .venv/bin/python benchmarks/recall_floor.py [--facts N | --heldout | --named | --unknown |
        --everything]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib
from memory_facts import (
    CHITCHAT,
    FACTS,
    HELDOUT_FACTS,
    HELDOUT_UNRELATED,
    NAMED_FACTS,
    NAMED_UNRELATED,
    UNKNOWN_FACTS,
    UNRELATED,
    Fact,
)
from memory_qa import plant_facts

from agenvoy_desktop.agent.recall import (
    DEFAULT_FLOOR,
    E5_FLOOR,
    QueryKind,
    RecallFloor,
    RecallItem,
    apply_floor,
    floor_for,
    format_block,
    query_kind,
    recall_candidates,
)
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.lifecycle import remove_session
from agenvoy_desktop.core.retrieval import fts_text
from agenvoy_desktop.paths import app_paths
from agenvoy_desktop.settings import Settings

WINDOW = Settings().memory.window_messages
T = TypeVar("T")
SWEEPS: dict[str, list[float]] = {
    "personal_cosine": [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6],
    "personal_keyword": [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0],
    "personal_cosine_share": [0.0, 0.2, 0.3, 0.4, 0.5],
    "personal_cosine_alone": [0.6, 0.65, 0.7, 0.75, 0.8, 0.9],
    "general_score": [0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0],
    "general_min_query_terms": [1, 2, 3],
    "cjk_keyword": [0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5],
    "named_keyword": [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0],
}


ALTERNATIVES: dict[str, dict[str, float]] = {
    "strict personal": {
        "personal_cosine": 0.5,
        "personal_cosine_share": 0.4,
        "personal_keyword": 0.7,
    },
}
"""Whole floors scored beside the shipped one in every mode (several values at once)."""


@dataclasses.dataclass(slots=True)
class Asked:
    """One question's recall candidates (no floor applied yet)."""

    text: str
    kind: str  # "fact" | "unrelated" | "chitchat"
    query_kind: QueryKind
    candidates: list[RecallItem]
    target: str | None = None  # the planted message id (facts)


def ask_all(
    services: AppServices,
    facts: Sequence[Fact],
    unrelated: Sequence[str],
    chitchat: Sequence[str],
) -> list[Asked]:
    planted = plant_facts(services, facts)
    store = services.store
    questions: list[tuple[str, str, str | None]] = [
        (p.fact.question, "fact", p.message_id) for p in planted
    ]
    questions += [(q, "unrelated", None) for q in unrelated]
    questions += [(q, "chitchat", None) for q in chitchat]
    asked: list[Asked] = []
    for text, kind, target in questions:
        sid = services.storage.run_sync(store.create_session, "ask")
        found = services.storage.run_sync(recall_candidates, store, sid, text, WINDOW)
        asked.append(Asked(text, kind, query_kind(text), found, target))
        services.storage.run_sync(remove_session, store, sid)
    return asked


def in_new_profile(ask: Callable[[AppServices], T]) -> T:
    """*ask* over a throw-away profile with the real MiniLM and no chat model."""
    with tempfile.TemporaryDirectory(prefix="recall-floor-") as tmp:
        paths = app_paths(Path(tmp) / "profile").ensure()
        embedder = benchlib.open_embedder(benchlib.install_model(paths, benchlib.embedding_model()))
        services = AppServices.open(paths, settings=Settings(), embedder=embedder)
        try:
            return ask(services)
        finally:
            services.close()


def ask_everything(services: AppServices) -> dict[str, list[Asked]]:
    """Every fact set planted together; each question asked with CJK runs searched as
    phrases only and with their bigrams too (:data:`fts_text.CJK_BIGRAM_TERMS`)."""
    planted = plant_facts(services, [*FACTS, *HELDOUT_FACTS, *NAMED_FACTS])
    questions: list[tuple[str, str, str | None]] = [
        (p.fact.question, "fact", p.message_id) for p in planted
    ]
    negatives = {
        "unrelated": [*UNRELATED, *HELDOUT_UNRELATED, *NAMED_UNRELATED],
        "chitchat": list(CHITCHAT),
        "unknown": list(UNKNOWN_FACTS),
    }
    questions += [(q, kind, None) for kind, texts in negatives.items() for q in texts]
    store = services.store
    asked: dict[str, list[Asked]] = {"phrase only": [], "bigrams too": []}
    for text, kind, target in questions:
        sid = services.storage.run_sync(store.create_session, "ask")
        for label, bigrams in (("phrase only", False), ("bigrams too", True)):
            fts_text.CJK_BIGRAM_TERMS = bigrams
            found = services.storage.run_sync(recall_candidates, store, sid, text, WINDOW)
            asked[label].append(Asked(text, kind, query_kind(text), found, target))
        fts_text.CJK_BIGRAM_TERMS = True
        services.storage.run_sync(remove_session, store, sid)
    return asked


def score_by_kind(asked: list[Asked]) -> dict[str, Any]:
    """The shipped floor's score for CJK questions, the others, and the negatives by kind.

    With ``AGENVOY_BENCH_EMBEDDING=e5`` "shipped" means the floor the app picks for e5.
    """
    floor = floor_for(benchlib.embedding_name())
    out: dict[str, Any] = {}
    for script in ("cjk", "other"):
        mine = [a for a in asked if (a.query_kind == "cjk") == (script == "cjk")]
        out[script] = {"n": len(mine), **score(mine, floor)}
        for kind in ("unrelated", "chitchat", "unknown"):
            group = [a for a in mine if a.kind == kind]
            out[script][f"false_injection_{kind}"] = score(group, floor)["false_injection"]
    return out


FLOORS_BY_SET: dict[str, RecallFloor] = {
    "MiniLM's floor": DEFAULT_FLOOR,
    "recall.E5_FLOOR": E5_FLOOR,
    "E5_FLOOR, personal cosine 0.87": dataclasses.replace(E5_FLOOR, personal_cosine=0.87),
}
"""Whole floors scored per fact set and kind of negative by ``--everything``."""


def score_by_set(asked: list[Asked]) -> dict[str, Any]:
    """Each floor's hit rate per fact set and false injection per kind of negative."""
    sets = {"main": FACTS, "held out": HELDOUT_FACTS, "named": NAMED_FACTS}
    questions = {name: {f.question for f in facts} for name, facts in sets.items()}
    out: dict[str, Any] = {}
    for label, floor in FLOORS_BY_SET.items():
        row: dict[str, float] = {}
        for name, texts in questions.items():
            row[f"hits {name}"] = score([a for a in asked if a.text in texts], floor)["hit_rate"]
        for kind in ("unrelated", "chitchat", "unknown"):
            group = [a for a in asked if a.kind == kind]
            row[f"false {kind}"] = score(group, floor)["false_injection"]
        out[label] = row
        print(f"{label}: {row}")
    return out


def run_everything() -> None:
    started = time.perf_counter()
    asked = in_new_profile(ask_everything)
    result: dict[str, Any] = {"seconds": 0.0}
    for label, rows in asked.items():
        result[label] = score_by_kind(rows)
        print(f"{label}: {result[label]}")
    result["by set"] = score_by_set(asked["bigrams too"])
    changed = [
        {"before": describe(a), "after": describe(b)}
        for a, b in zip(asked["phrase only"], asked["bigrams too"], strict=True)
        if describe(a)["shipped_block"] != describe(b)["shipped_block"]
    ]
    result["changed_blocks"] = changed
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(f"{len(changed)} blocks changed")
    benchlib.write_result("recall_floor_everything", result, quick=False)


def score(asked: list[Asked], floor: RecallFloor) -> dict[str, Any]:
    hits = injected = facts = others = extra = last = 0
    for a in asked:
        block = format_block(apply_floor(a.candidates, floor, kind=a.query_kind))
        if a.kind == "fact":
            facts += 1
            hits += a.target in block.message_ids
            extra += sum(1 for m in block.message_ids if m != a.target)
            last += bool(block.message_ids) and block.message_ids[-1] == a.target
        else:
            others += 1
            injected += bool(block.items)
    return {
        "hit_rate": round(hits / facts, 3) if facts else None,
        "false_injection": round(injected / others, 3) if others else None,
        "other_lines_per_fact_block": round(extra / facts, 2) if facts else None,
        "fact_is_last_line": round(last / facts, 3) if facts else None,
    }


def describe(a: Asked) -> dict[str, Any]:
    shipped = floor_for(benchlib.embedding_name())
    block = format_block(apply_floor(a.candidates, shipped, kind=a.query_kind))
    return {
        "question": a.text,
        "kind": a.kind,
        "query_kind": a.query_kind,
        "shipped_block": block.text,
        "candidates": [
            {
                "is_target": c.message_id == a.target,
                "cosine": None if c.cosine is None else round(c.cosine, 3),
                "coverage": round(c.coverage, 3),
                "terms": c.matched_terms,
                "text": c.text[:100],
            }
            for c in a.candidates
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=len(FACTS))
    parser.add_argument(
        "--heldout",
        action="store_true",
        help="score the shipped floor on the held-out facts and questions (no sweeps)",
    )
    parser.add_argument(
        "--named",
        action="store_true",
        help="score the shipped floor on questions that name people and places (no sweeps)",
    )
    parser.add_argument(
        "--unknown",
        action="store_true",
        help="sweep with questions about facts never told as the negatives",
    )
    parser.add_argument(
        "--everything",
        action="store_true",
        help="every fact set in one profile; CJK questions as phrases vs bigrams too",
    )
    args = parser.parse_args()
    if args.everything:
        run_everything()
        return
    if args.unknown:
        sets = (FACTS[: args.facts], UNKNOWN_FACTS, ())
    elif args.named:
        sets = (NAMED_FACTS, NAMED_UNRELATED, ())
    elif args.heldout:
        sets = (HELDOUT_FACTS, HELDOUT_UNRELATED, ())
    else:
        sets = (FACTS[: args.facts], UNRELATED, CHITCHAT)
    started = time.perf_counter()
    asked = in_new_profile(lambda services: ask_all(services, *sets))
    shipped = floor_for(benchlib.embedding_name())
    result: dict[str, Any] = {
        "facts": sum(a.kind == "fact" for a in asked),
        "unrelated": sum(a.kind == "unrelated" for a in asked),
        "chitchat": sum(a.kind == "chitchat" for a in asked),
        "shipped": {"floor": dataclasses.asdict(shipped), **score(asked, shipped)},
        "sweeps": {},
        "questions": [describe(a) for a in asked],
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(f"shipped floor {dataclasses.asdict(shipped)}: {result['shipped']}")
    result["alternatives"] = {}
    for label, values in ALTERNATIVES.items():
        scored = score(asked, dataclasses.replace(shipped, **values))
        result["alternatives"][label] = {"floor": values, **scored}
        print(f"{label} {values}: {scored}")
    if args.heldout:
        near = [a for a in asked if a.text in HELDOUT_UNRELATED[20:]]
        result["near_topic"] = score(near, shipped)
        print(f"near-topic questions only: {result['near_topic']}")
        benchlib.write_result("recall_floor_heldout", result, quick=False)
        return
    for name, values in SWEEPS.items():
        rows = []
        for value in values:
            floor = dataclasses.replace(shipped, **{name: value})
            rows.append({"value": value, **score(asked, floor)})
        result["sweeps"][name] = rows
        line = "  ".join(f"{r['value']}: {r['hit_rate']}/{r['false_injection']}" for r in rows)
        print(f"{name:>17} (hit/false) {line}")
    name = (
        "recall_floor_named"
        if args.named
        else "recall_floor_unknown"
        if args.unknown
        else "recall_floor"
    )
    benchlib.write_result(name, result, quick=False)


if __name__ == "__main__":
    main()
