"""Per-message actions on a session: delete, truncate to an earlier branch, fork.

Each action changes three layers (history.json, the archive, the vectors)
and must never leave them disagreeing, so it runs like a reset: under the
session's write lock, refused while a reply is being written (the turn lock,
:mod:`turn_lock`), journalled first (:mod:`journal`), then performed in
idempotent steps, then the journal entry is deleted.  A crash anywhere in
between is rolled forward at the next start by :func:`finish_entry`.

| action     | history.json          | vectors  | archive rows                        |
|------------|-----------------------|----------|-------------------------------------|
| delete     | message(s) dropped    | dropped  | deleted                             |
| edit       | message and after go  | dropped  | kept in ``message_versions`` (edit) |
| regenerate | answer and after go   | dropped  | kept in ``message_versions``        |
| fork       | new session: a copy   | embedded | copied with new ids                 |

The steps of a removal run in the store's usual write order — history.json,
then the vectors, then one archive transaction that takes the rows out,
fixes their full-text entries and logs the timeline event — and each step
skips what is already done, so running them again is harmless.  A delete
also takes the message's lines out of the search results other sessions
stored (their history files before the archive, :mod:`quoted_results`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
from collections.abc import Iterator, Sequence
from typing import Any

from agenvoy_desktop.core import journal
from agenvoy_desktop.core.archive import FORK_SUFFIX, ArchivedMessage, Branch
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.quoted_histories import withdraw_from_histories
from agenvoy_desktop.core.store import MemoryStore, check_session_id

log = logging.getLogger(__name__)

REMOVE = "message_remove"
FORK = "fork"
OPERATIONS = frozenset({REMOVE, FORK})
"""Journal entries this module finishes (see :func:`finish_entry`)."""


class MessageActionError(KnownError, ValueError):
    """A message action that cannot apply to this message; ``str()`` says why and what to do."""


# -- delete ----------------------------------------------------------------------------
def delete_message(store: MemoryStore, session_id: str, message_id: str) -> list[str]:
    """Delete one message for good, with the tool traffic it would leave orphaned.

    Works on compacted messages too (those only the archive holds).
    Returns the ids deleted.
    """
    with _acting(store, session_id, "delete the message"):
        target = _live_row(store, session_id, message_id)
        exchange = [r.message for r in store.archive.exchange(session_id, target.seq)]
        ids = sorted(orphaned_with(exchange, message_id))
        detail = {"message_id": message_id, "role": target.message.role, "messages": len(ids)}
        _run(store, session_id, _removal(store, session_id, ids, None, ("deleted", detail)))
    return ids


def orphaned_with(messages: Sequence[Message], message_id: str) -> set[str]:
    """*message_id* plus the tool traffic of *messages* that deleting it would orphan.

    An assistant message calling tools is orphaned when none of its results
    remain; a tool result when the message that called it is gone.  Only
    traffic orphaned *by this deletion* goes: what was orphaned before stays.
    """
    before = _orphans(messages, set())
    gone = {message_id}
    while True:
        more = _orphans(messages, gone) - before - gone
        if not more:
            return gone
        gone |= more


def _orphans(messages: Sequence[Message], gone: set[str]) -> set[str]:
    kept = [m for m in messages if m.id not in gone]
    results = {str(m.extra.get("tool_call_id")) for m in kept if m.role == "tool"}
    called = {call_id for m in kept for call_id in _call_ids(m)}
    out = set()
    for m in kept:
        lost_call = m.role == "tool" and str(m.extra.get("tool_call_id")) not in called
        lost_results = bool(_call_ids(m)) and not _call_ids(m) & results
        if lost_call or lost_results:
            out.add(m.id)
    return out


def _call_ids(message: Message) -> set[str]:
    calls = message.extra.get("tool_calls")
    if not isinstance(calls, list):
        return set()
    return {str(c.get("id")) for c in calls if isinstance(c, dict)}


# -- edit and regenerate -----------------------------------------------------------------
def edit_truncate(store: MemoryStore, session_id: str, message_id: str) -> list[str]:
    """Move a user message and everything after it to an earlier branch; the ids moved."""
    with _acting(store, session_id, "edit the message"):
        target = _live_row(store, session_id, message_id)
        if target.message.role != "user":
            raise MessageActionError("only your own messages can be edited; pick one of yours")
        return _branch_from(store, session_id, target.seq, Branch("edit", message_id, 0))


def regenerate_truncate(store: MemoryStore, session_id: str, message_id: str) -> str:
    """Move the answer (and everything after it) to an earlier version of that answer.

    *message_id* is the answer, or any message of its exchange; returns the
    id of the user message that started the exchange, to be answered again.
    That user message must still be in history.json (the model answers from
    it), not only in the archive.
    """
    with _acting(store, session_id, "regenerate the answer"):
        target = _live_row(store, session_id, message_id)
        user = _asked_in_history(store, session_id, target.message.id)
        asked = _live_row(store, session_id, user.id)
        _branch_from(store, session_id, asked.seq + 1, Branch("regenerate", user.id, 0))
        return user.id


def question_to_answer(store: MemoryStore, session_id: str, user_message_id: str) -> Message:
    """The user message a regeneration answers: it must end history.json (storage thread)."""
    messages = store.history(store.require(session_id)).messages
    if not messages or messages[-1].id != user_message_id or messages[-1].role != "user":
        raise MessageActionError(
            "that message is not the last one of the conversation any more;"
            " reload the session and regenerate again"
        )
    return messages[-1]


def _asked_in_history(store: MemoryStore, session_id: str, message_id: str) -> Message:
    """The user message that started the exchange of *message_id*, from history.json."""
    messages = store.history(session_id).messages
    position = next((i for i, m in enumerate(messages) if m.id == message_id), None)
    if position is not None:
        for message in reversed(messages[: position + 1]):
            if message.role == "user":
                return message
    raise MessageActionError(
        "this answer is older than the recent history, so it cannot be answered again here;"
        " fork the session from it instead"
    )


def _branch_from(store: MemoryStore, session_id: str, seq: int, branch: Branch) -> list[str]:
    """Journal and move every live row from *seq* on to an earlier *branch* (time set here).

    history.json's messages after the first one moved go too, archived or
    not, so the two layers cannot disagree afterwards.
    """
    ids = [r.message.id for r in store.archive.messages(session_id, seq)]
    messages = store.history(session_id).messages
    position = next((i for i, m in enumerate(messages) if ids and m.id == ids[0]), None)
    if position is not None:
        known = set(ids)
        ids += [m.id for m in messages[position:] if m.id not in known]
    branch = dataclasses.replace(branch, branched_ns=store.clock())
    kind = "edited" if branch.reason == "edit" else "regenerated"
    detail = {"message_id": branch.anchor_id, "messages": len(ids)}
    _run(store, session_id, _removal(store, session_id, ids, branch, (kind, detail)))
    return ids


# -- removal steps (shared by delete, edit and regenerate) -------------------------------------
def _removal(
    store: MemoryStore,
    session_id: str,
    ids: Sequence[str],
    branch: Branch | None,
    event: tuple[str, dict[str, Any]],
) -> dict[str, Any]:
    """The journal entry of a removal: everything its steps need, to run again after a crash.

    *event* is the timeline's (kind, detail) for the action.
    """
    kind, detail = event
    return {
        "op": REMOVE,
        "session_id": session_id,
        "ids": list(ids),
        "branch": None if branch is None else dataclasses.asdict(branch),
        "event": {"time_ns": store.clock(), "kind": kind, "detail": detail},
    }


def _run(store: MemoryStore, session_id: str, entry: dict[str, Any]) -> None:
    """Journal, perform and close one entry; the caller holds the session's lock."""
    path = journal.open_entry(store, session_id, entry)
    _perform(store, entry)
    journal.close_entry(path)


