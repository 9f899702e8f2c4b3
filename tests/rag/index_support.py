"""Helpers for the index tests: a small collection on disk, embedder factories, consistency checks.

The factories are named by ``module:function`` for the indexer child
process, which builds its own embedder (see ``agenvoy_desktop.rag.worker``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.doc_vectors import ChunkVectors
from agenvoy_desktop.rag.index import DocumentIndex
from tests.fakes import HashingEmbedder

NS = 1_000_000_000

FILES = {
    "garden.md": "# Garden\n\nTomatoes need full sun and deep watering twice a week.\n",
    "kitchen.md": "# Recipes\n\n## Bread\n\nKnead the dough for ten minutes, then let it rise.\n",
    "notes.txt": "The quarterly budget review is scheduled for Thursday morning.\n",
    "tool.py": "def compute_checksum(data):\n    return sum(data) % 255\n",
}


def write(path: Path, text: str, mtime_s: int = 1_700_000_000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(mtime_s * NS, mtime_s * NS))
    return path


def make_tree(root: Path, files: dict[str, str] = FILES) -> Collection:
    for name, text in files.items():
        write(root / name, text)
    return Collection("docs", (root,))


def hashing_embedder(paths: AppPaths, model_path: str | None) -> HashingEmbedder:
    """The child's embedder in tests: instant and deterministic."""
    del paths, model_path
    return HashingEmbedder()


class SlowEmbedder(HashingEmbedder):
    """A hashing embedder that takes its time, so a test can kill the child mid-run."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        time.sleep(0.15)
        return super().embed(texts)


def slow_embedder(paths: AppPaths, model_path: str | None) -> SlowEmbedder:
    del paths, model_path
    return SlowEmbedder()


def broken_embedder(paths: AppPaths, model_path: str | None) -> HashingEmbedder:
    del paths
    raise FileNotFoundError(f"no model at {model_path}")


def assert_consistent(index: DocumentIndex, *, saved: bool = True) -> None:
    """No duplicate chunk, no orphan vector or FTS row, the hnswlib file matching the table."""
    db = index._db  # the test reads the tables directly
    chunk_ids = [r[0] for r in db.execute("SELECT chunk_id FROM chunks")]
    assert len(chunk_ids) == len(set(chunk_ids)), "duplicate chunks"
    rowids = {int(r[0]) for r in db.execute("SELECT id FROM chunks")}
    labels = {int(r[0]) for r in db.execute("SELECT chunk_rowid FROM chunk_vectors")}
    assert labels <= rowids, "orphan vectors"
    fts = db.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone()[0]
    assert fts == len(rowids), "FTS rows out of step with chunks"
    paths = {r[0] for r in db.execute("SELECT DISTINCT path FROM chunks")}
    files = {r[0] for r in db.execute("SELECT path FROM files")}
    assert paths <= files, "chunks of a file the manifest does not list"
    dim = index.dim
    if dim is not None and labels:
        reopened = ChunkVectors(index.folder, dim, index._blobs)
        reopened.sync(labels)
        assert reopened.live == labels
        if saved:
            assert reopened.healed is None, reopened.healed
