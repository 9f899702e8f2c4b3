"""A reset or removed session taken out of the archive copies the app set aside earlier.

The app keeps two kinds of copy of the conversation archive
(:func:`~agenvoy_desktop.core.profile.copies_kept_aside`): the archive as it
was before a format upgrade (``config/backups/<time>-format-<old>-to-<new>/
…/archive.sqlite3``, :func:`~agenvoy_desktop.core.profile.back_up`) and an
archive set aside as damaged (``archive.sqlite3.damaged-<time>``,
:func:`~agenvoy_desktop.core.sqlite_db.set_aside_database`).  They exist so
that nothing is lost to an upgrade or a damaged file; but a person who resets
or removes a session means its words to go from every file of the profile,
those copies included.  So a reset or remove (:mod:`lifecycle`, inside its
journaled operation) takes the session out of each copy.

In place, and without migrating it: a backup is there to go back to the
version that wrote it, so it must stay a file that version opens.  Hence
plain ``sqlite3``, never :class:`~agenvoy_desktop.core.archive.Archive`
(which would migrate it to the current schema).  With ``secure_delete`` on,
in one transaction:

- the session's rows leave every ordinary table with a ``session_id`` column
  (``messages``, ``message_versions``, ``vectors``, ``events``,
  ``sessions``), for a reset as well as a remove: the copy is a backup, and
  history.json stays the source of truth of what a reset keeps;
- other sessions' rows that quote the session lose those lines, as in the
  live archive (recall records, stored search results:
  :mod:`recall_record`, :mod:`quoted_results`);
- the contentless FTS5 index is emptied.  It cannot delete a row without the
  text it indexed for it, and that text depends on the version that indexed
  it; FTS5's ``delete-all`` empties it and keeps its configuration (the
  ``rank`` row), which is what dropping and recreating it from its
  ``sqlite_master`` entry would do, in one statement.  The ``fts_text_version``
  meta key goes with it, as the schema migrations drop it: every version of
  the app rebuilds the index from the rows when that key is missing at open.

Then ``VACUUM`` rewrites the file without free pages, and the write-ahead
log is copied back and truncated: no page or log frame keeps the text.

A copy SQLite cannot open or read (garbage, truncated, not an archive), or
whose scrub fails, is left as it was and reported as *not cleaned*: it may
still hold the words, and the person is offered to delete it
(:func:`delete_copies`).  A bad copy never fails the reset or remove it
belongs to: it is logged and reported, never raised.  Every step is
idempotent, so a journal's roll-forward after a crash runs it all again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agenvoy_desktop.core.profile import copies_kept_aside
from agenvoy_desktop.core.quoted_results import Gone, withdrawn_result
from agenvoy_desktop.core.recall_record import RECALL_EVENT, withdrawn
from agenvoy_desktop.core.sqlite_db import COMPANIONS
from agenvoy_desktop.paths import AppPaths

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
"""How long a scrub waits for another process working on the same copy (another reset)."""
TEXT_TABLES = ("messages", "message_versions")
"""The tables whose rows hold what was said (``message_versions`` from schema v4)."""
_FTS5 = re.compile(r"\bUSING\s+fts5\s*\(", re.IGNORECASE)
"""A ``CREATE VIRTUAL TABLE`` of an FTS5 index (not of an ``fts5vocab`` table over it)."""
SCRUBBED_KEY = "set_aside_scrubbed"
"""The ``meta`` key a damaged copy gets when it is first scrubbed (with its ``VACUUM``).
From then on no page outside its tables holds text and its indexes are rebuilt from
the rows, so a later reset or remove rewrites it only when it holds that session:
rewriting a large copy on every reset would keep the storage thread busy for nothing."""


@dataclass(frozen=True, slots=True)
class CopiesReport:
    """What a reset or remove did to the archive copies set aside earlier."""

    cleaned: tuple[Path, ...] = ()
    """Copies the session was taken out of (nothing of it is left in them)."""
    not_cleaned: tuple[Path, ...] = ()
    """Copies that could not be read or changed: they may still hold the session's words."""


class _NotAnArchive(sqlite3.DatabaseError):
    """SQLite reads the file, but it holds no archive tables to take a session out of."""


class _LogKept(OSError):
    """The copy's write-ahead log could not be emptied (another program reads the copy)."""


