"""Document collections at scale: search latency and worker memory at 100,000 chunks.

The collection: 10,000 dated Markdown notes of 72 turns each (~100,000
chunks), the turns drawn at random from LoCoMo with the speaker labels
swapped for other names (so the text is real conversation, recombined).
It is indexed by ``index_collection`` once and cached in
``.bench-cache/documents-100k`` while the recipe holds.

Vectors are NOT real embeddings of the chunks (embedding 100,000 chunks
takes hours on this machine).  A chunk's vector is the normalised mean of
the cached real MiniLM vectors of the LoCoMo turns it is made of
(``retrieval_lab.py`` caches them), or of random unit vectors when that
cache is absent; the result says which.  hnswlib's latency depends on the
graph more than on the values, but a mean-of-turns cloud is smoother than
real chunk embeddings, so treat semantic latency as indicative.
The index remembers the real model's name, so the real embedder finds it
current.

Measured:

* ``search_documents`` p50/p95 (wall and thread CPU) per mode over LoCoMo
  questions, modes interleaved query by query; the query vector is the real
  MiniLM embedding, computed beforehand (semantic and hybrid exclude it);
* the indexer's peak memory (``python -m agenvoy_desktop.rag.worker``, the
  foreground form of the child ``IndexJob`` runs, real MiniLM factory) on a
  no-op pass and on a pass that re-embeds a few edited files; and the peak
  of a process that opens the index and searches (real embedder loaded);
  peaks from ``wait4`` (ru_maxrss).

Acceptance: p95 keyword <= 30 ms, semantic <= 5 ms, hybrid <= 40 ms.

    .venv/bin/python benchmarks/documents_scale.py [--quick]
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import benchlib
import documents_notes as dn
import numpy as np
from benchlib import Stopwatch, stats_ms, verdict

import agenvoy_desktop.rag.index as index_mod
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION
from agenvoy_desktop.core.retrieval.planner import plan_match
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.rag.index import DocumentIndex
from agenvoy_desktop.rag.index_schema import SCHEMA_VERSION
from agenvoy_desktop.rag.indexer import index_collection
from agenvoy_desktop.rag.registry import CollectionRegistry
from agenvoy_desktop.rag.search import DOC_MODES, search_documents

ACCEPT_P95_MS = {"keyword": 30.0, "semantic": 5.0, "hybrid": 40.0}
LIMIT = 10
WARMUP = 30
SEED = 20261201
BUILD_VERSION = 1
TURNS_PER_FILE = 72
COLLECTION = "notes"
EDITED_FILES = 10
"""Files edited before the memory pass that re-embeds (real MiniLM, ~10 chunks each)."""

_NAMES = (
    "Aaron",
    "Abigail",
    "Adam",
    "Aisha",
    "Alan",
    "Alice",
    "Amara",
    "Amir",
    "Andrea",
    "Angela",
    "Anna",
    "Arjun",
    "Ava",
    "Ben",
    "Bianca",
    "Brian",
    "Camila",
    "Carlos",
    "Carmen",
    "Chen",
    "Chloe",
    "Chris",
    "Clara",
    "Daniel",
    "Diana",
    "Diego",
    "Dmitri",
    "Elena",
    "Eli",
    "Emma",
    "Eric",
    "Eva",
    "Fatima",
    "Felix",
    "Fiona",
    "Frank",
    "Gabriel",
    "Grace",
    "Hana",
    "Hannah",
    "Harper",
    "Hassan",
    "Helen",
    "Henry",
    "Hugo",
    "Ian",
    "Ingrid",
    "Isaac",
    "Ivy",
    "Jack",
    "Jade",
    "Jamal",
    "Jasmine",
    "Javier",
    "Jin",
    "Joel",
    "Jonas",
    "Julia",
    "Kai",
    "Karen",
    "Kenji",
    "Kevin",
    "Kiara",
    "Laila",
)


def sizes(quick: bool) -> tuple[int, int]:
    """(files, take every n-th LoCoMo question as a query)."""
    return (500, 12) if quick else (10_000, 3)


# -- the corpus and its stand-in vectors ---------------------------------------------------
class TurnPool:
    """LoCoMo turns to draw from, and the vector each stands for."""

    def __init__(self, convs: Sequence[benchlib.Conversation]) -> None:
        self.turns = [t for c in convs for t in c.turns]
        self.texts = [" ".join(t.text.split()) for t in self.turns]
        real = dn.turn_vectors(len(self.turns))
        self.vector_source = (
            "mean of cached real MiniLM vectors of the chunk's LoCoMo turns"
            if real is not None
            else "mean of random unit vectors, one per LoCoMo turn (no cached turn vectors)"
        )
        self.vectors = (
            real if real is not None else np.stack([dn.hashed_vector(t) for t in self.texts])
        )
        self.by_text = {text: number for number, text in enumerate(self.texts)}

    def vector_of_line(self, line: str) -> np.ndarray | None:
        parsed = dn.parse_line(line)
        if parsed is None:
            return None
        number = self.by_text.get(parsed[1])
        return None if number is None else self.vectors[number]

    def vector_of_text(self, text: str) -> np.ndarray:
        return dn.line_vectors(text.splitlines(), self.vector_of_line)


def write_corpus(folder: Path, pool: TurnPool, n_files: int) -> None:
    """*n_files* notes of random LoCoMo turns under two speaker names each, dated a day apart."""
    rng = random.Random(SEED)
    base = datetime(2019, 1, 1, 9, 0, tzinfo=UTC).timestamp()
    for number in range(n_files):
        speakers = rng.sample(_NAMES, 2)
        when = int((base + number * 86_400) * 1e9)
        lines = [f"# {dn.heading_date(when)}", ""]
        for turn in range(TURNS_PER_FILE):
            lines += [dn.note_line(speakers[turn % 2], rng.choice(pool.texts)), ""]
        sub = folder / f"{number // 1000:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note-{number:05d}.md").write_text("\n".join(lines), "utf-8")


def cached_index(quick: bool, pool: TurnPool) -> tuple[AppPaths, Path, dict[str, Any]]:
    """The big collection, built once and reused while its recipe is unchanged."""
    n_files, _ = sizes(quick)
    folder = benchlib.BENCH_CACHE / ("documents-100k-quick" if quick else "documents-100k")
    model = benchlib.embedding_model()
    recipe = {
        "build_version": BUILD_VERSION,
        "files": n_files,
        "turns_per_file": TURNS_PER_FILE,
        "seed": SEED,
        "schema": SCHEMA_VERSION,
        "fts_text_version": FTS_TEXT_VERSION,
        "vectors": pool.vector_source,
        "model": model.name,
    }
    stamp = folder / "stamp.json"
    paths = app_paths(folder / "profile")
    notes = folder / "notes"
    if stamp.exists():
        saved = json.loads(stamp.read_text("utf-8"))
        if saved.get("recipe") == recipe:
            print(f"using cached index in {folder.relative_to(benchlib.ROOT)}")
            return paths, notes, {**saved["build"], "cached": True}
    shutil.rmtree(folder, ignore_errors=True)
    paths.ensure()
    print(f"writing {n_files:,} notes ...")
    write_corpus(notes, pool, n_files)
    collection = dn.add_collection(paths, COLLECTION, [notes])
    embedder = dn.PreparedEmbedder(pool.vector_of_text, model)
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "index" and (time.monotonic() - last[0] > 30 or done == total):
            last[0] = time.monotonic()
            print(f"  indexed {done:,}/{total:,} files")

    with Stopwatch() as sw:
        report = index_collection(paths, collection, embedder, progress)
    build = {
        "files": report.new,
        "chunks": report.chunks,
        "index_s": round(sw.seconds, 1),
        "vectors": pool.vector_source,
    }
    stamp.write_text(json.dumps({"recipe": recipe, "build": build}, indent=2), "utf-8")
    print(f"built: {build}")
    return paths, notes, {**build, "cached": False}


# -- latency -----------------------------------------------------------------------------------
def query_set(quick: bool) -> tuple[list[str], np.ndarray]:
    _, step = sizes(quick)
    questions = [q.question for c in benchlib.load_locomo() for q in c.questions][::step]
    vectors, _ = benchlib.cached_embeddings(
        "documents-latency-queries", questions, benchlib.embedding_model()
    )
    return questions, vectors.astype(np.float32)


def measure_latency(
    index: DocumentIndex, queries: Sequence[str], vectors: np.ndarray
) -> dict[str, Any]:
    """Every query in every mode, the modes' order rotating query by query."""

    def runner(mode: str) -> Callable[[int], object]:
        def run(i: int) -> object:
            embedder = dn.fixed_query_embedder(vectors[i])
            return search_documents(index, queries[i], mode, LIMIT, embedder)

        return run

    runs = {mode: runner(mode) for mode in DOC_MODES}
    with Stopwatch() as cold:
        runs["semantic"](0)  # loads the hnswlib file
    for i in range(min(WARMUP, len(queries))):
        for run in runs.values():
            run(i)
    wall: dict[str, list[float]] = {m: [] for m in DOC_MODES}
    cpu: dict[str, list[float]] = {m: [] for m in DOC_MODES}
    modes = list(DOC_MODES)
    for i in range(len(queries)):
        for mode in modes[i % 3 :] + modes[: i % 3]:
            c0, t0 = time.thread_time(), time.perf_counter()
            runs[mode](i)
            wall[mode].append(time.perf_counter() - t0)
            cpu[mode].append(time.thread_time() - c0)
    out: dict[str, Any] = {"first_semantic_s": round(cold.seconds, 3)}
    for mode in DOC_MODES:
        out[mode] = {**stats_ms(wall[mode]), "cpu": stats_ms(cpu[mode])}
        s = out[mode]
        print(
            f"  {mode:9s} p50 {s['p50_ms']:7.2f} ms  p95 {s['p95_ms']:7.2f} ms  "
            f"[cpu p95 {s['cpu']['p95_ms']:.2f} ms]  (n={s['n']})"
        )
    return out


