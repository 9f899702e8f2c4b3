"""The headless CLI, in-process (fake embedder) plus one real subprocess run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import archive_counts, write_json
from tests.fakes import HashingEmbedder
from tests.set_aside import garbage_copy, session_rows, upgrade_backup

ROWS = [
    {"role": "user", "content": "we should book a hotel in Kyoto", "id": "r1",
     "time": "2024-03-01T02:00:00Z"},
    {"role": "assistant", "content": "The Granvia hotel is next to Kyoto station", "id": "r2"},
    {"role": "user", "content": "what about the rail pass", "id": "r3"},
    {"role": "assistant", "content": "Buy the seven day rail pass", "id": "r4",
     "time": "2024-03-01T02:05:00Z"},
]  # fmt: skip


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=256))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "profile"


@pytest.fixture
def paths(data_dir: Path) -> AppPaths:
    return app_paths(data_dir)


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def _jsonl(tmp_path: Path, rows: Sequence[Mapping[str, object]], name: str = "chat.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def _import(capsys: pytest.CaptureFixture[str], data_dir: Path, file: Path, *extra: str) -> str:
    code, out, err = run(capsys, data_dir, "import", str(file), *extra)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    return lines[0]


def _state(paths: AppPaths) -> tuple[dict[str, bytes], dict[str, int]]:
    histories = {
        str(p.relative_to(paths.sessions_dir)): p.read_bytes()
        for p in sorted(paths.sessions_dir.rglob("*"))
        if p.is_file()
    }
    return histories, archive_counts(paths)


def test_import_jsonl_prints_the_session_id(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, paths: AppPaths
) -> None:
    sid = _import(capsys, data_dir, _jsonl(tmp_path, ROWS))
    history = json.loads((paths.sessions_dir / sid / "history.json").read_text("utf-8"))
    assert [m["content"] for m in history] == [r["content"] for r in ROWS]
    assert [m["ref"] for m in history] == ["r1", "r2", "r3", "r4"]
    assert history[1]["time"] == "2024-03-01T02:00:00.000000Z"
    counts = archive_counts(paths)
    assert counts["messages"] == 4
    assert counts["vectors"] == 4


def test_import_reference_history(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, paths: AppPaths
) -> None:
    file = tmp_path / "history.json"
    write_json(
        file,
        [
            {
                "role": "user",
                "content": "當前時間: 2024-03-01 10:00:00\n我們使用記憶系統來保存對話",
            },
            {"role": "assistant", "content": "好的"},
        ],
    )
    sid = _import(capsys, data_dir, file, "--title", "legacy")
    code, out, _ = run(capsys, data_dir, "search", "記憶系統", "--mode", "keyword", "--json")
    assert code == 0
    hit = json.loads(out)[0]  # the reply after it also matches, through its context
    assert hit["session_id"] == sid
    assert hit["content"] == "我們使用記憶系統來保存對話"
    code, out, _ = run(capsys, data_dir, "sessions", "--json")
    assert json.loads(out)[0]["title"] == "legacy"


def test_import_with_session_creates_then_appends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, paths: AppPaths
) -> None:
    assert _import(capsys, data_dir, _jsonl(tmp_path, ROWS[:2]), "--session", "trip") == "trip"
    assert _import(capsys, data_dir, _jsonl(tmp_path, ROWS[2:]), "--session", "trip") == "trip"
    history = json.loads((paths.sessions_dir / "trip" / "history.json").read_text("utf-8"))
    assert [m["ref"] for m in history] == ["r1", "r2", "r3", "r4"]
    assert archive_counts(paths)["messages"] == 4
    _, out, _ = run(capsys, data_dir, "sessions", "--json")
    assert [s["session_id"] for s in json.loads(out)] == ["trip"]


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_search_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, mode: str
) -> None:
    sid = _import(capsys, data_dir, _jsonl(tmp_path, ROWS))
    code, out, err = run(
        capsys, data_dir, "search", "Granvia hotel Kyoto station", "--mode", mode, "--json"
    )
    assert code == 0, err
    hits = json.loads(out)
    assert isinstance(hits, list)
    assert hits
    for hit in hits:
        assert set(hit) == {
            "session_id", "message_id", "ref", "role", "time", "content", "score"
        }  # fmt: skip
        assert hit["session_id"] == sid
    assert hits[0]["ref"] == "r2"
    assert hits[0]["role"] == "assistant"
    assert hits[0]["time"] == "2024-03-01T02:00:00.000000Z"
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_text_output_and_filters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    sid = _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "trip")
    code, out, _ = run(capsys, data_dir, "search", "rail pass", "--mode", "keyword")
    assert code == 0
    assert "rail pass" in out
    assert sid in out
    code, out, _ = run(
        capsys, data_dir, "search", "rail pass", "--mode", "keyword", "--session", "trip",
        "--since", "2024-03-01T02:01:00Z", "--until", "2024-03-01T03:00:00Z", "--json",
    )  # fmt: skip
    assert code == 0
    assert [h["ref"] for h in json.loads(out)] == ["r4"]
    code, out, _ = run(capsys, data_dir, "search", "zzzunknownzzz", "--mode", "keyword")
    assert code == 0
    assert out.strip() == "no results"


def test_sessions_and_stats(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    code, out, _ = run(capsys, data_dir, "sessions")
    assert code == 0
    assert out.strip() == "no sessions"
    _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "trip", "--title", "Japan")
    code, out, _ = run(capsys, data_dir, "sessions")
    assert code == 0
    assert "trip" in out
    assert "Japan" in out
    code, out, _ = run(capsys, data_dir, "stats", "--json")
    stats = json.loads(out)
    assert stats["sessions"] == 1
    assert stats["archived_messages"] == 4
    assert stats["history_messages"] == 4
    assert stats["vectors"] == 4
    assert stats["data_dir"] == str(data_dir.resolve())
    code, out, _ = run(capsys, data_dir, "stats")
    assert code == 0
    assert "archived_messages" in out
    code, out, _ = run(capsys, data_dir, "stats", "--session", "trip", "--json")
    one = json.loads(out)
    assert one["session_id"] == "trip"
    assert one["archived_messages"] == 4
    assert [e["kind"] for e in one["events"]] == ["import"]
    code, out, _ = run(capsys, data_dir, "stats", "--session", "trip")
    assert code == 0
    assert "import" in out


def test_reset_and_remove(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, paths: AppPaths
) -> None:
    _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "a")
    _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "b")
    (paths.sessions_dir / "a" / "summary.json").write_text("{}")
    code, out, _ = run(capsys, data_dir, "reset", "a")
    assert code == 0
    assert out.strip() == "reset a"
    assert not (paths.sessions_dir / "a" / "history.json").exists()
    assert (paths.sessions_dir / "a" / "summary.json").exists()
    code, out, _ = run(capsys, data_dir, "sessions", "--json")
    assert {s["session_id"]: s["archived_messages"] for s in json.loads(out)} == {"a": 0, "b": 4}
    code, out, _ = run(capsys, data_dir, "remove", "a")
    assert code == 0
    assert out.strip() == "removed a"
    assert not (paths.sessions_dir / "a").exists()
    code, out, _ = run(capsys, data_dir, "sessions", "--json")
    assert [s["session_id"] for s in json.loads(out)] == ["b"]
    assert archive_counts(paths)["messages"] == 4
    (paths.sessions_dir / "b" / "summary.json").write_text("{}")
    code, out, _ = run(capsys, data_dir, "reset", "b", "--clear-summary")
    assert code == 0
    assert out.strip() == "reset b and its summary"
    assert not (paths.sessions_dir / "b" / "summary.json").exists()
    assert archive_counts(paths)["messages"] == 0


def test_reset_and_remove_name_only_the_copies_set_aside_they_could_not_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, paths: AppPaths
) -> None:
    """An upgrade backup loses the session without a word; a damaged archive SQLite cannot
    read is named, with the option that deletes it (remove's too, once the session is gone)."""
    _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "a")
    _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "b")
    code, _out, err = run(capsys, data_dir, "reset", "a")
    assert code == 0
    assert "set aside" not in err
    backup = upgrade_backup(paths)
    garbage = garbage_copy(paths)
    code, out, err = run(capsys, data_dir, "remove", "b")
    assert code == 0
    assert out.strip() == "removed b"
    assert "1 older copy of the archive the app set aside could not be read" in err
    assert str(garbage) in err
    assert "--delete-unreadable-copies deletes it" in err
    assert str(backup) not in err  # cleaned: nothing of b is left in it
    assert session_rows(backup, "b") == 0
    assert garbage.exists()  # named, not deleted unless asked
    code, out, err = run(capsys, data_dir, "remove", "b", "--delete-unreadable-copies")
    assert code == 0
    assert "no session b left to remove" in out
    assert "deleted 1 copy" in err
    assert str(garbage) in err
    assert not garbage.exists()
    again = garbage_copy(paths, "20261205T000000Z")
    code, out, err = run(capsys, data_dir, "reset", "a", "--delete-unreadable-copies")
    assert code == 0
    assert out.strip() == "reset a"
    assert str(again) in err
    assert not again.exists()
    assert backup.exists()