def _perform(store: MemoryStore, entry: dict[str, Any]) -> None:
    if entry["op"] == FORK:
        _perform_fork(store, entry)
    else:
        _perform_removal(store, entry)


def _perform_removal(store: MemoryStore, entry: dict[str, Any]) -> None:
    sid = entry["session_id"]
    ids = {str(i) for i in entry["ids"]}
    hist = store.history(sid)
    if any(m.id in ids for m in hist.messages):
        hist.rewrite([m for m in hist.messages if m.id not in ids])
    rowids = store.archive.rowids_for(ids)
    have = store.archive.vector_rowids(sid)
    gone = sorted(r for r in rowids.values() if r in have)
    if gone:
        store.vectors(sid).remove(gone)
    branch = Branch(**entry["branch"]) if entry.get("branch") else None
    if branch is None:  # a delete: other sessions' stored search results lose its lines
        withdraw_from_histories(store, store.archive.gone(sid, ids))
    event = entry["event"]
    store.archive.take_rows(
        sid, ids, branch=branch, event=(int(event["time_ns"]), event["kind"], event["detail"])
    )
    _follow_history(store, sid)


def _follow_history(store: MemoryStore, session_id: str) -> None:
    """Keep the archive's cut point on history.json's first message.

    When that message left, the cut moves to the new first one (the
    compaction time stays 0 for a session never compacted); an emptied
    history moves it past every row, where the next message will be.
    """
    meta = store.archive.session(session_id)
    if meta is None:
        return
    messages = store.history(session_id).messages
    if messages:
        first = store.archive.message(session_id, messages[0].id)
        if first is None:  # not archived yet: reconciliation's business
            return
        cut, start = first.seq, messages[0].time_ns if meta.start_at_ns else 0
    else:
        cut, start = meta.next_seq, meta.start_at_ns
    if (cut, start) != (meta.cut_seq, meta.start_at_ns):
        store.archive.set_cut(session_id, cut, start)


