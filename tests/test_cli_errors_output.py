"""How ``agenvoy-desktop`` ends a failed command: a known error, a bug, an interrupt."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import sessions
from agenvoy_desktop.paths import app_paths


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def _failing(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def fail(args: object) -> int:
        raise exc

    monkeypatch.setattr(sessions, "cmd_sessions", fail)


def test_a_known_error_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, tmp_path / "p", "search", "   ")
    assert (code, out) == (1, "")
    assert err == "agenvoy-desktop: error: empty query\n"
    assert not app_paths(tmp_path / "p").log_file.exists()  # nothing for the log


def test_an_os_error_is_a_known_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, tmp_path / "p", "import", str(tmp_path / "missing.jsonl"))
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith("agenvoy-desktop: error: ")
    assert "missing.jsonl" in err


@pytest.mark.parametrize(
    ("exc", "shown"),
    [(RuntimeError("boom"), "RuntimeError: boom"), (KeyError("slot"), "KeyError: 'slot'")],
)
def test_a_bug_says_internal_error_and_logs_the_traceback(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    exc: Exception,
    shown: str,
) -> None:
    _failing(monkeypatch, exc)
    code, out, err = run(capsys, tmp_path / "p", "sessions")
    log_file = app_paths(tmp_path / "p").log_file
    assert (code, out) == (1, "")
    assert err == f"agenvoy-desktop: internal error: {shown} (details in {log_file})\n"
    logged = log_file.read_text("utf-8")
    assert "internal error in `sessions`" in logged
    assert "Traceback (most recent call last)" in logged
    assert f"{type(exc).__name__}: " in logged


def test_a_bug_goes_to_stderr_when_the_log_cannot_be_opened(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log_file = app_paths(tmp_path / "p").log_file
    log_file.parent.parent.mkdir(parents=True)
    log_file.parent.write_text("not a folder")  # the log's folder cannot be made
    _failing(monkeypatch, RuntimeError("boom"))
    code, _, err = run(capsys, tmp_path / "p", "sessions")
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1] == (
        "agenvoy-desktop: internal error: RuntimeError: boom (details above)"
    )


def test_ctrl_c_is_exit_status_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _failing(monkeypatch, KeyboardInterrupt())
    code, _, err = run(capsys, tmp_path / "p", "sessions")
    assert code == 130
    assert err == "agenvoy-desktop: interrupted; what was finished is kept\n"
