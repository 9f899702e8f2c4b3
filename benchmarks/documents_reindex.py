"""Incremental re-index of a document collection: touch 1 % of the files, re-index, compare.

A collection of small dated Markdown notes (3-8 random LoCoMo turns each,
one chunk or two) is indexed in full by ``index_collection``; then, three
times each, with a different 1 % of the files every time:

* *edited*: a line appended (new content: read, chunked, embedded again);
* *touched*: the modification time moved, content the same (hashed, only
  the manifest is refreshed);

and a re-index with nothing changed (*no-op*).  Each is timed against the
full index (medians of the three).

Two embedders: a near-free stand-in (a hashed random vector per text) at
10,000 files, which makes the full index as cheap as it can be and so is
the hard case for the ratio; and the real MiniLM at 500 files.

Acceptance: edited 1 % re-index <= 5 % of a full index (10,000 files).

    .venv/bin/python benchmarks/documents_reindex.py [--quick]
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import benchlib
import documents_notes as dn
from benchlib import verdict

from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.indexer import IndexReport, index_collection

ACCEPT_RATIO = 0.05
SHARE = 0.01
REPEATS = 3
SEED = 77


def sizes(quick: bool) -> tuple[int, int]:
    """(files with the stand-in embedder, files with the real one)."""
    return (500, 50) if quick else (10_000, 500)


def write_notes(folder: Path, n_files: int) -> list[Path]:
    """*n_files* short notes of random LoCoMo turns, 1,000 to a folder."""
    rng = random.Random(SEED)
    turns = [t for c in benchlib.load_locomo() for t in c.turns]
    files: list[Path] = []
    for number in range(n_files):
        picked = rng.sample(turns, rng.randint(3, 8))
        lines = [f"# {dn.heading_date(picked[0].time_ns)}", ""]
        for turn in picked:
            lines += [dn.note_line(turn.speaker, turn.text), ""]
        sub = folder / f"{number // 1000:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        file = sub / f"note-{number:05d}.md"
        file.write_text("\n".join(lines), "utf-8")
        files.append(file)
    return files


def timed_index(
    paths: AppPaths, collection: Collection, embedder: TextEmbedder
) -> tuple[float, IndexReport]:
    start = time.perf_counter()
    report = index_collection(paths, collection, embedder)
    return time.perf_counter() - start, report


def edit(files: Sequence[Path]) -> None:
    for file in files:
        with file.open("a", encoding="utf-8") as handle:
            handle.write(f"\n**Editor**: revised at {time.time_ns()}\n")


def touch(files: Sequence[Path]) -> None:
    later = time.time_ns() + 10**9
    for file in files:
        os.utime(file, ns=(later, later))


def measure(files: Sequence[Path], folder: Path, embedder: TextEmbedder) -> dict[str, Any]:
    """Full index, then no-op / edited / touched re-indexes (medians of REPEATS)."""
    rng = random.Random(SEED + len(files))
    share = max(1, round(len(files) * SHARE))
    with benchlib.temp_profile("doc-reindex") as paths:
        collection = dn.add_collection(paths, "notes", [folder])
        full_s, full = timed_index(paths, collection, embedder)
        assert full.new == len(files), full
        times: dict[str, list[float]] = {"no_op": [], "edited": [], "touched": []}
        for _ in range(REPEATS):
            seconds, report = timed_index(paths, collection, embedder)
            assert report.new == report.changed == report.touched == 0, report
            times["no_op"].append(seconds)
            edit(rng.sample(list(files), share))
            seconds, report = timed_index(paths, collection, embedder)
            assert report.changed == share, report
            times["edited"].append(seconds)
            touch(rng.sample(list(files), share))
            seconds, report = timed_index(paths, collection, embedder)
            assert report.touched == share, report
            assert report.changed == 0, report
            times["touched"].append(seconds)
    med = {k: statistics.median(v) for k, v in times.items()}
    out: dict[str, Any] = {
        "files": len(files),
        "changed_per_pass": share,
        "full": {"seconds": round(full_s, 3), "chunks": full.chunks},
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "ratio_to_full": {k: round(v / full_s, 4) for k, v in med.items()},
    }
    print(
        f"  {len(files):,} files, {full.chunks:,} chunks: full {full_s:.2f} s; "
        + ", ".join(f"{k} {v:.3f} s ({v / full_s:.2%})" for k, v in med.items())
    )
    return out


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    n_fake, n_real = sizes(args.quick)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="doc-reindex-") as tmp:
        print("stand-in embedder (hashed random vectors):")
        fake_dir = Path(tmp) / "fake"
        fake = dn.PreparedEmbedder(dn.hashed_vector, None)
        results["stand_in_embedder"] = measure(write_notes(fake_dir, n_fake), fake_dir, fake)
        print("real MiniLM embedder:")
        real_dir = Path(tmp) / "real"
        real = benchlib.open_embedder(benchlib.embedding_model())
        try:
            results["real_embedder"] = measure(write_notes(real_dir, n_real), real_dir, real)
        finally:
            real.close()
    ratio = results["stand_in_embedder"]["ratio_to_full"]["edited"]
    # At the quick size the fixed cost of a scan dominates: a smoke test, not a verdict.
    ok = None if args.quick else ratio <= ACCEPT_RATIO
    label = "SMOKE" if ok is None else verdict(ok)
    print(
        f"{label}: re-index after editing 1 % of {n_fake:,} files = {ratio:.2%} "
        f"of a full index (need <= {ACCEPT_RATIO:.0%}; real embedder at {n_real:,} files: "
        f"{results['real_embedder']['ratio_to_full']['edited']:.2%})"
    )
    benchlib.write_result(
        "documents_reindex",
        {
            **results,
            "acceptance": {
                "criterion": f"re-index after editing 1 % of {n_fake:,} files <= 5 % of full",
                "ratio": ratio,
                "real_embedder_ratio": results["real_embedder"]["ratio_to_full"]["edited"],
                "pass": ok,
            },
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
