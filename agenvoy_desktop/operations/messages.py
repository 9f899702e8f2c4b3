"""What a person does to one message: delete it, edit and resend it, regenerate an
answer, page through earlier answers, fork the conversation from it.

All synchronous (the window runs them on its storage thread).  Each write is
crash-safe and refused with the store's busy error while a reply is being
written in the session (see :mod:`agenvoy_desktop.core.message_edit`), and
returns what it changed, like every operation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenvoy_desktop.core import message_edit
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations.changes import Changed, MemoryChanges, session_changes

__all__ = [
    "action_text",
    "answer_versions",
    "delete_message",
    "edit_truncate",
    "fork_session",
    "regenerate_truncate",
]


def _conversation_changes(session_id: str) -> MemoryChanges:
    """Messages left the conversation: the chat, vectors, timeline and sizes change."""
    return MemoryChanges(
        sessions=True, messages=True, vectors=True, timeline=True, session_id=session_id
    )


def delete_message(store: MemoryStore, session_id: str, message_id: str) -> MemoryChanges:
    """Delete one message for good (the window's undo delay is over), with the tool
    traffic of its exchange that would be left orphaned; compacted messages too."""
    message_edit.delete_message(store, session_id, message_id)
    return _conversation_changes(session_id)


def edit_truncate(store: MemoryStore, session_id: str, message_id: str) -> MemoryChanges:
    """Before resending an edited user message: it and everything after it leave the
    conversation (kept in the archive as an earlier branch, shown as "edited")."""
    message_edit.edit_truncate(store, session_id, message_id)
    return _conversation_changes(session_id)


def regenerate_truncate(store: MemoryStore, session_id: str, message_id: str) -> Changed[str]:
    """Before regenerating an answer: the answer and everything after it leave the
    conversation (kept as an earlier version); the user message to answer again."""
    user_id = message_edit.regenerate_truncate(store, session_id, message_id)
    return Changed(user_id, _conversation_changes(session_id))


def answer_versions(
    store: MemoryStore, session_id: str, user_message_id: str
) -> list[list[Message]]:
    """Every version of the answer to a user message, oldest first, the current one last.

    A version is the messages of one answer: tool calls, tool results and the
    final answer.  Earlier versions come from regenerations; the current one
    is the live answer (left out while there is none yet).
    """
    versions = [
        answer
        for rows in store.archive.branches(session_id, user_message_id, "regenerate")
        if (answer := _until_next_question([r.message for r in rows]))
    ]
    asked = store.archive.message(session_id, user_message_id)
    if asked is not None:
        exchange = store.archive.exchange(session_id, asked.seq)
        current = [r.message for r in exchange if r.seq > asked.seq]
        if current:
            versions.append(current)
    return versions


def _until_next_question(messages: list[Message]) -> list[Message]:
    """The leading messages up to (not including) the next user message."""
    end = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    return messages[:end]


def fork_session(
    store: MemoryStore, session_id: str, message_id: str, title: str | None = None
) -> Changed[str]:
    """A new session with copies of the conversation up to and including *message_id*
    (compacted messages included), compacted and embedded like an import; its id."""
    new_id = message_edit.fork_session(store, session_id, message_id, title)
    return Changed(new_id, session_changes(new_id) | MemoryChanges(sessions=True, timeline=True))


def action_text(kind: str, detail: Mapping[str, Any]) -> str | None:
    """The timeline's line for a message action's event (None: not one of them)."""
    count = int(detail.get("messages", 0))
    plural = "s" if count != 1 else ""
    if kind == "deleted":
        return f"Deleted {count} message{plural}"
    if kind == "edited":
        return f"Message edited: {count} message{plural} kept as an earlier branch"
    if kind == "regenerated":
        return f"Answer regenerated: {count} message{plural} kept as an earlier version"
    if kind == "fork":
        return f"Forked into session {detail.get('to')} ({count} message{plural} copied)"
    if kind == "forked":
        return f"Forked from session {detail.get('from')} ({count} message{plural} copied)"
    return None
