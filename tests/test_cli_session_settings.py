"""``agenvoy-desktop sessions settings``: show and change a session's persona and tools switch."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.core.session_settings import MAX_PROMPT_CHARS, SETTINGS_FILE
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import app_paths
from tests.fakes import HashingEmbedder


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A profile with one session, ``s1``."""
    folder = tmp_path / "profile"
    with open_memory(app_paths(folder).ensure(), HashingEmbedder()) as store:
        store.create_session("notes", "s1")
    return folder


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def settings_json(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> object:
    code, out, err = run(capsys, data_dir, "sessions", "settings", "s1", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_show_change_and_go_back(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    assert settings_json(capsys, data_dir) == {
        "session_id": "s1",
        "system_prompt": None,
        "tools": True,
        "custom_prompt": False,
    }
    changed = settings_json(capsys, data_dir, "--system-prompt", "Be a pirate.", "--tools", "off")
    assert changed == {
        "session_id": "s1",
        "system_prompt": "Be a pirate.",
        "tools": False,
        "custom_prompt": True,
    }
    code, out, _ = run(capsys, data_dir, "sessions", "settings", "s1")
    assert code == 0
    assert "custom (12 characters)" in out
    assert "Be a pirate." in out
    assert "off (plain chat)" in out
    back = settings_json(capsys, data_dir, "--default-prompt")
    assert back == {**changed, "system_prompt": None, "custom_prompt": False}  # tools stay off
    file = app_paths(data_dir).sessions_dir / "s1" / SETTINGS_FILE
    assert json.loads(file.read_text("utf-8"))["tools"] is False


def test_prompt_from_stdin(
    capsys: pytest.CaptureFixture[str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("You teach.\nStep by step.\n"))
    data = settings_json(capsys, data_dir, "--system-prompt", "-")
    assert data == {
        "session_id": "s1",
        "system_prompt": "You teach.\nStep by step.",
        "tools": True,
        "custom_prompt": True,
    }


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, _, err = run(capsys, data_dir, "sessions", "settings", "nope", "--tools", "off")
    assert code == 1
    assert err.strip() == "agenvoy-desktop: error: no session 'nope'"
    too_long = "x" * (MAX_PROMPT_CHARS + 1)
    code, _, err = run(capsys, data_dir, "sessions", "settings", "s1", "--system-prompt", too_long)
    assert code == 1
    assert "shorten it" in err
    assert len(err.strip().splitlines()) == 1


def test_a_damaged_file_is_noticed_not_fatal(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    (app_paths(data_dir).sessions_dir / "s1" / SETTINGS_FILE).write_text("{broken")
    code, out, err = run(capsys, data_dir, "sessions", "settings", "s1")
    assert code == 0
    assert "system prompt: default" in out
    assert "cannot be read" in err


def test_plain_sessions_listing_still_works(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    for args in (("sessions", "--json"), ("sessions", "list", "--json")):
        code, out, _ = run(capsys, data_dir, *args)
        assert code == 0
        assert [s["session_id"] for s in json.loads(out)] == ["s1"]
