"""Run the benchmark suite, one process each, and print ONE table against the recorded baseline.

    .venv/bin/python benchmarks/run_all.py [--quick] [--only NAME ...]  # run, then the table
    .venv/bin/python benchmarks/run_all.py --table [--quick]   # the table, nothing run
    .venv/bin/python benchmarks/run_all.py [--quick] --record  # ... and keep it as the baseline

The suite is the quality benchmarks (answers through the real agent and starter
model: memory QA, chit-chat, summary quality, yes/no consistency, LongMemEval,
facts never told, recap questions) next to the speed and retrieval ones.  Each
writes ``benchmarks/results/<name>[.quick].json``; this script then reads the
figures that decide the product out of those files and sets them against
``benchmarks/baseline.json``: one row per figure with this run, the baseline,
the goal and whether it fell back.

Why a baseline file and not "the previous result": a result file is
overwritten by any run, tagged experiments included, so "the last result"
drifts with whatever was tried last and one bad run becomes the next run's
yardstick.  ``baseline.json`` moves only with ``--record`` (a reviewed diff),
and it holds what a result file cannot: each figure's goal, which way is
better and how much noise is no regression (one question of a small set;
a share of a timing, the shared VM's speed drifts by ±25 %).  Quick runs are
smaller sets, so they have their own recorded figures.

Exit status: 1 if a benchmark crashed or a figure regressed against the
baseline; a figure short of its goal is reported, not an exit code (some
goals are known misses, see RESULTS.md).  ``results/summary[.quick].json``
keeps the outcomes and the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import benchlib

BASELINE = benchlib.ROOT / "benchmarks" / "baseline.json"


@dataclass(frozen=True, slots=True)
class Bench:
    """One suite entry: a script in ``benchmarks/`` and how the suite runs it."""

    name: str
    kind: str  # "quality" or "speed"
    args: tuple[str, ...] = ()
    optional: bool = False  # the script may not exist yet: skipped with a line


SUITE: tuple[Bench, ...] = (
    Bench("memory_qa", "quality"),
    Bench("chitchat", "quality"),
    Bench("answer_consistency", "quality"),
    Bench("unknown_facts", "quality", ("--variants", "example")),
    Bench("recap_questions", "quality", ("--variants", "recap")),
    Bench("summary_quality", "quality"),
    Bench("longmemeval_recall", "quality", optional=True),
    Bench("longmemeval_qa", "quality"),
    Bench("locomo_recall", "quality"),
    Bench("documents_recall", "quality"),
    Bench("documents_floor", "quality"),
    Bench("append_latency", "speed"),
    Bench("keyword_latency", "speed"),
    Bench("semantic_latency", "speed"),
    Bench("import_throughput", "speed"),
    Bench("error_lookup", "speed"),
    Bench("chat_throughput", "speed"),
    Bench("decode_ratio", "speed"),
    Bench("prompt_reuse", "speed"),
    Bench("session_walk", "speed", ("--read",)),
    Bench("summary_latency", "speed"),
    Bench("turn_overhead", "speed"),
    Bench("documents_throughput", "speed"),
    Bench("documents_scale", "speed"),
    Bench("documents_reindex", "speed"),
    Bench("cold_start", "speed"),
    Bench("endpoint_stream", "speed"),
)
BENCHMARKS = tuple(bench.name for bench in SUITE)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What running one benchmark gave: its result (None: none written) or why not."""

    status: str  # "ran", "crashed", "skipped", "no result", "not run"
    detail: str = ""
    wall_s: float = 0.0
    result: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table."""

    bench: str
    figure: str
    value: str
    baseline: str
    goal: str
    verdict: str  # the goal: "PASS" / "FAIL" / ""; a run that gave nothing: "CRASHED" / "NO RESULT"
    trend: str  # against the baseline: "ok", "better", "REGRESSED", "new", ""

    @property
    def regressed(self) -> bool:
        return self.trend == "REGRESSED" or self.verdict in {"CRASHED", "NO RESULT"}


# -- running ------------------------------------------------------------------------------
def script_of(bench: Bench) -> Path:
    return benchlib.ROOT / "benchmarks" / f"{bench.name}.py"


def result_path(results_dir: Path, name: str, quick: bool) -> Path:
    """``results/<name>[.e5][.quick].json``, the name ``benchlib.write_result`` gives."""
    suffix = ".e5" if benchlib.uses_e5() else ""
    return results_dir / f"{name}{suffix}{'.quick' if quick else ''}.json"


def read_result(path: Path, newer_than: float | None = None) -> Mapping[str, Any] | None:
    """The result file's content; None when absent, unreadable or older than *newer_than*."""
    try:
        if newer_than is not None and path.stat().st_mtime < newer_than:
            return None
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_one(bench: Bench, quick: bool) -> Outcome:
    script = script_of(bench)
    if not script.is_file():
        where = script.relative_to(benchlib.ROOT)
        if bench.optional:
            print(f"\n=== skipped {bench.name}: {where} is not there (yet)", flush=True)
            return Outcome("skipped", f"{script.name} not there")
        print(f"\n=== {bench.name}: {where} is missing", flush=True)
        return Outcome("crashed", f"{script.name} missing")
    command = [sys.executable, str(script), *bench.args, *(["--quick"] if quick else [])]
    print(f"\n=== {bench.name} {'(quick)' if quick else ''}", flush=True)
    start_wall = time.time()
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = subprocess.run(command, cwd=benchlib.ROOT, env=env, check=False).returncode
    seconds = round(time.perf_counter() - start, 1)
    if code:
        return Outcome("crashed", f"exit {code}", seconds)
    path = result_path(benchlib.RESULTS_DIR, bench.name, quick)
    result = read_result(path, newer_than=start_wall - 1)
    if result is None:
        return Outcome("no result", f"no fresh {path.name}", seconds)
    return Outcome("ran", "", seconds, result)


