"""Bad input gets one line and changes nothing: each case is a row of the bug report.

Every case runs the real CLI in-process against a profile that already holds
a session, then checks the profile is byte-for-byte what it was and that the
next commands still work (a far-future time used to brick the profile).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import archive_counts
from tests.fakes import HashingEmbedder

GOOD = [
    {"role": "user", "content": "we should book a hotel in Kyoto", "time": "2024-03-01T02:00:00Z"},
    {"role": "assistant", "content": "The Granvia hotel is next to Kyoto station"},
]


class Cli:
    """The CLI on one test profile, with the helpers every case needs."""

    def __init__(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        self.capsys = capsys
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "profile"
        self.paths: AppPaths = app_paths(self.data_dir)

    def run(self, *args: str) -> tuple[int, str, str]:
        code = cli.main([*args, "--data-dir", str(self.data_dir)])
        out, err = self.capsys.readouterr()
        return code, out, err

    def lines(self, *rows: object, name: str = "in.jsonl") -> Path:
        """A JSON Lines file; a ``str`` row is written verbatim."""
        path = self.tmp_path / name
        text = "\n".join(
            r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows
        )
        path.write_text(text + "\n", "utf-8")
        return path

    def state(self) -> tuple[dict[str, bytes], dict[str, int]]:
        files = {
            str(p.relative_to(self.paths.sessions_dir)): p.read_bytes()
            for p in sorted(self.paths.sessions_dir.rglob("*"))
            if p.is_file()
        }
        return files, archive_counts(self.paths)

    def refused(self, *argv: str) -> str:
        """Run *argv*; assert one error line and an unchanged, still usable profile."""
        before = self.state()
        code, out, err = self.run(*argv)
        assert code == 1
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("agenvoy-desktop: error: "), err
        assert self.state() == before
        for command in (["sessions"], ["stats"], ["search", "hotel"], ["doctor", "--repair"]):
            code, _, after = self.run(*command)
            assert code == 0, (command, after)
        return err


@pytest.fixture
def env(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A profile holding one session, ``trip``."""
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=64))
    env = Cli(capsys, tmp_path)
    code, _, err = env.run("import", str(env.lines(*GOOD)), "--session", "trip")
    assert code == 0, err
    return env


BAD_TIMES = ["2300-01-01T00:00:00Z", "1600-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
             "1969-12-31T23:59:59Z", "9999-12-31T23:00:00-05:00"]  # fmt: skip


@pytest.mark.parametrize("when", BAD_TIMES)
@pytest.mark.parametrize("session", [None, "trip"])
def test_unstorable_time_is_refused_before_anything_is_written(
    env: Cli, when: str, session: str | None
) -> None:
    bad = env.lines(GOOD[0], {"role": "user", "content": "x", "time": when}, name="t.jsonl")
    err = env.refused("import", str(bad), *(["--session", session] if session else []))
    assert "t.jsonl:2:" in err
    assert "out of range" in err or "not an ISO 8601 time" in err


def test_reference_header_far_in_the_future_is_refused(env: Cli) -> None:
    bad = env.lines({"role": "user", "content": "當前時間: 2300-01-01 10:00:00\nhi"})
    assert "out of range" in env.refused("import", str(bad))


@pytest.mark.parametrize(
    ("content", "named"),
    [(12345, "a number"), ([1, 2], "a list"), ({"evil": True}, "an object"),
     (False, "a boolean"), (None, "null"), ([{"type": "image"}], "a list")],
)  # fmt: skip
def test_content_that_is_not_text_is_refused(env: Cli, content: object, named: str) -> None:
    bad = env.lines(GOOD[0], {"role": "user", "content": content}, name="c.jsonl")
    err = env.refused("import", str(bad), "--session", "trip")
    assert f"c.jsonl:2: 'content' must be a string, got {named}" in err


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused(env: Cli, number: str) -> None:
    line = f'{{"role": "user", "content": "x", "score": {number}}}'
    err = env.refused("import", str(env.lines(GOOD[0], line, name="n.jsonl")))
    assert "n.jsonl:2:" in err
    array = env.tmp_path / "history.json"
    array.write_text(f"[{line}]", "utf-8")
    assert "finite" in env.refused("import", str(array))


def test_lone_surrogate_leaves_no_session_behind(env: Cli) -> None:
    bad = env.lines('{"role": "user", "content": "broken \\ud800 text"}')
    assert "surrogate" in env.refused("import", str(bad), "--session", "fresh")
    assert not (env.paths.sessions_dir / "fresh").exists()
    _, out, _ = env.run("sessions", "--json")
    assert [s["session_id"] for s in json.loads(out)] == ["trip"]


