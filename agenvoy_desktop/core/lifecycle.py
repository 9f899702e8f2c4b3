"""Reset and remove, crash-safe.

Each operation first writes a journal entry (``memory/ops/<session>.json``),
then performs idempotent steps, then deletes the entry.  If the process dies
anywhere in between, the next start finds the entry and runs the remaining
steps again (roll forward): a session is never left half-reset or
half-removed, and nothing is back-filled from a history.json that was about
to be deleted, because pending operations are finished before anything else.

| operation | history.json | vectors | archive (messages + meta) | summary |
|-----------|--------------|---------|---------------------------|---------|
| reset     | deleted      | cleared | cleared                   | kept    |
| remove    | folder gone  | cleared | cleared                   | deleted |

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
from typing import Literal

from agenvoy_desktop.core import message_edit
from agenvoy_desktop.core.atomic import atomic_write_text, fsync_dir
from agenvoy_desktop.core.journal import ops_dir
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.store import MemoryStore, check_session_id

log = logging.getLogger(__name__)

Operation = Literal["reset", "remove"]
TRASH_PREFIX = ".removing-"


__all__ = ["finish_pending", "ops_dir", "remove_session", "reset_session", "run_operation"]


def reset_session(store: MemoryStore, session_id: str) -> None:
    """Clear history, vectors and archive of a session; keep its summary."""
    with store.locked(session_id, "reset"):
        run_operation(store, "reset", store.require(session_id))


def remove_session(store: MemoryStore, session_id: str) -> None:
    """Delete a session entirely (folder, archive rows, vectors, summary)."""
    with store.locked(session_id, "remove"):
        run_operation(store, "remove", store.require(session_id))


def run_operation(store: MemoryStore, op: Operation, session_id: str) -> None:
    """Journal, perform and close one reset/remove; the caller holds the session's lock."""
    journal = ops_dir(store) / f"{session_id}.json"
    atomic_write_text(
        journal, json.dumps({"op": op, "session_id": session_id, "time_ns": store.clock()})
    )
    _perform(store, op, session_id)
    journal.unlink(missing_ok=True)
    fsync_dir(journal.parent)


def _perform(store: MemoryStore, op: Operation, session_id: str) -> None:
    folder = store.folder(session_id)
    store.forget_cached(session_id)
    if op == "remove":
        trash = folder.with_name(TRASH_PREFIX + session_id)
        if folder.exists():
            if trash.exists():
                shutil.rmtree(trash)
            folder.replace(trash)
            fsync_dir(folder.parent)
        store.archive.delete_session_rows(session_id, drop_session=True)
        shutil.rmtree(trash, ignore_errors=True)
        log.info("removed session %s", session_id)
        return
    store.archive.delete_session_rows(session_id, drop_session=False)
    store.archive.ensure_session(session_id, store.clock())
    store.archive.add_event(session_id, store.clock(), "reset", {})
    for name in ("history.json", "vectors.hnsw", "vectors.meta.json"):
        (folder / name).unlink(missing_ok=True)
    fsync_dir(folder)
    log.info("reset session %s", session_id)


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


def _finish_one(store: MemoryStore, journal: Path) -> list[str]:
    try:
        entry = json.loads(journal.read_text("utf-8"))
        op, sid = entry["op"], check_session_id(str(entry["session_id"]))
    except FileNotFoundError:  # its operation just finished
        return []
    except (OSError, ValueError, KeyError):
        log.warning("unreadable operation journal %s; ignored", journal)
        journal.rename(journal.with_suffix(".bad"))
        return []
    with _unless_busy(store, sid, op) as free:
        if not free or not journal.exists():
            return []
        done: list[str] = []
        if op in ("reset", "remove"):
            _perform(store, op, sid)
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
