"""Which messages wait to be folded: the cursor, the window, the chunks."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer.runs import MISSING_STAMP, PAGE
from agenvoy_desktop.core.summary import (
    HistoryStamp,
    Source,
    Summary,
    SummaryMeta,
    message_handle,
    message_text,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Cursor:
    """The last message folded into the summary (seq -1: none yet)."""

    seq: int = -1
    message_id: str | None = None
    time_ns: int = 0

    @classmethod
    def of(cls, row: ArchivedMessage) -> Cursor:
        return cls(row.seq, row.message.id, row.message.time_ns)

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "seq": self.seq, "time_ns": self.time_ns}


def _seq_of(store: MemoryStore, session_id: str, message_id: str) -> int | None:
    """Archive seq of one message (wants ``Archive.seq_of``; built on public calls)."""
    rowid = store.archive.rowids_for([message_id]).get(message_id)
    if rowid is None:
        return None
    row = store.archive.by_rowids([rowid]).get(rowid)
    return row.seq if row is not None and row.session_id == session_id else None


def resolve_cursor(store: MemoryStore, session_id: str, meta: SummaryMeta | None) -> Cursor:
    """The meta's cursor, checked against the archive.

    After a reset the archive restarts at seq 0 and the cursor's message is
    gone: everything now in the archive is new to the (kept) summary.
    """
    if meta is None or meta.cursor_message_id is None:
        return Cursor()
    seq = _seq_of(store, session_id, meta.cursor_message_id)
    if seq is None:
        log.info("summary cursor of %s is not in the archive (reset?): folding anew", session_id)
        return Cursor()
    return Cursor(seq, meta.cursor_message_id, meta.cursor_time_ns)


def window_start(store: MemoryStore, session_id: str, window_messages: int) -> int | None:
    """Archive seq of the window's oldest message; None = every archived row is older.

    The plain last-N window, not the stepped one a turn's prompt shows
    (``AgentConfig.window_step``): up to step - 1 messages are folded into
    the summary while the prompt still shows them word for word, which is
    harmless, and the summary never waits on the window's next jump.
    """
    window = store.window(session_id, window_messages)
    rowids = store.archive.rowids_for(m.id for m in window)
    first = next((rowids[m.id] for m in window if m.id in rowids), None)
    if first is None:
        return None
    row = store.archive.by_rowids([first]).get(first)
    return None if row is None else row.seq


def gate_closed(meta: SummaryMeta, stamp: HistoryStamp, window_messages: int) -> bool:
    """The mtime gate: history.json unchanged since the summary was last fully caught up."""
    return (
        meta.caught_up and meta.window_messages == window_messages and meta.history_stamp == stamp
    )


def count_between(store: MemoryStore, session_id: str, after: int, end: int | None) -> int:
    total = store.archive.count_from(session_id, after + 1)
    if end is None:
        return total
    # A cursor inside the window (the window grew, or N shrank) leaves nothing pending.
    return max(0, total - store.archive.count_from(session_id, end))


def history_stamp(path: Path) -> HistoryStamp:
    try:
        st = path.stat()
    except FileNotFoundError:
        return MISSING_STAMP
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class Pending:
    """Unsummarised archive rows, fetched a page at a time (catch-up can be huge)."""

    def __init__(self, session_id: str, after: int, end: int | None, total: int) -> None:
        self.session_id = session_id
        self.end = end
        self.total = total
        self.rows: list[ArchivedMessage] = []
        self._next_seq = after + 1
        self._exhausted = total == 0

    def fetch(self, store: MemoryStore) -> None:
        if self._exhausted:
            return
        upper = self._next_seq + PAGE if self.end is None else min(self.end, self._next_seq + PAGE)
        page = store.archive.messages(self.session_id, self._next_seq, upper)
        self.rows.extend(page)
        self._next_seq = upper
        last = store.archive.session(self.session_id)
        limit = self.end if self.end is not None else (last.next_seq if last else 0)
        self._exhausted = len(self.rows) >= self.total or self._next_seq >= limit

    @property
    def exhausted(self) -> bool:
        return self._exhausted


@dataclass(slots=True)
class Chunk:
    rows: list[ArchivedMessage]
    lines: list[str]
    reserve: int
    earlier: dict[str, Source]
    """Handles of the previous summary's decisions (``p1``…)."""

    @property
    def has_content(self) -> bool:
        return any(message_text(r.message) for r in self.rows)

    @property
    def sources(self) -> dict[str, Source]:
        """Every handle a decision may cite: earlier decisions, then this chunk's messages."""
        mine = {
            message_handle(i): Source(row.message.id, message_text(row.message))
            for i, row in enumerate(self.rows)
        }
        return {**self.earlier, **mine}

    def first_half(self) -> Chunk:
        """The retry after a failed answer: fewer messages, so less to get wrong."""
        keep = len(self.rows) // 2
        return Chunk(self.rows[:keep], self.lines[:keep], self.reserve, self.earlier)


class ContextTooSmallError(RuntimeError):
    """The model's context leaves too few tokens for messages beside the summary."""


class SourceGoneError(RuntimeError):
    """The chunk's messages are no longer in the archive (a reset): its pass is dropped."""


class RetryFailedError(RuntimeError):
    """The retry with half the chunk failed too; ``chunk`` is that half."""

    def __init__(self, chunk: Chunk, message: str) -> None:
        super().__init__(message)
        self.chunk = chunk


class PassStoppedError(RuntimeError):
    """A stop ended the model's answer for ``chunk``; nothing of the answer is kept.

    ``interrupted``: the stop was the run's task being cancelled, so the run
    records the stop and then lets the cancellation go on.
    """

    def __init__(self, chunk: Chunk, *, interrupted: bool = False) -> None:
        super().__init__(f"stopped while the model wrote the summary of {len(chunk.rows)} messages")
        self.chunk = chunk
        self.interrupted = interrupted


@dataclass(slots=True)
class Folded:
    """A good answer for a chunk, its token accounting and notes for the pass record."""

    summary: Summary
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
