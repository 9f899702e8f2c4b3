"""A store's embedding model, the vectors it makes, and the in-memory index kept in step.

Two vectors per record: the symptom alone (what a new failure is compared
with) and symptom + cause + action (what a search is compared with).  Each
is stored with the tag of the model that made it; vectors of another model
are ignored until :meth:`RecordVectors.backfill` replaces them.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np

from agenvoy_desktop.core.error_memory import writes
from agenvoy_desktop.core.error_memory.candidates import Query
from agenvoy_desktop.core.error_memory.index import FloatArray, VectorIndex
from agenvoy_desktop.core.error_memory.schema import RECORD_FROM

if TYPE_CHECKING:
    from agenvoy_desktop.core.embedding import TextEmbedder

log = logging.getLogger(__name__)

VectorPair = tuple[FloatArray, FloatArray]
"""(symptom vector, symptom + cause + action vector)."""
Transaction = Callable[[], AbstractContextManager[sqlite3.Connection]]
"""``SqliteStore.transaction``: one atomic unit of work."""


def detail_text(symptom: str, cause: str, action: str) -> str:
    """The text a search is compared with."""
    return f"{symptom}\n{cause}\n{action}"


class RecordVectors:
    """The embedder of one store and its in-memory index (loaded on first use).

    Every write of the store is mirrored here with :meth:`put`, :meth:`drop`
    and :meth:`set_expires`; before the index is loaded they do nothing (the
    load reads the database as it is then).
    """

    def __init__(self, embedder: TextEmbedder | None, model_name: str) -> None:
        self.embedder = embedder
        self.tag = f"{model_name}:{embedder.dim}" if embedder is not None else None
        """What marks a stored vector as this model's (None: no model)."""
        self._loaded: VectorIndex | None = None

    def embed(self, texts: Sequence[str]) -> FloatArray | None:
        """Vectors for *texts*, or None without a model (or when it fails)."""
        if self.embedder is None:
            return None
        try:
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        except Exception:  # a broken model must not lose a record or crash a turn
            log.warning("error memory: embedding failed; keywords only", exc_info=True)
            return None

    def pair(self, symptom: str, cause: str, action: str) -> VectorPair | None:
        """A record's two vectors, or None without a model."""
        out = self.embed([symptom, detail_text(symptom, cause, action)])
        return None if out is None else (out[0], out[1])

    def index(self, query: Query) -> VectorIndex:
        """The in-memory columns, loaded on first use (list/show never need them)."""
        if self._loaded is None:
            rows = query(
                "SELECT id, tool, error_type, expires_ns, model = ?, symptom_vec, detail_vec"
                f" FROM {RECORD_FROM} ORDER BY id",
                (self.tag,),
            )
            dim = self.embedder.dim if self.embedder is not None else 0
            self._loaded = VectorIndex.from_rows(dim, rows)
        return self._loaded

    def put(
        self,
        rec_id: int,
        tool: str,
        error_type: str,
        expires_ns: int,
        vectors: VectorPair | None,
        *,
        keep_vectors: bool = False,
    ) -> None:
        """Mirror a written record (see :meth:`VectorIndex.put`)."""
        if self._loaded is not None:
            self._loaded.put(
                rec_id, tool, error_type, expires_ns, vectors, keep_vectors=keep_vectors
            )

    def drop(self, ids: Sequence[int]) -> None:
        """Mirror deleted records."""
        if self._loaded is not None:
            for rec_id in ids:
                self._loaded.drop(int(rec_id))

    def set_expires(self, ids: Sequence[int], expires_ns: int) -> None:
        """Mirror renewed records."""
        if self._loaded is not None:
            self._loaded.set_expires(ids, expires_ns)

    def missing(self, query: Query) -> int:
        """Records without a vector of this model (0 without a model)."""
        if self.tag is None:
            return 0
        rows = query(
            f"SELECT count(*) FROM {RECORD_FROM} WHERE model IS NULL OR model != ?", (self.tag,)
        )
        return int(rows[0][0])

    def backfill(
        self, query: Query, transaction: Transaction, limit: int | None, batch: int
    ) -> int:
        """Embed up to *limit* records lacking this model's vectors; how many were embedded."""
        if self.tag is None:
            return 0
        rows = query(
            f"SELECT id, tool, symptom, cause, action, error_type, expires_ns FROM {RECORD_FROM}"
            " WHERE model IS NULL OR model != ? ORDER BY id LIMIT ?",
            (self.tag, -1 if limit is None else limit),
        )
        done = 0
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            vectors = self.embed([t for r in part for t in (r[2], detail_text(*r[2:5]))])
            if vectors is None:
                break
            self._store(transaction, part, vectors)
            done += len(part)
        return done

    def _store(
        self, transaction: Transaction, rows: Sequence[Sequence[Any]], vectors: FloatArray
    ) -> None:
        pairs = [(vectors[2 * n], vectors[2 * n + 1]) for n in range(len(rows))]
        items = [(int(row[0]), *pair) for row, pair in zip(rows, pairs, strict=True)]
        with transaction() as db:
            writes.insert_vectors(db, self.tag, items)
        for row, pair in zip(rows, pairs, strict=True):
            self.put(int(row[0]), str(row[1]), str(row[5]), int(row[6]), pair)
