"""Reset and remove, crash-safe.

Each operation first writes a journal entry (``memory/ops/<session>.json``),
then performs idempotent steps, then deletes the entry.  If the process dies
anywhere in between, the next start finds the entry and runs the remaining
steps again (roll forward): a session is never left half-reset or
half-removed, and nothing is back-filled from a history.json that was about
to be deleted, because pending operations are finished before anything else.

| operation | history.json | vectors | archive (messages + meta) | summary |
|-----------|--------------|---------|---------------------------|---------|
| reset     | deleted      | cleared | cleared                   | kept¹   |
| remove    | folder gone  | cleared | cleared                   | deleted |

¹ deleted too when the caller asks (``clear_summary``).

Nothing of the session's text survives either: a reset deletes every file
of the folder but the session's settings (and the summary's, when it
stays), a title made from the messages, the timeline's events (but the
summary's, when it stays); the archive zeroes what it frees, merges its
full-text index and empties its write-ahead log
(:meth:`Archive.delete_session_rows`).  The archive copies the app set aside
earlier (upgrade backups, damaged archives) lose the session too, in the same
journaled operation (:mod:`set_aside_copies`); one that cannot be read is
reported (:class:`CopiesReport`), never a reason for the operation to fail.

Message actions (delete, edit, regenerate, fork) journal themselves the same
way (:mod:`message_edit`); :func:`finish_pending` rolls them forward too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from agenvoy_desktop.core import message_edit
from agenvoy_desktop.core.atomic import atomic_write_text, fsync_dir
from agenvoy_desktop.core.journal import ops_dir
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.quoted_histories import withdraw_from_histories
from agenvoy_desktop.core.session_settings import SETTINGS_FILE, keep_title
from agenvoy_desktop.core.set_aside_copies import CopiesReport, take_session_out
from agenvoy_desktop.core.store import MemoryStore, check_session_id
from agenvoy_desktop.core.summary import LOG_FILE, META_FILE, PREVIOUS_FILE, SUMMARY_FILE

log = logging.getLogger(__name__)

Operation = Literal["reset", "remove"]
TRASH_PREFIX = ".removing-"
SUMMARY_FILES = (SUMMARY_FILE, PREVIOUS_FILE, META_FILE, LOG_FILE)
"""The summary's files (and, with a ``.`` after the name, their set-aside copies): a reset
that keeps the summary keeps the copy before its last pass too, one that clears it deletes both."""
SUMMARY_EVENTS = frozenset({"summary_pass", "summary_failed", "summary_edit"})
"""Timeline events that belong to the summary: a reset that keeps it keeps them."""
SUMMARIZER_LOCK = "summary.lock"
"""``summarizer.runs.LOCK_FILE``, named here so a reset need not load the summarizer:
a summary pass may hold it, so a reset never deletes it."""
KEPT_BY_RESET = (SETTINGS_FILE, SUMMARIZER_LOCK)
"""Files of a session folder a reset leaves: its settings, and the summarizer's lock."""


__all__ = ["finish_pending", "ops_dir", "remove_session", "reset_session", "run_operation"]


def reset_session(
    store: MemoryStore, session_id: str, *, clear_summary: bool = False
) -> CopiesReport:
    """Clear history, vectors and archive of a session; keep its summary unless *clear_summary*.

    The summary stays by default: it is what a person resets for, to go on
    from the gist without the transcript.  Returns what became of the copies
    set aside earlier (:func:`~set_aside_copies.take_session_out`).
    """
    with store.locked(session_id, "reset"):
        return run_operation(store, "reset", store.require(session_id), clear_summary=clear_summary)


def remove_session(store: MemoryStore, session_id: str) -> CopiesReport:
    """Delete a session entirely (folder, archive rows, vectors, summary, and its rows in
    the copies set aside earlier: see the returned report)."""
    with store.locked(session_id, "remove"):
        return run_operation(store, "remove", store.require(session_id))


def run_operation(
    store: MemoryStore, op: Operation, session_id: str, *, clear_summary: bool = False
) -> CopiesReport:
    """Journal, perform and close one reset/remove; the caller holds the session's lock."""
    journal = ops_dir(store) / f"{session_id}.json"
    entry = {"op": op, "session_id": session_id, "time_ns": store.clock()}
    if clear_summary:
        entry["clear_summary"] = True
    atomic_write_text(journal, json.dumps(entry))
    report = _perform(store, op, session_id, clear_summary=clear_summary)
    journal.unlink(missing_ok=True)
    fsync_dir(journal.parent)
    return report