# -- fork --------------------------------------------------------------------------------
def fork_session(
    store: MemoryStore, session_id: str, message_id: str, title: str | None = None
) -> str:
    """A new session holding copies of the conversation up to *message_id*; its id.

    The copies come from the archive, so compacted messages are included;
    the new session is compacted and embedded like an import (the embedding
    runs after the journal closes: a crash there only leaves vectors for
    reconciliation to add).
    """
    with _acting(store, session_id, "fork the session"):
        _live_row(store, session_id, message_id)
        meta = store.archive.session(session_id)
        if title is None:
            title = (meta.title if meta and meta.title else "Conversation") + FORK_SUFFIX
        new_id = check_session_id(new_message_id()[:12])
        entry = {
            "op": FORK,
            "session_id": new_id,
            "source": session_id,
            "message_id": message_id,
            "title": title,
            "time_ns": store.clock(),
        }
        with store.locked(new_id, "fork"):
            _run(store, new_id, entry)
    if store.embedder is not None:
        store.index_pending(new_id)
    return new_id


def _perform_fork(store: MemoryStore, entry: dict[str, Any]) -> None:
    """Make the copy from scratch (whatever an interrupted attempt left is cleared first)."""
    new_id, source = entry["session_id"], str(entry["source"])
    _clear(store, new_id)
    with store.locked(check_session_id(source), "fork"):
        target = store.archive.message(source, str(entry["message_id"]))
        if target is None:
            log.warning("fork of %s: its message is gone; nothing copied", source)
            return
        rows = store.archive.messages(source, 0, target.seq + 1)
        copies = [dataclasses.replace(r.message, id=new_message_id()) for r in rows]
        store.create_session(entry["title"], new_id)
        store.history(new_id).rewrite(copies)
        store.archive.add_messages(new_id, copies, store.clock())
        store.maybe_compact(new_id)
        time_ns = int(entry["time_ns"])
        detail = {"message_id": target.message.id, "messages": len(copies)}
        store.archive.add_event(new_id, time_ns, "forked", {**detail, "from": source})
        last = store.archive.last_event(source, "fork")
        if last is None or last[1].get("to") != new_id:
            store.archive.add_event(source, time_ns, "fork", {**detail, "to": new_id})


def _clear(store: MemoryStore, session_id: str) -> None:
    """Forget every trace of a session (a fork that must start again)."""
    store.forget_cached(session_id)
    store.archive.delete_session_rows(session_id, drop_session=True)
    shutil.rmtree(store.folder(session_id), ignore_errors=True)


# -- shared ------------------------------------------------------------------------------
@contextlib.contextmanager
def _acting(store: MemoryStore, session_id: str, action: str) -> Iterator[None]:
    """No reply being written (else a busy error at once), then the session's write lock."""
    with store.turns.quiet(session_id, action), store.locked(session_id, action):
        yield


def _live_row(store: MemoryStore, session_id: str, message_id: str) -> ArchivedMessage:
    store.require(session_id)
    row = store.archive.message(session_id, message_id)
    if row is None:
        raise MessageActionError(
            "that message is no longer part of this conversation; reload the session and try again"
        )
    return row


def finish_entry(store: MemoryStore, entry: dict[str, Any]) -> str:
    """Roll forward an entry a crash interrupted (the caller holds its session's lock)."""
    _perform(store, entry)
    if entry["op"] == FORK:
        return f"finished interrupted fork of session {entry['source']}"
    return f"finished interrupted {entry['event']['kind']} message action in {entry['session_id']}"
