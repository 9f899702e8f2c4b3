"""DocumentIndex: one transaction per file, manifest, stats, vector healing, damaged files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import hnswlib
import pytest

from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.rag.chunking import make_chunk
from agenvoy_desktop.rag.doc_vectors import VECTORS_FILE
from agenvoy_desktop.rag.index import (
    DocumentIndex,
    PreparedFile,
    open_document_index,
)
from agenvoy_desktop.rag.index_schema import INDEX_FILE
from agenvoy_desktop.rag.scan import FileEntry, FileState, Manifest, scan_collection
from tests.fakes import HashingEmbedder
from tests.rag.index_support import assert_consistent, make_tree

EMBEDDER = HashingEmbedder()


def _entry(path: str, sha: str = "s1") -> FileEntry:
    return FileEntry(path, Path("/nowhere") / path, FileState(10, 20, sha))


def _prepared(path: str, *texts: str) -> PreparedFile:
    chunks = [make_chunk(path, text, "H", lines=(i + 1, i + 1)) for i, text in enumerate(texts)]
    return PreparedFile(chunks, EMBEDDER.embed([c.text for c in chunks]))


@pytest.fixture
def index(tmp_path: Path) -> Iterator[DocumentIndex]:
    opened = open_document_index(tmp_path / "docs")
    opened.use_embedder(EMBEDDER.dim, "hashing")
    yield opened
    opened.close()


def test_replace_file_swaps_chunks_and_vectors(index: DocumentIndex) -> None:
    index.replace_file(_entry("a.md"), _prepared("a.md", "alpha one", "alpha two"))
    index.replace_file(_entry("a.md", "s2"), _prepared("a.md", "beta only"))
    stats = index.stats()
    assert (stats.files, stats.chunks, stats.vectors) == (1, 1, 1)
    assert index.manifest().files["a.md"].sha256 == "s2"
    assert index.keyword_ranked("alpha", 5) == []
    assert len(index.keyword_ranked("beta", 5)) == 1
    vectors = index.vectors()
    assert vectors is not None
    assert vectors.live == index.vector_labels()
    index.flush()
    assert_consistent(index)


def test_remove_file_drops_everything_of_it(index: DocumentIndex) -> None:
    index.replace_file(_entry("a.md"), _prepared("a.md", "alpha"))
    index.replace_file(_entry("b.md"), _prepared("b.md", "beta"))
    assert index.remove_file("a.md") == 1
    assert set(index.manifest().files) == {"b.md"}
    assert index.keyword_ranked("alpha", 5) == []
    index.flush()
    assert_consistent(index)


def test_a_failed_file_is_listed_with_its_reason(index: DocumentIndex) -> None:
    index.replace_file(_entry("a.pdf"), _prepared("a.pdf", "old text"))
    index.replace_file(_entry("a.pdf", "s2"), PreparedFile(reason="the PDF is encrypted"))
    stats = index.stats()
    assert stats.chunks == 0
    assert [(f.path, f.reason) for f in stats.failed] == [("a.pdf", "the PDF is encrypted")]
    assert stats.last_indexed_ns is not None


def test_a_failing_write_leaves_the_file_as_it_was(index: DocumentIndex) -> None:
    index.replace_file(_entry("a.md"), _prepared("a.md", "alpha"))
    bad = PreparedFile(_prepared("a.md", "x", "y").chunks, EMBEDDER.embed(["only one"]))
    with pytest.raises(ValueError, match="one vector per chunk"):
        index.replace_file(_entry("a.md", "s2"), bad)
    duplicate = _prepared("a.md", "same")
    twice = PreparedFile([*duplicate.chunks, *duplicate.chunks])
    with pytest.raises(Exception, match="UNIQUE"):
        index.replace_file(_entry("a.md", "s3"), twice)
    assert index.manifest().files["a.md"].sha256 == "s1"
    assert len(index.keyword_ranked("alpha", 5)) == 1
    index.flush()
    assert_consistent(index)


def test_vector_file_behind_the_table_heals_at_open(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    with open_document_index(folder) as index:
        index.use_embedder(EMBEDDER.dim, "hashing")
        index.replace_file(_entry("a.md"), _prepared("a.md", "alpha"))
        index.flush()
        # Written after the last save, then "killed": the file never hears of b.md,
        # and a.md's replacement leaves a stale label in it.
        index.replace_file(_entry("b.md"), _prepared("b.md", "beta"))
        index.replace_file(_entry("a.md", "s2"), _prepared("a.md", "gamma"))
        index._vectors = None  # dropped unsaved, as a kill would
    with open_document_index(folder) as index:
        vectors = index.vectors()
        assert vectors is not None
        assert vectors.live == index.vector_labels()
        assert len(vectors.live) == 2
        hits = vectors.search(EMBEDDER.embed(["beta"])[0], 5)
        assert {label for label, _ in hits} == index.vector_labels()
        assert_consistent(index)


def test_unreadable_vector_file_is_rebuilt(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    with open_document_index(folder) as index:
        index.use_embedder(EMBEDDER.dim, "hashing")
        index.replace_file(_entry("a.md"), _prepared("a.md", "alpha", "beta"))
    (folder / VECTORS_FILE).write_bytes(b"\x00garbage")
    with open_document_index(folder) as index:
        vectors = index.vectors()
        assert vectors is not None
        assert vectors.live == index.vector_labels()
        assert vectors.healed is not None


def test_damaged_index_is_set_aside_with_a_notice(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / INDEX_FILE).write_bytes(b"this is not a database" * 100)
    with open_document_index(folder, "docs") as index:
        assert index.stats().files == 0
        assert len(index.notices) == 1
        assert "set aside" in index.notices[0]
    assert [p.name for p in folder.glob(f"{INDEX_FILE}.damaged-*")]


def test_a_new_embedding_model_empties_the_index(index: DocumentIndex) -> None:
    index.replace_file(_entry("a.md"), _prepared("a.md", "alpha"))
    assert index.use_embedder(EMBEDDER.dim, "hashing") is False
    assert index.use_embedder(32, "another") is True
    assert index.stats().files == 0
    assert index.manifest() == Manifest()


def test_apply_stops_between_files_when_cancelled(index: DocumentIndex, tmp_path: Path) -> None:
    collection = make_tree(tmp_path / "root")
    plan = scan_collection(collection, index.manifest())
    calls: list[str] = []

    def prepare(entry: FileEntry) -> PreparedFile:
        calls.append(entry.path)
        if len(calls) == 2:
            raise OperationCancelledError("stop")
        return _prepared(entry.path, f"text of {entry.path}")

    result = index.apply(plan, prepare)
    assert result.cancelled
    assert result.indexed == 1
    assert list(index.manifest().files) == [calls[0]]
    assert_consistent(index)


_DIE_MID_TRANSACTION = """
import os, sys
from pathlib import Path
from agenvoy_desktop.rag.index import DocumentIndex, open_document_index
from tests.rag.test_index import EMBEDDER, _entry, _prepared