def _perform(
    store: MemoryStore, op: Operation, session_id: str, *, clear_summary: bool = False
) -> CopiesReport:
    folder = store.folder(session_id)
    store.forget_cached(session_id)
    # Other sessions' stored search results quoting these messages lose those lines:
    # the files here, the archive rows in the transaction that deletes.
    withdraw_from_histories(store, store.archive.gone(session_id))
    if op == "remove":
        _remove(store, session_id, folder)
    else:
        _reset(store, session_id, folder, clear_summary=clear_summary)
    # Last, the upgrade backups and damaged archives the app set aside: a copy that
    # cannot be read is reported, and never fails the operation.
    return take_session_out(store.paths, session_id)


def _remove(store: MemoryStore, session_id: str, folder: Path) -> None:
    trash = folder.with_name(TRASH_PREFIX + session_id)
    if folder.exists():
        if trash.exists():
            shutil.rmtree(trash)
        folder.replace(trash)
        fsync_dir(folder.parent)
    store.archive.delete_session_rows(session_id, drop_session=True)
    shutil.rmtree(trash, ignore_errors=True)
    log.info("removed session %s", session_id)


def _reset(store: MemoryStore, session_id: str, folder: Path, *, clear_summary: bool) -> None:
    kept_events = frozenset() if clear_summary else SUMMARY_EVENTS
    store.archive.delete_session_rows(session_id, drop_session=False, keep_events=kept_events)
    store.archive.ensure_session(session_id, store.clock())
    store.archive.add_event(session_id, store.clock(), "reset", {})
    kept = store.archive.session(session_id)
    if kept is None or not kept.title:  # a typed title made of the session's own words went
        keep_title(folder, None)
    _empty_folder(folder, keep_summary=not clear_summary)
    log.info("reset session %s", session_id)


def _empty_folder(folder: Path, *, keep_summary: bool) -> None:
    """Delete every file a reset does not keep: history, index files, set-aside copies.

    A list of what stays rather than of what goes: a copy a repair set
    aside (``history.json.corrupt-…``) or a file a later version adds holds
    the session's text as well.
    """
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name in KEPT_BY_RESET or (keep_summary and _is_summary_file(path.name)):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    fsync_dir(folder)


def _is_summary_file(name: str) -> bool:
    return any(name == s or name.startswith(s + ".") for s in SUMMARY_FILES)


def finish_pending(store: MemoryStore) -> list[str]:
    """Roll forward operations a crash interrupted; returns what was finished.

    Each session is taken under its lock without waiting: a journal whose
    session is busy belongs to an operation still at work in another
    process (it closes the journal itself), so it is left alone.
    """
    done: list[str] = []
    folder = ops_dir(store)
    if folder.is_dir():
        for journal in sorted(folder.glob("*.json")):
            done += _finish_one(store, journal)
    for trash in store.paths.sessions_dir.glob(TRASH_PREFIX + "*"):
        sid = trash.name.removeprefix(TRASH_PREFIX)
        with _unless_busy(store, sid, "remove") as free:
            if free:
                shutil.rmtree(trash, ignore_errors=True)
                done.append(f"deleted leftover folder {trash.name}")
    return done


def _read_journal(journal: Path) -> dict[str, Any]:
    """A journal entry; TypeError unless it is an object whose op and session are text.

    ``null``, a list or a number where the entry should be would otherwise
    stop every start-up at the first ``entry["op"]``.
    """
    entry = json.loads(journal.read_text("utf-8"))
    if not isinstance(entry, dict):
        raise TypeError(f"not a JSON object but {type(entry).__name__}")
    for key in ("op", "session_id"):
        if not isinstance(entry.get(key), str):
            raise TypeError(f"{key!r} is {entry.get(key)!r}, not text")
    return entry


def _finish_one(store: MemoryStore, journal: Path) -> list[str]:
    try:
        entry = _read_journal(journal)
        op, sid = entry["op"], check_session_id(entry["session_id"])
    except FileNotFoundError:  # its operation just finished
        return []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable operation journal %s (%s); set aside as .bad", journal, exc)
        journal.rename(journal.with_suffix(".bad"))
        return []
    with _unless_busy(store, sid, op) as free:
        if not free or not journal.exists():
            return []
        done: list[str] = []
        if op in ("reset", "remove"):
            _perform(store, op, sid, clear_summary=bool(entry.get("clear_summary", False)))
            done.append(f"finished interrupted {op} of session {sid}")
        elif op in message_edit.OPERATIONS:
            try:
                done.append(message_edit.finish_entry(store, entry))
            except StoreBusyError as exc:  # a fork's source is busy: next start
                log.info("left for later: %s", exc)
                return []
        journal.unlink(missing_ok=True)
        return done


@contextlib.contextmanager
def _unless_busy(store: MemoryStore, session_id: str, operation: str) -> Iterator[bool]:
    """The session's lock if it is free right now: yields whether it was."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.locked(session_id, operation, wait_s=0.0))
            free = True
        except StoreBusyError as exc:
            log.debug("left for later: %s", exc)
            free = False
        yield free