def test_doctor(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, paths: AppPaths
) -> None:
    code, out, _ = run(capsys, data_dir, "doctor")
    assert code == 0
    assert "consistent" in out
    _import(capsys, data_dir, _jsonl(tmp_path, ROWS), "--session", "trip")
    code, out, _ = run(capsys, data_dir, "doctor")
    assert code == 0
    assert "consistent" in out
    # Damage: a message only in history.json, and a vector gone.
    history = paths.sessions_dir / "trip" / "history.json"
    records = json.loads(history.read_text("utf-8"))
    records.append({**records[-1], "id": "f" * 32, "content": "written before a crash"})
    history.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n", "utf-8")
    before = _state(paths)
    code, out, _ = run(capsys, data_dir, "doctor")
    assert code == 3
    assert "missing from archive" in out
    assert "--repair" in out
    assert _state(paths) == before
    code, out, _ = run(capsys, data_dir, "doctor", "--json")
    assert code == 3
    assert all(not f["repaired"] for f in json.loads(out))
    code, out, _ = run(capsys, data_dir, "doctor", "--repair")
    assert code == 0
    assert "repaired" in out
    assert archive_counts(paths)["messages"] == 5
    assert archive_counts(paths)["vectors"] == 5
    code, out, _ = run(capsys, data_dir, "doctor")
    assert code == 0
    assert "consistent" in out