def keyword_breakdown(index: DocumentIndex, queries: Sequence[str]) -> dict[str, Any]:
    """Where keyword time goes: planning (counting each term's chunks) against the whole
    ranked query, under the shipped POSTINGS_BUDGET and smaller ones, interleaved per query."""
    budgets = (index_mod.POSTINGS_BUDGET, 4_000, 2_000)
    plan: dict[int, list[float]] = {b: [] for b in budgets}
    total: dict[int, list[float]] = {b: [] for b in budgets}
    saved = index_mod.POSTINGS_BUDGET
    try:
        for i, query in enumerate(queries):
            for budget in budgets[i % 3 :] + budgets[: i % 3]:
                index_mod.POSTINGS_BUDGET = budget
                t0 = time.perf_counter()
                plan_match(query, index.doc_freq, budget)
                t1 = time.perf_counter()
                index.keyword_ranked(query, LIMIT)
                plan[budget].append(t1 - t0)
                total[budget].append(time.perf_counter() - t1)
    finally:
        index_mod.POSTINGS_BUDGET = saved
    out: dict[str, Any] = {}
    for budget in budgets:
        row = {"plan_only": stats_ms(plan[budget]), "keyword_ranked": stats_ms(total[budget])}
        out[f"budget={budget}{' (shipped)' if budget == saved else ''}"] = row
        print(
            f"  budget {budget:5d}: plan p50 {row['plan_only']['p50_ms']:.2f} / p95 "
            f"{row['plan_only']['p95_ms']:.2f} ms; keyword_ranked p50 "
            f"{row['keyword_ranked']['p50_ms']:.2f} / p95 {row['keyword_ranked']['p95_ms']:.2f} ms"
        )
    return out


