"""Run the reliability suite at nightly size and print its figures.

The suite (``tests/reliability``) runs in CI at a size that takes minutes:
3 kill -9 trials per operation, a few hundred generated inputs per property,
small concurrency runs.  This script runs the same tests larger —
``AGENVOY_TORTURE_SEEDS`` trials per operation (default 20, which also
multiplies the generated inputs about sevenfold) and ``AGENVOY_TORTURE_SCALE``
times the concurrent work (default 5) — then prints, per kill -9 operation,
the trials run, how many were killed mid-way, how many ended with the
operation done, the messages lost and the crashes (goal for both: 0), and
per test file its passed / failed / expected-failure counts.

    .venv/bin/python scripts/torture.py                 # nightly size
    .venv/bin/python scripts/torture.py --seeds 3 --scale 1 -- -k kill9

Exit status: pytest's, or 1 if any trial lost data or crashed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = "tests/reliability"
OPERATIONS = ("import", "compaction", "reset", "remove")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the reliability suite at nightly size.")
    parser.add_argument("--seeds", type=int, default=20, help="kill -9 trials per operation")
    parser.add_argument("--scale", type=int, default=5, help="concurrency work multiplier")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    return parser.parse_args(argv)


def run_suite(args: argparse.Namespace, work: Path) -> tuple[int, float]:
    """Run pytest on the suite with the nightly sizes; (exit status, seconds)."""
    env = {
        **os.environ,
        "AGENVOY_TORTURE_SEEDS": str(args.seeds),
        "AGENVOY_TORTURE_SCALE": str(args.scale),
        "AGENVOY_TORTURE_REPORT": str(work / "kill9.jsonl"),
        "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--junitxml={work / 'junit.xml'}", SUITE, *args.pytest_args]  # fmt: skip
    began = time.monotonic()
    code = subprocess.call(command, cwd=ROOT, env=env)
    return code, time.monotonic() - began


def read_trials(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def trial_table(trials: Iterable[dict[str, Any]]) -> list[list[str]]:
    """One row per operation: trials, killed, done, lost, crashes, other problems."""
    by_op: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for trial in trials:
        by_op[trial["operation"]].append(trial)
    rows = [["operation", "trials", "killed", "done", "lost", "crashes", "problems"]]
    for op in [*OPERATIONS, *sorted(set(by_op) - set(OPERATIONS))]:
        runs = by_op.get(op, [])
        rows.append(
            [
                op,
                str(len(runs)),
                str(sum(1 for t in runs if t["killed"])),
                str(sum(1 for t in runs if t.get("done"))),
                str(sum(int(t["lost"]) for t in runs)),
                str(sum(1 for t in runs if t["crash"])),
                str(sum(1 for t in runs if t["problems"] and not t["crash"])),
            ]
        )
    return rows


def file_table(junit: Path) -> list[list[str]]:
    """Per test file: passed, failed (errors included), expected failures, skipped."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("classname", "?").rsplit(".", 1)[-1]
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    xfail = "xfail" in (child.get("type", "") + child.get("message", ""))
                    outcome = "xfailed" if xfail else "skipped"
            counts[name][outcome] += 1
    rows = [["test file", "passed", "failed", "xfailed", "skipped"]]
    for name in sorted(counts):
        c = counts[name]
        rows.append([name, *(str(c[k]) for k in ("passed", "failed", "xfailed", "skipped"))])
    return rows


def render(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(
    args: argparse.Namespace, seconds: float, trials: list[dict[str, Any]], junit: Path
) -> str:
    """The figures as text: the kill -9 table, the per-file table, each failed trial."""
    parts = [
        f"reliability suite: seeds={args.seeds} scale={args.scale}, {seconds:.0f} s",
        render(trial_table(trials)),
        "",
        render(file_table(junit)),
    ]
    parts += [
        f"{t['operation']} seed {t['seed']}: lost {t['lost']}, {t['problems']}"
        for t in trials
        if t["problems"] or t["lost"]
    ]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="torture-") as tmp:
        work = Path(tmp)
        code, seconds = run_suite(args, work)
        trials = read_trials(work / "kill9.jsonl")
        sys.stdout.write("\n" + report(args, seconds, trials, work / "junit.xml") + "\n")
    damaged = any(t["lost"] or t["crash"] for t in trials)
    return code or int(damaged)


if __name__ == "__main__":
    raise SystemExit(main())