index = open_document_index(Path(sys.argv[1]))
real = DocumentIndex._insert_chunk
count = [0]

def dying(self, db, chunk):
    count[0] += 1
    if count[0] == 2:
        os._exit(9)  # killed with the new chunks half written
    return real(self, db, chunk)

DocumentIndex._insert_chunk = dying
index.replace_file(_entry("a.md", "s2"), _prepared("a.md", "new one", "new two", "new three"))
"""


def test_a_process_killed_mid_transaction_leaves_the_old_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    with open_document_index(folder) as index:
        index.use_embedder(EMBEDDER.dim, "hashing")
        index.replace_file(_entry("a.md"), _prepared("a.md", "old alpha", "old beta"))
    done = subprocess.run(
        [sys.executable, "-c", _DIE_MID_TRANSACTION, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 9, done.stderr
    with open_document_index(folder) as index:
        assert index.manifest().files["a.md"].sha256 == "s1"
        assert index.stats().chunks == 2
        assert len(index.keyword_ranked("alpha", 5)) == 1
        assert index.keyword_ranked("new", 5) == []
        assert_consistent(index)


def test_searching_does_not_rewrite_a_current_vector_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    with open_document_index(folder) as index:
        index.use_embedder(EMBEDDER.dim, "hashing")
        index.replace_file(_entry("a.md"), _prepared("a.md", "alpha", "beta"))
        index.replace_file(_entry("a.md", "s2"), _prepared("a.md", "gamma"))  # marks two deleted
    saved = (folder / VECTORS_FILE).stat().st_mtime_ns
    with open_document_index(folder) as index:
        assert len(index.semantic_ranked(EMBEDDER.embed(["gamma"])[0], 5)) == 1
    assert (folder / VECTORS_FILE).stat().st_mtime_ns == saved


def test_deleted_nodes_are_compacted_away(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agenvoy_desktop.rag.doc_vectors.COMPACT_MIN_DELETED", 0)
    folder = tmp_path / "docs"
    with open_document_index(folder) as index:
        index.use_embedder(EMBEDDER.dim, "hashing")
        for round_ in range(3):
            index.replace_file(_entry("a.md", f"s{round_}"), _prepared("a.md", f"v{round_} x"))
    saved = hnswlib.Index(space="ip", dim=EMBEDDER.dim)
    saved.load_index(str(folder / VECTORS_FILE))
    with open_document_index(folder) as index:
        assert {int(x) for x in saved.get_ids_list()} == index.vector_labels()
        assert_consistent(index)


def test_keyword_scores_are_the_tables_configured_rank(index: DocumentIndex) -> None:
    """RANK_SQL repeats the weights the schema gave ``rank``; they must not drift apart."""
    texts = ["alpha beta", "alpha alpha gamma", "beta alpha delta epsilon", "alpha"]
    index.replace_file(_entry("a.md"), _prepared("a.md", *texts))
    ranked = index.keyword_ranked("alpha beta", 10)
    rows = index._query(
        "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank",
        ('{body where_} : ("alpha" OR "beta")',),
    )
    assert ranked == [(int(rowid), -float(rank)) for rowid, rank in rows]