# -- memory ------------------------------------------------------------------------------------
PEAK_MARK = "peak-rss-kib:"
PEAK_REPORT = f"""
import atexit, sys
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("{PEAK_MARK}" + line.split()[1], file=sys.stderr, flush=True)
atexit.register(_peak)
"""
"""Prints the process's own peak RSS at exit (``wait4``'s ru_maxrss would include the
parent's: Linux keeps the larger of the old and new peaks across ``exec``)."""


def run_measured(command: Sequence[str]) -> tuple[int, float, int, str]:
    """Run a Python *command* (its arguments after ``python``) with the peak reporter.

    Returns (exit code, seconds, peak RSS in KiB, last stdout line).
    """
    env = {**os.environ, "PYTHONPATH": str(benchlib.ROOT)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_REPORT + command[0], *command[1:]],
        cwd=benchlib.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    peaks = [
        int(line.removeprefix(PEAK_MARK))
        for line in done.stderr.splitlines()
        if line.startswith(PEAK_MARK)
    ]
    lines = done.stdout.splitlines() or done.stderr.splitlines()
    return done.returncode, seconds, peaks[-1] if peaks else 0, lines[-1] if lines else ""


WORKER = """
import runpy, sys
sys.argv[0] = "agenvoy_desktop.rag.worker"
runpy.run_module("agenvoy_desktop.rag.worker", run_name="__main__")
"""


def worker_pass(paths: AppPaths, model: Path) -> dict[str, Any]:
    """One run of the indexer process with the real embedder factory; its peak memory."""
    code, seconds, peak_kib, last = run_measured(
        [
            WORKER,
            "--config-dir",
            str(paths.config_dir),
            "--data-dir",
            str(paths.data_dir),
            "--collection",
            COLLECTION,
            "--model",
            str(model),
            "--factory",
            "agenvoy_desktop.agent.doc_embedder:open_document_embedder",
        ]
    )
    if code != 0:
        raise SystemExit(f"the indexer process failed ({code}): {last}")
    report = json.loads(last)[1]
    keys = ("new", "changed", "touched", "deleted", "chunks")
    return {
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "seconds": round(seconds, 2),
        **{k: report[k] for k in keys},
    }


