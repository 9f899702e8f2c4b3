"""Changing a collection: add or drop folders, new patterns; the next index run matches it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop.operations import documents as ops
from agenvoy_desktop.operations.changes import DOCUMENTS_CHANGED
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.errors import InvalidRootError, UnknownCollectionError
from agenvoy_desktop.rag.index import index_folder, open_document_index
from agenvoy_desktop.rag.indexer import IndexReport, index_collection
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir
from tests.fakes import HashingEmbedder
from tests.rag.index_support import assert_consistent, make_tree, write


def _index(paths: AppPaths) -> IndexReport:
    collection = CollectionRegistry(paths).get("docs")
    return index_collection(paths, collection, HashingEmbedder())


def _indexed_paths(paths: AppPaths) -> set[str]:
    index = open_document_index(index_folder(documents_dir(paths), "docs"), "docs")
    try:
        assert_consistent(index)
        return {row.path for row in index.files()}
    finally:
        index.close()


def test_the_next_index_run_forgets_what_is_no_longer_covered(
    paths: AppPaths, tmp_path: Path
) -> None:
    notes, mail = tmp_path / "notes", tmp_path / "mail"
    make_tree(notes)
    write(mail / "letter.txt", "Dear reader, the dough rose.\n")
    ops.add_collection(paths, "docs", [notes])
    _index(paths)
    assert _indexed_paths(paths) == {
        "notes/garden.md",
        "notes/kitchen.md",
        "notes/notes.txt",
        "notes/tool.py",
    }
    changed = ops.update_collection(paths, "docs", add=[mail], exclude=["*.py"])
    assert changed.changes == DOCUMENTS_CHANGED
    assert (changed.value.changed, changed.value.reindex) == (True, True)
    report = _index(paths)
    assert (report.new, report.deleted) == (1, 1)
    assert "notes/tool.py" not in _indexed_paths(paths)
    assert "mail/letter.txt" in _indexed_paths(paths)
    ops.update_collection(paths, "docs", drop=[notes], exclude=[])
    report = _index(paths)
    assert report.deleted == 3
    assert _indexed_paths(paths) == {"mail/letter.txt"}
    view = next(f for f in ops.collection_files(paths, "docs"))
    assert view.status == "indexed"


def test_files_left_out_show_until_the_next_run(paths: AppPaths, tmp_path: Path) -> None:
    make_tree(tmp_path / "notes")
    ops.add_collection(paths, "docs", [tmp_path / "notes"])
    _index(paths)
    ops.update_collection(paths, "docs", include=["*.md"])
    gone = {f.path: f for f in ops.collection_files(paths, "docs") if f.status == "deleted"}
    assert set(gone) == {"notes/notes.txt", "notes/tool.py"}
    assert "no longer" in gone["notes/tool.py"].reason


def test_watch_alone_needs_no_index_run(paths: AppPaths, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    ops.add_collection(paths, "docs", [tmp_path / "notes"])
    update = ops.update_collection(paths, "docs", watch=True).value
    assert (update.changed, update.reindex, update.after.watch) == (True, False, True)
    assert [c.name for c in ops.watched_collections(paths)] == ["docs"]
    (view,) = ops.list_collections(paths)
    assert view.watch
    same = ops.update_collection(paths, "docs", watch=True).value
    assert not same.changed


def test_bad_changes_are_refused_with_the_reason(paths: AppPaths, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    ops.add_collection(paths, "docs", [notes])
    with pytest.raises(UnknownCollectionError):
        ops.update_collection(paths, "nope", watch=True)
    with pytest.raises(InvalidRootError, match="at least one"):
        ops.update_collection(paths, "docs", drop=[notes])
    with pytest.raises(InvalidRootError, match="not one of the folders"):
        ops.update_collection(paths, "docs", drop=[tmp_path / "other"])
    with pytest.raises(InvalidRootError, match="not found"):
        ops.update_collection(paths, "docs", add=[tmp_path / "missing"])
    assert ops.update_collection(paths, "docs", drop=[notes], add=[tmp_path]).value.after.roots == (
        tmp_path,
    )