BAD_CALLS: list[tuple[str, list[str], str]] = [
    ("missing file", ["import", "{tmp}/absent.jsonl"], "no such file"),
    ("folder", ["import", "{tmp}"], "no chat export"),
    ("invalid json line", ["import", "{tmp}/bad.jsonl"], "bad.jsonl:2: invalid JSON"),
    ("binary file", ["import", "{tmp}/garbage.bin"], "binary"),
    ("invalid role", ["import", "{tmp}/role.jsonl"], "'role' must be one of"),
    ("empty file", ["import", "{tmp}/empty.jsonl"], "empty file"),
    ("bad session id", ["import", "{tmp}/good.jsonl", "--session", "../x"], "invalid session id"),
    ("bad session id 2", ["import", "{tmp}/good.jsonl", "--session", "a/b"], "invalid session id"),
    ("unknown search session", ["search", "x", "--session", "nope"], "no session 'nope'"),
    ("search bad session id", ["search", "x", "--session", "../x"], "invalid session id"),
    ("empty query", ["search", "   "], "empty query"),
    ("empty keyword query", ["search", "", "--mode", "keyword"], "empty query"),
    ("zero limit", ["search", "x", "--limit", "0"], "limit"),
    ("bad since", ["search", "x", "--since", "yesterday"], "not an ISO 8601 time"),
    ("reset unknown", ["reset", "nope"], "no session 'nope'"),
    ("remove unknown", ["remove", "nope"], "no session 'nope'"),
    ("reset bad id", ["reset", "../trip"], "invalid session id"),
    ("remove bad id", ["remove", ".."], "invalid session id"),
    ("stats unknown", ["stats", "--session", "nope"], "no session 'nope'"),
]


