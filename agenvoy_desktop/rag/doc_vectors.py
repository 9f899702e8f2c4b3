"""The hnswlib index of one collection's chunk vectors: a cache of the ``chunk_vectors`` table.

The vectors themselves are stored in the collection's SQLite file, in the
same transaction as their chunks, so the file here is derived data: a
label is a chunk's rowid, and opening compares the file's labels with the
table and heals the difference (a kill between the SQL commit and the save
of this file leaves it behind or ahead by a few chunks).  Labels in the
file without a row are marked deleted, rows without a label are added
from their stored blobs; re-embedding is never needed, which matters
because embedding a large collection takes minutes and a heal must not.

A removed chunk is only *marked* deleted (hnswlib keeps its node); when
marked nodes outnumber live ones the index is rebuilt from the table
before it is saved, so the file does not grow without end.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import hnswlib
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.vectors import from_blobs

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]
VECTORS_FILE = "vectors.hnsw"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 100
HNSW_EF_SEARCH = 64
MIN_CAPACITY = 256
COMPACT_MIN_DELETED = 512
"""Marked-deleted nodes tolerated before a rebuild, whatever the live count."""

LoadBlobs = Callable[[Iterable[int] | None], list[tuple[int, bytes]]]
"""``load(labels)``: (label, blob) for those labels, or for every stored vector (None)."""


class ChunkVectors:
    """The in-memory hnswlib index of one collection, and its file.

    *load* reads stored vectors from the collection's database; the index
    is built lazily, on the first :meth:`sync` (a keyword search never
    pays for it).
    """

    def __init__(self, folder: Path, dim: int, load: LoadBlobs) -> None:
        self.file = folder / VECTORS_FILE
        self.dim = dim
        self._load = load
        self._index: hnswlib.Index | None = None
        self._live: set[int] = set()
        self._deleted = 0
        self._dirty = False
        self.healed: str | None = None
        """What the last :meth:`sync` had to fix (for a notice or the doctor), or None."""

    @property
    def live(self) -> frozenset[int]:
        return frozenset(self._live)

    def sync(self, stored: set[int]) -> None:
        """Make the index hold exactly *stored* labels (loading the file on first use)."""
        if self._index is None:
            self._index, labels = self._open_file()
            self._live = set(labels)
            self._deleted = 0
            if stored - labels:
                self.healed = f"vector index behind: {len(stored - labels)} vectors added"
        # Nodes marked deleted before the file was saved are listed again: marking
        # them in memory is enough, the file need not be written for it.
        self.remove(self._live - stored, changed=False)
        missing = sorted(stored - self._live)
        if missing:
            pairs = self._load(missing)
            self.add([label for label, _ in pairs], from_blobs([b for _, b in pairs], self.dim))

    def _open_file(self) -> tuple[hnswlib.Index, set[int]]:
        """The saved index and its labels, or a new empty index when it cannot be used."""
        if self.file.exists():
            try:
                index = hnswlib.Index(space="ip", dim=self.dim)
                index.load_index(str(self.file))
                labels = {int(x) for x in index.get_ids_list()}
                index.set_ef(HNSW_EF_SEARCH)
                return index, labels
            except (OSError, RuntimeError, ValueError, MemoryError) as exc:
                log.warning("vector index %s unreadable (%s); rebuilding", self.file, exc)
                self.healed = "vector index unreadable: rebuilt"
        return self._new_index(MIN_CAPACITY), set()

    def _new_index(self, capacity: int) -> hnswlib.Index:
        index = hnswlib.Index(space="ip", dim=self.dim)
        index.init_index(
            max_elements=max(capacity, MIN_CAPACITY),
            ef_construction=HNSW_EF_CONSTRUCTION,
            M=HNSW_M,
        )
        index.set_ef(HNSW_EF_SEARCH)
        return index

    def add(self, labels: Sequence[int], vectors: FloatArray) -> None:
        """Add vectors (labels not yet in the index)."""
        if not labels:
            return
        index = self._require()
        needed = index.get_current_count() + len(labels)
        if needed > index.get_max_elements():
            index.resize_index(max(needed, index.get_max_elements() * 2))
        index.add_items(np.asarray(vectors, dtype=np.float32), np.asarray(labels, dtype=np.int64))
        self._live.update(labels)
        self._dirty = True

    def remove(self, labels: Iterable[int], *, changed: bool = True) -> None:
        """Mark labels deleted (their chunks are gone); *changed*: the file must be saved."""
        index = self._require()
        for label in labels:
            with contextlib.suppress(RuntimeError):  # already marked in the saved file
                index.mark_deleted(label)
            self._live.discard(label)
            self._deleted += 1
            self._dirty = self._dirty or changed

    def _require(self) -> hnswlib.Index:
        if self._index is None:
            raise RuntimeError("ChunkVectors.sync() must come first")
        return self._index

    def search(self, query: FloatArray, k: int) -> list[tuple[int, float]]:
        """The *k* nearest live labels as (label, cosine similarity), best first."""
        index = self._require()
        want = min(k, len(self._live))
        while want > 0:
            index.set_ef(max(HNSW_EF_SEARCH, want * 2))
            try:
                labels, distances = index.knn_query(np.asarray(query, dtype=np.float32), k=want)
            except RuntimeError:  # too few reachable nodes among the marked ones
                want //= 2
                continue
            return [
                (int(label), 1.0 - float(dist))
                for label, dist in zip(labels[0], distances[0], strict=True)
            ]
        return []

    def flush(self) -> None:
        """Save the file if it changed (compacting first when deleted nodes dominate)."""
        if not self._dirty or self._index is None:
            return
        if self._deleted > max(COMPACT_MIN_DELETED, len(self._live)):
            self._rebuild()
        self.file.parent.mkdir(parents=True, exist_ok=True)
        # A name of this process's own: the window and the indexer may both save.
        tmp = self.file.with_name(f".{VECTORS_FILE}.{os.getpid()}.tmp")
        try:
            self._index.save_index(str(tmp))
            tmp.replace(self.file)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._dirty = False

    def _rebuild(self) -> None:
        pairs = self._load(None)
        self._index = self._new_index(len(pairs) * 2)
        self._live, self._deleted = set(), 0
        self.add([label for label, _ in pairs], from_blobs([b for _, b in pairs], self.dim))

    def clear(self) -> None:
        """Forget the index and delete its file (the collection's vectors were dropped)."""
        self._index, self._live, self._deleted, self._dirty = None, set(), 0, False
        self.file.unlink(missing_ok=True)