def existing_outcomes(names: Iterable[str], results_dir: Path, quick: bool) -> dict[str, Outcome]:
    """The result files as they stand (``--table``): no benchmark is run."""
    out: dict[str, Outcome] = {}
    for name in names:
        result = read_result(result_path(results_dir, name, quick))
        out[name] = Outcome("ran", "", 0.0, result) if result else Outcome("not run", "no file")
    return out


# -- figures ------------------------------------------------------------------------------
_GOAL = re.compile(r"^\s*(>=|<=|==|>|<)\s*(-?[0-9.]+)\s*$")
_FRACTION = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def figure_value(result: Mapping[str, Any], key: str) -> float | None:
    """The number at dotted *key* of a result; booleans count 1/0, ``"41/51"`` its share."""
    node: Any = result
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool):
        return 1.0 if node else 0.0
    if isinstance(node, int | float):
        return float(node)
    if isinstance(node, str) and (match := _FRACTION.match(node)):
        whole = int(match.group(2))
        return int(match.group(1)) / whole if whole else None
    return None


def meets_goal(value: float, goal: str) -> bool:
    """Whether *value* meets a goal written ``">= 0.8"``, ``"<= 30"``, ``"== 0"``, ``"true"``."""
    if goal.strip().lower() == "true":
        return value == 1.0
    match = _GOAL.match(goal)
    if match is None:
        raise ValueError(
            f"goal {goal!r}: write it as '>= N', '<= N', '> N', '< N', '== N' or 'true'"
        )
    op, limit = match.group(1), float(match.group(2))
    return {
        ">=": value >= limit,
        "<=": value <= limit,
        ">": value > limit,
        "<": value < limit,
        "==": value == limit,
    }[op]


def allowed_drop(baseline: float, tolerance: float | str) -> float:
    """How far a figure may fall back before it counts: absolute, or ``"25%"`` of the baseline."""
    if isinstance(tolerance, str):
        text = tolerance.strip()
        if not text.endswith("%"):
            raise ValueError(f"tolerance {tolerance!r}: a number or a percentage like '25%'")
        return abs(baseline) * float(text[:-1]) / 100.0
    return float(tolerance)


