"""Semantic recall index for one session (the semantic-recall layer).

The vectors themselves live in the archive database; the hnswlib file next
to history.json is a cache of them.  Opening checks the file against the
database and heals it: a missing, unreadable or stale file is rebuilt or
topped up from the database, silently.  A message may have several vectors
(a long message is embedded in parts); labels pack the message's archive
rowid and the part (:func:`~agenvoy_desktop.core.archive.vector_label`), so
a hit leads straight to its message, and a message scores its best part.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.archive import MAX_PARTS, Archive, label_message, vector_label
from agenvoy_desktop.core.atomic import atomic_write_text

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]

INDEX_FILE = "vectors.hnsw"
META_FILE = "vectors.meta.json"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 96
LABELS = "rowid<<6|part"
"""How labels are made; an index file that says otherwise is rebuilt."""


def message_of(label: int) -> int:
    """The archive rowid a vector label belongs to."""
    return label_message(label)


def to_blob(vector: FloatArray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: Sequence[bytes], dim: int) -> FloatArray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float32)


META_FIELDS: dict[str, type] = {"dim": int, "count": int, "capacity": int}
"""What :meth:`SessionVectors.flush` writes to the meta file, besides the optional ``labels``."""


def read_meta(path: Path) -> dict[str, Any]:
    """The meta file's content; ValueError unless it has the shape a flush writes.

    Checked field by field so that ``null``, a list or a dict of wrong types
    is damage (rebuilt from the archive) rather than an AttributeError deep
    in a search.  Bytes that are not UTF-8 raise ValueError too.
    """
    data = json.loads(path.read_bytes().decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {type(data).__name__}")
    for key, kind in META_FIELDS.items():
        value = data.get(key)
        if type(value) is not kind or (isinstance(value, int) and value < 0):
            raise ValueError(f"{key!r} is {value!r}, not a count")
    if not isinstance(data.get("labels", ""), str):
        raise ValueError(f"'labels' is {data['labels']!r}, not text")
    return data


def meta_problem(folder: Path) -> str | None:
    """What is wrong with *folder*'s meta file, in a few words; None when it is fine or absent.

    Read-only, so plain ``doctor`` can report a damaged file it must not touch.
    """
    path = folder / META_FILE
    try:
        read_meta(path)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        return f"{META_FILE} damaged (not UTF-8 text: {exc.reason})"
    except ValueError as exc:
        return f"{META_FILE} damaged ({exc})"
    except OSError as exc:
        return f"{META_FILE} unreadable ({exc.strerror or exc})"
    return None


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
        """Messages indexed (a message in several parts counts once)."""
        self._ensure()
        return len({message_of(label) for label in self._labels})

    @property
    def vector_count(self) -> int:
        """Vectors indexed (parts counted one by one)."""
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
        stored = self.archive.vector_labels(self.session_id)
        index, labels = self._load_file()
        if index is None or not labels <= stored:
            if self.healed is None and (index is not None or stored):
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
        problem = meta_problem(self.folder)
        if problem is not None:
            log.warning("vector index %s: %s; rebuilding", self.index_path, problem)
            self.healed = f"{problem}: rebuilt from the archive"
            return None, set()
        if not self.index_path.exists() or not meta_path.exists():
            return None, set()
        try:
            meta = read_meta(meta_path)
            if meta["dim"] != self.dim or meta.get("labels") != LABELS:
                return None, set()
            index = hnswlib.Index(space="ip", dim=self.dim)
            index.load_index(str(self.index_path), max_elements=meta["capacity"])
            index.set_ef(HNSW_EF_SEARCH)
            labels = {int(x) for x in index.get_ids_list()}
            if len(labels) != meta["count"]:
                return None, set()
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            log.warning("vector index %s unreadable (%s); rebuilding", self.index_path, exc)
            return None, set()
        return index, labels

    def _rebuild(self, labels: set[int]) -> None:
        self._index = self._new_index(len(labels) * 2)
        self._labels = set()
        if labels:
            self._add_from_archive(sorted(labels))
        # Nothing to save for an empty session unless a stale file must be replaced:
        # a search must not leave empty index files behind.
        meta_path = self.folder / META_FILE
        self._dirty = bool(labels) or self.index_path.exists() or meta_path.exists()

    def _add_from_archive(self, labels: Sequence[int]) -> None:
        wanted = set(labels)
        pairs = [(r, b) for r, b in self.archive.vectors(self.session_id) if r in wanted]
        self._insert([r for r, _ in pairs], from_blobs([b for _, b in pairs], self.dim))

    def _insert(self, labels: Sequence[int], vectors: FloatArray) -> None:
        if not labels:
            return
        index = self._index
        assert index is not None
        needed = len(self._labels) + len(labels)
        if needed > index.get_max_elements():
            index.resize_index(max(needed, index.get_max_elements() * 2))
        index.add_items(vectors, np.asarray(labels, dtype=np.int64))
        self._labels.update(labels)
        self._dirty = True

    # -- public -----------------------------------------------------------
    def add(
        self,
        model: str,
        rowids: Sequence[int],
        vectors: FloatArray,
        parts: Sequence[int] | None = None,
    ) -> None:
        """Persist vectors in the archive, then add them to the index.

        ``rowids[i]`` is the message of ``vectors[i]`` and ``parts[i]`` which
        part of it that vector embeds (default: part 0, a message in one piece).
        """
        self._ensure()
        numbers = parts if parts is not None else [0] * len(rowids)
        labels = [vector_label(r, p) for r, p in zip(rowids, numbers, strict=True)]
        self.archive.add_vectors(
            self.session_id,
            model,
            [(lb, to_blob(v)) for lb, v in zip(labels, vectors, strict=True)],
        )
        self._insert(labels, vectors)

    def remove(self, rowids: Sequence[int]) -> None:
        """Drop every vector of these messages (compaction): the index is rebuilt."""
        if not rowids:
            return
        self.archive.delete_vectors(rowids)
        self._rebuild(self.archive.vector_labels(self.session_id))
        self.flush()

    @property
    def dirty(self) -> bool:
        """Whether the index file lags behind this object (a flush would write it)."""
        return self._dirty and self._index is not None

    def is_current(self) -> bool:
        """Whether the in-memory index holds exactly the session's stored vectors.

        False once another process added or removed some; one query of the
        session's labels.
        """
        return self._index is None or self.archive.vector_labels(self.session_id) == self._labels

    def drop_cache(self) -> None:
        """Forget the in-memory index, keep the files: another process changed the session."""
        self._index, self._labels, self._dirty = None, set(), False

    def clear(self) -> None:
        """Forget everything (reset/remove); the archive rows are cleared by the caller."""
        self._index, self._labels, self._dirty = None, set(), False
        for name in (INDEX_FILE, META_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()

    def search(
        self, query: FloatArray, k: int, exclude: frozenset[int] = frozenset()
    ) -> list[tuple[int, float]]:
        """Nearest messages as (rowid, cosine similarity of its best part), best first."""
        index = self._ensure()
        live = len(self._labels)
        if live == 0 or k <= 0:
            return []
        want = min(live, k + len(exclude))
        while True:
            best = self._knn(index, query, want)
            for rowid in exclude:
                best.pop(rowid, None)
            if len(best) >= k or want >= live:
                break
            want = min(live, want * 2)  # parts of one message crowded the list
        order = sorted(best.items(), key=lambda pair: pair[1], reverse=True)
        return order[:k]

    def parts(self, rowid: int) -> int:
        """How many vectors message *rowid* has here (0 when it has none).

        Parts are numbered from 0 without gaps, so this reads a few labels
        instead of counting them all.
        """
        self._ensure()
        count = 0
        while count < MAX_PARTS and vector_label(rowid, count) in self._labels:
            count += 1
        return count

    @staticmethod
    def _knn(index: hnswlib.Index, query: FloatArray, want: int) -> dict[int, float]:
        """The *want* nearest vectors folded to their messages (best part kept)."""
        index.set_ef(max(HNSW_EF_SEARCH, want))
        labels, distances = index.knn_query(np.asarray(query, dtype=np.float32), k=want)
        best: dict[int, float] = {}
        for label, dist in zip(labels[0], distances[0], strict=True):
            rowid = message_of(int(label))
            sim = 1.0 - float(dist)
            if sim > best.get(rowid, -2.0):
                best[rowid] = sim
        return best

    def flush(self) -> None:
        """Save the index file if it changed (cheap to skip: the archive has the truth)."""
        if not self._dirty or self._index is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        # A name of this process's own: two processes saving at once must not mix their bytes.
        tmp = self.index_path.with_name(f".{INDEX_FILE}.{os.getpid()}.tmp")
        try:
            self._index.save_index(str(tmp))
            tmp.replace(self.index_path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        atomic_write_text(
            self.folder / META_FILE,
            json.dumps(
                {
                    "dim": self.dim,
                    "labels": LABELS,
                    "count": len(self._labels),
                    "capacity": self._index.get_max_elements(),
                }
            ),
        )
        self._dirty = False
