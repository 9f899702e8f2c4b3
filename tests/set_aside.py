"""Copies of the archive the app sets aside (upgrade backups, damaged archives), made for tests.

An upgrade backup is what :func:`profile.back_up` copies before a format
upgrade: an archive of an older schema.  :func:`old_archive` writes one as
that version of the app did (its migrations in order, its rows and FTS
columns); :func:`as_schema_4` turns a copy of the current archive into the
schema-4 file it was before (schema 5 only added indexes).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from agenvoy_desktop.core.archive import MIGRATIONS
from agenvoy_desktop.core.profile import back_up
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION
from agenvoy_desktop.paths import AppPaths
from tests.conftest import T0

V5_INDEXES = (
    "messages_quoting",
    "message_versions_quoting",
    "messages_unmarked",
    "message_versions_unmarked",
)


def old_archive(path: Path, version: int, sessions: dict[str, list[str]]) -> None:
    """An archive of schema *version* (1-4) in WAL mode holding *sessions* (id: texts).

    Each session has its messages (ids ``<sid>-<seq>``) in the FTS index as
    that version's columns take them, a vector per message, a ``note``
    event quoting its first message and, from schema 4, an earlier version
    of its last message.  The last session's turn recalled every other
    session's first message (a ``recall`` event quoting it).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        for step in range(1, version + 1):
            db.executescript(MIGRATIONS[step])
        db.execute(f"PRAGMA user_version = {version}")
        db.execute("INSERT INTO meta VALUES ('fts_text_version', ?)", (str(FTS_TEXT_VERSION),))
        for sid, texts in sessions.items():
            _write_session(db, version, sid, texts)
        *others, last = sessions
        block = "Said before:\n" + "\n".join(f'- you said: "{sessions[s][0]}"' for s in others)
        detail = {"text": block, "ids": [f"{s}-0" for s in others]}
        db.execute(
            "INSERT INTO events (session_id, time_ns, kind, detail) VALUES (?, ?, 'recall', ?)",
            (last, T0, json.dumps(detail)),
        )
    finally:
        db.close()


def _write_session(db: sqlite3.Connection, version: int, sid: str, texts: list[str]) -> None:
    db.execute(
        "INSERT INTO sessions (session_id, title, created_ns, updated_ns) VALUES (?, ?, ?, ?)",
        (sid, texts[0], T0, T0),
    )
    for seq, text in enumerate(texts):
        role = "user" if seq % 2 == 0 else "assistant"
        rowid = db.execute(
            "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (f"{sid}-{seq}", sid, seq, role, text, T0 + seq),
        ).lastrowid
        columns = ["body", "sid", "ctx"][: min(version, 3)]
        values = [text, f"sid{sid}", ""][: len(columns)]
        db.execute(
            f"INSERT INTO messages_fts (rowid, {', '.join(columns)})"
            f" VALUES (?{', ?' * len(columns)})",
            (rowid, *values),
        )
        vector = (rowid, sid, "test-model", b"\x00\x00\x80\x3f" * 4)
        if version >= 3:
            db.execute("INSERT INTO vectors VALUES (?, ?, ?, ?, ?)", (rowid << 6, *vector))
        else:
            db.execute("INSERT INTO vectors VALUES (?, ?, ?, ?)", vector)
    db.execute(
        "INSERT INTO events (session_id, time_ns, kind, detail) VALUES (?, ?, 'note', ?)",
        (sid, T0, json.dumps({"text": texts[0]})),
    )
    if version >= 4:
        db.execute(
            "INSERT INTO message_versions (msg_id, session_id, seq, role, content, time_ns,"
            " branched_ns, reason, anchor_id) VALUES (?, ?, ?, 'assistant', ?, ?, ?, ?, ?)",
            (f"{sid}-old", sid, len(texts), f"earlier: {texts[-1]}", T0, T0, "regenerate", "x"),
        )


def as_schema_4(archive: Path) -> None:
    """Turn a copy of a schema-5 archive into the schema-4 file it was before."""
    db = sqlite3.connect(archive, isolation_level=None)
    try:
        for index in V5_INDEXES:
            db.execute(f"DROP INDEX IF EXISTS {index}")
        db.execute("PRAGMA user_version = 4")
    finally:
        db.close()


def upgrade_backup(paths: AppPaths) -> Path:
    """The app's backup before an upgrade from profile format 2 (archive schema 4):
    :func:`profile.back_up` copies the archive and its log as they are, and the copy
    is set back to schema 4.  Returns the backup's archive."""
    folder = back_up(paths, "format-2-to-4")
    (archive,) = folder.rglob(paths.archive_db.name)
    as_schema_4(archive)
    return archive


def damaged_copy(paths: AppPaths, stamp: str = "20261202T000000Z") -> Path:
    """A copy of the live archive and its log, kept as a damaged archive is
    (:func:`sqlite_db.set_aside_database` names it so); SQLite reads it."""
    aside = paths.archive_db.with_name(f"{paths.archive_db.name}.damaged-{stamp}")
    for end in ("", "-wal"):
        source = paths.archive_db.with_name(paths.archive_db.name + end)
        if source.exists():
            aside.with_name(aside.name + end).write_bytes(source.read_bytes())
    return aside


def garbage_copy(paths: AppPaths, stamp: str = "20261203T000000Z") -> Path:
    """A damaged archive SQLite cannot read at all (its bytes are not a database)."""
    aside = paths.archive_db.with_name(f"{paths.archive_db.name}.damaged-{stamp}")
    aside.parent.mkdir(parents=True, exist_ok=True)
    aside.write_bytes(b"not a database: My bike lock code is quokkalock4721." * 100)
    return aside


def session_rows(archive: Path, session_id: str) -> int:
    """How many message rows of *session_id* an archive file (a copy) holds."""
    db = sqlite3.connect(archive)
    try:
        query = "SELECT count(*) FROM messages WHERE session_id = ?"
        return int(db.execute(query, (session_id,)).fetchone()[0])
    finally:
        db.close()