SEARCH_CHILD = """
import json, sys, time
from pathlib import Path
from agenvoy_desktop.llm.embedder import Embedder
from agenvoy_desktop.paths import app_paths
from agenvoy_desktop.rag.index import index_folder, open_document_index
from agenvoy_desktop.rag.registry import documents_dir
from agenvoy_desktop.rag.search import search_documents
paths = app_paths(Path(sys.argv[1]))
queries = json.loads(sys.argv[3])
before = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
embedder = Embedder(Path(sys.argv[2]))
embedder.embed(["warm up"])
index = open_document_index(index_folder(documents_dir(paths), "notes"), "notes")
t0 = time.perf_counter()
for q in queries:
    for mode in ("keyword", "semantic", "hybrid"):
        search_documents(index, q, mode, 10, embedder)
print(json.dumps({"imports_kib": before, "search_s": time.perf_counter() - t0}))
"""


def search_process(paths: AppPaths, model: Path, queries: Sequence[str]) -> dict[str, Any]:
    """Peak memory of a process that loads the embedder, opens the index and searches."""
    code, seconds, peak_kib, last = run_measured(
        [
            SEARCH_CHILD,
            str(paths.data_dir.parent),
            str(model),
            json.dumps(list(queries[:20])),
        ]
    )
    if code != 0:
        raise SystemExit(f"the search process failed ({code}): {last}")
    facts = json.loads(last)
    return {
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "after_imports_mib": round(facts["imports_kib"] / 1024, 1),
        "queries": min(20, len(queries)),
        "seconds": round(seconds, 2),
    }


def edit_files(notes: Path, count: int) -> None:
    """Append a dated line to the first *count* notes (their content changes every run)."""
    for file in sorted(notes.rglob("*.md"))[:count]:
        with file.open("a", encoding="utf-8") as handle:
            handle.write(f"\n\n**Editor**: revised at {time.time_ns()}\n")


def measure_memory(paths: AppPaths, notes: Path, queries: Sequence[str]) -> dict[str, Any]:
    model = benchlib.embedding_model()
    no_op = worker_pass(paths, model)
    print(f"  indexer, no-op pass: {no_op}")
    edit_files(notes, EDITED_FILES)
    edited = worker_pass(paths, model)
    print(f"  indexer, {EDITED_FILES} files edited: {edited}")
    searching = search_process(paths, model, queries)
    print(f"  search process: {searching}")
    return {"indexer_no_op": no_op, "indexer_edited": edited, "search_process": searching}


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    pool = TurnPool(benchlib.load_locomo())
    paths, notes, build = cached_index(args.quick, pool)
    queries, vectors = query_set(args.quick)
    index = dn.open_index(paths, COLLECTION)
    try:
        stats = index.stats()
        print(f"{stats.chunks:,} chunks, {stats.vectors:,} vectors; {len(queries)} queries")
        latency = measure_latency(index, queries, vectors)
        print("keyword breakdown (plan = counting each term's chunks; ranked = plan + match):")
        breakdown = keyword_breakdown(index, queries)
    finally:
        index.close()
    index_dir = paths.config_dir / "documents" / COLLECTION
    disk = {p.name: p.stat().st_size for p in index_dir.iterdir() if p.is_file()}
    memory = measure_memory(paths, notes, queries)
    p95 = {mode: latency[mode]["p95_ms"] for mode in DOC_MODES}
    ok = all(p95[mode] <= ACCEPT_P95_MS[mode] for mode in DOC_MODES)
    print(
        f"{verdict(ok)}: p95 "
        + ", ".join(f"{m} {p95[m]:.2f} ms (<= {ACCEPT_P95_MS[m]:.0f})" for m in DOC_MODES)
    )
    benchlib.write_result(
        "documents_scale",
        {
            "build": build,
            "chunks": stats.chunks,
            "vectors": stats.vectors,
            "files_on_disk_bytes": disk,
            "queries": len(queries),
            "latency": latency,
            "keyword_breakdown": breakdown,
            "memory": memory,
            "collections_registered": len(CollectionRegistry(paths).list()),
            "acceptance": {
                "criterion": "search p95: keyword <= 30 ms, semantic <= 5 ms, hybrid <= 40 ms",
                "p95_ms": p95,
                "pass": ok,
            },
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
