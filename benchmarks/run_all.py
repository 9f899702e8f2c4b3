"""Run every benchmark, one process each, and summarise their acceptance verdicts.

    .venv/bin/python benchmarks/run_all.py [--quick] [--only NAME ...]

Each benchmark writes ``benchmarks/results/<name>[.quick].json``; this script
adds ``benchmarks/results/summary[.quick].json`` (wall time and pass/fail of
each) and exits non-zero if a benchmark crashed.  Acceptance failures are
reported, not turned into an exit code: these are measurements, not tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import benchlib

BENCHMARKS = (
    "append_latency",
    "keyword_latency",
    "semantic_latency",
    "import_throughput",
    "locomo_recall",
    "error_lookup",
    "chat_throughput",
    "decode_ratio",
    "prompt_reuse",
    "summary_latency",
    "turn_overhead",
    "documents_throughput",
    "documents_scale",
    "documents_recall",
    "documents_reindex",
    "documents_floor",
    "cold_start",
    "endpoint_stream",
)


def run_one(name: str, quick: bool) -> dict[str, Any]:
    script = benchlib.ROOT / "benchmarks" / f"{name}.py"
    command = [sys.executable, str(script), *(["--quick"] if quick else [])]
    print(f"\n=== {name} {'(quick)' if quick else ''}", flush=True)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = subprocess.run(command, cwd=benchlib.ROOT, env=env, check=False).returncode
    seconds = time.perf_counter() - start
    result_file = benchlib.RESULTS_DIR / f"{name}{'.quick' if quick else ''}.json"
    acceptance = None
    if code == 0 and result_file.exists():
        acceptance = json.loads(result_file.read_text("utf-8")).get("acceptance")
    return {"exit_code": code, "wall_s": round(seconds, 1), "acceptance": acceptance}


def main() -> int:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these")
    args = ap.parse_args()
    names = args.only or BENCHMARKS
    summary = {name: run_one(name, args.quick) for name in names}
    print("\n=== summary")
    for name, item in summary.items():
        acc = item["acceptance"] or {}
        state = "CRASHED" if item["exit_code"] else benchlib.verdict(bool(acc.get("pass")))
        print(f"  {name:18s} {state:8s} {item['wall_s']:7.1f} s  {acc.get('criterion', '')}")
    benchlib.write_result("summary", {"benchmarks": summary}, quick=args.quick)
    return 1 if any(item["exit_code"] for item in summary.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
