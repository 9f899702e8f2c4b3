"""Rebuilding a damaged archive from what is left of it and from the history.json files.

The archive is one SQLite file; when SQLite says it is damaged (a bad page,
a truncated file, not a database at all) nothing else in the app can use it.
Repair never deletes: the file (with its write-ahead log) is moved aside
under a timestamped name, then

1. every row that can still be read is salvaged from a working copy of it,
   table by table in rowid ranges, splitting a range that hits a bad page
   until only the unreadable rows are left out; when some pages could not
   be reached through a table's tree, every page of the file is scanned for
   the rows on them (:mod:`sqlite_pages`; what ``sqlite3 .recover`` does, in
   Python, because the sqlite3 shell is not always installed);
2. a fresh archive gets the salvaged sessions, messages (with their rowids,
   seqs, times, titles and cut points) and events;
3. each session's history.json, the truth for recent messages, fills in what
   the salvage lost, in its place in the conversation.

Vectors and the full-text index are derived data: the index is rebuilt at
once, the vectors are embedded again in the background.  The caller tells
the user with :meth:`ArchiveRecovery.notice`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.archive import Archive, ArchiveDamagedError, SessionMeta, first_title
from agenvoy_desktop.core.history import HistoryFile
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.session_settings import kept_title
from agenvoy_desktop.core.sqlite_db import COMPANIONS, set_aside_database
from agenvoy_desktop.core.sqlite_pages import Value, leaf_rows
from agenvoy_desktop.core.sqlite_salvage import RangeReader
from agenvoy_desktop.core.store import InvalidSessionIdError, check_session_id
from agenvoy_desktop.core.timeutil import Clock

log = logging.getLogger(__name__)

CHUNK = 256
"""Rowids read per query while salvaging; a failing range is split in halves."""
MAX_FAILED_READS = 200_000
"""A salvage gives up after this many failed reads (a file of nothing but bad pages)."""
MAX_GAP_LOOKUPS = 2_000_000
"""Rowids a salvage looks up one by one after its range reads (about a second per 100,000)."""

Row = tuple[int | None, str, int, Message]
"""(rowid or None for a new one, session id, seq, message): one row to restore."""
EventRow = tuple[int, str, int, str, str]


@dataclass(frozen=True, slots=True)
class Salvage:
    """What could be read from a damaged archive."""

    sessions: list[SessionMeta]
    messages: list[Row]
    events: list[EventRow]
    unreadable: int
    """Rowids whose page could not be read (some may never have held a row)."""


@dataclass(frozen=True, slots=True)
class ArchiveRecovery:
    """What a rebuild did, for the notice and the doctor report."""

    reason: str
    set_aside: Path
    salvaged: int
    restored: int
    sessions: int

    def notice(self) -> str:
        return (
            f"the archive was damaged ({self.reason}); it was set aside as {self.set_aside} and"
            f" rebuilt: {self.salvaged} message(s) salvaged, {self.restored} restored from"
            f" history.json; vectors are embedded again"
        )


# -- opening ------------------------------------------------------------------------
def open_archive(
    path: Path,
    sessions_dir: Path,
    clock: Clock,
    *,
    repair: bool = True,
    exclusive: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> tuple[Archive, ArchiveRecovery | None]:
    """Open the archive; a damaged one is set aside and rebuilt (unless *repair* is off).

    The check at open is cheap (the schema reads, :meth:`Archive.probe`);
    damage further in shows when a query reaches it, and the caller repairs
    then (:func:`agenvoy_desktop.core.reconcile.repair_archive`).  The rebuild runs inside
    *exclusive* (the profile lock: no other process writes meanwhile), and
    looks again first: another process may have rebuilt it while we waited.
    """
    try:
        return _probed(path), None
    except ArchiveDamagedError:
        if not repair:
            raise
    with exclusive():
        try:
            return _probed(path), None
        except ArchiveDamagedError as exc:
            return rebuild_archive(path, sessions_dir, clock, damage_reason(exc))


def _probed(path: Path) -> Archive:
    """The archive at *path*, opened and probed (ArchiveDamagedError if it is damaged)."""
    archive = Archive(path)
    try:
        archive.probe()
    except BaseException:
        archive.close()
        raise
    return archive


def damage_reason(exc: BaseException) -> str:
    """The reason in a store error ("archive /x: the file is damaged" -> "the file is damaged")."""
    return str(exc).rsplit(": ", 1)[-1]


def rebuild_archive(
    path: Path, sessions_dir: Path, clock: Clock, reason: str
) -> tuple[Archive, ArchiveRecovery]:
    """Set the archive aside, salvage it, and build a fresh one (see the module docstring)."""
    aside = set_aside_database(path)
    log.info("archive %s is damaged (%s); set aside as %s", path, reason, aside)
    salvaged = salvage(aside, set(_session_folders(sessions_dir)))
    sessions, rows, restored = plan_restore(salvaged, sessions_dir, clock)
    archive = Archive(path)
    try:
        written = archive.restore(sessions, rows, salvaged.events)
    except BaseException:
        archive.close()
        raise
    report = ArchiveRecovery(reason, aside, max(0, written - restored), restored, len(sessions))
    log.info("%s", report.notice())  # the caller tells the user
    return archive, report


# -- salvage ------------------------------------------------------------------------
_SESSION_COLS = "session_id, title, created_ns, updated_ns, start_at_ns, cut_seq, next_seq"
_MESSAGE_COLS = "id, session_id, seq, msg_id, role, content, time_ns, ref, extra"
_EVENT_COLS = "id, session_id, time_ns, kind, detail"


def salvage(path: Path, folders: set[str] | frozenset[str] = frozenset()) -> Salvage:
    """Every readable session, message and event row of a damaged archive file.

    Works on a copy (with the copy's write-ahead log replayed), so the
    set-aside file stays exactly as it was found.  A copy that cannot be
    made (a full disk) salvages nothing: history.json still restores the
    recent messages.  *folders* names the sessions that still have a folder
    (rows found only by scanning pages are kept for live sessions only).
    """
    work = path.with_name(path.name + ".salvage")
    if not path.is_file():
        return Salvage([], [], [], 0)
    try:
        for end in ("", "-wal"):
            if path.with_name(path.name + end).exists():
                shutil.copyfile(path.with_name(path.name + end), work.with_name(work.name + end))
        return _salvage_copy(work, set(folders))
    except (OSError, sqlite3.Error) as exc:
        log.warning("could not salvage %s: %s", path, exc)
        return Salvage([], [], [], 0)
    finally:
        for end in ("", *COMPANIONS):
            work.with_name(work.name + end).unlink(missing_ok=True)


_TABLES = {"sessions": _SESSION_COLS, "messages": _MESSAGE_COLS, "events": _EVENT_COLS}
RawRow = tuple[Any, ...]
"""(rowid, *the table's columns in the order of its ``_*_COLS``)."""


def _salvage_copy(work: Path, folders: set[str]) -> Salvage:
    pages = functools.cache(functools.partial(_scan_pages, work))
    db = sqlite3.connect(work, isolation_level=None)
    try:
        reader = RangeReader(
            db,
            chunk=CHUNK,
            max_failed_reads=MAX_FAILED_READS,
            max_gap_lookups=MAX_GAP_LOOKUPS,
            fallback_bound=lambda table: max(pages()[table], default=0),
        )
        with contextlib.suppress(sqlite3.DatabaseError):
            # Read the tables even when other entries of the schema are damaged.
            db.execute("PRAGMA writable_schema = ON")
            db.execute("PRAGMA cell_size_check = ON")
        tables = {name: reader.rows(name, f"rowid, {cols}") for name, cols in _TABLES.items()}
    finally:
        db.close()
    page_only: set[int] = set()
    if reader.failed:  # some pages were unreachable through the tables' trees
        for name, rows in pages().items():
            if name == "messages":
                page_only = set(rows) - set(tables[name])
            for rowid, row in rows.items():
                tables[name].setdefault(rowid, row)
    sessions = [s for r in tables["sessions"].values() if (s := _session(r[1:]))]
    # Rows only a page scan found may sit on a page a removed session left
    # outside the freelist: they are kept for sessions that still exist.
    alive = {meta.session_id for meta in sessions} | folders
    messages = [
        m
        for rowid, r in tables["messages"].items()
        if (m := _message(r[1:])) and (rowid not in page_only or m[1] in alive)
    ]
    events = [e for r in tables["events"].values() if (e := _event(r[1:]))]
    return Salvage(sessions, messages, events, reader.lost)


def _scan_pages(work: Path) -> dict[str, dict[int, RawRow]]:
    """Rows of the salvaged tables found on the file's pages, by their shape.

    Read at most once per salvage (it reads the whole file): for a table
    whose ``max(rowid)`` fails, and for the rows no query could reach.
    """
    found: dict[str, dict[int, RawRow]] = {name: {} for name in _TABLES}
    try:
        for rowid, values in leaf_rows(work):
            if (row := _page_row(rowid, values)) is not None:
                found[row[0]][rowid] = row[1]
    except OSError as exc:
        log.warning("could not scan the pages of %s: %s", work, exc)
    return found


def _page_row(rowid: int, values: list[Value]) -> tuple[str, RawRow] | None:
    """Which of the salvaged tables a row read off a page belongs to, by its shape.

    messages: ten columns, the first (the rowid alias) stored as NULL, the
    tool flag an integer; events: five, the rowid alias NULL and text after
    it (a vector's second column is an integer); sessions: seven, text first.
    """
    if len(values) == 10 and values[0] is None and isinstance(values[8], int):
        _id, msg_id, sid, seq, role, content, time_ns, ref, _tool, extra = values
        return "messages", (rowid, rowid, sid, seq, msg_id, role, content, time_ns, ref, extra)
    if len(values) == 5 and values[0] is None and isinstance(values[1], str):
        return "events", (rowid, rowid, *values[1:])
    if len(values) == 7 and isinstance(values[0], str):
        return "sessions", (rowid, *values)
    return None


def _zeroed(sid: object) -> bool:
    """Whether a salvaged session id is damage: the end of a row whose overflow pages lay
    past a truncated file's end reads as zeros, and no session id (a folder's name) holds
    a NUL."""
    return not isinstance(sid, str) or "\x00" in sid


def _session(row: Sequence[Any]) -> SessionMeta | None:
    sid, title, *numbers = row
    if _zeroed(sid) or not all(isinstance(n, int) for n in numbers):
        return None
    if title is not None and not isinstance(title, str):
        title = None
    return SessionMeta(sid, title, *numbers)


def _message(row: Sequence[Any]) -> Row | None:
    rowid, sid, seq, msg_id, role, content, time_ns, ref, extra = row
    texts = (sid, msg_id, role, content)
    if not all(isinstance(t, str) for t in texts) or not isinstance(time_ns, int):
        return None
    if _zeroed(sid):
        return None
    if not isinstance(rowid, int) or not isinstance(seq, int):
        return None
    try:
        data = json.loads(extra) if isinstance(extra, str) and extra else {}
    except ValueError:
        data = {}
    ref = ref if isinstance(ref, str) else None
    message = Message(
        msg_id, role, content, time_ns, ref=ref, extra=data if isinstance(data, dict) else {}
    )
    return rowid, sid, seq, message


def _event(row: Sequence[Any]) -> EventRow | None:
    rowid, sid, time_ns, kind, detail = row
    if not (isinstance(rowid, int) and isinstance(sid, str) and isinstance(time_ns, int)):
        return None
    if not (isinstance(kind, str) and isinstance(detail, str)):
        return None
    return rowid, sid, time_ns, kind, detail


# -- restore plan ---------------------------------------------------------------------
def plan_restore(
    salvaged: Salvage, sessions_dir: Path, clock: Clock
) -> tuple[list[SessionMeta], list[Row], int]:
    """(sessions, rows, messages restored from history.json) for a fresh archive.

    Every session the salvage or a session folder knows is rebuilt: its
    salvaged rows older than its history.json, then history.json's
    messages (the salvaged copy where there is one), then salvaged rows the
    history does not hold.  Salvaged seqs are kept wherever the order
    allows, so the summary's cursor still points at the same message.
    """
    metas = {meta.session_id: meta for meta in salvaged.sessions}
    by_session: dict[str, list[Row]] = {}
    for row in salvaged.messages:
        by_session.setdefault(row[1], []).append(row)
    sids = set(metas) | set(by_session) | set(_session_folders(sessions_dir))
    sessions: list[SessionMeta] = []
    rows: list[Row] = []
    restored = 0
    for sid in sorted(sids):
        history = HistoryFile(sessions_dir / sid / "history.json", clock(), readonly=True).load()
        kept = sorted(by_session.get(sid, []), key=lambda row: row[2])
        planned, new = _merge(sid, kept, history)
        restored += new
        rows += planned
        meta = metas.get(sid)
        lost = _lost_title(sessions_dir / sid, planned) if meta is None else None
        sessions.append(_meta(sid, meta, planned, history, clock(), lost_title=lost))
    return sessions, rows, restored


def _session_folders(sessions_dir: Path) -> list[str]:
    out: list[str] = []
    with contextlib.suppress(OSError):
        for folder in sessions_dir.iterdir():
            with contextlib.suppress(InvalidSessionIdError):
                if folder.is_dir():
                    out.append(check_session_id(folder.name))
    return out


def _merge(sid: str, kept: list[Row], history: Sequence[Message]) -> tuple[list[Row], int]:
    """The session's rows in conversation order with their seqs; and how many came from history."""
    in_history = {m.id for m in history}
    salvaged = {row[3].id: row for row in kept}
    anchors = [salvaged[m.id][2] for m in history if m.id in salvaged]
    anchor = min(anchors) if anchors else None
    older = [r for r in kept if r[3].id not in in_history and (anchor is None or r[2] < anchor)]
    later = [r for r in kept if r[3].id not in in_history and anchor is not None and r[2] > anchor]
    middle: list[Row] = [salvaged.get(m.id, (None, sid, -1, m)) for m in history]
    planned: list[Row] = []
    previous = -1
    for rowid, _sid, old_seq, message in [*older, *middle, *later]:
        seq = old_seq if old_seq > previous else previous + 1
        planned.append((rowid, sid, seq, message))
        previous = seq
    return planned, sum(1 for m in history if m.id not in salvaged)


def _meta(
    sid: str,
    meta: SessionMeta | None,
    planned: Sequence[Row],
    history: Sequence[Message],
    now: int,
    *,
    lost_title: str | None = None,
) -> SessionMeta:
    """The session's row: salvaged where it was, its cut point where history.json starts."""
    next_seq = planned[-1][2] + 1 if planned else 0
    times = [row[3].time_ns for row in planned]
    created = meta.created_ns if meta else min(times, default=now)
    updated = max(meta.updated_ns if meta else 0, max(times, default=now))
    if history:
        first = next(row for row in planned if row[3].id == history[0].id)
        cut_seq, start_at = first[2], history[0].time_ns
    elif meta is not None:
        cut_seq, start_at = min(meta.cut_seq, next_seq), meta.start_at_ns
    else:
        cut_seq, start_at = 0, 0
    title = meta.title if meta else lost_title
    return SessionMeta(sid, title, created, updated, start_at, cut_seq, next_seq)


def _lost_title(folder: Path, planned: Sequence[Row]) -> str | None:
    """The title of a session whose row was lost with the archive: the one the person
    typed (kept beside its settings), else the automatic one from its first message."""
    return kept_title(folder) or first_title(row[3] for row in planned)