def trend(value: float, baseline: float | None, spec: Mapping[str, Any]) -> str:
    """``REGRESSED`` when worse than *baseline* by more than the figure's tolerance."""
    if baseline is None:
        return "new"
    lower_better = spec.get("better", "higher") == "lower"
    worse = value - baseline if lower_better else baseline - value
    room = allowed_drop(baseline, spec.get("tolerance", 0))
    if worse > room + 1e-9:
        return "REGRESSED"
    return "better" if worse < -room - 1e-9 else "ok"


def show(value: float | None, spec: Mapping[str, Any]) -> str:
    if value is None:
        return "-"
    if str(spec.get("goal", "")).strip().lower() == "true":
        return "yes" if value == 1.0 else "no"
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.4g}"


def mode_key(quick: bool) -> str:
    return "quick" if quick else "full"


def figure_rows(
    name: str, result: Mapping[str, Any], entry: Mapping[str, Any], quick: bool
) -> list[Row]:
    """The rows of one benchmark's figures, or its acceptance verdict when none are listed."""
    figures: Mapping[str, Mapping[str, Any]] = entry.get("figures", {})
    if not figures:
        return [acceptance_row(name, result)]
    rows = []
    for label, spec in figures.items():
        value = figure_value(result, spec["key"])
        base = spec.get(mode_key(quick))
        goal = spec.get("goal") or ""
        if value is None:
            rows.append(Row(name, label, "missing", show(base, spec), goal, "", "REGRESSED"))
            continue
        verdict = benchlib.verdict(meets_goal(value, goal)) if goal else ""
        cells = (show(value, spec), show(base, spec), goal.replace("true", "yes"))
        rows.append(Row(name, label, *cells, verdict, trend(value, base, spec)))
    return rows


def acceptance_row(name: str, result: Mapping[str, Any]) -> Row:
    acc = result.get("acceptance") or {}
    if "pass" not in acc:
        return Row(name, "(no figures in baseline.json)", "-", "-", "", "", "")
    verdict = benchlib.verdict(bool(acc["pass"]))
    return Row(name, "acceptance", verdict, "-", str(acc.get("criterion", "")), verdict, "")


def table_rows(
    names: Sequence[str],
    outcomes: Mapping[str, Outcome],
    baseline: Mapping[str, Any],
    quick: bool,
) -> list[Row]:
    entries: Mapping[str, Any] = baseline.get("benchmarks", {})
    rows: list[Row] = []
    for name in names:
        outcome = outcomes[name]
        if outcome.result is None:
            verdict = {"crashed": "CRASHED", "no result": "NO RESULT"}.get(outcome.status, "")
            rows.append(Row(name, outcome.status, outcome.detail, "", "", verdict, ""))
            continue
        rows.extend(figure_rows(name, outcome.result, entries.get(name, {}), quick))
    return rows


HEADERS = ("benchmark", "figure", "this run", "baseline", "goal", "verdict", "vs baseline")


