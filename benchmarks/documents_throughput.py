"""Document indexing throughput with embeddings, as a ratio to raw embedding of the same chunks.

LoCoMo's conversations are written as dated Markdown notes (one file per
session); ``index_collection`` indexes them into a fresh profile with the
project's ``Embedder`` (scan, read, chunk, embed in batches of 32 per file,
SQLite + FTS5 + hnswlib), and the very texts it embeds (``embed_text`` of
each chunk) are embedded by the same ``Embedder`` in one call, the fastest
way the model can take them.  The two alternate, in swapped order each
round, in one process; the result is the ratio of medians, raw time /
index time.  Time spent inside the embedder during indexing is measured
too, to split model time from everything else.

(``import_throughput.py`` compares the ``Embedder`` with plain
llama-cpp-python; this one compares indexing with the ``Embedder``.)

Acceptance: ratio >= 0.85.

    .venv/bin/python benchmarks/documents_throughput.py [--quick]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import benchlib
import documents_notes as dn
import numpy as np
from benchlib import verdict

from agenvoy_desktop.llm.embedder import Embedder
from agenvoy_desktop.rag.chunking import chunk_document
from agenvoy_desktop.rag.indexer import embed_text, index_collection
from agenvoy_desktop.rag.readers import read_document

ACCEPT_RATIO = 0.85


def sizes(quick: bool) -> tuple[int, int]:
    """(chunks at least, rounds)."""
    return (40, 1) if quick else (450, 3)


class TimedEmbedder:
    """The real embedder, with the time spent in ``embed`` added up."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_path = inner.model_path
        self.dim = inner.dim
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - start

    def submit(self, texts: Sequence[str]) -> Future[np.ndarray]:
        future: Future[np.ndarray] = Future()
        future.set_result(self.embed(texts))
        return future


def write_corpus(folder: Path, min_chunks: int) -> tuple[list[str], int]:
    """Notes of whole LoCoMo sessions until *min_chunks* chunks; (embedded texts, files)."""
    texts: list[str] = []
    files = 0
    for conv in benchlib.load_locomo():
        notes = dn.write_notes(conv, folder / conv.sample_id)
        for name in sorted(notes.lines):
            file = notes.folder / name
            if len(texts) >= min_chunks:
                file.unlink()
                continue
            chunks = chunk_document(read_document(file, f"{conv.sample_id}/{name}"))
            texts += [embed_text(c) for c in chunks]
            files += 1
        if len(texts) >= min_chunks:
            break
    return texts, files


def run_index(embedder: TimedEmbedder, notes: Path, expected: int) -> tuple[float, float]:
    """(wall seconds, seconds inside the embedder) of one full index in a fresh profile."""
    with benchlib.temp_profile("doc-throughput") as paths:
        collection = dn.add_collection(paths, "notes", [notes])
        embedder.seconds = 0.0
        start = time.perf_counter()
        report = index_collection(paths, collection, embedder)
        seconds = time.perf_counter() - start
    assert report.chunks == expected, (report.chunks, expected)
    return seconds, embedder.seconds


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    min_chunks, rounds = sizes(args.quick)
    model = benchlib.embedding_model()
    times: dict[str, list[float]] = {"index": [], "index_embed_part": [], "raw": []}
    with tempfile.TemporaryDirectory(prefix="doc-notes-") as tmp:
        notes = Path(tmp)
        texts, files = write_corpus(notes, min_chunks)
        print(f"{files} notes, {len(texts)} chunks, {sum(map(len, texts)) / len(texts):.0f} chars")
        inner = benchlib.open_embedder(model)
        embedder = TimedEmbedder(inner)
        try:
            inner.embed(texts[:16])
            for number in range(rounds):
                order = ("index", "raw") if number % 2 == 0 else ("raw", "index")
                for what in order:
                    if what == "index":
                        seconds, in_embed = run_index(embedder, notes, len(texts))
                        times["index"].append(seconds)
                        times["index_embed_part"].append(in_embed)
                    else:
                        start = time.perf_counter()
                        inner.embed(texts)
                        times["raw"].append(time.perf_counter() - start)
                print(
                    f"  round {number + 1}: "
                    + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items())
                )
        finally:
            inner.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["raw"] / med["index"]
    ok = ratio >= ACCEPT_RATIO
    n = len(texts)
    for name, seconds in med.items():
        print(f"{name:18s} median {seconds:.2f} s  ({n / seconds:.1f} chunks/s)")
    overhead = (med["index"] - med["index_embed_part"]) / med["index"]
    print(f"outside the embedder during indexing: {overhead:.1%} of index time")
    print(
        f"{verdict(ok)}: indexing / raw embedding throughput = {ratio:.3f} (need >= {ACCEPT_RATIO})"
    )
    benchlib.write_result(
        "documents_throughput",
        {
            "files": files,
            "chunks": n,
            "mean_chunk_chars": round(sum(map(len, texts)) / n),
            "rounds": rounds,
            "embedder_threads": inner.n_threads,
            "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
            "median_s": {k: round(v, 3) for k, v in med.items()},
            "chunks_per_s": {k: round(n / v, 2) for k, v in med.items()},
            "outside_embedder_share": round(overhead, 4),
            "acceptance": {
                "criterion": f"indexing throughput >= {ACCEPT_RATIO} x raw embedding (same run)",
                "ratio": round(ratio, 4),
                "pass": ok,
            },
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
