"""The indexer child process: progress, cancel, failure, and surviving a kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agenvoy_desktop.operations.documents import interrupted_collections
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.index import DocumentIndex, index_folder, open_document_index
from agenvoy_desktop.rag.indexer import index_collection
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir
from agenvoy_desktop.rag.search import search_documents
from agenvoy_desktop.rag.worker import CRASHED, IndexJob, WorkerSetupError, load_factory
from tests.fakes import HashingEmbedder
from tests.rag.index_support import FILES, assert_consistent, make_tree, write

FAST = "tests.rag.index_support:hashing_embedder"
SLOW = "tests.rag.index_support:slow_embedder"
BROKEN = "tests.rag.index_support:broken_embedder"
WAIT_S = 120
MANY = 30


def _register(paths: AppPaths, root: Path, files: dict[str, str] = FILES) -> None:
    make_tree(root, files)
    CollectionRegistry(paths).add("docs", [root])


def _many_files() -> dict[str, str]:
    return {
        f"note{i:02d}.md": f"# Note {i}\n\nword{i} shared text number {i}\n" for i in range(MANY)
    }


def _open(paths: AppPaths) -> DocumentIndex:
    return open_document_index(index_folder(documents_dir(paths), "docs"))


def test_a_job_indexes_and_reports(paths: AppPaths, tmp_path: Path) -> None:
    _register(paths, tmp_path / "root")
    job = IndexJob(paths, "docs", factory=FAST)
    job.start()
    outcome = job.wait(WAIT_S)
    assert outcome is not None
    assert outcome.status == "done", outcome.message
    assert outcome.exit_code == 0
    assert outcome.report is not None
    assert outcome.report.new == len(FILES)
    assert job.progress == ("index", len(FILES), len(FILES))
    with _open(paths) as index:
        hits = search_documents(index, "dough", "hybrid", 3, HashingEmbedder())
        assert hits[0].citation.startswith("root/kitchen.md:")


def test_a_setup_failure_is_one_line(paths: AppPaths, tmp_path: Path) -> None:
    _register(paths, tmp_path / "root")
    job = IndexJob(paths, "docs", factory=BROKEN, model_path="/no/model.gguf")
    job.start()
    outcome = job.wait(WAIT_S)
    assert outcome is not None
    assert outcome.status == "failed"
    assert outcome.exit_code == 1
    assert outcome.message.startswith("cannot load the embedding model")
    assert "\n" not in outcome.message


def test_an_unknown_collection_fails_cleanly(paths: AppPaths) -> None:
    job = IndexJob(paths, "nope", factory=FAST)
    job.start()
    outcome = job.wait(WAIT_S)
    assert outcome is not None
    assert outcome.status == "failed"
    assert "nope" in outcome.message


def test_load_factory_refuses_bad_names() -> None:
    with pytest.raises(WorkerSetupError):
        load_factory("no_such_module_xyz:f")
    with pytest.raises(WorkerSetupError):
        load_factory("tests.rag.index_support:FILES")
    assert load_factory(FAST)(AppPaths(Path("/a"), Path("/b")), None).dim > 0


def _wait_for_progress(job: IndexJob, files: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        outcome = job.poll(0.2)
        assert outcome is None, f"the job ended early: {outcome}"
        if job.progress is not None and job.progress[0] == "index" and job.progress[1] >= files:
            return
    pytest.fail("no progress from the indexer")


def test_cancel_stops_between_files_and_keeps_the_work(paths: AppPaths, tmp_path: Path) -> None:
    _register(paths, tmp_path / "root", _many_files())
    job = IndexJob(paths, "docs", factory=SLOW)
    job.start()
    _wait_for_progress(job, 2)
    job.cancel()
    outcome = job.wait(WAIT_S)
    assert outcome is not None
    assert outcome.status == "cancelled"
    assert outcome.report is not None
    with _open(paths) as index:
        kept = index.stats().files
        assert 2 <= kept < MANY
        assert_consistent(index)


def test_kill_9_mid_index_then_rerun_leaves_no_duplicates_or_orphans(
    paths: AppPaths, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    _register(paths, root, _many_files())
    job = IndexJob(paths, "docs", factory=SLOW)
    job.start()
    _wait_for_progress(job, 3)
    assert job.pid is not None
    os.kill(job.pid, signal.SIGKILL)
    outcome = job.wait(WAIT_S)
    assert outcome is not None
    assert outcome.status == "crashed"
    assert outcome.message == CRASHED
    assert outcome.exit_code == -signal.SIGKILL
    assert interrupted_collections(paths) == ["docs"]  # the next start resumes it

    with _open(paths) as index:  # the app keeps working: search what was finished
        partial = index.stats().files
        assert 3 <= partial < MANY
        assert search_documents(index, "shared", "keyword", 5)
        assert_consistent(index, saved=False)

    write(root / "note00.md", "# Note 0\n\nrewritten after the crash\n", mtime_s=1_700_009_000)
    rerun = IndexJob(paths, "docs", factory=FAST)
    rerun.start()
    final = rerun.wait(WAIT_S)
    assert final is not None
    assert final.status == "done", final.message
    with _open(paths) as index:
        stats = index.stats()
        assert stats.files == MANY
        assert stats.failed == []
        assert stats.vectors == stats.chunks
        assert_consistent(index)
        assert search_documents(index, "rewritten", "keyword")[0].path == "root/note00.md"
    again = index_collection(paths, CollectionRegistry(paths).get("docs"), HashingEmbedder())
    assert (again.new, again.changed, again.chunks) == (0, 0, 0)


def test_module_entry_point_prints_json_lines(paths: AppPaths, tmp_path: Path) -> None:
    _register(paths, tmp_path / "root")
    command = [
        sys.executable,
        "-m",
        "agenvoy_desktop.rag.worker",
        "--config-dir",
        str(paths.config_dir),
        "--data-dir",
        str(paths.data_dir),
        "--collection",
        "docs",
        "--factory",
        FAST,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=WAIT_S, check=False, cwd=Path.cwd()
    )
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert messages[-1][0] == "done"
    assert messages[-1][1]["new"] == len(FILES)


def test_kill_stops_a_stuck_child(paths: AppPaths, tmp_path: Path) -> None:
    _register(paths, tmp_path / "root", _many_files())
    job = IndexJob(paths, "docs", factory=SLOW)
    job.start()
    _wait_for_progress(job, 1)
    job.kill()
    outcome = job.wait(WAIT_S)
    assert outcome is not None
    assert outcome.status == "crashed"
    with _open(paths) as index:
        assert index.stats().files >= 1
