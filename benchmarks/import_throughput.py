"""Import throughput with embeddings, relative to raw llama-cpp-python embedding.

Two imports are measured: one session of all messages (``MemoryStore.import_messages``)
and the bulk import of the CLI and the window (``operations.bulk_import.run_import``)
with the same messages as conversations of ``PER_CONVERSATION`` (an export of many
short chats, as LongMemEval's 50 sessions of ~10 messages), each against the raw
embedding of exactly the texts it embeds.

The same ~3,000 real messages (LoCoMo turns, ``"<speaker>: <text>"``) are
(a) imported with ``MemoryStore.import_messages`` into a fresh profile with
the project's ``Embedder`` (history.json + archive + vectors + index), and
(b) the very texts that import embeds (each message with the head of the
previous one, :func:`~agenvoy_desktop.core.embedding.embedding_parts`)
embedded by a plain ``llama_cpp.Llama(embedding=True).embed(texts)`` with
settings equivalent to the Embedder's (n_ctx = the model's 512, n_batch =
n_ubatch = 512, all cores, flash attention as llama.cpp's default resolves
it, normalised; ``Llama``'s own default flash_attn=False is ~3x slower
here).  The two alternate for a few rounds (the Embedder alone is timed too,
to split model time from store time); the result is the ratio of medians,
raw time / import time.

Acceptance: both ratios >= 0.85.

    .venv/bin/python benchmarks/import_throughput.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import benchlib
import llama_cpp
from benchlib import verdict

from agenvoy_desktop.core.embedding import embedding_parts
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.llm.embedder import BATCH_TOKENS, Embedder
from agenvoy_desktop.operations.bulk_import import ImportPlan, PlannedConversation
from agenvoy_desktop.operations.bulk_import import run_import as run_bulk_import

ACCEPT_RATIO = 0.85
PER_CONVERSATION = 10


def sizes(quick: bool) -> tuple[int, int]:
    """(messages, rounds)."""
    return (600, 2) if quick else (3000, 3)


def corpus(n: int) -> list[tuple[str, str, str]]:
    """(role, content, dia_id) of the first *n* LoCoMo turns."""
    out: list[tuple[str, str, str]] = []
    for conv in benchlib.load_locomo():
        for turn in conv.turns:
            role = "user" if turn.speaker == conv.speaker_a else "assistant"
            out.append((role, f"{turn.speaker}: {turn.text}", f"{conv.sample_id}/{turn.dia_id}"))
            if len(out) == n:
                return out
    return out


def raw_llama(model: Path) -> Any:
    """llama-cpp-python's own embedding path, configured like the Embedder."""
    threads = os.cpu_count() or 1
    return llama_cpp.Llama(
        model_path=str(model),
        embedding=True,
        n_ctx=0,  # the model's training context (512), as the Embedder uses
        n_batch=BATCH_TOKENS,
        n_ubatch=BATCH_TOKENS,
        n_threads=threads,
        n_threads_batch=threads,
        flash_attn=True,  # the Embedder's context uses llama.cpp's default (auto = on, on CPU)
        verbose=False,
    )


def as_messages(rows: Sequence[tuple[str, str, str]]) -> list[Message]:
    t0 = 1_700_000_000 * 10**9
    return [
        Message(new_message_id(), role, content, t0 + i * 10**9, ref=ref)
        for i, (role, content, ref) in enumerate(rows)
    ]


def embedded_texts(rows: Sequence[tuple[str, str, str]]) -> list[str]:
    """Exactly the texts an import embeds: each message's parts with its previous message's head.

    The raw baseline embeds these too, so the ratio compares the same work
    (the context head makes them about twice as long as the bare contents).
    """
    messages = as_messages(rows)
    texts: list[str] = []
    for index, message in enumerate(messages):
        texts += embedding_parts(message, messages[index - 1] if index else None)
    return texts


def chunks(rows: Sequence[tuple[str, str, str]]) -> list[Sequence[tuple[str, str, str]]]:
    """The rows as conversations of ``PER_CONVERSATION`` messages."""
    return [rows[i : i + PER_CONVERSATION] for i in range(0, len(rows), PER_CONVERSATION)]


def bulk_texts(rows: Sequence[tuple[str, str, str]]) -> list[str]:
    """What the bulk import embeds: each conversation's texts (no head across conversations)."""
    return [text for chunk in chunks(rows) for text in embedded_texts(chunk)]


