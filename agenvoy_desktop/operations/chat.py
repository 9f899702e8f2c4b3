"""The chat's pages: consecutive archive messages and the recall blocks sent with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore


@dataclass(frozen=True, slots=True)
class Page:
    """Consecutive archive messages of one session and whether older ones exist."""

    messages: list[Message]
    first_seq: int
    has_earlier: bool
    recalls: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    """User message id → (recall block sent with it, remembered messages, document passages)."""


def load_page(store: MemoryStore, session_id: str, before_seq: int | None, size: int) -> Page:
    """The *size* messages before *before_seq* (the newest when None); storage thread."""
    meta = store.archive.session(session_id)
    if meta is None:  # only a folder so far: history.json is all there is
        messages = list(store.history(session_id).messages)
        return Page(messages[-size:], 0, len(messages) > size)
    end = meta.next_seq if before_seq is None else before_seq
    start = max(0, end - size)
    rows = store.archive.messages(session_id, start, end)
    earlier = store.archive.count(session_id) - store.archive.count_from(session_id, start)
    messages = [r.message for r in rows]
    return Page(messages, start, earlier > 0, recalls_for(store, session_id, messages))


def recalls_for(
    store: MemoryStore, session_id: str, messages: Sequence[Message]
) -> dict[str, tuple[str, int, int]]:
    """The recall blocks sent with these messages' turns (storage thread)."""
    ids = {m.id for m in messages if m.role == "user"}
    found: dict[str, tuple[str, int, int]] = {}
    for _time, kind, detail in store.archive.events(session_id):
        target = detail.get("message_id")
        if kind == "recall" and target in ids and detail.get("text"):
            found[str(target)] = (
                str(detail.get("text", "")),
                len(detail.get("ids") or []),
                len(detail.get("citations") or []),
            )
    return found


def seq_of(store: MemoryStore, message_id: str) -> int | None:
    """Archive position of a message (storage thread)."""
    rowid = store.archive.rowids_for([message_id]).get(message_id)
    if rowid is None:
        return None
    row = store.archive.by_rowids([rowid]).get(rowid)
    return row.seq if row is not None else None
