"""The benchmark suite's table: figures read from result files, set against the baseline.

``benchmarks/run_all.py`` is what tells a change that broke answers from one
that did not, so its reading of goals, tolerances and regressions is tested
here on fake result files; no benchmark is run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))

import run_all  # noqa: E402


def baseline(**figures: dict[str, Any]) -> dict[str, Any]:
    """A baseline with one benchmark, ``qa``, holding *figures*."""
    return {"benchmarks": {"qa": {"figures": figures}}}


def fig(key: str, **spec: Any) -> dict[str, Any]:
    return {"key": key, "better": "higher", "tolerance": 0, "full": None, "quick": None, **spec}


def write(results: Path, name: str, data: dict[str, Any], *, quick: bool = False) -> None:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}{'.quick' if quick else ''}.json"
    path.write_text(json.dumps({"benchmark": name, "finished_utc": "T", **data}), "utf-8")


def rows_for(
    results: Path, base: dict[str, Any], *, quick: bool = False, names: tuple[str, ...] = ("qa",)
) -> list[run_all.Row]:
    outcomes = run_all.existing_outcomes(names, results, quick)
    return run_all.table_rows(names, outcomes, base, quick)


@pytest.fixture(autouse=True)
def no_e5(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENVOY_BENCH_EMBEDDING", raising=False)


# -- figures and goals ---------------------------------------------------------------------
def test_figures_are_read_by_dotted_key() -> None:
    result = {"totals": {"overall": {"accuracy": 0.73, "evidence": "41/51", "ok": True}}}
    assert run_all.figure_value(result, "totals.overall.accuracy") == 0.73
    assert run_all.figure_value(result, "totals.overall.evidence") == pytest.approx(41 / 51)
    assert run_all.figure_value(result, "totals.overall.ok") == 1.0
    assert run_all.figure_value(result, "totals.missing") is None
    assert run_all.figure_value({"totals": "text"}, "totals") is None


@pytest.mark.parametrize(
    ("value", "goal", "met"),
    [
        (0.8, ">= 0.80", True),
        (0.79, ">= 0.80", False),
        (10.0, "< 10", False),
        (0.0, "== 0", True),
        (1.0, "true", True),
        (0.0, "true", False),
        (31.0, "<= 30", False),
    ],
)
def test_goals(value: float, goal: str, met: bool) -> None:
    assert run_all.meets_goal(value, goal) is met


def test_a_goal_written_wrongly_says_how_to_write_it() -> None:
    with pytest.raises(ValueError, match="write it as"):
        run_all.meets_goal(1.0, "at least 0.8")


# -- regressions ---------------------------------------------------------------------------
def test_a_drop_beyond_the_tolerance_is_marked(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"totals": {"accuracy": 0.90}})
    base = baseline(answered=fig("totals.accuracy", goal=">= 0.80", tolerance=0.032, full=0.969))
    (row,) = rows_for(tmp_path, base)
    assert (row.value, row.baseline, row.verdict) == ("0.9", "0.969", "PASS")
    assert row.trend == "REGRESSED"
    assert row.regressed
    table = run_all.format_table([row])
    assert table.splitlines()[2].endswith("<<")
    assert "1 regressed against the baseline, 0 short of their goal" in table


def test_one_question_of_noise_is_no_regression(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"totals": {"accuracy": 0.938}})
    base = baseline(answered=fig("totals.accuracy", tolerance=0.032, full=0.969))
    (row,) = rows_for(tmp_path, base)
    assert row.trend == "ok"
    assert not row.regressed


def test_a_timing_regresses_by_a_share_and_lower_is_better(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"turn_s": 12.0, "other_s": 5.0})
    base = baseline(
        turn=fig("turn_s", better="lower", tolerance="25%", full=9.0),
        other=fig("other_s", better="lower", tolerance="25%", full=9.0),
    )
    turn, other = rows_for(tmp_path, base)
    assert turn.trend == "REGRESSED"  # 12 > 9 + 2.25
    assert other.trend == "better"


def test_a_goal_miss_alone_is_reported_not_a_regression(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"turn_s": 12.8})
    base = baseline(turn=fig("turn_s", goal="<= 10", better="lower", tolerance="25%", full=12.8))
    (row,) = rows_for(tmp_path, base)
    assert (row.verdict, row.trend, row.regressed) == ("FAIL", "ok", False)


def test_a_figure_missing_from_the_result_is_marked(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"totals": {}})
    (row,) = rows_for(tmp_path, baseline(answered=fig("totals.accuracy", full=0.9)))
    assert (row.value, row.trend) == ("missing", "REGRESSED")


def test_quick_runs_compare_with_the_quick_figures(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"accuracy": 0.5}, quick=True)
    write(tmp_path, "qa", {"accuracy": 0.5})
    recorded = baseline(answered=fig("accuracy", full=0.9, quick=0.5))
    (quick,) = rows_for(tmp_path, recorded, quick=True)
    (full,) = rows_for(tmp_path, recorded)
    assert (quick.trend, full.trend) == ("ok", "REGRESSED")
    (new,) = rows_for(tmp_path, baseline(answered=fig("accuracy", full=0.9)), quick=True)
    assert (new.baseline, new.trend) == ("-", "new")


def test_without_listed_figures_the_acceptance_verdict_is_shown(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"acceptance": {"criterion": "p95 <= 10 ms", "pass": False}})
    (row,) = rows_for(tmp_path, {"benchmarks": {}})
    assert (row.figure, row.value, row.goal) == ("acceptance", "FAIL", "p95 <= 10 ms")


def test_crashes_and_missing_results_count_skips_do_not() -> None:
    outcomes = {
        "a": run_all.Outcome("crashed", "exit 1"),
        "b": run_all.Outcome("no result", "no fresh b.json"),
        "c": run_all.Outcome("skipped", "c.py not there"),
    }
    rows = run_all.table_rows(("a", "b", "c"), outcomes, {"benchmarks": {}}, False)
    assert [row.regressed for row in rows] == [True, True, False]
    assert rows[2].figure == "skipped"


def test_a_missing_optional_script_is_skipped_with_a_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome = run_all.run_one(run_all.Bench("no_such_benchmark", "quality", optional=True), False)
    assert outcome.status == "skipped"
    assert "skipped no_such_benchmark" in capsys.readouterr().out


# -- the baseline file -----------------------------------------------------------------------
def test_record_moves_only_the_modes_values_of_benchmarks_that_ran(tmp_path: Path) -> None:
    write(tmp_path, "qa", {"finished_utc": "2026-12-04T10:00:00Z", "accuracy": 0.875}, quick=True)
    base = {
        "benchmarks": {
            "qa": {"figures": {"answered": fig("accuracy", goal=">= 0.80", full=0.9)}},
            "other": {"figures": {"x": fig("x", full=3.0)}},
        }
    }
    outcomes = run_all.existing_outcomes(("qa", "other"), tmp_path, True)
    new = run_all.recorded(base, outcomes, quick=True)
    answered = new["benchmarks"]["qa"]["figures"]["answered"]
    assert (answered["quick"], answered["full"], answered["goal"]) == (0.875, 0.9, ">= 0.80")
    assert new["benchmarks"]["qa"]["recorded"]["quick"].startswith("qa.quick.json 2026-12-04")
    assert new["benchmarks"]["other"] == base["benchmarks"]["other"]
    assert base["benchmarks"]["qa"]["figures"]["answered"]["quick"] is None  # input untouched


def test_the_baseline_file_keeps_one_line_per_figure(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    data = baseline(answered=fig("accuracy", goal=">= 0.80", full=0.9))
    run_all.write_baseline(path, data)
    assert run_all.load_baseline(path) == data
    lines = path.read_text("utf-8").splitlines()
    assert any(line.strip().startswith('"answered": {"key": "accuracy"') for line in lines)


def test_a_broken_baseline_file_is_named_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text("{not json", "utf-8")
    with pytest.raises(SystemExit, match=r"baseline\.json: not valid JSON"):
        run_all.load_baseline(path)
    assert path.read_text("utf-8") == "{not json"
    assert run_all.load_baseline(tmp_path / "absent.json") == {"benchmarks": {}}


def test_table_mode_exit_status_and_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run_all.benchlib, "RESULTS_DIR", tmp_path / "results")
    write(tmp_path / "results", "memory_qa", {"totals": {"accuracy": 0.5}})
    path = tmp_path / "baseline.json"
    spec = {"memory_qa": {"figures": {"answered": fig("totals.accuracy", full=0.969)}}}
    run_all.write_baseline(path, {"benchmarks": spec})
    argv = ["--table", "--only", "memory_qa", "--baseline", str(path)]
    assert run_all.main(argv) == 1
    assert "REGRESSED" in capsys.readouterr().out
    assert run_all.main([*argv, "--record"]) == 1  # recorded after the table it printed
    assert run_all.main(argv) == 0
    recorded = run_all.load_baseline(path)["benchmarks"]["memory_qa"]["figures"]["answered"]
    assert recorded["full"] == 0.5


# -- the suite as shipped ------------------------------------------------------------------
def test_every_suite_benchmark_has_its_script_and_baseline_entry() -> None:
    shipped = run_all.load_baseline(run_all.BASELINE)["benchmarks"]
    for bench in run_all.SUITE:
        assert bench.optional or run_all.script_of(bench).is_file(), bench.name
        assert bench.name in shipped, bench.name
        for spec in shipped[bench.name].get("figures", {}).values():
            if spec.get("goal"):
                run_all.meets_goal(0.0, spec["goal"])  # parses
            run_all.allowed_drop(1.0, spec.get("tolerance", 0))
    names = {bench.name for bench in run_all.SUITE}
    quality = {"memory_qa", "chitchat", "summary_quality", "answer_consistency"}
    assert quality | {"longmemeval_qa", "longmemeval_recall", "unknown_facts"} <= names
    lab = {path.stem for path in (BENCHMARKS_DIR / "lab").glob("*.py")}
    assert not names & lab