def run_bulk(embedder: Embedder, rows: Sequence[tuple[str, str, str]]) -> float:
    """The bulk import's own path, timed from the plan on (the files are read before)."""
    plan = ImportPlan(
        [
            PlannedConversation(Path("bench"), "bench", f"chat {i}", f"bulk-{i}", as_messages(c))
            for i, c in enumerate(chunks(rows))
        ]
    )
    with benchlib.temp_profile("import-bulk") as paths:
        store = MemoryStore(paths, embedder)
        try:
            start = time.perf_counter()
            report = run_bulk_import(store, plan)
            seconds = time.perf_counter() - start
            assert report.added == len(rows), report
        finally:
            store.close()
    return seconds


def run_import(embedder: Embedder, rows: Sequence[tuple[str, str, str]]) -> float:
    messages = as_messages(rows)
    with benchlib.temp_profile("import") as paths:
        store = MemoryStore(paths, embedder)
        try:
            start = time.perf_counter()
            sid = store.import_messages(messages, title="import benchmark")
            seconds = time.perf_counter() - start
            info = store.info(sid)
            assert info.vectors == len(messages), info
        finally:
            store.close()
    return seconds


def timed(job: Callable[[], object]) -> float:
    start = time.perf_counter()
    job()
    return time.perf_counter() - start


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    n, rounds = sizes(args.quick)
    rows = corpus(n)
    texts = embedded_texts(rows)
    texts_bulk = bulk_texts(rows)
    with benchlib.temp_profile("import-model") as paths:
        model = benchlib.install_model(paths, benchlib.embedding_model())
        llm = raw_llama(model)  # before any worker thread exists (verbose=False swaps fds)
        embedder = benchlib.open_embedder(model)
        llm.embed(texts[:64], normalize=True)  # warm up both
        embedder.embed(texts[:64])
        times: dict[str, list[float]] = {
            "import": [],
            "raw_llama": [],
            "embedder_only": [],
            "bulk_import": [],
            "raw_llama_bulk": [],
        }
        try:
            for number in range(rounds):
                times["import"].append(run_import(embedder, rows))
                times["raw_llama"].append(timed(lambda: llm.embed(texts, normalize=True)))
                times["embedder_only"].append(timed(lambda: embedder.embed(texts)))
                times["bulk_import"].append(run_bulk(embedder, rows))
                times["raw_llama_bulk"].append(timed(lambda: llm.embed(texts_bulk, normalize=True)))
                print(
                    f"  round {number + 1}: "
                    + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items())
                )
        finally:
            embedder.close()
            llm.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["raw_llama"] / med["import"]
    ratio_embedder = med["raw_llama"] / med["embedder_only"]
    ratio_bulk = med["raw_llama_bulk"] / med["bulk_import"]
    ok = ratio >= ACCEPT_RATIO and ratio_bulk >= ACCEPT_RATIO
    for name, seconds in med.items():
        print(f"{name:14s} median {seconds:.2f} s  ({n / seconds:.0f} msg/s)")
    print(
        f"Embedder alone vs raw llama-cpp-python: {ratio_embedder:.3f}; "
        f"store overhead on top of the Embedder: "
        f"{(med['import'] - med['embedder_only']) / med['import']:.1%} of import time"
    )
    print(
        f"{verdict(ok)}: import throughput / raw embedding throughput = {ratio:.3f}; "
        f"bulk import ({len(chunks(rows))} conversations) {ratio_bulk:.3f} (need >= {ACCEPT_RATIO})"
    )
    benchlib.write_result(
        "import_throughput",
        {
            "messages": n,
            "rounds": rounds,
            "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
            "median_s": {k: round(v, 3) for k, v in med.items()},
            "messages_per_s": {k: round(n / v, 1) for k, v in med.items()},
            "ratio_embedder_only_vs_raw": round(ratio_embedder, 4),
            "conversations_in_bulk": len(chunks(rows)),
            "ratio_bulk_vs_raw": round(ratio_bulk, 4),
            "acceptance": {
                "criterion": f"import throughput >= {ACCEPT_RATIO} x raw llama-cpp-python, "
                "one session and bulk",
                "ratio": round(ratio, 4),
                "ratio_bulk": round(ratio_bulk, 4),
                "pass": ok,
            },
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
