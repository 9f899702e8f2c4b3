"""open_memory repairs and reconciles; a plain MemoryStore opens the files as they are."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agenvoy_desktop.core import lifecycle, store
from agenvoy_desktop.core.archive import Archive, ArchiveDamagedError
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import AppPaths
from tests.conftest import FakeClock, conversation
from tests.fakes import HashingEmbedder


class Crash(Exception):
    """Stands in for the process dying."""


def test_the_store_imports_neither_lifecycle_nor_reconciliation() -> None:
    tree = ast.parse(Path(store.__file__).read_text("utf-8"))
    imported = {
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    for name in ("lifecycle", "reconcile", "recovery", "startup"):
        assert f"agenvoy_desktop.core.{name}" not in imported


def test_only_open_memory_finishes_an_interrupted_reset(
    paths: AppPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(paths, None, clock=FakeClock()) as first:
        first.import_messages(conversation(["one", "two"]), "s")
        with monkeypatch.context() as patch:

            def crash(*args: object, **kwargs: object) -> None:
                raise Crash

            patch.setattr(Archive, "delete_session_rows", crash)
            with pytest.raises(Crash):
                lifecycle.reset_session(first, "s")
    with MemoryStore(paths) as plain:
        assert list(lifecycle.ops_dir(plain).glob("*.json"))  # left as it was
        assert plain.findings == []
    with open_memory(paths) as opened:
        assert not list(lifecycle.ops_dir(opened).glob("*.json"))
        assert opened.archive.count("s") == 0
        assert any(f.kind == "interrupted operation" for f in opened.findings)


def test_open_memory_counts_a_backlog_of_missing_vectors(paths: AppPaths) -> None:
    with open_memory(paths, None) as writer:  # no model: no vectors
        writer.import_messages(conversation([f"m{i}" for i in range(100)]), "s")
    with open_memory(paths, HashingEmbedder(dim=32)) as opened:
        assert opened.missing_vectors == {"s": 100}  # more than start-up embeds itself
    with MemoryStore(paths, HashingEmbedder(dim=32)) as plain:
        assert plain.missing_vectors == {}  # counting is open_memory's


class _NamedEmbedder(HashingEmbedder):
    """A model of the same width under another name (as e5 is to MiniLM)."""

    model_name = "multilingual-e5-small"


def test_a_model_of_the_same_width_under_another_name_re_embeds(paths: AppPaths) -> None:
    with open_memory(paths, HashingEmbedder(dim=32)) as first:
        first.import_messages(conversation(["tea in Kyoto", "ramen in Sapporo"]), "s")
        assert (first.archive.get_meta("vector_model") or "").startswith("all-MiniLM-L6-v2:32:")
    with open_memory(paths, _NamedEmbedder(dim=32)) as second:
        assert second.model_name == "multilingual-e5-small"
        assert (second.archive.get_meta("vector_model") or "").startswith(
            "multilingual-e5-small:32:"
        )
        assert len(second.archive.vector_rowids("s")) == 2  # embedded again at start-up


def test_a_damaged_archive_is_refused_or_rebuilt(paths: AppPaths) -> None:
    paths.ensure().archive_db.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(ArchiveDamagedError):
        open_memory(paths, repair_damage=False)
    with open_memory(paths) as opened:
        assert any("set aside" in n for n in opened.notices)
        assert opened.session_ids() == []