def format_table(rows: Sequence[Row]) -> str:
    """One aligned plain-text table; a regressed row is marked ``<<`` at the end."""
    cells = [HEADERS] + [
        (r.bench, r.figure, r.value, r.baseline, r.goal, r.verdict, r.trend) for r in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADERS))]
    lines = []
    for index, line in enumerate(cells):
        text = "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        if index and rows[index - 1].regressed:
            text += "  <<"
        lines.append(text.rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    regressed = sum(1 for r in rows if r.regressed)
    failed = sum(1 for r in rows if r.verdict == "FAIL")
    lines.append(f"\n{regressed} regressed against the baseline, {failed} short of their goal")
    return "\n".join(lines)


# -- the baseline ---------------------------------------------------------------------------
def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {"benchmarks": {}}
    except ValueError as exc:
        raise SystemExit(f"{path}: not valid JSON ({exc}); fix or restore it") from exc
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks", {}), dict):
        raise SystemExit(f"{path}: expected an object with a 'benchmarks' object")
    return data


def recorded(
    baseline: Mapping[str, Any], outcomes: Mapping[str, Outcome], quick: bool
) -> dict[str, Any]:
    """*baseline* with this run's figures as the mode's values; goals and tolerances kept.

    Only benchmarks that ran and only figures they reported move; the rest stay
    as recorded, so a partial run (``--only``) records just its part.
    """
    out: dict[str, Any] = json.loads(json.dumps(baseline))
    mode = mode_key(quick)
    for name, outcome in outcomes.items():
        entry = out.get("benchmarks", {}).get(name)
        if outcome.result is None or not entry:
            continue
        moved = False
        for spec in entry.get("figures", {}).values():
            value = figure_value(outcome.result, spec["key"])
            if value is not None:
                spec[mode] = round(value, 4)
                moved = True
        if moved:
            stamp = outcome.result.get("finished_utc", "?")
            file = f"{outcome.result.get('benchmark', name)}{'.quick' if quick else ''}.json"
            entry.setdefault("recorded", {})[mode] = f"{file} {stamp}"
    return out


def write_baseline(path: Path, data: Mapping[str, Any]) -> None:
    """Write the baseline file, each figure on one line (a recorded run is a one-line diff)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(dumps_baseline(data) + "\n", "utf-8")
    tmp.replace(path)


def dumps_baseline(node: Any, indent: int = 0) -> str:
    """JSON indented like ``indent=2``, except that a figure (an object with a ``key``) stays
    on one line."""
    inline = isinstance(node, Mapping) and "key" in node
    if inline or not isinstance(node, Mapping | list) or not node:
        return json.dumps(node, ensure_ascii=False)
    pad = "  " * (indent + 1)
    if isinstance(node, list):
        items = [pad + dumps_baseline(item, indent + 1) for item in node]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    items = [
        f"{pad}{json.dumps(key, ensure_ascii=False)}: {dumps_baseline(value, indent + 1)}"
        for key, value in node.items()
    ]
    return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"


# -- main -------------------------------------------------------------------------------------
def arguments() -> argparse.ArgumentParser:
    ap = benchlib.parser((__doc__ or "").splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=BENCHMARKS, metavar="NAME", help="run only these")
    ap.add_argument(
        "--table",
        action="store_true",
        help="run nothing: the table of the result files as they are",
    )
    ap.add_argument(
        "--record", action="store_true", help="write this run's figures into the baseline file"
    )
    ap.add_argument("--baseline", type=Path, default=BASELINE, help="default: %(default)s")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    baseline = load_baseline(args.baseline)
    names = list(args.only or BENCHMARKS)
    if args.table:
        outcomes = existing_outcomes(names, benchlib.RESULTS_DIR, args.quick)
    else:
        by_name = {bench.name: bench for bench in SUITE}
        outcomes = {name: run_one(by_name[name], args.quick) for name in names}
    rows = table_rows(names, outcomes, baseline, args.quick)
    title = "quick run" if args.quick else "full run"
    source = "result files as they are" if args.table else "this run"
    print(f"\n=== {title}: {source} against {args.baseline.name} ({mode_key(args.quick)} figures)")
    print(format_table(rows))
    if not args.table:
        summary = {
            name: {"status": o.status, "detail": o.detail, "wall_s": o.wall_s}
            for name, o in outcomes.items()
        }
        table = [asdict(row) for row in rows]
        benchlib.write_result("summary", {"benchmarks": summary, "table": table}, quick=args.quick)
    if args.record:
        write_baseline(args.baseline, recorded(baseline, outcomes, args.quick))
        print(f"baseline recorded: {args.baseline}")
    crashed = any(o.status == "crashed" for o in outcomes.values())
    return 1 if crashed or any(row.regressed for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