def archive_copies(paths: AppPaths) -> list[Path]:
    """The archive files among the copies the app set aside: each upgrade backup's
    archive and each damaged archive, without their ``-wal``/``-shm``/``-journal``."""
    return [*_backup_archives(paths), *_damaged_archives(paths)]


def _backup_archives(paths: AppPaths) -> list[Path]:
    found: list[Path] = []
    for kept in copies_kept_aside(paths):
        if kept.is_dir():
            found += sorted(p for p in kept.rglob(paths.archive_db.name) if p.is_file())
    return found


def _damaged_archives(paths: AppPaths) -> list[Path]:
    return [
        kept
        for kept in copies_kept_aside(paths)
        if kept.is_file() and not kept.name.endswith(COMPANIONS)
    ]


def take_session_out(paths: AppPaths, session_id: str) -> CopiesReport:
    """Take *session_id* out of every archive copy set aside (see the module docstring).

    A backup that holds nothing of the session is not changed.  A damaged
    copy is scrubbed whatever it seems to hold the first time (its indexes
    may hide rows, and pages a damage cut off from its tables hold text no
    query finds, which only ``VACUUM`` drops), then like a backup
    (:data:`SCRUBBED_KEY`).  Never raises for a copy: what failed is
    logged and reported in :attr:`CopiesReport.not_cleaned`.
    """
    cleaned: list[Path] = []
    not_cleaned: list[Path] = []
    damaged = set(_damaged_archives(paths))
    for copy in archive_copies(paths):
        try:
            if _scrub(copy, session_id, damaged=copy in damaged):
                cleaned.append(copy)
        except (sqlite3.Error, OSError) as exc:
            log.warning(
                "could not take session %s out of the copy %s (%s)",
                session_id,
                copy,
                exc,
            )
            not_cleaned.append(copy)
    if cleaned:
        log.info("took session %s out of %d copies set aside earlier", session_id, len(cleaned))
    return CopiesReport(tuple(cleaned), tuple(not_cleaned))


def _scrub(path: Path, session_id: str, *, damaged: bool) -> bool:
    """Take the session out of one copy; whether it was changed.  Raises for a copy that
    cannot be read or changed (a failed step leaves it as it was: one transaction)."""
    if not path.is_file():  # deleted meanwhile: nothing of it is left
        return False
    with _connect(path) as db:
        db.execute("PRAGMA secure_delete = ON")
        tables = _session_tables(db)
        meta = _has_meta(db)  # without it, a damaged copy is scrubbed whole every time
        whole = damaged and not (meta and _scrubbed_before(db))
        if not whole and not _holds(db, tables, session_id):
            return False
        with _transaction(db):
            _withdraw_quotes(db, tables, session_id)
            for table in tables:
                db.execute(
                    f"DELETE FROM {_name(table)} NOT INDEXED WHERE session_id = ?", (session_id,)
                )
            _empty_fts(db, has_meta=meta)
        db.execute("VACUUM")
        if whole and meta:  # only once VACUUM went through: it is what dropped the lost pages
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (SCRUBBED_KEY,))
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # Closing the last connection copies the log back and deletes it; one still
    # there with frames in it is read by another program and may hold old pages.
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise _LogKept(f"its write-ahead log {wal.name} could not be emptied")
    return True


@contextlib.contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """The copy opened read-write, never created (a copy gone meanwhile is an error):
    ``sqlite3.connect`` would otherwise make an empty database of a missing name."""
    uri = f"{path.absolute().as_uri()}?mode=rw"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    try:
        yield db
    finally:
        db.close()


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _name(table: str) -> str:
    """*table* quoted as an SQL identifier (names come from the copy's own schema)."""
    return '"' + table.replace('"', '""') + '"'


def _session_tables(db: sqlite3.Connection) -> list[str]:
    """The copy's ordinary tables with a ``session_id`` column; reading the schema is
    the first read, so a file that is not a database fails here."""
    names = [
        str(row[0])
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
        )
    ]
    tables = [
        name
        for name in names
        if any(col[1] == "session_id" for col in db.execute(f"PRAGMA table_info({_name(name)})"))
    ]
    if "messages" not in tables:
        raise _NotAnArchive("no archive tables in it")
    return tables


