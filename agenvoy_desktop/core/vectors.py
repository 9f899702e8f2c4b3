"""Semantic recall index for one session (layer 2, DESIGN.md §1.2).

The vectors themselves live in the archive database; the hnswlib file next
to history.json is a cache of them.  Opening checks the file against the
database and heals it: a missing, unreadable or stale file is rebuilt or
topped up from the database, silently.  Labels are archive rowids, so a hit
leads straight to its message.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import hnswlib
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.atomic import atomic_write_text

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]

INDEX_FILE = "vectors.hnsw"
META_FILE = "vectors.meta.json"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 96


def to_blob(vector: FloatArray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: Sequence[bytes], dim: int) -> FloatArray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float32)


class SessionVectors:
    """hnswlib index over one session's live vectors (those still in history.json)."""

    def __init__(self, folder: Path, session_id: str, archive: Archive, dim: int) -> None:
        self.folder = folder
        self.session_id = session_id
        self.archive = archive
        self.dim = dim
        self._index: hnswlib.Index | None = None
        self._labels: set[int] = set()
        self._dirty = False
        self.healed: str | None = None  # what opening had to fix, for the doctor

    @property
    def index_path(self) -> Path:
        return self.folder / INDEX_FILE

    @property
    def count(self) -> int:
        self._ensure()
        return len(self._labels)

    def _new_index(self, capacity: int) -> hnswlib.Index:
        index = hnswlib.Index(space="ip", dim=self.dim)
        index.init_index(
            max_elements=max(capacity, 64), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M
        )
        index.set_ef(HNSW_EF_SEARCH)
        return index

    def _ensure(self) -> hnswlib.Index:
        if self._index is not None:
            return self._index
        stored = self.archive.vector_rowids(self.session_id)
        index, labels = self._load_file()
        if index is None or not labels <= stored:
            if index is not None or stored:
                self.healed = "index file missing or unreadable: rebuilt"
            self._rebuild(stored)
        else:
            self._index, self._labels = index, labels
            missing = sorted(stored - labels)
            if missing:
                self.healed = f"index file stale: {len(missing)} vectors added"
                self._add_from_archive(missing)
        assert self._index is not None
        return self._index

    def _load_file(self) -> tuple[hnswlib.Index | None, set[int]]:
        meta_path = self.folder / META_FILE
        if not self.index_path.exists() or not meta_path.exists():
            return None, set()
        try:
            meta = json.loads(meta_path.read_text("utf-8"))
            if meta.get("dim") != self.dim:
                return None, set()
            index = hnswlib.Index(space="ip", dim=self.dim)
            index.load_index(str(self.index_path), max_elements=int(meta["capacity"]))
            index.set_ef(HNSW_EF_SEARCH)
            labels = {int(x) for x in index.get_ids_list()}
            if len(labels) != int(meta["count"]):
                return None, set()
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            log.warning("vector index %s unreadable (%s); rebuilding", self.index_path, exc)
            return None, set()
        return index, labels

    def _rebuild(self, rowids: set[int]) -> None:
        self._index = self._new_index(len(rowids) * 2)
        self._labels = set()
        if rowids:
            self._add_from_archive(sorted(rowids))
        # Nothing to save for an empty session unless a stale file must be replaced:
        # a search must not leave empty index files behind.
        self._dirty = bool(rowids) or self.index_path.exists()

    def _add_from_archive(self, rowids: Sequence[int]) -> None:
        wanted = set(rowids)
        pairs = [(r, b) for r, b in self.archive.vectors(self.session_id) if r in wanted]
        self._insert([r for r, _ in pairs], from_blobs([b for _, b in pairs], self.dim))

    def _insert(self, rowids: Sequence[int], vectors: FloatArray) -> None:
        if not rowids:
            return
        index = self._index
        assert index is not None
        needed = len(self._labels) + len(rowids)
        if needed > index.get_max_elements():
            index.resize_index(max(needed, index.get_max_elements() * 2))
        index.add_items(vectors, np.asarray(rowids, dtype=np.int64))
        self._labels.update(rowids)
        self._dirty = True

    # -- public -----------------------------------------------------------
    def add(self, model: str, rowids: Sequence[int], vectors: FloatArray) -> None:
        """Persist vectors in the archive, then add them to the index."""
        self._ensure()
        self.archive.add_vectors(
            self.session_id, model, [(r, to_blob(v)) for r, v in zip(rowids, vectors, strict=True)]
        )
        self._insert(rowids, vectors)

    def remove(self, rowids: Sequence[int]) -> None:
        """Drop vectors (compaction): the index is rebuilt from what remains."""
        if not rowids:
            return
        self.archive.delete_vectors(rowids)
        self._rebuild(self.archive.vector_rowids(self.session_id))
        self.flush()

    def clear(self) -> None:
        """Forget everything (reset/remove); the archive rows are cleared by the caller."""
        self._index, self._labels, self._dirty = None, set(), False
        for name in (INDEX_FILE, META_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()

    def search(
        self, query: FloatArray, k: int, exclude: frozenset[int] = frozenset()
    ) -> list[tuple[int, float]]:
        """Nearest live vectors as (rowid, cosine similarity), best first."""
        index = self._ensure()
        live = len(self._labels)
        if live == 0 or k <= 0:
            return []
        want = min(live, k + len(exclude))
        index.set_ef(max(HNSW_EF_SEARCH, want))
        labels, distances = index.knn_query(np.asarray(query, dtype=np.float32), k=want)
        out = [
            (int(label), 1.0 - float(dist))
            for label, dist in zip(labels[0], distances[0], strict=True)
            if int(label) not in exclude
        ]
        return out[:k]

    def flush(self) -> None:
        """Save the index file if it changed (cheap to skip: the archive has the truth)."""
        if not self._dirty or self._index is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.index_path.with_name(f".{INDEX_FILE}.tmp")
        self._index.save_index(str(tmp))
        tmp.replace(self.index_path)
        atomic_write_text(
            self.folder / META_FILE,
            json.dumps(
                {
                    "dim": self.dim,
                    "count": len(self._labels),
                    "capacity": self._index.get_max_elements(),
                }
            ),
        )
        self._dirty = False
