"""What the CLI prints from storage cannot drive the terminal, and a closed pipe ends it quietly.

Text planted through the real store holds a screen clear, an OSC window
title, a C1 CSI and a bidi override; ``sessions`` and ``search`` must show
them escaped (the stored text stays as it was), and ``--json`` must give the
stored values back exactly.  A reader that closes the pipe early
(``| head -1``) must not turn into "error: Broken pipe".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli.output_guard import READER_GONE_STATUS, guarded_stdout, stderr_or_null
from agenvoy_desktop.cli.safe_text import json_shown, shown, shown_line
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import app_paths
from tests.conftest import conversation
from tests.fakes import HashingEmbedder

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 120.0
"""Only so a regression fails instead of hanging the suite; not a timing claim."""

TITLE = "\x1b]0;evil\x07Trip \u202eplans"
MESSAGE = "clear\x1b[2J the screen \x9b31m red \x7f and tab\there"
RAW = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e")
"""Characters that must never reach the terminal raw."""


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """A profile with one session whose title and messages carry terminal escapes."""
    data_dir = tmp_path / "profile"
    with open_memory(app_paths(data_dir), HashingEmbedder()) as store:
        store.create_session(TITLE, "s1")
        store.append("s1", conversation([MESSAGE, "noted"]))
    return data_dir


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_no_raw_controls(text: str) -> None:
    assert not [c for c in RAW if c in text], repr(text)


# -- the helper ------------------------------------------------------------------
def test_shown_escapes_controls_but_keeps_lines() -> None:
    assert shown("a\x1b[2Jb\nc\td\re") == "a\\x1b[2Jb\nc\td\\x0de"
    assert shown("\x9b\u202e\u2066\u2028") == "\\x9b\\u202e\\u2066\\u2028"
    assert shown("plain, ünïcödé and emoji 👩‍👩‍👧") == "plain, ünïcödé and emoji 👩‍👩‍👧"


def test_shown_line_escapes_newlines_and_tabs_too() -> None:
    assert shown_line("a\nb\tc\x00") == "a\\x0ab\\x09c\\x00"


def test_json_shown_keeps_the_value() -> None:
    value = {"t": TITLE, "m": MESSAGE + "\u2029\x85"}
    dumped = json_shown(json.dumps(value, ensure_ascii=False))
    assert_no_raw_controls(dumped)
    assert "\u2029" not in dumped
    assert "\x85" not in dumped
    assert json.loads(dumped) == value


# -- the commands ----------------------------------------------------------------
def test_sessions_shows_a_planted_title_escaped(
    capsys: pytest.CaptureFixture[str], profile: Path
) -> None:
    code, out, _ = run(capsys, profile, "sessions")
    assert code == 0
    assert_no_raw_controls(out)
    assert "\\x1b]0;evil\\x07Trip \\u202eplans" in out
    with open_memory(app_paths(profile)) as store:  # shown escaped, stored as it was
        assert [s.title for s in store.sessions()] == [TITLE]


def test_sessions_json_gives_the_stored_title_back(
    capsys: pytest.CaptureFixture[str], profile: Path
) -> None:
    code, out, _ = run(capsys, profile, "sessions", "--json")
    assert code == 0
    assert_no_raw_controls(out)
    assert [s["title"] for s in json.loads(out)] == [TITLE]


def test_search_shows_a_planted_message_escaped(
    capsys: pytest.CaptureFixture[str], profile: Path
) -> None:
    code, out, _ = run(capsys, profile, "search", "screen", "--mode", "keyword")
    assert code == 0
    assert_no_raw_controls(out)
    assert "clear\\x1b[2J the screen \\x9b31m red \\x7f and tab here" in out
    code, out, _ = run(capsys, profile, "search", "screen", "--mode", "keyword", "--json")
    assert code == 0
    assert_no_raw_controls(out)
    assert MESSAGE in [hit["content"] for hit in json.loads(out)]


def test_settings_shows_a_planted_system_prompt_escaped(
    capsys: pytest.CaptureFixture[str], profile: Path
) -> None:
    prompt = "Be brief.\n\x1b[8mhidden\x1b[0m"
    assert run(capsys, profile, "sessions", "settings", "s1", "--system-prompt", prompt)[0] == 0
    code, out, _ = run(capsys, profile, "sessions", "settings", "s1")
    assert code == 0
    assert_no_raw_controls(out)
    assert "Be brief.\n\\x1b[8mhidden\\x1b[0m" in out  # the newline stays a newline


def test_an_error_naming_stored_text_is_escaped(
    capsys: pytest.CaptureFixture[str], profile: Path
) -> None:
    code, _, err = run(capsys, profile, "remove", "no\x1b[2Jsuch")
    assert code == 1
    assert_no_raw_controls(err)


# -- a closed pipe ---------------------------------------------------------------
def _run_cli(data_dir: Path, *args: str, **how: Any) -> subprocess.CompletedProcess[str]:
    """``python -m agenvoy_desktop *args`` on *data_dir*, its streams as *how* says."""
    return subprocess.run(
        [sys.executable, "-m", "agenvoy_desktop", *args, "--data-dir", str(data_dir)],
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
        check=False,
        **how,
    )


def _run_into_closed_pipe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command with a stdout whose reader is gone before it writes a byte.

    An ``os.pipe`` whose read end is closed is what ``| head -1`` leaves
    once head has exited: every write fails with EPIPE (Python ignores
    SIGPIPE), with no race on when the reader stops.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return _run_cli(data_dir, *args, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)


@pytest.mark.skipif(os.name != "posix", reason="a pipe's EPIPE is POSIX")
@pytest.mark.parametrize(
    "args",
    [
        ["sessions"],
        ["sessions", "--json"],
        ["search", "screen", "--mode", "keyword"],
        ["stats"],
    ],
    ids=" ".join,
)
def test_a_closed_pipe_ends_the_command_quietly(profile: Path, args: list[str]) -> None:
    done = _run_into_closed_pipe(profile, *args)
    assert done.stderr == ""  # no "error: Broken pipe", no "Exception ignored"
    assert done.returncode == READER_GONE_STATUS
    with open_memory(app_paths(profile)) as store:  # nothing lost on the way
        assert [m.content for m in store.history("s1").messages] == [MESSAGE, "noted"]


def test_a_command_without_any_stdout_prints_to_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen app started without a console has ``sys.stdout = None``."""
    monkeypatch.setattr(sys, "stdout", None)
    with guarded_stdout() as guard:
        print("nobody reads this")
    assert not guard.reader_gone
    assert sys.stdout is None


@pytest.mark.parametrize(
    "args", [["search", "screen", "--mode", "keyword"], ["search", "nothing-like-it"]], ids=" ".join
)
def test_a_closed_stderr_does_not_break_a_command(profile: Path, args: list[str]) -> None:
    """Started with ``2>&-`` Python has ``sys.stderr = None``: progress and messages go nowhere."""
    close_stderr = partial(os.close, 2)
    done = _run_cli(
        profile, *args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=close_stderr
    )
    assert done.returncode == 0, done.stdout
    assert "internal error" not in done.stdout


def test_no_stderr_at_all_gets_the_null_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    stderr_or_null()
    print("nobody reads this", file=sys.stderr)
    assert sys.stderr is not None
    sys.stderr.close()