def _has_meta(db: sqlite3.Connection) -> bool:
    """Whether the copy has the archive's ``meta`` table (every schema version has)."""
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
    return found.fetchone() is not None


def _scrubbed_before(db: sqlite3.Connection) -> bool:
    """Whether this damaged copy was scrubbed whole before (:data:`SCRUBBED_KEY`)."""
    found = db.execute("SELECT 1 FROM meta WHERE key = ?", (SCRUBBED_KEY,))
    return found.fetchone() is not None


def _holds(db: sqlite3.Connection, tables: Iterable[str], session_id: str) -> bool:
    """Whether any row of the session is in the copy (one index seek per table)."""
    return any(
        db.execute(
            f"SELECT 1 FROM {_name(table)} WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        for table in tables
    )


def _withdraw_quotes(db: sqlite3.Connection, tables: Collection[str], session_id: str) -> None:
    """Other sessions' recall records and stored search results lose the lines that quote
    the session's messages (what the live archive does in its delete), by id, or by
    text for a result stored before results listed ids."""
    rows = [
        row
        for table in TEXT_TABLES
        if table in tables
        for row in db.execute(
            f"SELECT msg_id, content FROM {table} WHERE session_id = ?", (session_id,)
        ).fetchall()
    ]
    gone = Gone((str(r[0]) for r in rows), (str(r[1]) for r in rows))
    if not gone:
        return
    if "events" in tables:
        recalls = db.execute(
            "SELECT id, detail FROM events WHERE kind = ? AND session_id != ?",
            (RECALL_EVENT, session_id),
        ).fetchall()
        for event_id, raw in recalls:
            detail = _json_object(raw)
            changed = withdrawn(detail, gone.ids) if detail is not None else None
            if changed is not None:
                db.execute(
                    "UPDATE events SET detail = ? WHERE id = ?",
                    (json.dumps(changed, ensure_ascii=False), event_id),
                )
    for table in (t for t in TEXT_TABLES if t in tables):
        results = db.execute(
            f"SELECT id, content, extra FROM {table} WHERE role = 'tool' AND session_id != ?",
            (session_id,),
        ).fetchall()
        for rowid, content, raw in results:
            extra = _json_object(raw)
            result = withdrawn_result(str(content), extra, gone) if extra is not None else None
            if result is not None:
                db.execute(
                    f"UPDATE {table} SET content = ?, extra = ? WHERE id = ?",
                    (result[0], json.dumps(result[1], ensure_ascii=False, sort_keys=True), rowid),
                )


def _json_object(raw: object) -> dict[str, object] | None:
    """A row's JSON field as an object (None: empty, damaged, or not an object)."""
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _empty_fts(db: sqlite3.Connection, *, has_meta: bool) -> None:
    """Empty every FTS5 index of the copy and have the app rebuild it at its next open."""
    schema = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'"
    ).fetchall()
    for name, sql in schema:
        if _FTS5.search(str(sql)):
            db.execute(f"INSERT INTO {_name(name)} ({_name(name)}) VALUES ('delete-all')")
    if has_meta:
        db.execute("DELETE FROM meta WHERE key = 'fts_text_version'")


def delete_copies(paths: AppPaths, chosen: Iterable[Path]) -> list[Path]:
    """Delete the *chosen* archive copies with their ``-wal``/``-shm``/``-journal``;
    returns those deleted.

    Only a file that is one of the archive copies set aside
    (:func:`archive_copies`) is deleted: what the person confirmed came from
    a report, and nothing else of the profile goes by mistake.  A copy gone
    meanwhile counts as deleted; a file that cannot be deleted raises
    (OSError), after the others went.
    """
    known = set(archive_copies(paths))
    deleted: list[Path] = []
    failed: OSError | None = None
    for copy in chosen:
        if copy not in known and copy.exists():
            log.warning("not deleting %s: it is not a copy the app set aside", copy)
            continue
        try:
            for end in ("", *COMPANIONS):
                copy.with_name(copy.name + end).unlink(missing_ok=True)
        except OSError as exc:
            failed = failed or exc
            continue
        deleted.append(copy)
        log.info("deleted the copy set aside earlier %s", copy)
    if failed is not None:
        raise failed
    return deleted