def test_oversized_message_is_refused_and_pushes_nothing_out(env: Cli) -> None:
    huge = {"role": "user", "content": "x" * (1024 * 1024 + 1)}
    bad = env.lines(GOOD[0], huge, name="big.jsonl")
    err = env.refused("import", str(bad), "--session", "trip")
    assert "big.jsonl:2: message too large" in err
    assert "limit is 1.0 MiB" in err


def test_u2028_inside_a_string_is_valid_jsonl(env: Cli) -> None:
    rows = [{"role": "user", "content": "line\u2028separated\u2029and\x85next"}, GOOD[1]]
    path = env.lines(*rows)
    assert "\u2028" in path.read_text("utf-8")  # written raw, as LongMemEval has it
    code, out, err = env.run("import", str(path))
    assert code == 0, err
    history = env.paths.sessions_dir / out.strip() / "history.json"
    assert json.loads(history.read_text("utf-8"))[0]["content"] == rows[0]["content"]


@pytest.mark.parametrize("session", ["x\n", "trip\n", "", " x", "a/b", ".hidden", "x" * 65])
def test_session_ids_match_the_whole_pattern(env: Cli, session: str) -> None:
    good = env.lines(*GOOD, name="good.jsonl")
    for argv in (
        ["import", str(good), "--session", session],
        ["search", "hotel", "--session", session],
        ["chat", "hi", "--session", session],
        ["stats", "--session", session],
    ):
        assert "invalid session id" in env.refused(*argv), argv


BAD_NUMBERS = [
    (["search", "hotel", "--limit", "99999999999999999999"], "--limit must be between 1 and"),
    (["search", "hotel", "--limit", "-1"], "--limit must be between 1 and"),
    (["search", "hotel", "--since", "2300-01-01"], "--since: time '2300-01-01' is out of range"),
    (["search", "hotel", "--until", "1600-01-01"], "--until: time '1600-01-01' is out of range"),
    (["search", "hotel", "--since", "9999-12-31T23:00:00-05:00"], "not an ISO 8601 time"),
    (["errors", "show", "99999999999999999999"], "id must be between 1 and"),
    (["errors", "delete", "0"], "id must be between 1 and"),
    (["errors", "list", "--limit", "99999999999999999999"], "--limit must be between 1 and"),
    (["errors", "search", "x", "--limit", "0"], "--limit must be between 1 and"),
]


@pytest.mark.parametrize(
    ("argv", "expected"), BAD_NUMBERS, ids=[" ".join(a) for a, _ in BAD_NUMBERS]
)
def test_numeric_arguments_are_range_checked(env: Cli, argv: list[str], expected: str) -> None:
    assert expected in env.refused(*argv)


def _settings(env: Cli, max_history_bytes: int) -> None:
    env.paths.settings_file.write_text(
        json.dumps({"memory": {"max_history_bytes": max_history_bytes}}), "utf-8"
    )


def test_cli_honours_max_history_bytes_from_settings(env: Cli) -> None:
    _settings(env, 50_000)
    rows = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "y" * 400}
        for i in range(200)
    ]  # about 90 KB of history
    code, out, err = env.run("import", str(env.lines(*rows)))
    assert code == 0, err
    sid = out.strip()
    assert (env.paths.sessions_dir / sid / "history.json").stat().st_size <= 50_000
    _, out, _ = env.run("stats", "--session", sid, "--json")
    stats = json.loads(out)
    assert stats["archived_messages"] == 200
    assert any(e["kind"] == "compaction" for e in stats["events"])


def test_one_message_cannot_take_most_of_a_small_budget(env: Cli) -> None:
    _settings(env, 1_000_000)
    big = env.lines({"role": "user", "content": "z" * 300_000}, name="big.jsonl")
    err = env.refused("import", str(big), "--session", "trip")
    assert "limit is 244 KiB" in err  # a quarter of the budget


def test_a_profile_bricked_by_an_old_version_heals(env: Cli) -> None:
    """history.json holding a year-2300 message (written before times were checked)."""
    history = env.paths.sessions_dir / "trip" / "history.json"
    rows = [json.loads(line.rstrip(",")) for line in history.read_text("utf-8").splitlines()[1:-1]]
    bad = {**rows[-1], "id": "f" * 32, "time": "2300-01-01T00:00:00.000000Z"}
    lines = [json.dumps(r, ensure_ascii=False) for r in [*rows, bad]]
    history.write_text("[\n" + ",\n".join(lines) + "\n]\n", "utf-8")
    for command in (["sessions"], ["stats"], ["search", "hotel"], ["doctor", "--repair"]):
        code, _, err = env.run(*command)
        assert code == 0, (command, err)
    assert list(history.parent.glob("history.json.orig-*"))  # the original is kept
    assert "2300" not in history.read_text("utf-8")
