"""The in-memory columns every ranking reads: ids, tools, classes, expiry, vectors.

Retrieval needs no ANN index: a few thousand records (10,000 at most in
practice) are ranked by brute-force cosine over an in-memory matrix that is
loaded once and kept in step with every write.  benchmarks/error_lookup.py,
10,000 records: a whole lookup costs 1-2 ms (p95 < 3 ms on the shared
2-core machine); hnswlib answers a bare top-10 in 0.1 ms against 1 ms, but
cannot filter by tool and expiry, and would be a second copy of the vectors
to keep consistent with every add, edit, delete and purge.  Two vectors per
record: the symptom alone (what a new failure is compared with) and symptom +
cause + action (what a search is compared with), ~3 KiB of memory per
record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.error_types import ERROR_TYPES

FloatArray = npt.NDArray[np.float32]
TYPE_CODE: dict[str, int] = {name: code for code, name in enumerate(ERROR_TYPES)}
"""Each error class's small-integer code in :attr:`VectorIndex.types`."""


def type_code(error_type: str) -> int:
    """The code of *error_type* (an unknown class counts as "other")."""
    return TYPE_CODE.get(error_type, TYPE_CODE["other"])


class VectorIndex:
    """In-memory columns of every record: all that ranking needs, without SQL.

    Rows are dense (a deleted row is replaced by the last one) and grow by
    doubling; ``row_of[id]`` maps a record id to its row (-1: none), so SQL
    results map to rows without a Python loop.  Rows without a usable vector
    hold zeros (similarity 0).
    """

    _COLUMNS = ("ids", "tools", "types", "expires", "symptom", "detail")

    def __init__(self, dim: int, capacity: int = 64) -> None:
        self.dim = dim
        self.size = 0
        self.tool_codes: dict[str, int] = {}
        self.row_of = np.full(capacity, -1, np.int64)
        self.ids = np.zeros(capacity, np.int64)
        self.tools = np.zeros(capacity, np.int32)
        self.types = np.zeros(capacity, np.int8)
        self.expires = np.zeros(capacity, np.int64)
        self.symptom: FloatArray = np.zeros((capacity, dim), np.float32)
        self.detail: FloatArray = np.zeros((capacity, dim), np.float32)

    @classmethod
    def from_rows(cls, dim: int, rows: Sequence[Sequence[Any]]) -> VectorIndex:
        """Bulk load from (id, tool, error_type, expires_ns, vectors_usable, sym, detail)."""
        index = cls(dim, capacity=len(rows) + len(rows) // 4 + 64)
        if not rows:
            return index
        ids, tools, types, expires, usable, sym, det = zip(*rows, strict=True)
        n = index.size = len(rows)
        index.ids[:n] = ids
        codes = index.tool_codes = {tool: code for code, tool in enumerate(dict.fromkeys(tools))}
        index.tools[:n] = [codes[t] for t in tools]
        index.types[:n] = [type_code(t) for t in types]
        index.expires[:n] = expires
        index.row_of = np.full(max(ids) + 64, -1, np.int64)
        index.row_of[index.ids[:n]] = np.arange(n)
        rows_with = [i for i, ok in enumerate(usable) if ok] if dim else []
        for blobs, target in ((sym, index.symptom), (det, index.detail)):
            if rows_with:
                joined = b"".join([blobs[i] for i in rows_with])
                target[rows_with] = np.frombuffer(joined, "<f4").reshape(len(rows_with), dim)
        return index

    def row(self, rec_id: int) -> int | None:
        if 0 <= rec_id < len(self.row_of) and self.row_of[rec_id] >= 0:
            return int(self.row_of[rec_id])
        return None

    def rows(self, rec_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Rows of many ids at once (-1 where absent)."""
        inside = (rec_ids >= 0) & (rec_ids < len(self.row_of))
        return np.where(inside, self.row_of[np.where(inside, rec_ids, 0)], -1)

    def is_live(self, rec_id: int, now_ns: int, tool: str | None) -> bool:
        row = self.row(rec_id)
        if row is None or self.expires[row] <= now_ns:
            return False
        return tool is None or self.tool_codes.get(tool) == self.tools[row]

    def _grow(self) -> None:
        for name in self._COLUMNS:
            old = getattr(self, name)
            grown = np.zeros((2 * old.shape[0], *old.shape[1:]), old.dtype)
            grown[: self.size] = old[: self.size]
            setattr(self, name, grown)

    def _map(self, rec_id: int, row: int) -> None:
        if rec_id >= len(self.row_of):
            grown = np.full(max(2 * len(self.row_of), rec_id + 64), -1, np.int64)
            grown[: len(self.row_of)] = self.row_of
            self.row_of = grown
        self.row_of[rec_id] = row

    def put(
        self,
        rec_id: int,
        tool: str,
        error_type: str,
        expires_ns: int,
        vectors: tuple[FloatArray, FloatArray] | None,
        *,
        keep_vectors: bool = False,
    ) -> None:
        """Insert or overwrite a row; *keep_vectors* leaves an existing row's vectors."""
        row = self.row(rec_id)
        if row is None:
            if self.size == len(self.ids):
                self._grow()
            row = self.size
            self._map(rec_id, row)
            self.size += 1
            keep_vectors = False  # the slot may hold a dropped row's vectors
        self.ids[row] = rec_id
        self.tools[row] = self.tool_codes.setdefault(tool, len(self.tool_codes))
        self.types[row] = type_code(error_type)
        self.expires[row] = expires_ns
        if vectors is not None or not keep_vectors:
            self.symptom[row] = vectors[0] if vectors else 0.0
            self.detail[row] = vectors[1] if vectors else 0.0

    def drop(self, rec_id: int) -> None:
        row = self.row(rec_id)
        if row is None:
            return
        self.row_of[rec_id] = -1
        last = self.size - 1
        if row != last:
            for name in self._COLUMNS:
                array = getattr(self, name)
                array[row] = array[last]
            self.row_of[self.ids[row]] = row
        self.size = last

    def set_expires(self, ids: Sequence[int], expires_ns: int) -> None:
        rows = self.rows(np.asarray(ids, np.int64))
        self.expires[rows[rows >= 0]] = expires_ns

    def live(self, now_ns: int, tool: str | None) -> npt.NDArray[np.intp]:
        """Rows not expired at *now_ns* (of one tool, if given)."""
        mask = self.expires[: self.size] > now_ns
        if tool is not None:
            code = self.tool_codes.get(tool)
            if code is None:
                return np.zeros(0, np.intp)
            mask &= self.tools[: self.size] == code
        return np.flatnonzero(mask)

    def similarities(
        self, matrix: FloatArray, rows: npt.NDArray[np.intp], query: FloatArray
    ) -> npt.NDArray[np.float32]:
        """Cosine of *query* with *rows* of *matrix* (symptom or detail).

        einsum, not ``@``: a matrix-vector product is memory-bound, and
        multi-threaded OpenBLAS took 8 ms for what one thread does in 0.7 ms
        (10,000 × 384 on the 2-core test machine; benchmarks/error_lookup.py).
        """
        if rows.size * 4 < self.size:  # a few rows: gather them
            sims = np.einsum("ij,j->i", matrix[rows], query)
        else:
            sims = np.einsum("ij,j->i", matrix[: self.size], query)[rows]
        return np.asarray(sims, dtype=np.float32)
