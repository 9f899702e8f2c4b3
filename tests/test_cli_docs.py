"""``agenvoy-desktop docs``: each command, bad input as one line, JSON shapes, Ctrl+C keeps work.

``docs index`` runs the real child process; the test names its embedder
factory with the hidden ``--embedder-factory`` option.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.cli import docs as docs_cli
from agenvoy_desktop.core.locks import FileLock
from agenvoy_desktop.paths import app_paths
from agenvoy_desktop.rag.index import index_folder
from agenvoy_desktop.rag.index_schema import INDEX_FILE
from agenvoy_desktop.rag.registry import documents_dir
from agenvoy_desktop.rag.worker import IndexJob, JobOutcome
from tests.fakes import HashingEmbedder
from tests.rag.index_support import make_tree, write

HASHING = "tests.rag.index_support:hashing_embedder"
SLOW = "tests.rag.index_support:slow_embedder"
HIT_KEYS = {
    "collection",
    "path",
    "start_line",
    "end_line",
    "page",
    "heading",
    "text",
    "score",
    "citation",
}


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder())


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "profile"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    make_tree(tmp_path / "notes")
    return tmp_path / "notes"


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("agenvoy-desktop: error: ")
    for word in words:
        assert word in lines[0]


def _indexed(capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path) -> None:
    assert run(capsys, data_dir, "docs", "add", "docs", str(notes))[0] == 0
    code, out, err = run(capsys, data_dir, "docs", "index", "docs", "--embedder-factory", HASHING)
    assert code == 0, err
    assert out.startswith("indexed 'docs': 4 new, 0 changed")


def test_add_list_index_search_remove(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path
) -> None:
    code, out, err = run(capsys, data_dir, "docs", "add", "docs", str(notes), "--exclude", "*.py")
    assert code == 0
    assert "docs index docs" in out
    assert "Settings → Documents" in err  # opt-in: says where to turn it on
    code, out, _ = run(capsys, data_dir, "docs", "list")
    assert out.startswith("docs: not indexed yet")
    code, out, err = run(capsys, data_dir, "docs", "index", "docs", "--embedder-factory", HASHING)
    assert code == 0, err
    assert out.startswith("indexed 'docs': 3 new")  # tool.py excluded
    code, out, _ = run(capsys, data_dir, "docs", "list")
    assert out.startswith("docs: 3 files, 3 chunks, last indexed ")
    code, out, _ = run(capsys, data_dir, "docs", "search", "docs", "bread dough")
    assert code == 0
    assert " 1. " in out.splitlines()[0]
    assert "notes/kitchen.md:" in out.splitlines()[0]
    code, out, _ = run(capsys, data_dir, "docs", "remove", "docs")
    assert code == 0
    assert "removed collection 'docs'" in out
    assert not index_folder(documents_dir(app_paths(data_dir)), "docs").exists()
    assert notes.joinpath("garden.md").exists()  # the user's files are never touched
    assert run(capsys, data_dir, "docs", "list")[1].startswith("no document collections")


def test_json_shapes(capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path) -> None:
    _, out, _ = run(capsys, data_dir, "docs", "add", "docs", str(notes), "--json")
    assert json.loads(out)["roots"] == [str(notes)]
    code, out, err = run(
        capsys, data_dir, "docs", "index", "docs", "--json", "--embedder-factory", HASHING
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["status"] == "done"
    assert (report["new"], report["chunks"], report["cancelled"]) == (4, 4, False)
    listed = json.loads(run(capsys, data_dir, "docs", "list", "--json")[1])
    assert [row["name"] for row in listed] == ["docs"]
    row = listed[0]
    assert (row["indexed"], row["files"], row["chunks"], row["vectors"]) == (True, 4, 4, 4)
    assert row["last_indexed"].endswith("Z")
    assert row["problem"] is None
    code, out, _ = run(
        capsys, data_dir, "docs", "search", "docs", "tomatoes sun", "--json", "--limit", "2"
    )
    assert code == 0
    hits: list[dict[str, Any]] = json.loads(out)
    assert len(hits) == 2
    assert set(hits[0]) == HIT_KEYS
    assert hits[0]["path"] == "notes/garden.md"
    assert (hits[0]["start_line"], hits[0]["end_line"], hits[0]["page"]) == (1, 3, None)
    assert hits[0]["citation"] == "notes/garden.md:1-3"


def test_bad_input_is_one_line_and_loses_nothing(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path, tmp_path: Path
) -> None:
    _indexed(capsys, data_dir, notes)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    cases: list[tuple[list[str], tuple[str, ...]]] = [
        (["docs", "add", "other", str(tmp_path / "missing")], ("not found",)),
        (["docs", "add", "other", str(binary)], ("binary file",)),
        (["docs", "add", "docs", str(tmp_path)], ("exists already",)),
        (["docs", "add", "../x", str(notes)], ("invalid collection name",)),
        (["docs", "index", "nope"], ("no document collection 'nope'",)),
        (["docs", "search", "nope", "x"], ("no document collection 'nope'",)),
        (["docs", "search", "docs", "   "], ("empty query",)),
        (["docs", "search", "docs", "x", "--limit", "0"], ("--limit",)),
        (["docs", "remove", "nope"], ("no document collection 'nope'",)),
    ]
    for args, words in cases:
        code, _, err = run(capsys, data_dir, *args)
        _one_line_error(code, err, *words)
    listed = json.loads(run(capsys, data_dir, "docs", "list", "--json")[1])
    assert [(r["name"], r["chunks"]) for r in listed] == [("docs", 4)]


def test_search_before_indexing_says_what_to_do(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path
) -> None:
    run(capsys, data_dir, "docs", "add", "docs", str(notes))
    code, _, err = run(capsys, data_dir, "docs", "search", "docs", "tomatoes")
    _one_line_error(code, err, "not indexed yet", "docs index docs")


def test_a_damaged_index_is_reported_not_set_aside(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path
) -> None:
    _indexed(capsys, data_dir, notes)
    index = index_folder(documents_dir(app_paths(data_dir)), "docs") / INDEX_FILE
    for end in ("-wal", "-shm"):
        index.with_name(index.name + end).unlink(missing_ok=True)
    index.write_bytes(b"garbage" * 500)
    code, out, _ = run(capsys, data_dir, "docs", "list")
    assert code == 0
    assert "index the collection again" in out
    code, _, err = run(capsys, data_dir, "docs", "search", "docs", "tomatoes")
    _one_line_error(code, err, "damaged")
    assert index.read_bytes().startswith(b"garbage")  # a search repairs nothing by itself


def test_index_failure_is_one_line(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path
) -> None:
    run(capsys, data_dir, "docs", "add", "docs", str(notes))
    code, _, err = run(
        capsys, data_dir, "docs", "index", "docs", "--embedder-factory", "no.such:factory"
    )
    _one_line_error(code, err, "no embedder factory")


def test_ctrl_c_cancels_and_keeps_what_was_indexed(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "many"
    for number in range(30):
        write(root / f"n{number:02}.md", f"# Note {number}\n\nText number {number}.\n")
    run(capsys, data_dir, "docs", "add", "many", str(root))
    follow = docs_cli._follow
    calls = [0]

    def interrupted_follow(job: IndexJob, show: Any) -> JobOutcome:
        calls[0] += 1
        if calls[0] == 1:  # the user presses Ctrl+C once a file is indexed
            while job.poll(0.05) is None:
                if job.progress is not None and job.progress[0] == "index":
                    raise KeyboardInterrupt
        return follow(job, show)

    monkeypatch.setattr(docs_cli, "_follow", interrupted_follow)
    code, out, err = run(capsys, data_dir, "docs", "index", "many", "--embedder-factory", SLOW)
    assert code == 130
    assert "cancelled" in out
    assert "what was indexed is kept" in out
    assert "stopping after the file in hand" in err
    monkeypatch.setattr(docs_cli, "_follow", follow)
    listed = json.loads(run(capsys, data_dir, "docs", "list", "--json")[1])
    assert 1 <= listed[0]["files"] < 30
    code, out, _ = run(capsys, data_dir, "docs", "index", "many", "--embedder-factory", HASHING)
    assert code == 0
    assert " 0 changed" in out
    assert json.loads(run(capsys, data_dir, "docs", "list", "--json")[1])[0]["files"] == 30


def test_remove_refuses_while_the_collection_is_being_indexed(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path
) -> None:
    _indexed(capsys, data_dir, notes)
    folder = index_folder(documents_dir(app_paths(data_dir)), "docs")
    indexer = FileLock(folder / "index.lock", "the index of 'docs'", "another indexer")
    indexer.acquire("index documents", shared=False, wait_s=0)
    try:
        code, _, err = run(capsys, data_dir, "docs", "remove", "docs")
    finally:
        indexer.release()
    _one_line_error(code, err, "in use")
    assert (folder / INDEX_FILE).is_file()
    assert json.loads(run(capsys, data_dir, "docs", "list", "--json")[1])[0]["chunks"] == 4


def test_add_watch_and_update(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, data_dir, "docs", "add", "docs", str(notes), "--watch", "--json")
    assert code == 0
    assert json.loads(out)["watch"] is True
    assert ", watched" in run(capsys, data_dir, "docs", "list")[1]
    write(tmp_path / "mail" / "letter.txt", "Dear reader.\n")
    code, out, err = run(
        capsys,
        data_dir,
        "docs",
        "update",
        "docs",
        "--add",
        str(tmp_path / "mail"),
        "--exclude",
        "*.py",
        "drafts/**",
        "--no-watch",
    )
    assert code == 0, err
    assert out.startswith("updated collection 'docs': ")
    assert "docs index docs" in out
    row = json.loads(run(capsys, data_dir, "docs", "list", "--json")[1])[0]
    assert row["roots"] == [str(notes), str(tmp_path / "mail")]
    assert (row["exclude"], row["watch"]) == (["*.py", "drafts/**"], False)
    code, out, _ = run(capsys, data_dir, "docs", "update", "docs", "--drop", str(notes), "--json")
    assert code == 0
    shown = json.loads(out)
    assert (shown["roots"], shown["changed"], shown["reindex"]) == (
        [str(tmp_path / "mail")],
        True,
        True,
    )
    code, out, _ = run(capsys, data_dir, "docs", "update", "docs", "--no-exclude", "--watch")
    assert code == 0
    assert "docs index" in out  # the patterns changed: the index must follow
    code, out, _ = run(capsys, data_dir, "docs", "update", "docs", "--watch")
    assert out.strip() == "collection 'docs' is unchanged"


def test_update_with_bad_input_is_one_line_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], data_dir: Path, notes: Path, tmp_path: Path
) -> None:
    run(capsys, data_dir, "docs", "add", "docs", str(notes))
    before = run(capsys, data_dir, "docs", "list", "--json")[1]
    cases: list[tuple[list[str], tuple[str, ...]]] = [
        (["docs", "update", "nope", "--watch"], ("no document collection 'nope'",)),
        (["docs", "update", "docs", "--add", str(tmp_path / "missing")], ("not found",)),
        (["docs", "update", "docs", "--drop", str(notes)], ("at least one",)),
        (["docs", "update", "docs", "--drop", str(tmp_path)], ("not one of the folders",)),
        (["docs", "update", "docs", "--exclude", "../x"], ("'..'",)),
        (["docs", "update", "docs", "--include", "*.md", "--no-include"], ("contradict",)),
    ]
    for args, words in cases:
        code, _, err = run(capsys, data_dir, *args)
        _one_line_error(code, err, *words)
    assert run(capsys, data_dir, "docs", "list", "--json")[1] == before
