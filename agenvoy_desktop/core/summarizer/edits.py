"""The user's own edits of a summary, saved like a pass."""

from __future__ import annotations

import logging
from pathlib import Path

from agenvoy_desktop.core.archive import ArchiveError
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer.pending import Cursor
from agenvoy_desktop.core.summarizer.runs import SummaryBusyError
from agenvoy_desktop.core.summarizer.session_lock import SessionLock
from agenvoy_desktop.core.summary import (
    PassRecord,
    Summary,
    SummaryMeta,
    append_record,
    load_meta,
    save_meta,
    save_summary,
    validate_summary,
)
from agenvoy_desktop.core.timeutil import Clock, now_ns

log = logging.getLogger(__name__)


def save_user_edit(
    store: MemoryStore, session_id: str, summary: Summary, clock: Clock = now_ns
) -> PassRecord:
    """Save a summary the user edited: validated, saved like a pass, cursor unchanged.

    Raises SummaryFormatError (bad edit), SummaryBusyError (a pass is
    running: its next chunk would overwrite the edit), SummaryFileError.
    """
    summary = validate_summary(summary)
    with store.locked(session_id, "summary edit"):
        folder = store.folder(store.require(session_id))
        folder.mkdir(parents=True, exist_ok=True)
    lock = SessionLock.acquire(folder, clock)
    if lock is None:
        raise SummaryBusyError(
            f"session {session_id}: a summary pass is running; try again when it finishes"
        )
    try:
        with store.locked(session_id, "summary edit"):
            record = _save_edit(store, session_id, folder, summary, clock)
    finally:
        lock.release()
    return record


def _save_edit(
    store: MemoryStore, session_id: str, folder: Path, summary: Summary, clock: Clock
) -> PassRecord:
    """Write an edit; the caller holds both the summary lock and the session lock."""
    meta = load_meta(folder) or SummaryMeta()
    now = clock()
    save_summary(folder, summary)
    save_meta(folder, meta.with_(updated_ns=now))
    cursor = Cursor(meta.cursor_seq, meta.cursor_message_id, meta.cursor_time_ns).to_json()
    record = PassRecord("edit", now, model="user", cursor_before=cursor, cursor_after=cursor)
    append_record(folder, record)
    try:
        store.archive.add_event(session_id, now, "summary_edit", record.to_json())
    except ArchiveError as exc:
        log.warning("summary edit event of %s not recorded: %s", session_id, exc)
    return record
