"""``agenvoy-desktop errors ...`` through a parser built like cli.build_parser."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.cli import common
from agenvoy_desktop.cli import errors as cli_errors
from agenvoy_desktop.core.error_memory import ErrorMemory, error_db_path
from agenvoy_desktop.paths import app_paths
from tests.fakes import HashingEmbedder


def _parser() -> argparse.ArgumentParser:
    """The shape of cli.build_parser: a shared --data-dir parent and ``add``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default=argparse.SUPPRESS)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="agenvoy-desktop", parents=[common])
    sub = parser.add_subparsers(dest="command")

    def add(
        name: str, func: Callable[[argparse.Namespace], int], text: str
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=text)
        cmd.set_defaults(func=func)
        return cmd

    cli_errors.register(add)
    return parser


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "profile"


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=256))


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], data_dir: Path) -> Run:
    """Parse and run like cli.main: CliError -> one line on stderr, status 1."""

    def runner(*argv: str) -> tuple[int, str, str]:
        args = _parser().parse_args([*argv, "--data-dir", str(data_dir)])
        args.data_dir = getattr(args, "data_dir", None)
        try:
            code: int = args.func(args)
        except common.CliError as exc:
            print(f"agenvoy-desktop: error: {exc}", file=sys.stderr)
            code = 1
        out, err = capsys.readouterr()
        return code, out, err

    return runner


def _json(run: Run, *argv: str) -> Any:
    code, out, err = run(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


ADD = (
    "errors", "add", "--tool", "read_file", "--symptom", "No such file: notes.txt",
    "--cause", "wrong folder", "--action", "look in ~/Documents", "--outcome", "resolved",
    "--keyword", "Notes.txt", "--keyword", "path",
)  # fmt: skip


def test_add_show_list(run: Run) -> None:
    code, out, _ = run(*ADD)
    assert (code, out) == (0, "added error record #1\n")
    shown = _json(run, "errors", "show", "1")
    assert shown["keywords"] == ["notes.txt", "path", "error_type:not_found"]
    assert shown["source"] == "user"
    assert shown["has_vector"] is False  # add never loads the model
    assert set(shown) == {
        "id", "tool", "error_type", "keywords", "symptom", "cause", "action", "outcome",
        "source", "session_id", "created", "updated", "expires", "expired", "hits",
        "last_hit", "has_vector",
    }  # fmt: skip
    code, out, _ = run(*ADD[:-4], "--keyword", "more")
    assert out == "updated error record #1 (same tool and symptom)\n"
    code, out, _ = run("errors", "list")
    assert out.splitlines()[0].split()[:3] == ["ID", "TOOL", "OUTCOME"]
    assert "read_file" in out
    assert "No such file: notes.txt" in out
    assert [r["id"] for r in _json(run, "errors", "list", "--outcome", "resolved")] == [1]
    assert _json(run, "errors", "list", "--tool", "other") == []
    assert [r["id"] for r in _json(run, "errors", "list", "--sort", "hits", "--limit", "1")] == [1]
    code, out, _ = run("errors", "show", "1")
    assert "look in ~/Documents" in out


def test_edit_delete_and_errors(run: Run) -> None:
    run(*ADD)
    edited = _json(run, "errors", "edit", "1", "--outcome", "failed", "--keyword", "X")
    assert (edited["outcome"], edited["keywords"]) == ("failed", ["x", "error_type:not_found"])
    code, _, err = run("errors", "edit", "1")
    assert code == 1
    assert "nothing to change" in err
    code, _, err = run("errors", "edit", "1", "--symptom", " ")
    assert (code, err.strip()) == (1, "agenvoy-desktop: error: symptom must not be empty")
    code, _, err = run("errors", "show", "7")
    assert code == 1
    assert "no error record #7" in err
    assert _json(run, "errors", "delete", "1") == {"deleted": 1}
    code, _, err = run("errors", "delete", "1")
    assert code == 1
    assert "#1" in err
    code, out, _ = run("errors", "list")
    assert out == "no error records\n"


def test_add_requires_fields_and_valid_outcome(run: Run) -> None:
    with pytest.raises(SystemExit):
        run("errors", "add", "--tool", "t", "--outcome", "resolved")
    with pytest.raises(SystemExit):
        run("errors", "add", "--tool", "t", "--symptom", "s", "--outcome", "fine")
    code, _, err = run(
        "errors", "add", "--tool", "t", "--symptom", "x" * 2001, "--outcome", "failed"
    )
    assert code == 1
    assert "symptom is 2001 characters" in err


def test_search_with_and_without_model(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    run(*ADD)
    run("errors", "add", "--tool", "web", "--symptom", "timed out: web", "--outcome", "failed")
    hits = _json(run, "errors", "search", "notes.txt missing")
    assert [h["id"] for h in hits] == [1]
    assert hits[0]["instruction"] == "apply this fix: look in ~/Documents"
    assert hits[0]["has_vector"] is True  # search embedded what add stored without a model
    assert hits[0]["hits"] == 1

    def broken(paths: object) -> HashingEmbedder:
        raise RuntimeError("embedding model not downloaded")

    monkeypatch.setattr(common, "load_embedder", broken)
    code, out, err = run("errors", "search", "timed out", "--tool", "web")
    assert code == 0
    assert "keyword search only" in err
    assert "timed out: web" in out
    code, out, _ = run("errors", "search", "nothing like it", "--keyword-only")
    assert out == "no matching error records\n"
    code, _, err = run("errors", "search", "  ")
    assert (code, "empty query" in err) == (1, True)


def test_purge_and_include_expired(run: Run, data_dir: Path) -> None:
    path = error_db_path(app_paths(data_dir))
    old = 1_600_000_000_000_000_000
    with ErrorMemory(path, None, clock=lambda: old) as memory:
        memory.add("t", "long ago", outcome="failed")
    assert _json(run, "errors", "list") == []
    expired = _json(run, "errors", "list", "--include-expired")
    assert [r["expired"] for r in expired] == [True]
    code, out, _ = run("errors", "list", "--include-expired")
    assert code == 0
    assert "expired" in out
    assert _json(run, "errors", "purge") == {"purged": 1}
    _, out, _ = run("errors", "purge")
    assert out == "purged 0 expired error records\n"


def test_data_dir_before_the_action(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["errors", "--data-dir", str(data_dir), "list"])
    assert args.data_dir == str(data_dir)
    assert args.func(args) == 0
    assert capsys.readouterr().out == "no error records\n"
