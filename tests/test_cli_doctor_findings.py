"""``doctor`` names what the app quietly works around: out-of-range times, unreadable session.json.

A message in history.json whose time the archive cannot store (year 2300,
before 1970) is left out when the file is read, and a session.json that
cannot be read gives the default settings; both used to pass unreported.
``doctor`` now lists them with the session and a count, and ``--repair``
keeps the original of whatever it rewrites.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.core.session_settings import SETTINGS_FILE
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import T0, conversation
from tests.fakes import HashingEmbedder

SID = "s1"


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=64))


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    paths = app_paths(tmp_path / "profile")
    with open_memory(paths, None) as store:
        store.import_messages(conversation(["one", "two"], start=T0), SID)
    return paths


def _doctor(
    capsys: pytest.CaptureFixture[str], paths: AppPaths, *extra: str
) -> tuple[int, list[dict[str, Any]]]:
    code = cli.main(["doctor", "--json", *extra, "--data-dir", str(paths.config_dir.parent)])
    return code, json.loads(capsys.readouterr().out)


def _with_times(paths: AppPaths, *times: str) -> Path:
    """history.json with one extra message per time, after the two stored ones."""
    path = paths.sessions_dir / SID / "history.json"
    items = json.loads(path.read_text("utf-8"))
    for number, when in enumerate(times):
        items.append({"id": f"bad{number}", "role": "user", "content": "x", "time": when})
    path.write_text(json.dumps(items), "utf-8")
    return path


def test_out_of_range_times_are_reported_with_a_count(
    paths: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _with_times(paths, "2300-01-01T00:00:00Z", "1969-12-31T23:59:59Z")
    before = path.read_bytes()
    code, found = _doctor(capsys, paths)
    assert code == 3
    [row] = [f for f in found if "out of range" in f["detail"]]
    assert row["session_id"] == SID
    assert row["detail"].startswith("2 message(s) with a time out of range")
    assert not any("migrated" in f["detail"] for f in found)  # nothing foreign about them
    assert path.read_bytes() == before  # a check writes nothing

    code, found = _doctor(capsys, paths, "--repair")
    [row] = [f for f in found if "out of range" in f["detail"]]
    assert row["repaired"]
    assert "original is kept as" in row["detail"]
    [copy] = path.parent.glob("history.json.orig-*")
    assert copy.read_bytes() == before
    assert len(json.loads(path.read_text("utf-8"))) == 2
    assert _doctor(capsys, paths) == (0, [])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "cannot be read"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"tools": "yes", "system_prompt": "be brief", "future": 1}', "wrong type"),
    ],
)
def test_unreadable_session_json_is_reported_and_set_aside(
    paths: AppPaths, capsys: pytest.CaptureFixture[str], content: bytes, problem: str
) -> None:
    settings = paths.sessions_dir / SID / SETTINGS_FILE
    settings.write_bytes(content)
    code, found = _doctor(capsys, paths)
    assert code == 3
    [row] = [f for f in found if f["kind"] == SETTINGS_FILE]
    assert row["session_id"] == SID
    assert problem in row["detail"]
    assert not row["repaired"]
    assert settings.read_bytes() == content

    code, found = _doctor(capsys, paths, "--repair")
    [row] = [f for f in found if f["kind"] == SETTINGS_FILE]
    assert row["repaired"]
    assert "kept as" in row["detail"]
    [copy] = settings.parent.glob(f"{SETTINGS_FILE}.corrupt-*")
    assert copy.read_bytes() == content
    assert _doctor(capsys, paths) == (0, [])
    if problem == "wrong type":  # what was readable stays
        data = json.loads(settings.read_text("utf-8"))
        assert data["system_prompt"] == "be brief"
        assert data["future"] == 1
        assert data["tools"] is True


def test_text_output_names_the_session(paths: AppPaths, capsys: pytest.CaptureFixture[str]) -> None:
    _with_times(paths, "2300-01-01T00:00:00Z")
    (paths.sessions_dir / SID / SETTINGS_FILE).write_bytes(b"\xff")
    assert cli.main(["doctor", "--data-dir", str(paths.config_dir.parent)]) == 3
    out = capsys.readouterr().out
    assert f"[{SID}] history.json: 1 message(s) with a time out of range" in out
    assert f"[{SID}] {SETTINGS_FILE}: " in out
