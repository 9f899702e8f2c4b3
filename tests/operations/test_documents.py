"""The Documents tab's operations: reads, writes, the indexer run, and the citation gate."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from agenvoy_desktop.operations import documents as ops
from agenvoy_desktop.operations.changes import DOCUMENTS_CHANGED
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.index import index_folder
from agenvoy_desktop.rag.index_schema import INDEX_FILE
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir
from agenvoy_desktop.rag.worker import IndexJob, JobOutcome
from tests.fakes import HashingEmbedder, OtherHashingEmbedder
from tests.rag.builders import make_pdf
from tests.rag.index_support import FILES, make_tree, write

FAST = "tests.rag.index_support:hashing_embedder"
SLOW = "tests.rag.index_support:slow_embedder"
BROKEN = "tests.rag.index_support:broken_embedder"


def _never() -> bool:
    return False


def _add(paths: AppPaths, root: Path) -> None:
    make_tree(root)
    write(root / "broken.pdf", "this is not a PDF at all")
    changed = ops.add_collection(paths, "docs", [root], exclude=["*.tmp"])
    assert changed.changes == DOCUMENTS_CHANGED


def _index(paths: AppPaths) -> JobOutcome:
    seen: list[tuple[str, int, int]] = []
    changed = ops.run_index_job(paths, "docs", FAST, lambda *p: seen.append(p), _never)
    assert changed.changes == DOCUMENTS_CHANGED
    assert seen
    assert seen[-1][0] == "index"
    return changed.value


def test_a_collection_is_listed_before_and_after_indexing(paths: AppPaths, tmp_path: Path) -> None:
    _add(paths, tmp_path / "root")
    (view,) = ops.list_collections(paths)
    assert (view.name, view.files, view.indexed, view.problem) == ("docs", 0, False, None)
    assert view.exclude == ("*.tmp",)
    assert not index_folder(documents_dir(paths), "docs").exists(), "a read created the index"
    outcome = _index(paths)
    assert outcome.status == "done"
    assert "Indexed 'docs'" in ops.outcome_text(outcome)
    (view,) = ops.list_collections(paths)
    assert view.files == len(FILES) + 1
    assert view.failed == 1
    assert view.chunks >= len(FILES)
    assert view.indexed


def test_files_show_status_reason_and_disk_changes(paths: AppPaths, tmp_path: Path) -> None:
    root = tmp_path / "root"
    _add(paths, root)
    _index(paths)
    files = {f.path: f for f in ops.collection_files(paths, "docs")}
    assert files["root/garden.md"].status == "indexed"
    assert files["root/broken.pdf"].status == "failed"
    assert files["root/broken.pdf"].reason
    write(root / "garden.md", "# Garden\n\nNow with roses.\n", mtime_s=1_800_000_000)
    write(root / "new.md", "# New\n")
    (root / "notes.txt").unlink()
    files = {f.path: f for f in ops.collection_files(paths, "docs")}
    assert files["root/garden.md"].status == "changed"
    assert files["root/new.md"].status == "new"
    assert files["root/notes.txt"].status == "deleted"


def test_chunks_of_a_file_in_reading_order(paths: AppPaths, tmp_path: Path) -> None:
    _add(paths, tmp_path / "root")
    _index(paths)
    chunks = ops.collection_chunks(paths, "docs", "root/kitchen.md")
    assert chunks
    assert any("Knead" in c.text for c in chunks)
    assert all(c.citation.startswith("root/kitchen.md:") for c in chunks)
    assert chunks[0].place.startswith("line")
    assert ops.collection_chunks(paths, "docs", "root/none.md") == []


def test_search_by_words_and_meaning(paths: AppPaths, tmp_path: Path) -> None:
    _add(paths, tmp_path / "root")
    assert ops.search(paths, "docs", "dough") == [], "never indexed: nothing, no error"
    _index(paths)
    hits = ops.search(paths, "docs", "dough", mode="keyword")
    assert hits[0].path == "root/kitchen.md"
    hits = ops.search(paths, "docs", "dough rise", mode="hybrid", embedder=HashingEmbedder())
    assert hits[0].citation.startswith("root/kitchen.md:")


def test_remove_deletes_the_index_not_the_files(paths: AppPaths, tmp_path: Path) -> None:
    root = tmp_path / "root"
    _add(paths, root)
    _index(paths)
    assert ops.remove_collection(paths, "docs").changes == DOCUMENTS_CHANGED
    assert ops.list_collections(paths) == []
    assert not index_folder(documents_dir(paths), "docs").exists()
    assert (root / "garden.md").exists()


def test_cancel_keeps_what_was_done(paths: AppPaths, tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_tree(root, {f"n{i:02d}.md": f"# N{i}\n\nword{i}\n" for i in range(40)})
    CollectionRegistry(paths).add("docs", [root])
    progress: list[tuple[str, int, int]] = []

    def cancelled() -> bool:
        return any(stage == "index" and done >= 1 for stage, done, _ in progress)

    changed = ops.run_index_job(paths, "docs", SLOW, lambda *p: progress.append(p), cancelled)
    assert changed.value.status == "cancelled"
    assert "cancelled" in ops.outcome_text(changed.value)
    (view,) = ops.list_collections(paths)
    assert 1 <= view.files < 40


def test_a_killed_indexer_is_a_known_error(paths: AppPaths, tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_tree(root, {f"n{i:02d}.md": f"# N{i}\n\nword{i}\n" for i in range(40)})
    CollectionRegistry(paths).add("docs", [root])
    jobs: list[IndexJob] = []

    def progress(stage: str, done: int, _total: int) -> None:
        if stage == "index" and done >= 1 and jobs[0].pid is not None and len(jobs) == 1:
            jobs.append(jobs[0])
            os.kill(jobs[0].pid, signal.SIGKILL)

    with pytest.raises(ops.IndexerCrashedError, match="stopped unexpectedly"):
        ops.run_index_job(paths, "docs", SLOW, progress, _never, started=jobs.append)
    (view,) = ops.list_collections(paths)
    assert view.files >= 1, "what was indexed before the kill is kept"
    assert ops.run_index_job(paths, "docs", FAST, lambda *_: None, _never).value.status == "done"


def test_a_broken_embedder_is_a_failure_line(paths: AppPaths, tmp_path: Path) -> None:
    _add(paths, tmp_path / "root")
    with pytest.raises(ops.IndexFailedError, match="embedding model"):
        ops.run_index_job(paths, "docs", BROKEN, lambda *_: None, _never)


def test_a_damaged_index_never_breaks_the_list(paths: AppPaths, tmp_path: Path) -> None:
    _add(paths, tmp_path / "root")
    _index(paths)
    folder = index_folder(documents_dir(paths), "docs")
    (folder / INDEX_FILE).write_bytes(b"garbage" * 1000)
    (view,) = ops.list_collections(paths)
    assert view.files == 0 or view.problem, "a damaged index is set aside or named"


def test_citations_are_found_and_parsed() -> None:
    text = "See notes/a.md:12-30 and x/report.pdf p. 3, also `root/tool.py:4`; not 12:30."
    found = [c for _, _, c in ops.find_citations(text)]
    assert found == [
        ops.Citation("notes/a.md", 12, 30),
        ops.Citation("x/report.pdf", page=3),
        ops.Citation("root/tool.py", 4, 4),
    ]
    assert ops.parse_citation("notes/a.md:12-30") == ops.Citation("notes/a.md", 12, 30)
    assert ops.parse_citation("notes/a.md:12-30 extra") is None
    assert ops.Citation("a/b.md", 3, 3).text == "a/b.md:3"


def test_only_files_inside_a_root_resolve(paths: AppPaths, tmp_path: Path) -> None:
    root = tmp_path / "root"
    _add(paths, root)
    write(tmp_path / "secret.txt", "private")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    roots = ops.citation_roots(paths)
    assert ops.resolve_citation(roots, "root/garden.md") == (root / "garden.md").resolve()
    assert ops.resolve_citation(roots, "root/../secret.txt") is None
    assert ops.resolve_citation(roots, "root/link.txt") is None
    assert ops.resolve_citation(roots, "other/garden.md") is None
    assert ops.resolve_citation(roots, "root/missing.md") is None
    cited = ops.read_cited(roots, ops.Citation("root/kitchen.md", 3, 5))
    assert "Bread" in cited.text
    assert (cited.first_line, cited.last_line) == (3, 5)
    with pytest.raises(ops.CitationError):
        ops.read_cited(roots, ops.Citation("root/../secret.txt", 1, 1))


def test_a_pdf_citation_shows_its_page(paths: AppPaths, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "report.pdf").write_bytes(make_pdf([["First page text"], ["Budget figures here"]]))
    ops.add_collection(paths, "docs", [root])
    roots = ops.citation_roots(paths)
    cited = ops.read_cited(roots, ops.Citation("root/report.pdf", page=2))
    assert "Budget figures" in cited.text
    assert "First page" not in cited.text
    assert cited.note == "page 2"


def test_collections_of_another_model_are_found_for_indexing_again(
    paths: AppPaths, tmp_path: Path
) -> None:
    _add(paths, tmp_path / "root")
    ops.add_collection(paths, "empty", [tmp_path / "root"])  # never indexed: nothing to redo
    assert ops.indexed_by_another_model(paths, HashingEmbedder()) == []
    _index(paths)
    assert ops.indexed_by_another_model(paths, HashingEmbedder()) == []
    assert ops.indexed_by_another_model(paths, None) == []
    assert ops.indexed_by_another_model(paths, OtherHashingEmbedder()) == ["docs"]
