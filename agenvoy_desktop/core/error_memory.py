"""Cross-session error memory: what failed, why, what was tried.

Its own SQLite file (``memory/errors.sqlite3``), WAL, schema version in
``PRAGMA user_version`` with forward migrations; a database from a newer app
is refused before anything is written to it.  Records expire 90 days after
they were written or last returned; every record a lookup or search returns
is renewed.  Expired records are purged on open and by :meth:`purge_if_due`.

Retrieval needs no ANN index: a few thousand records (10,000 at most in
practice) are ranked by brute-force cosine over an in-memory matrix that is
loaded once and kept in step with every write.  benchmarks/error_lookup.py,
10,000 records: a whole lookup costs 1-2 ms (p95 < 3 ms on the shared
2-core machine); hnswlib answers a bare top-10 in 0.1 ms against 1 ms, but
cannot filter by tool and expiry, and would be a second copy of the vectors
to keep consistent with every add, edit, delete and purge.  Two vectors per
record: the symptom alone (what a new failure is compared with) and symptom +
cause + action (what a search is compared with), ~3 KiB of memory per
record.  Vectors made by another embedding model are ignored until
:meth:`backfill_vectors` replaces them.  The full-text index (FTS5,
:mod:`fts_text` preparation) is derived data.

Threading: one connection per instance, created and used on one thread
(the app's storage worker; sqlite3's same-thread check stays on, so misuse
fails loudly instead of corrupting anything).
"""

from __future__ import annotations

import builtins
import json
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.error_types import (
    ERROR_TYPE_PREFIX,
    ERROR_TYPES,
    OUTCOMES,
    ErrorHint,
    ErrorRecord,
    ErrorRecordInvalid,
    RecordDraft,
    classify_error,
    clean_choice,
    draft_record,
    error_text,
    format_hints,
    fuse_ranks,
    hint_for,
    keyword_term,
    lookup_query,
    merge_keywords,
    rank_for_failure,
    symptom_key,
    text_terms,
    with_type_keyword,
)
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.fts_text import FTS_TEXT_VERSION, index_text, query_terms
from agenvoy_desktop.core.sqlite_db import SqliteStore, StoreDamagedError, set_aside_database
from agenvoy_desktop.core.timeutil import Clock, now_ns

if TYPE_CHECKING:
    from agenvoy_desktop.core.embedding import TextEmbedder
    from agenvoy_desktop.paths import AppPaths

