"""The SQL that writes a record's rows: ``errors``, its keywords, its FTS row and its vectors.

Every function runs inside the caller's transaction (*db*), so a record and
its derived rows change together or not at all.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from agenvoy_desktop.core.error_memory.index import FloatArray
from agenvoy_desktop.core.error_memory.records import fts_body
from agenvoy_desktop.core.error_types import (
    ERROR_TYPE_PREFIX,
    RecordDraft,
    keyword_term,
    with_type_keyword,
)
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION

VectorRow = tuple[int, FloatArray, FloatArray]
"""(record id, symptom vector, symptom + cause + action vector)."""


def write_record(db: sqlite3.Connection, rec_id: int | None, values: dict[str, Any]) -> int:
    """Insert (*rec_id* None) or overwrite a record's ``errors`` row; its id."""
    if rec_id is None:
        cols = ", ".join(values)
        marks = ", ".join("?" * len(values))
        cur = db.execute(f"INSERT INTO errors ({cols}) VALUES ({marks})", [*values.values()])
        assert cur.lastrowid is not None
        return int(cur.lastrowid)
    sets = ", ".join(f"{col} = ?" for col in values)
    db.execute(f"UPDATE errors SET {sets} WHERE id = ?", [*values.values(), rec_id])
    return rec_id


def write_derived(db: sqlite3.Connection, rec_id: int, draft: RecordDraft) -> None:
    """Replace a record's keyword terms and its full-text row."""
    db.execute("DELETE FROM error_keywords WHERE record_id = ?", (rec_id,))
    terms = {keyword_term(k) for k in draft.keywords} - {""}
    db.executemany(
        "INSERT INTO error_keywords (tool, term, record_id) VALUES (?, ?, ?)",
        [(draft.tool, term, rec_id) for term in sorted(terms)],
    )
    keywords = with_type_keyword(draft.keywords, draft.error_type)
    body = fts_body(draft.tool, draft.symptom, draft.cause, draft.action, keywords)
    db.execute("DELETE FROM errors_fts WHERE rowid = ?", (rec_id,))
    db.execute("INSERT INTO errors_fts (rowid, body) VALUES (?, ?)", (rec_id, body))


def insert_vectors(
    db: sqlite3.Connection, model_tag: str | None, items: Sequence[VectorRow]
) -> None:
    """Store (or replace) the vectors of each record, tagged with the model that made them."""
    db.executemany(
        "INSERT OR REPLACE INTO error_vectors (record_id, model, symptom_vec, detail_vec)"
        " VALUES (?, ?, ?, ?)",
        [
            (
                rec_id,
                model_tag,
                sym.astype("<f4").tobytes(),
                det.astype("<f4").tobytes(),
            )
            for rec_id, sym, det in items
        ],
    )


def delete_records(db: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Delete records with every row derived from them."""
    payload = json.dumps([int(i) for i in ids])
    for table, col in (
        ("errors_fts", "rowid"),
        ("error_keywords", "record_id"),
        ("error_vectors", "record_id"),
    ):
        db.execute(
            f"DELETE FROM {table} WHERE {col} IN (SELECT value FROM json_each(?))",
            (payload,),
        )
    db.execute("DELETE FROM errors WHERE id IN (SELECT value FROM json_each(?))", (payload,))


def rebuild_fts(db: sqlite3.Connection) -> None:
    """Recreate the derived full-text index from the records, stamped with the text version."""
    db.execute("DELETE FROM errors_fts")
    rows = db.execute("SELECT id, tool, symptom, cause, action, keywords FROM errors")
    db.executemany(
        "INSERT INTO errors_fts (rowid, body) VALUES (?, ?)",
        [(r[0], fts_body(r[1], r[2], r[3], r[4], json.loads(r[5]))) for r in rows],
    )
    db.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_text_version', ?)",
        (str(FTS_TEXT_VERSION),),
    )


def restore_records(db: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> set[int]:
    """Insert salvaged ``errors`` rows (every column, ids kept) with their keyword rows.

    A row whose tool and symptom an earlier one already holds is skipped.
    The stored keywords carry the class keyword, which the keyword rows
    leave out (as :func:`write_derived` does).  Returns the ids written.
    """
    marks = ", ".join("?" * 16)
    written: set[int] = set()
    for row in rows:
        cur = db.execute(f"INSERT OR IGNORE INTO errors VALUES ({marks})", list(row))
        if cur.rowcount != 1:
            continue
        rec_id, tool = int(row[0]), str(row[1])
        keywords = [k for k in json.loads(row[8]) if not k.startswith(ERROR_TYPE_PREFIX)]
        terms = {keyword_term(k) for k in keywords} - {""}
        db.executemany(
            "INSERT OR IGNORE INTO error_keywords (tool, term, record_id) VALUES (?, ?, ?)",
            [(tool, term, rec_id) for term in sorted(terms)],
        )
        written.add(rec_id)
    return written


def restore_vectors(db: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> None:
    """Insert salvaged ``error_vectors`` rows as they were (model tag and bytes)."""
    db.executemany(
        "INSERT OR REPLACE INTO error_vectors (record_id, model, symptom_vec, detail_vec)"
        " VALUES (?, ?, ?, ?)",
        [list(row) for row in rows],
    )
