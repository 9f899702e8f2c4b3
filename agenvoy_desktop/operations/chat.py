"""The chat's pages: consecutive archive messages and the recall blocks sent with them.

A recall block quotes messages of any session.  While such a message's
delete, or its session's reset or remove, waits in its undo window, the
chat's chip hides its line (:func:`hidden_lines`); once the operation ran,
the stored record no longer quotes it and says how many lines it lost
(``core/recall_record.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.recall_record import RECALL_EVENT
from agenvoy_desktop.core.search import Withheld
from agenvoy_desktop.core.store import MemoryStore

HiddenWhy = Literal["session", "message", "gone"]
"""Why a recalled line is hidden: its session's reset or remove, or its message's delete,
waits in its undo window; or its message is no longer stored."""


@dataclass(frozen=True, slots=True)
class RecallRecord:
    """The recall block one turn sent, as its chip shows it."""

    text: str
    """The block as sent (less lines of messages deleted since: the archive scrubs it)."""
    ids: tuple[str, ...]
    """The remembered messages, one per line of the block, in its order."""
    passages: int = 0
    """Document passages after the remembered lines."""
    withdrawn: int = 0
    """Lines taken out of the stored record since: their messages were deleted."""


@dataclass(frozen=True, slots=True)
class Page:
    """Consecutive archive messages of one session and whether older ones exist."""

    messages: list[Message]
    first_seq: int
    has_earlier: bool
    recalls: dict[str, RecallRecord] = field(default_factory=dict)
    """User message id → the recall block sent with it."""


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
) -> dict[str, RecallRecord]:
    """The recall blocks sent with these messages' turns (storage thread); one whose lines
    were all taken out since is kept, so its chip can say so."""
    ids = {m.id for m in messages if m.role == "user"}
    found: dict[str, RecallRecord] = {}
    for _time, kind, detail in store.archive.events(session_id):
        target = detail.get("message_id")
        withdrawn = int(detail.get("withdrawn", 0) or 0)
        if kind == RECALL_EVENT and target in ids and (detail.get("text") or withdrawn):
            found[str(target)] = RecallRecord(
                str(detail.get("text", "")),
                tuple(str(i) for i in detail.get("ids") or []),
                len(detail.get("citations") or []),
                withdrawn,
            )
    return found


def hidden_lines(
    store: MemoryStore, ids: Collection[str], withheld: Withheld
) -> dict[str, tuple[HiddenWhy, str]]:
    """Storage thread: those of *ids* (recalled messages) a chip must hide: why, and the
    session the message is in ("" when it is gone)."""
    rowids = store.archive.rowids_for(ids)
    rows = store.archive.by_rowids(list(rowids.values()))
    session_of = {row.message.id: row.session_id for row in rows.values()}
    hidden: dict[str, tuple[HiddenWhy, str]] = {}
    for message_id in ids:
        sid = session_of.get(message_id)
        if sid is None:
            hidden[message_id] = ("gone", "")
        elif message_id in withheld.messages:
            hidden[message_id] = ("message", sid)
        elif sid in withheld.sessions:
            hidden[message_id] = ("session", sid)
    return hidden


def seq_of(store: MemoryStore, message_id: str) -> int | None:
    """Archive position of a message (storage thread)."""
    rowid = store.archive.rowids_for([message_id]).get(message_id)
    if rowid is None:
        return None
    row = store.archive.by_rowids([rowid]).get(rowid)
    return row.seq if row is not None else None