__all__ = [
    "ErrorHint",
    "ErrorMemory",
    "ErrorMemoryDamagedError",
    "ErrorMemoryError",
    "ErrorRecord",
    "ErrorRecordInvalid",
    "ErrorRecordNotFound",
    "classify_error",
    "error_db_path",
    "format_hints",
    "open_error_memory",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DAY_NS = 86_400 * 1_000_000_000
DEFAULT_TTL_DAYS = 90
PURGE_INTERVAL_NS = DAY_NS
LOOKUP_MIN_SIMILARITY = 0.45
"""A failure "resembles" a symptom from this cosine on (MiniLM: paraphrases ≈ 0.5-0.9)."""
SEARCH_MIN_SIMILARITY = 0.3
"""Searches are short phrases, whose cosine with a whole record runs lower."""
FTS_POSTINGS_BUDGET = 500
OVERLAP_CANDIDATES = 256
# Fusion as in search_chat_history (measured on LoCoMo, core/search.py).
RRF_K = 1
SEARCH_WEIGHTS = (0.75, 1.0)  # (vector, keyword)

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE errors (
    id INTEGER PRIMARY KEY,
    tool TEXT NOT NULL,
    symptom TEXT NOT NULL,
    symptom_key TEXT NOT NULL,
    cause TEXT NOT NULL DEFAULT '',
    action TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    error_type TEXT NOT NULL,
    keywords TEXT NOT NULL,
    source TEXT NOT NULL,
    session_id TEXT,
    created_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    expires_ns INTEGER NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    last_hit_ns INTEGER,
    UNIQUE (tool, symptom_key)
);
CREATE TABLE error_vectors (
    record_id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    symptom_vec BLOB NOT NULL,
    detail_vec BLOB NOT NULL
);
CREATE INDEX errors_expires ON errors (expires_ns);
CREATE TABLE error_keywords (
    tool TEXT NOT NULL,
    term TEXT NOT NULL,
    record_id INTEGER NOT NULL,
    PRIMARY KEY (tool, term, record_id)
) WITHOUT ROWID;
CREATE INDEX error_keywords_record ON error_keywords (record_id);
CREATE VIRTUAL TABLE errors_fts USING fts5 (body, tokenize='unicode61 remove_diacritics 2');
"""

MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}
"""``MIGRATIONS[v]`` upgrades a database at version v-1 to v."""

_COLS = (
    "id, tool, keywords, error_type, symptom, cause, action, outcome, created_ns, updated_ns,"
    " expires_ns, hits, last_hit_ns, source, session_id, model"
)
# Vectors live in their own table: scans of the records stay small (3 KiB less a row).
_FROM = "errors LEFT JOIN error_vectors ON record_id = id"
_ORDER_COLUMNS = {
    "id": "id",
    "tool": "tool",
    "outcome": "outcome",
    "created": "created_ns",
    "updated": "updated_ns",
    "expires": "expires_ns",
    "hits": "hits",
    "last_hit": "last_hit_ns",
}
ORDER_KEYS = tuple(_ORDER_COLUMNS)
_TYPE_CODE: dict[str, int] = {name: code for code, name in enumerate(ERROR_TYPES)}

FloatArray = npt.NDArray[np.float32]


class ErrorMemoryError(KnownError, RuntimeError):
    """An environment problem with the error-memory file, phrased for the user."""


class ErrorMemoryDamagedError(ErrorMemoryError, StoreDamagedError):
    """The error-memory file is damaged: it is set aside and a fresh one started."""


class ErrorRecordNotFound(KnownError, KeyError):
    """No record has this id (deleted, purged, or never written)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "no such error record"


def error_db_path(paths: AppPaths) -> Path:
    """Where a profile keeps its error memory."""
    return paths.memory_dir / "errors.sqlite3"


def open_error_memory(
    path: Path,
    embedder: TextEmbedder | None,
    *,
    repair: bool = True,
    **options: Any,
) -> tuple[ErrorMemory, str | None]:
    """Open the error memory, checked; a damaged file is set aside and a fresh one started.

    Returns the store and, when it had to start fresh, a notice for the
    user.  The check is SQLite's ``quick_check`` (every page read once: a
    few milliseconds for the few thousand records this store holds), so a
    damaged page cannot fail a turn later.  *options* go to
    :class:`ErrorMemory`; *repair* False raises :class:`ErrorMemoryDamagedError`.
    """
    try:
        memory = ErrorMemory(path, embedder, **options)
        problems = memory.integrity_problems(quick=True)
        if problems:
            memory.close()
            raise ErrorMemoryDamagedError(f"error memory {path}: {problems[0]}")
    except ErrorMemoryDamagedError as exc:
        if not repair:
            raise
        notice = start_fresh(path, str(exc).rsplit(": ", 1)[-1])
        return ErrorMemory(path, embedder, **options), notice
    return memory, None


def start_fresh(path: Path, reason: str) -> str:
    """Set a damaged error-memory file aside (never deleted); returns the notice for the user."""
    moved = set_aside_database(path)
    notice = (
        f"the error memory was damaged ({reason}); it was set aside as {moved}"
        " and a fresh one started"
    )
    log.info("%s", notice)  # the caller tells the user
    return notice


class _Index:
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
    def from_rows(cls, dim: int, rows: Sequence[Sequence[Any]]) -> _Index:
        """Bulk load from (id, tool, error_type, expires_ns, vectors_usable, sym, detail)."""
        index = cls(dim, capacity=len(rows) + len(rows) // 4 + 64)
        if not rows:
            return index
        ids, tools, types, expires, usable, sym, det = zip(*rows, strict=True)
        n = index.size = len(rows)
        index.ids[:n] = ids
        codes = index.tool_codes = {tool: code for code, tool in enumerate(dict.fromkeys(tools))}
        index.tools[:n] = [codes[t] for t in tools]
        index.types[:n] = [_TYPE_CODE.get(t, _TYPE_CODE["other"]) for t in types]
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
        self.types[row] = _TYPE_CODE.get(error_type, _TYPE_CODE["other"])
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


class ErrorMemory(SqliteStore):
    """The error-memory store of one profile (see the module docstring)."""

    _kind = "error memory"
    _not_a_db = "the file is not an error-memory database"
    _error = ErrorMemoryError
    _damaged = ErrorMemoryDamagedError
    _schema_version = SCHEMA_VERSION
    _migrations = MIGRATIONS

    def __init__(
        self,
        path: Path,
        embedder: TextEmbedder | None,
        *,
        clock: Clock = now_ns,
        ttl_days: int = DEFAULT_TTL_DAYS,
        model_name: str = "all-MiniLM-L6-v2",
        purge_on_open: bool = True,
    ) -> None:
        """Open (creating or migrating) the store.  *purge_on_open* False keeps
        expired records visible, for an inspector that lists them."""
        if ttl_days < 1:
            raise ValueError(f"ttl_days must be at least 1, got {ttl_days}")
        self.embedder = embedder
        self.clock = clock
        self.ttl_ns = ttl_days * DAY_NS
        self.vector_tag = f"{model_name}:{embedder.dim}" if embedder is not None else None
        self._index_cache: _Index | None = None
        self._purge_on_open = purge_on_open
        super().__init__(path)

    def _opened(self) -> None:
        if self.get_meta("fts_text_version") != str(FTS_TEXT_VERSION):
            self.rebuild_fts()
        if self._purge_on_open:
            self.purge_expired()

    def _row(self, row: Sequence[Any]) -> ErrorRecord:
        return ErrorRecord(
            id=row[0],
            tool=row[1],
            keywords=tuple(json.loads(row[2])),
            error_type=row[3],
            symptom=row[4],
            cause=row[5],
            action=row[6],
            outcome=row[7],
            created_ns=row[8],
            updated_ns=row[9],
            expires_ns=row[10],
            hits=row[11],
            last_hit_ns=row[12],
            source=row[13],
            session_id=row[14],
            has_vector=row[15] is not None and row[15] == self.vector_tag,
        )

    def _records(self, ids: Sequence[int]) -> builtins.list[ErrorRecord]:
        """Records by id, in the order given (missing ids skipped)."""
        rows = self._query(
            f"SELECT {_COLS} FROM {_FROM} WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([int(i) for i in ids]),),
        )
        by_id = {int(r[0]): self._row(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    # -- vectors and the in-memory index -------------------------------------------
    def _embed(self, texts: Sequence[str]) -> FloatArray | None:
        """Vectors for *texts*, or None without a model (or when it fails)."""
        if self.embedder is None:
            return None
        try:
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        except Exception:  # a broken model must not lose a record or crash a turn
            log.warning("error memory: embedding failed; keywords only", exc_info=True)
            return None

    def _record_vectors(self, draft: RecordDraft) -> tuple[FloatArray, FloatArray] | None:
        out = self._embed([draft.symptom, f"{draft.symptom}\n{draft.cause}\n{draft.action}"])
        return None if out is None else (out[0], out[1])

    def preload(self) -> None:
        """Load the in-memory index now (~0.1 s for 10,000 records) instead of at
        the first lookup; the app calls it on its storage thread at start."""
        self._index()

    def _index(self) -> _Index:
        """The in-memory columns, loaded on first use (list/show never need them)."""
        if self._index_cache is None:
            rows = self._query(
                "SELECT id, tool, error_type, expires_ns, model = ?, symptom_vec, detail_vec"
                f" FROM {_FROM} ORDER BY id",
                (self.vector_tag,),
            )
            dim = self.embedder.dim if self.embedder is not None else 0
            self._index_cache = _Index.from_rows(dim, rows)
        return self._index_cache

    # -- writing --------------------------------------------------------------------------
    def _write(self, rec_id: int | None, draft: RecordDraft, now: int, *, embed: bool) -> int:
        """Insert (rec_id None) or overwrite a record, its keywords and its FTS row."""
        vectors = self._record_vectors(draft) if embed else None
        keywords = with_type_keyword(draft.keywords, draft.error_type)
        values: dict[str, Any] = {
            "tool": draft.tool,
            "symptom": draft.symptom,
            "symptom_key": symptom_key(draft.symptom),
            "cause": draft.cause,
            "action": draft.action,
            "outcome": draft.outcome,
            "error_type": draft.error_type,
            "keywords": json.dumps(list(keywords), ensure_ascii=False),
            "source": draft.source,
            "session_id": draft.session_id,
            "updated_ns": now,
            "expires_ns": now + self.ttl_ns,
        }
        with self.transaction() as db:
            if rec_id is None:
                values["created_ns"] = now
                cols = ", ".join(values)
                marks = ", ".join("?" * len(values))
                cur = db.execute(
                    f"INSERT INTO errors ({cols}) VALUES ({marks})", [*values.values()]
                )
                assert cur.lastrowid is not None
                rec_id = int(cur.lastrowid)
            else:
                sets = ", ".join(f"{col} = ?" for col in values)
                db.execute(f"UPDATE errors SET {sets} WHERE id = ?", [*values.values(), rec_id])
            self._write_derived(db, rec_id, draft, keywords)
            if embed:
                db.execute("DELETE FROM error_vectors WHERE record_id = ?", (rec_id,))
                if vectors is not None:
                    self._insert_vectors(db, [(rec_id, vectors[0], vectors[1])])
        if self._index_cache is not None:
            self._index_cache.put(
                rec_id,
                draft.tool,
                draft.error_type,
                now + self.ttl_ns,
                vectors,
                keep_vectors=not embed,
            )
        return rec_id

    @staticmethod
    def _write_derived(
        db: sqlite3.Connection, rec_id: int, draft: RecordDraft, keywords: Sequence[str]
    ) -> None:
        db.execute("DELETE FROM error_keywords WHERE record_id = ?", (rec_id,))
        terms = {keyword_term(k) for k in draft.keywords} - {""}
        db.executemany(
            "INSERT INTO error_keywords (tool, term, record_id) VALUES (?, ?, ?)",
            [(draft.tool, term, rec_id) for term in sorted(terms)],
        )
        db.execute("DELETE FROM errors_fts WHERE rowid = ?", (rec_id,))
        db.execute(
            "INSERT INTO errors_fts (rowid, body) VALUES (?, ?)",
            (rec_id, _fts_body(draft.tool, draft.symptom, draft.cause, draft.action, keywords)),
        )

    def add(
        self,
        tool: str,
        symptom: str,
        *,
        cause: str = "",
        action: str = "",
        outcome: str,
        keywords: Sequence[str] = (),
        session_id: str | None = None,
        source: str = "agent",
        error_type: str | None = None,
    ) -> ErrorRecord:
        """Remember a failure; the same tool + symptom updates the existing record.

        On a duplicate, keywords are merged, a non-empty cause or action
        replaces the old one (an empty one keeps it), the outcome is
        overwritten and the expiry renewed; where and by whom it was first
        learned stays.  ``error_type`` defaults to the symptom's class.
        Raises ErrorRecordInvalid (naming the field) on bad input.
        """
        draft = draft_record(
            tool=tool,
            symptom=symptom,
            cause=cause,
            action=action,
            outcome=outcome,
            keywords=keywords,
            error_type=error_type,
            source=source,
            session_id=session_id,
        )
        old = self.find(draft.tool, draft.symptom)
        now = self.clock()
        if old is None:
            return self._get_or_raise(self._write(None, draft, now, embed=True))
        merged = replace(
            draft,
            symptom=old.symptom,
            cause=draft.cause or old.cause,
            action=draft.action or old.action,
            error_type=draft.error_type if error_type is not None else old.error_type,
            keywords=merge_keywords(old.keywords, draft.keywords),
            source=old.source,
            session_id=old.session_id or draft.session_id,
        )
        changed = (merged.cause, merged.action) != (old.cause, old.action)
        self._write(old.id, merged, now, embed=changed or not old.has_vector)
        return self._get_or_raise(old.id)

    def find(self, tool: str, symptom: str) -> ErrorRecord | None:
        """The record :meth:`add` would update for this tool and symptom, if any."""
        rows = self._query(
            f"SELECT {_COLS} FROM {_FROM} WHERE tool = ? AND symptom_key = ?",
            (tool.strip(), symptom_key(symptom)),
        )
        return self._row(rows[0]) if rows else None

    def update(
        self,
        record_id: int,
        *,
        tool: str | None = None,
        symptom: str | None = None,
        cause: str | None = None,
        action: str | None = None,
        outcome: str | None = None,
        keywords: Sequence[str] | None = None,
        error_type: str | None = None,
    ) -> ErrorRecord:
        """Change a record's fields (None = keep); keywords are replaced, not merged.

        A new symptom is re-classified unless ``error_type`` is given.  The
        expiry is renewed: an edited record is one somebody cares about.
        """
        old = self._get_or_raise(record_id)
        new_symptom = old.symptom if symptom is None else symptom
        if error_type is None and symptom is not None:
            etype = None
        else:
            etype = error_type if error_type is not None else old.error_type
        draft = draft_record(
            tool=old.tool if tool is None else tool,
            symptom=new_symptom,
            cause=old.cause if cause is None else cause,
            action=old.action if action is None else action,
            outcome=old.outcome if outcome is None else outcome,
            keywords=old.keywords if keywords is None else keywords,
            error_type=etype,
            source=old.source,
            session_id=old.session_id,
        )
        clash = self.find(draft.tool, draft.symptom)
        if clash is not None and clash.id != record_id:
            raise ErrorRecordInvalid(
                f"symptom: record #{clash.id} already holds this symptom for tool {draft.tool}"
            )
        texts_changed = (draft.symptom, draft.cause, draft.action) != (
            old.symptom,
            old.cause,
            old.action,
        )
        self._write(record_id, draft, self.clock(), embed=texts_changed or not old.has_vector)
        return self._get_or_raise(record_id)

    def delete(self, record_id: int) -> None:
        self._get_or_raise(record_id)
        self._delete_ids([record_id])

    def _delete_ids(self, ids: Sequence[int]) -> None:
        payload = json.dumps([int(i) for i in ids])
        with self.transaction() as db:
            for table, col in (
                ("errors_fts", "rowid"),
                ("error_keywords", "record_id"),
                ("error_vectors", "record_id"),
            ):
                db.execute(
                    f"DELETE FROM {table} WHERE {col} IN (SELECT value FROM json_each(?))",
                    (payload,),
                )
            db.execute(
                "DELETE FROM errors WHERE id IN (SELECT value FROM json_each(?))", (payload,)
            )
        if self._index_cache is not None:
            for rec_id in ids:
                self._index_cache.drop(int(rec_id))

    def renew(self, record_id: int) -> ErrorRecord:
        """Extend a record's life to now + TTL (not counted as a hit)."""
        self._get_or_raise(record_id)
        expires = self.clock() + self.ttl_ns
        with self.transaction() as db:
            db.execute("UPDATE errors SET expires_ns = ? WHERE id = ?", (expires, record_id))
        if self._index_cache is not None:
            self._index_cache.set_expires([record_id], expires)
        return self._get_or_raise(record_id)

    def _hit(self, ids: Sequence[int]) -> builtins.list[ErrorRecord]:
        """Count a hit on each returned record and renew it; the updated records."""
        if not ids:
            return []
        now = self.clock()
        expires = now + self.ttl_ns
        with self.transaction() as db:
            db.execute(
                "UPDATE errors SET hits = hits + 1, last_hit_ns = ?, expires_ns = ?"
                " WHERE id IN (SELECT value FROM json_each(?))",
                (now, expires, json.dumps([int(i) for i in ids])),
            )
        if self._index_cache is not None:
            self._index_cache.set_expires(ids, expires)
        return self._records(ids)

    # -- reading ----------------------------------------------------------------------------
    def get(self, record_id: int) -> ErrorRecord | None:
        rows = self._query(f"SELECT {_COLS} FROM {_FROM} WHERE id = ?", (int(record_id),))
        return self._row(rows[0]) if rows else None

    def _get_or_raise(self, record_id: int) -> ErrorRecord:
        record = self.get(record_id)
        if record is None:
            raise ErrorRecordNotFound(f"no error record #{record_id} in {self.path}")
        return record

    def count(self, *, include_expired: bool = False) -> int:
        if include_expired:
            return int(self._query("SELECT count(*) FROM errors")[0][0])
        rows = self._query("SELECT count(*) FROM errors WHERE expires_ns > ?", (self.clock(),))
        return int(rows[0][0])

    def list(
        self,
        tool: str | None = None,
        outcome: str | None = None,
        *,
        include_expired: bool = False,
        order_by: str = "-created",
        limit: int | None = None,
    ) -> builtins.list[ErrorRecord]:
        """Records, filtered; ``order_by`` is one of ORDER_KEYS, ``-`` for descending."""
        key = order_by.removeprefix("-")
        if key not in _ORDER_COLUMNS:
            raise ValueError(f"order_by must be one of {', '.join(ORDER_KEYS)} (with - to reverse)")
        direction = "DESC" if order_by.startswith("-") else "ASC"
        where: builtins.list[str] = ["1"]
        params: builtins.list[object] = []
        if tool is not None:
            where.append("tool = ?")
            params.append(tool.strip())
        if outcome is not None:
            where.append("outcome = ?")
            params.append(clean_choice("outcome", outcome, OUTCOMES))
        if not include_expired:
            where.append("expires_ns > ?")
            params.append(self.clock())
        sql = (
            f"SELECT {_COLS} FROM {_FROM} WHERE {' AND '.join(where)}"
            f" ORDER BY {_ORDER_COLUMNS[key]} {direction}, id {direction}"
        )
        if limit is not None:
            if limit < 1:
                raise ValueError(f"limit must be at least 1, got {limit}")
            sql += f" LIMIT {int(limit)}"
        return [self._row(r) for r in self._query(sql, params)]

    # -- retrieval ------------------------------------------------------------------------------
    def lookup_for_failure(
        self, tool: str, error: BaseException | str | None, *, limit: int = 3
    ) -> builtins.list[ErrorHint]:
        """Records of *tool* that resemble this failure, best first; each is renewed.

        Ranking: records whose symptom is similar to the error (cosine ≥
        LOOKUP_MIN_SIMILARITY) by similarity; then records of the same
        error_type, by keyword overlap; then records sharing keywords.
        Records matching none of these are not returned.
        """
        tool = tool.strip()
        index = self._index()
        rows = index.live(self.clock(), tool)
        if rows.size == 0 or limit < 1:
            return []
        text = error_text(error)
        sims = self._similarities(index.symptom, rows, lookup_query(tool, error))
        error_type = classify_error(error)
        same = index.types[rows] == _TYPE_CODE[error_type]
        if error_type == "other":  # "unclassified" twice is no resemblance
            same[:] = False
        if np.count_nonzero(sims >= LOOKUP_MIN_SIMILARITY) >= limit:
            overlap = np.zeros(rows.size, np.int64)  # similar records fill the answer
        else:
            overlap = self._keyword_overlap(tool, text, index, rows)
        ranked = rank_for_failure(
            sims,
            same,
            overlap,
            index.ids[rows],
            min_similarity=LOOKUP_MIN_SIMILARITY,
            limit=limit,
        )
        picked = {
            int(index.ids[rows[i]]): (float(sims[i]) if why == "similar" else 0.0, why)
            for i, why in ranked
        }
        records = self._hit(list(picked))
        return [hint_for(r, *picked[r.id]) for r in records]

    def _similarities(
        self, matrix: FloatArray, rows: npt.NDArray[np.intp], text: str
    ) -> npt.NDArray[np.float32]:
        """Cosine of *text* with each of *rows* (zeros without a model)."""
        query = self._embed([text]) if text.strip() else None
        if query is None or matrix.shape[1] != query.shape[1]:
            return np.zeros(rows.size, np.float32)
        return self._index().similarities(matrix, rows, query[0])

    def _keyword_overlap(
        self, tool: str, text: str, index: _Index, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        """How many of each record's keywords occur in the error text.

        Only the OVERLAP_CANDIDATES records with the most shared keywords
        count (the rest read as 0): a generic keyword ("file") shared by
        thousands of records would otherwise cost more than the whole lookup.
        """
        terms = text_terms(text)
        if not terms:
            return np.zeros(rows.size, np.int64)
        found = self._query(
            "SELECT record_id, count(*) AS n FROM error_keywords WHERE tool = ?"
            " AND term IN (SELECT value FROM json_each(?)) GROUP BY record_id"
            " ORDER BY n DESC, record_id DESC LIMIT ?",
            (tool, json.dumps(sorted(terms), ensure_ascii=False), OVERLAP_CANDIDATES),
        )
        counts = np.zeros(index.size, np.int64)
        if found:
            pairs = np.asarray(found, dtype=np.int64)
            at = index.rows(pairs[:, 0])
            counts[at[at >= 0]] = pairs[at >= 0, 1]
        return counts[rows]

    def search(
        self, query: str, *, tool: str | None = None, limit: int = 10
    ) -> builtins.list[ErrorHint]:
        """Records matching a free-text query, best first; each is renewed.

        Vector similarity to symptom + cause + action (with a model) fused by
        reciprocal rank with the full-text match; when full text finds
        nothing, a plain substring match.  Query text never reaches SQL or
        FTS5 as syntax.
        """
        if not query.strip():
            raise ValueError("empty search query")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        tool = tool.strip() if tool is not None else None
        index = self._index()
        now = self.clock()
        rows = index.live(now, tool)
        if rows.size == 0:
            return []
        sims = self._similarities(index.detail, rows, query)
        keep = np.flatnonzero(sims >= SEARCH_MIN_SIMILARITY)
        best = keep[np.argsort(-sims[keep], kind="stable")][: 3 * limit]
        semantic = [int(index.ids[rows[i]]) for i in best]
        keyword = self._fts_ids(query, tool, now, 3 * limit) or self._like_ids(
            query, tool, now, 3 * limit
        )
        scores = fuse_ranks((semantic, keyword), SEARCH_WEIGHTS, RRF_K)
        top = sorted(scores, key=lambda i: scores[i], reverse=True)[:limit]
        return [hint_for(r, scores[r.id], "search") for r in self._hit(top)]

    def _fts_ids(self, query: str, tool: str | None, now: int, limit: int) -> builtins.list[int]:
        """Full-text hits, best first: FTS5 ranks alone, the index filters after."""
        match = self._fts_match(query)
        if match is None:
            return []
        index = self._index()
        fetch = 3 * limit
        while True:
            rows = self._query(
                "SELECT rowid FROM errors_fts WHERE errors_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, fetch),
            )
            ids = [int(r[0]) for r in rows if index.is_live(int(r[0]), now, tool)]
            if len(ids) >= limit or len(rows) < fetch:
                return ids[:limit]
            fetch *= 8

    def _fts_match(self, query: str) -> str | None:
        """A safe MATCH expression: the rarest terms, up to FTS_POSTINGS_BUDGET documents.

        bm25 costs ~1.5 µs per matching document, so a common word ("file",
        "error") alone would cost more than the rest of the search.
        """
        terms = query_terms(query)
        content = [t for t in terms if not t.is_stopword] or terms
        scored: builtins.list[tuple[int, str]] = []
        for term in content:
            rows = self._query(
                "SELECT count(*) FROM (SELECT 1 FROM errors_fts WHERE errors_fts MATCH ? LIMIT ?)",
                (term.expr, FTS_POSTINGS_BUDGET + 1),
            )
            if rows[0][0]:
                scored.append((int(rows[0][0]), term.expr))
        scored.sort()
        chosen: builtins.list[str] = []
        total = 0
        for df, expr in scored:
            if chosen and total + df > FTS_POSTINGS_BUDGET:
                break
            chosen.append(expr)
            total += df
        return " OR ".join(chosen) if chosen else None

    def _like_ids(self, query: str, tool: str | None, now: int, limit: int) -> builtins.list[int]:
        escaped = query.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._query(
            "SELECT id FROM errors WHERE expires_ns > :now AND (:tool IS NULL OR tool = :tool)"
            " AND (symptom LIKE :pat ESCAPE '\\' OR cause LIKE :pat ESCAPE '\\'"
            " OR action LIKE :pat ESCAPE '\\')"
            " ORDER BY updated_ns DESC, id DESC LIMIT :limit",
            {"now": now, "tool": tool, "pat": f"%{escaped}%", "limit": limit},
        )
        return [int(r[0]) for r in rows]

    # -- upkeep ------------------------------------------------------------------------------------
    def purge_expired(self) -> int:
        """Delete every expired record; returns how many went."""
        now = self.clock()
        ids = [
            int(r[0]) for r in self._query("SELECT id FROM errors WHERE expires_ns <= ?", (now,))
        ]
        if ids:
            self._delete_ids(ids)
            log.info("error memory: purged %d expired records", len(ids))
        self.set_meta("last_purge_ns", str(now))
        return len(ids)

    def purge_if_due(self) -> int | None:
        """Purge when the last purge is a day old (the app's daily timer); None if not due."""
        last = int(self.get_meta("last_purge_ns") or 0)
        if self.clock() - last < PURGE_INTERVAL_NS:
            return None
        return self.purge_expired()

    def missing_vectors(self) -> int:
        """Records without a vector of the current model (0 without a model)."""
        if self.vector_tag is None:
            return 0
        rows = self._query(
            f"SELECT count(*) FROM {_FROM} WHERE model IS NULL OR model != ?",
            (self.vector_tag,),
        )
        return int(rows[0][0])

    def backfill_vectors(self, limit: int | None = None, batch: int = 32) -> int:
        """Embed up to *limit* records lacking current vectors (added without a
        model, or by another one); returns how many were embedded."""
        if self.vector_tag is None:
            return 0
        rows = self._query(
            f"SELECT id, tool, symptom, cause, action, error_type, expires_ns FROM {_FROM}"
            " WHERE model IS NULL OR model != ? ORDER BY id LIMIT ?",
            (self.vector_tag, -1 if limit is None else limit),
        )
        done = 0
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            texts = [t for r in part for t in (r[2], f"{r[2]}\n{r[3]}\n{r[4]}")]
            vectors = self._embed(texts)
            if vectors is None:
                break
            self._store_vectors(part, vectors)
            done += len(part)
        return done

    def _store_vectors(self, rows: Sequence[Sequence[Any]], vectors: FloatArray) -> None:
        with self.transaction() as db:
            self._insert_vectors(
                db, [(row[0], vectors[2 * n], vectors[2 * n + 1]) for n, row in enumerate(rows)]
            )
        if self._index_cache is not None:
            for n, row in enumerate(rows):
                pair = (vectors[2 * n], vectors[2 * n + 1])
                self._index_cache.put(int(row[0]), str(row[1]), str(row[5]), int(row[6]), pair)

    def _insert_vectors(
        self, db: sqlite3.Connection, items: Sequence[tuple[int, FloatArray, FloatArray]]
    ) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO error_vectors (record_id, model, symptom_vec, detail_vec)"
            " VALUES (?, ?, ?, ?)",
            [
                (rec_id, self.vector_tag, sym.astype("<f4").tobytes(), det.astype("<f4").tobytes())
                for rec_id, sym, det in items
            ],
        )

    def rebuild_fts(self) -> None:
        """Recreate the derived full-text index from the records."""
        with self.transaction() as db:
            db.execute("DELETE FROM errors_fts")
            rows = db.execute("SELECT id, tool, symptom, cause, action, keywords FROM errors")
            db.executemany(
                "INSERT INTO errors_fts (rowid, body) VALUES (?, ?)",
                [(r[0], _fts_body(r[1], r[2], r[3], r[4], json.loads(r[5]))) for r in rows],
            )
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_text_version', ?)",
                (str(FTS_TEXT_VERSION),),
            )


def _fts_body(tool: str, symptom: str, cause: str, action: str, keywords: Sequence[str]) -> str:
    """What full text indexes: the texts, and keywords with the class as plain words
    (``error_type:`` itself would make "error" match every record)."""
    words = [k.removeprefix(ERROR_TYPE_PREFIX).replace("_", " ") for k in keywords]
    return index_text("\n".join((tool, symptom, cause, action, " ".join(words))))
