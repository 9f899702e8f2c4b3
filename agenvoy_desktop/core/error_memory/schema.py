"""The error memory's tables, their migrations, and the columns a record is read from.

Four tables: ``errors`` (the records), ``error_vectors`` (two vectors per
record, in their own table so that scans of the records stay small),
``error_keywords`` (one row per tool + keyword term, for the overlap of a
failure's words) and ``errors_fts`` (FTS5, derived: rebuilt whenever the
text preparation changes).  The schema version lives in ``PRAGMA
user_version``; ``MIGRATIONS[v]`` upgrades a database at version v-1 to v.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

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

RECORD_COLUMNS = (
    "id, tool, keywords, error_type, symptom, cause, action, outcome, created_ns, updated_ns,"
    " expires_ns, hits, last_hit_ns, source, session_id, model"
)
"""What :func:`records.record_from_row` reads, in its order."""
RECORD_FROM = "errors LEFT JOIN error_vectors ON record_id = id"
"""A record with the tag of the model its vectors came from (NULL: none)."""

ORDER_COLUMNS = {
    "id": "id",
    "tool": "tool",
    "outcome": "outcome",
    "created": "created_ns",
    "updated": "updated_ns",
    "expires": "expires_ns",
    "hits": "hits",
    "last_hit": "last_hit_ns",
}
"""A listing's order keys and the columns they sort by."""
ORDER_KEYS = tuple(ORDER_COLUMNS)
