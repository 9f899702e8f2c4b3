"""The error-memory store: one SQLite file of records, kept in step with an in-memory index.

Its own SQLite file (``memory/errors.sqlite3``), WAL, schema version in
``PRAGMA user_version`` with forward migrations (:mod:`.schema`); a database
from a newer app is refused before anything is written to it.  Records
expire 90 days after they were written or last returned; every record a
lookup or search returns is renewed.  Expired records are purged on open and
by :meth:`ErrorMemory.purge_if_due`.  Vectors made by another embedding
model are ignored until :meth:`ErrorMemory.backfill_vectors` replaces them.
The full-text index (FTS5, :mod:`fts_text` preparation) is derived data.

Threading: one connection per instance, created and used on one thread
(the app's storage worker; sqlite3's same-thread check stays on, so misuse
fails loudly instead of corrupting anything).
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agenvoy_desktop.core.error_memory import ranking, writes
from agenvoy_desktop.core.error_memory.exceptions import (
    ErrorMemoryDamagedError,
    ErrorMemoryError,
    ErrorQueryInvalid,
    ErrorRecordNotFound,
)
from agenvoy_desktop.core.error_memory.index import VectorIndex
from agenvoy_desktop.core.error_memory.records import (
    edited_draft,
    merged_draft,
    record_from_row,
    record_values,
    texts_of,
)
from agenvoy_desktop.core.error_memory.schema import (
    MIGRATIONS,
    ORDER_COLUMNS,
    ORDER_KEYS,
    RECORD_COLUMNS,
    RECORD_FROM,
    SCHEMA_VERSION,
)
from agenvoy_desktop.core.error_memory.vectors import RecordVectors
from agenvoy_desktop.core.error_types import (
    OUTCOMES,
    ErrorHint,
    ErrorRecord,
    ErrorRecordInvalid,
    RecordDraft,
    clean_choice,
    draft_record,
    hint_for,
    symptom_key,
)
from agenvoy_desktop.core.model_name import embedding_model_name
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION
from agenvoy_desktop.core.sqlite_db import SqliteStore
from agenvoy_desktop.core.timeutil import Clock, now_ns

if TYPE_CHECKING:
    from agenvoy_desktop.core.embedding import TextEmbedder

log = logging.getLogger(__name__)

DAY_NS = 86_400 * 1_000_000_000
DEFAULT_TTL_DAYS = 90
PURGE_INTERVAL_NS = DAY_NS


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
        model_name: str | None = None,
        purge_on_open: bool = True,
    ) -> None:
        """Open (creating or migrating) the store.  *purge_on_open* False keeps
        expired records visible, for an inspector that lists them."""
        if ttl_days < 1:
            raise ValueError(f"ttl_days must be at least 1, got {ttl_days}")
        self.embedder = embedder
        self.clock = clock
        self.ttl_ns = ttl_days * DAY_NS
        self.vectors = RecordVectors(embedder, model_name or embedding_model_name(embedder))
        self.vector_tag = self.vectors.tag
        self._purge_on_open = purge_on_open
        super().__init__(path)

    def _opened(self) -> None:
        if self.get_meta("fts_text_version") != str(FTS_TEXT_VERSION):
            self.rebuild_fts()
        if self._purge_on_open:
            self.purge_expired()

    def _records(self, ids: Sequence[int]) -> builtins.list[ErrorRecord]:
        """Records by id, in the order given (missing ids skipped)."""
        rows = self._query(
            f"SELECT {RECORD_COLUMNS} FROM {RECORD_FROM}"
            " WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([int(i) for i in ids]),),
        )
        by_id = {int(r[0]): record_from_row(r, self.vector_tag) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    # -- the in-memory index -----------------------------------------------------------
    def preload(self) -> None:
        """Load the in-memory index now (~0.1 s for 10,000 records) instead of at
        the first lookup; the app calls it on its storage thread at start."""
        self._index()

    def _index(self) -> VectorIndex:
        """The in-memory columns, loaded on first use (list/show never need them)."""
        return self.vectors.index(self._query)

    # -- writing --------------------------------------------------------------------------
    def _write(self, rec_id: int | None, draft: RecordDraft, now: int, *, embed: bool) -> int:
        """Insert (rec_id None) or overwrite a record, its keywords and its FTS row."""
        vectors = self.vectors.pair(*texts_of(draft)) if embed else None
        expires = now + self.ttl_ns
        values = record_values(draft, now, expires)
        if rec_id is None:
            values["created_ns"] = now
        with self.transaction() as db:
            rec_id = writes.write_record(db, rec_id, values)
            writes.write_derived(db, rec_id, draft)
            if embed:
                db.execute("DELETE FROM error_vectors WHERE record_id = ?", (rec_id,))
                if vectors is not None:
                    writes.insert_vectors(db, self.vector_tag, [(rec_id, *vectors)])
        self.vectors.put(
            rec_id, draft.tool, draft.error_type, expires, vectors, keep_vectors=not embed
        )
        return rec_id

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
        merged = merged_draft(old, draft, type_given=error_type is not None)
        changed = (merged.cause, merged.action) != (old.cause, old.action)
        self._write(old.id, merged, now, embed=changed or not old.has_vector)
        return self._get_or_raise(old.id)

    def find(self, tool: str, symptom: str) -> ErrorRecord | None:
        """The record :meth:`add` would update for this tool and symptom, if any."""
        rows = self._query(
            f"SELECT {RECORD_COLUMNS} FROM {RECORD_FROM} WHERE tool = ? AND symptom_key = ?",
            (tool.strip(), symptom_key(symptom)),
        )
        return record_from_row(rows[0], self.vector_tag) if rows else None

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
        draft = edited_draft(
            old,
            tool=tool,
            symptom=symptom,
            cause=cause,
            action=action,
            outcome=outcome,
            keywords=keywords,
            error_type=error_type,
        )
        clash = self.find(draft.tool, draft.symptom)
        if clash is not None and clash.id != record_id:
            raise ErrorRecordInvalid(
                f"symptom: record #{clash.id} already holds this symptom for tool {draft.tool}"
            )
        changed = texts_of(draft) != texts_of(old)
        self._write(record_id, draft, self.clock(), embed=changed or not old.has_vector)
        return self._get_or_raise(record_id)

    def delete(self, record_id: int) -> None:
        self._get_or_raise(record_id)
        self._delete_ids([record_id])

    def _delete_ids(self, ids: Sequence[int]) -> None:
        with self.transaction() as db:
            writes.delete_records(db, ids)
        self.vectors.drop(ids)

    def renew(self, record_id: int) -> ErrorRecord:
        """Extend a record's life to now + TTL (not counted as a hit)."""
        self._get_or_raise(record_id)
        expires = self.clock() + self.ttl_ns
        with self.transaction() as db:
            db.execute("UPDATE errors SET expires_ns = ? WHERE id = ?", (expires, record_id))
        self.vectors.set_expires([record_id], expires)
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
        self.vectors.set_expires(ids, expires)
        return self._records(ids)

    # -- reading ----------------------------------------------------------------------------
    def get(self, record_id: int) -> ErrorRecord | None:
        rows = self._query(
            f"SELECT {RECORD_COLUMNS} FROM {RECORD_FROM} WHERE id = ?",
            (int(record_id),),
        )
        return record_from_row(rows[0], self.vector_tag) if rows else None

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
        if key not in ORDER_COLUMNS:
            raise ErrorQueryInvalid(
                f"order_by must be one of {', '.join(ORDER_KEYS)} (with - to reverse)"
            )
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
            f"SELECT {RECORD_COLUMNS} FROM {RECORD_FROM} WHERE {' AND '.join(where)}"
            f" ORDER BY {ORDER_COLUMNS[key]} {direction}, id {direction}"
        )
        if limit is not None:
            sql += f" LIMIT {_positive('limit', limit)}"
        return [record_from_row(r, self.vector_tag) for r in self._query(sql, params)]

    # -- retrieval ------------------------------------------------------------------------------
    def lookup_for_failure(
        self, tool: str, error: BaseException | str | None, *, limit: int = 3
    ) -> builtins.list[ErrorHint]:
        """Records of *tool* that resemble this failure, best first; each is renewed.

        Ranking (:func:`ranking.failure_picks`): records whose symptom is
        similar to the error by similarity; then records of the same
        error_type, by keyword overlap; then records sharing keywords.
        Records matching none of these are not returned.
        """
        tool = tool.strip()
        index = self._index()
        rows = index.live(self.clock(), tool)
        if rows.size == 0 or limit < 1:
            return []
        picked = ranking.failure_picks(
            self._query, self.vectors.embed, index, rows, tool=tool, error=error, limit=limit
        )
        return [hint_for(r, *picked[r.id]) for r in self._hit(list(picked))]

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
            raise ErrorQueryInvalid("empty search query: say what to look for")
        limit = _positive("limit", limit)
        tool = tool.strip() if tool is not None else None
        index = self._index()
        now = self.clock()
        rows = index.live(now, tool)
        if rows.size == 0:
            return []
        scores = ranking.search_scores(
            self._query,
            self.vectors.embed,
            index,
            rows,
            query,
            tool=tool,
            now=now,
            limit=limit,
        )
        return [hint_for(r, scores[r.id], "search") for r in self._hit(list(scores))]

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
        return self.vectors.missing(self._query)

    def backfill_vectors(self, limit: int | None = None, batch: int = 32) -> int:
        """Embed up to *limit* records lacking current vectors (added without a
        model, or by another one); returns how many were embedded."""
        return self.vectors.backfill(self._query, self.transaction, limit, batch)

    def rebuild_fts(self) -> None:
        """Recreate the derived full-text index from the records."""
        with self.transaction() as db:
            writes.rebuild_fts(db)


def _positive(name: str, value: int) -> int:
    """*value* as a count of at least 1, or ErrorQueryInvalid naming *name*."""
    if value < 1:
        raise ErrorQueryInvalid(f"{name} must be at least 1, got {value}")
    return int(value)