@pytest.mark.parametrize("case", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_input_is_one_line_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data_dir: Path,
    paths: AppPaths,
    case: tuple[str, list[str], str],
) -> None:
    _, argv, error = case
    files = tmp_path / "files"
    files.mkdir()
    (files / "bad.jsonl").write_text('{"role": "user", "content": "ok"}\n{"role": "us\n')
    (files / "garbage.bin").write_bytes(bytes(range(256)) * 8)
    (files / "role.jsonl").write_text('{"role": "wizard", "content": "x"}\n')
    (files / "empty.jsonl").write_text("")
    _jsonl(files, ROWS, "good.jsonl")
    _import(capsys, data_dir, files / "good.jsonl", "--session", "trip")
    before = _state(paths)

    code, out, err = run(capsys, data_dir, *[a.replace("{tmp}", str(files)) for a in argv])
    assert code != 0
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("agenvoy-desktop: error: ")
    assert error in err
    assert _state(paths) == before
    assert not (paths.sessions_dir.parent / "x").exists()


def test_bad_import_into_an_empty_profile_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    code, _, err = run(capsys, data_dir, "import", str(bad))
    assert code == 1
    assert ":1: invalid JSON" in err
    assert not data_dir.exists()


def test_newer_archive_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], data_dir: Path, paths: AppPaths
) -> None:
    import sqlite3

    paths.ensure()
    db = sqlite3.connect(paths.archive_db)
    db.execute("PRAGMA user_version = 999")
    db.close()
    code, _, err = run(capsys, data_dir, "sessions")
    assert code == 1
    assert "newer" in err
    assert len(err.strip().splitlines()) == 1


def test_no_command_opens_the_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from agenvoy_desktop.ui import app

    opened: list[list[str]] = []
    monkeypatch.setattr(app, "main", lambda argv: opened.append(list(argv)) or 0)
    assert cli.main([]) == 0
    assert cli.main(["--data-dir", str(tmp_path), "-v"]) == 0
    assert opened == [[], ["--data-dir", str(tmp_path), "-v"]]


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in ("chat", "summarize", "models", "errors", "import", "search", "doctor"):
        assert command in out


def test_data_dir_defaults_to_env_override(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "envhome"
    monkeypatch.setenv("AGENVOY_DESKTOP_HOME", str(home))
    assert cli.main(["import", str(_jsonl(tmp_path, ROWS))]) == 0
    capsys.readouterr()
    assert (home / "config" / "memory" / "archive.sqlite3").exists()


def test_entry_point_subprocess(tmp_path: Path) -> None:
    data_dir = tmp_path / "profile"
    env = {**os.environ, "AGENVOY_DESKTOP_HOME": str(tmp_path / "unused")}
    command = [sys.executable, "-m", "agenvoy_desktop"]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [*command, "search", "x", "--mode", "keyword", "--data-dir", str(data_dir)],
        capture_output=True, text=True, cwd=root, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no results"
    assert (data_dir / "config" / "memory" / "archive.sqlite3").exists()
    assert not (tmp_path / "unused").exists()
    bad = subprocess.run(
        [*command, "reset", "nope", "--data-dir", str(data_dir)],
        capture_output=True, text=True, cwd=root, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 1
    assert bad.stderr.strip() == "agenvoy-desktop: error: no session 'nope'"
