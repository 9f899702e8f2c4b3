"""index_collection: incremental re-index, deletions, unreadable files, cancel, one at a time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agenvoy_desktop.core.locks import FileLock, StoreBusyError
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.documents import Document
from agenvoy_desktop.rag.index import index_folder, open_document_index
from agenvoy_desktop.rag.indexer import index_collection
from agenvoy_desktop.rag.readers import read_document
from agenvoy_desktop.rag.registry import documents_dir
from agenvoy_desktop.rag.search import search_documents
from tests.fakes import HashingEmbedder
from tests.rag.index_support import FILES, assert_consistent, make_tree, write


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The collection paths the indexer read, in order."""
    seen: list[str] = []
    real = read_document

    def spy(file: Path, path: str) -> Document:
        seen.append(path)
        return real(file, path)

    monkeypatch.setattr("agenvoy_desktop.rag.indexer.read_document", spy)
    return seen


def _folder(paths: AppPaths) -> Path:
    return index_folder(documents_dir(paths), "docs")


def test_first_run_indexes_every_file(paths: AppPaths, tmp_path: Path, reads: list[str]) -> None:
    collection = make_tree(tmp_path / "root")
    progress: list[tuple[str, int, int]] = []
    report = index_collection(
        paths, collection, HashingEmbedder(), lambda *step: progress.append(step)
    )
    assert (report.new, report.unreadable, report.cancelled) == (len(FILES), 0, False)
    assert report.chunks >= len(FILES)
    assert ("index", len(FILES), len(FILES)) in progress
    assert progress[0][0] == "scan"
    with open_document_index(_folder(paths)) as index:
        stats = index.stats()
        assert (stats.files, stats.chunks, stats.vectors) == (
            len(FILES),
            report.chunks,
            report.chunks,
        )
        assert_consistent(index)


def test_reindex_touches_only_changed_files_and_removes_deleted(
    paths: AppPaths, tmp_path: Path, reads: list[str]
) -> None:
    root = tmp_path / "root"
    collection = make_tree(root)
    embedder = HashingEmbedder()
    first = index_collection(paths, collection, embedder)
    assert (first.new, first.changed, first.deleted) == (len(FILES), 0, 0)
    assert sorted(reads) == sorted(f"root/{name}" for name in FILES)

    reads.clear()
    write(root / "garden.md", "# Garden\n\nRoses want morning light.\n", mtime_s=1_700_000_500)
    (root / "notes.txt").unlink()
    os.utime(root / "tool.py", ns=(1_700_000_900 * 10**9,) * 2)  # touched, same content
    second = index_collection(paths, collection, embedder)
    assert reads == ["root/garden.md"]
    assert (second.new, second.changed, second.deleted, second.touched) == (0, 1, 1, 1)

    with open_document_index(_folder(paths)) as index:
        assert set(index.manifest().files) == {"root/garden.md", "root/kitchen.md", "root/tool.py"}
        assert search_documents(index, "tomatoes", "keyword") == []
        assert search_documents(index, "roses", "keyword")[0].path == "root/garden.md"
        hits = search_documents(index, "quarterly budget", "hybrid", 5, embedder)
        assert all(h.path != "root/notes.txt" for h in hits)
        assert index.manifest().files["root/tool.py"].mtime_ns == 1_700_000_900 * 10**9
        assert_consistent(index)

    reads.clear()
    third = index_collection(paths, collection, embedder)
    assert reads == []
    assert (third.new, third.changed, third.deleted, third.chunks) == (0, 0, 0, 0)


def test_unreadable_files_are_listed_and_not_retried(
    paths: AppPaths, tmp_path: Path, reads: list[str]
) -> None:
    root = tmp_path / "root"
    collection = make_tree(root, {"good.md": "fine text\n"})
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    report = index_collection(paths, collection, HashingEmbedder())
    assert report.unreadable == 1
    with open_document_index(_folder(paths)) as index:
        failed = index.stats().failed
        assert [f.path for f in failed] == ["root/broken.pdf"]
        assert failed[0].reason
    reads.clear()
    index_collection(paths, collection, HashingEmbedder())
    assert reads == []


def test_cancel_keeps_what_was_done(paths: AppPaths, tmp_path: Path) -> None:
    collection = make_tree(tmp_path / "root")
    done: list[int] = []

    def progress(stage: str, count: int, total: int) -> None:
        if stage == "index":
            done.append(count)

    report = index_collection(
        paths, collection, HashingEmbedder(), progress, lambda: len(done) >= 2
    )
    assert report.cancelled
    with open_document_index(_folder(paths)) as index:
        assert index.stats().files == 2
        assert_consistent(index)
    rest = index_collection(paths, collection, HashingEmbedder())
    assert rest.new == len(FILES) - 2
    with open_document_index(_folder(paths)) as index:
        assert index.stats().files == len(FILES)
        assert_consistent(index)


def test_without_an_embedder_keyword_search_still_works(paths: AppPaths, tmp_path: Path) -> None:
    collection = make_tree(tmp_path / "root")
    index_collection(paths, collection, None)
    with open_document_index(_folder(paths)) as index:
        assert index.stats().vectors == 0
        assert search_documents(index, "checksum", "hybrid", 5, None)[0].path == "root/tool.py"


def test_a_second_indexer_is_refused(paths: AppPaths, tmp_path: Path) -> None:
    collection = make_tree(tmp_path / "root")
    lock = FileLock(_folder(paths) / "index.lock", "held", "test")
    lock.acquire("test", shared=False, wait_s=0)
    try:
        with pytest.raises(StoreBusyError):
            index_collection(paths, collection, HashingEmbedder())
    finally:
        lock.release()


def test_a_collection_never_indexes_the_profile(paths: AppPaths) -> None:
    """A root above the profile (a whole home folder) skips the profile's folders."""
    write(paths.config_dir / "memory" / "secret.md", "private conversation\n")
    write(paths.config_dir.parent / "mine.md", "my own notes\n")
    collection = Collection("docs", (paths.config_dir.parent,))
    report = index_collection(paths, collection, HashingEmbedder())
    assert report.new == 1
    with open_document_index(_folder(paths)) as index:
        assert list(index.manifest().files) == ["profile/mine.md"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX file names are bytes")
def test_a_file_name_that_is_not_utf8_is_skipped_with_a_notice(
    paths: AppPaths, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    collection = make_tree(root, {"ok.md": "fine text\n"})
    try:
        (root / os.fsdecode(b"bad\xff.md")).write_text("odd name\n")
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    report = index_collection(paths, collection, HashingEmbedder())
    assert report.new == 2
    assert any("not valid text" in n for n in report.notices)
    with open_document_index(_folder(paths)) as index:
        assert list(index.manifest().files) == ["root/ok.md"]
        assert_consistent(index)


def test_a_reader_bug_fails_one_file_not_the_run(
    paths: AppPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = make_tree(tmp_path / "root", {"a.md": "alpha\n", "b.md": "beta\n"})
    real = read_document

    def buggy(file: Path, path: str) -> Document:
        if path.endswith("a.md"):
            raise AttributeError("a bug in a reader")
        return real(file, path)

    monkeypatch.setattr("agenvoy_desktop.rag.indexer.read_document", buggy)
    report = index_collection(paths, collection, HashingEmbedder())
    assert report.unreadable == 1
    with open_document_index(_folder(paths)) as index:
        failed = index.stats().failed
        assert [(f.path, f.reason) for f in failed] == [
            ("root/a.md", "could not be read (internal error: AttributeError)")
        ]
        assert index.stats().chunks == 1
