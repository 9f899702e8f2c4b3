"""Reset, remove and message delete with an undo window instead of a confirmation dialog.

Clicking Reset or Remove changes the *view* at once (the chat empties, the
session leaves the list) and schedules the real operation; the store runs it
when the undo window (10 s) ends, unless the user pressed Undo.  After that
the core's journal makes it final and crash-safe (``core/lifecycle.py``).

What a crash does: while an operation is pending nothing has been deleted
yet, so a crash inside the undo window keeps the data — the safe side; the
user simply sees the session again at the next start.  Once the store has
started the operation, its journal rolls it forward at the next start.

A message delete works the same way for one message: the chat hides its
bubble at once, and the store deletes it when the window ends.  Every other
view of the message (the inspector's Context and Recall tabs, the timeline)
leaves it out as well: they ask :meth:`PendingOps.deleted_messages` which
messages to skip and follow :attr:`PendingOps.changed`, so Undo brings the
message back everywhere at once.

Once the store work has run, the chat model forgets every prompt it read
(:meth:`AppServices.forget_prompts`: a local engine's KV cache and saved
states), so the text gone from the store is gone from memory too; while the
undo window is open nothing is forgotten, and Undo leaves all as it was.

Quitting finalises every pending operation (:meth:`PendingOps.flush`):
closing the window is not an undo.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QObject, QTimer, Signal

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import is_known
from agenvoy_desktop.core.search import Withheld
from agenvoy_desktop.operations.changes import Changed
from agenvoy_desktop.operations.sessions import remove_session, reset_session
from agenvoy_desktop.ui.async_runner import AsyncRunner

log = logging.getLogger(__name__)

UNDO_WINDOW_MS = 10_000
OpKind = Literal["reset", "remove", "delete_message"]


@dataclass(eq=False)
class PendingOp:
    """One reset/remove/message delete waiting for its undo window to end."""

    kind: OpKind
    session_id: str
    title: str
    timer: QTimer = field(repr=False)
    state: Literal["pending", "running", "done", "undone", "failed"] = "pending"
    message_id: str | None = None
    """The message a ``delete_message`` deletes."""
    clear_summary: bool = False
    """A ``reset`` that clears the session's summary too (the user chose it)."""
    not_cleaned: tuple[Path, ...] = ()
    """Once a reset or remove ran: the archive copies set aside earlier that could not be
    read, so the session could not be taken out of them (:mod:`core.set_aside_copies`)."""
    ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    """Set once the store work ended (done or failed): what :meth:`PendingOps.flush` awaits."""

    @property
    def key(self) -> str:
        """One pending operation per session, and per message for deletes."""
        return (
            self.session_id if self.message_id is None else f"{self.session_id}/{self.message_id}"
        )

    @property
    def what(self) -> str:
        """The operation in words, for logs and error messages."""
        return "delete the message" if self.kind == "delete_message" else f"{self.kind} the session"


class PendingOps(QObject):
    """Schedules, undoes and finally runs resets and removes."""

    scheduled = Signal(object)
    """A :class:`PendingOp` entered its undo window."""
    undone = Signal(object)
    executed = Signal(object)
    failed = Signal(object, str)
    changed = Signal()
    """:meth:`deleted_messages` changed (a delete scheduled, undone or failed): the views
    that leave those messages out follow."""

    def __init__(
        self,
        services: AppServices,
        runner: AsyncRunner,
        *,
        delay_ms: int = UNDO_WINDOW_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.delay_ms = delay_ms
        self._ops: dict[str, PendingOp] = {}
        self._deleted: set[str] = set()
        """Messages whose delete has run (a few ids per deleted message, for the app's life)."""
        self._running: set[PendingOp] = set()
        """Operations whose window ended and whose store work has not finished yet."""

    # -- queries -------------------------------------------------------------------
    def pending_for(self, session_id: str) -> PendingOp | None:
        """The pending reset or remove of *session_id* (message deletes: :meth:`deleting`)."""
        op = self._ops.get(session_id)
        return op if op is not None and op.state == "pending" else None

    def deleting(self, session_id: str) -> set[str]:
        """Messages of *session_id* deleted in the view whose undo window is open or running."""
        return {
            op.message_id
            for op in self._ops.values()
            if op.message_id is not None and op.session_id == session_id
        }

    def deleted_messages(self) -> set[str]:
        """Messages of any session that no view may show (ids are unique across sessions).

        Those deleted in the chat whose window is open or whose delete is
        running, and those whose delete has run: a view may still hold a
        reading from before it (a search result, the timeline before its
        reload), and the message must not come back there for a moment.
        """
        pending = {op.message_id for op in self._ops.values() if op.message_id is not None}
        return pending | self._deleted

    def hidden_sessions(self) -> set[str]:
        """Sessions the list must not show: removed, undo window still open or running."""
        return {op.session_id for op in self._ops.values() if op.kind == "remove"}

    def withheld(self) -> Withheld:
        """What no search may find (recall, the search tool): the view no longer shows it.

        Sessions whose reset or remove has not finished (a reset clears every
        message the session holds, so all of them), and :meth:`deleted_messages`.
        Undo takes them out of here; once an operation ran, the store no
        longer holds what it removed.
        """
        sessions = {op.session_id for op in self._ops.values() if op.message_id is None}
        return Withheld(frozenset(sessions), frozenset(self.deleted_messages()))

    def pending(self) -> list[PendingOp]:
        return [op for op in self._ops.values() if op.state == "pending"]

    # -- actions ---------------------------------------------------------------------
    def schedule(
        self,
        kind: OpKind,
        session_id: str,
        title: str,
        message_id: str | None = None,
        *,
        clear_summary: bool = False,
    ) -> PendingOp:
        """Start the undo window; a remove replaces a pending reset of the same session."""
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.setInterval(self.delay_ms)
        op = PendingOp(
            kind, session_id, title, timer, message_id=message_id, clear_summary=clear_summary
        )
        previous = self._ops.get(op.key)
        if previous is not None and previous.state == "pending":
            previous.timer.stop()
            if previous.kind == "remove":
                op.kind = "remove"  # removing subsumes resetting
            previous.state = "undone"
        timer.timeout.connect(lambda: self._execute(op))
        self._ops[op.key] = op
        timer.start()
        log.info("%s of %s scheduled (undo window %d ms)", op.kind, op.key, self.delay_ms)
        self.scheduled.emit(op)
        self.changed.emit()
        return op

    def undo(self, op: PendingOp) -> bool:
        """Cancel *op* if its window is still open; False when it already ran."""
        if op.state != "pending":
            return False
        op.timer.stop()
        op.state = "undone"
        self._ops.pop(op.key, None)
        log.info("%s of %s undone", op.kind, op.key)
        self.undone.emit(op)
        self.changed.emit()
        return True

    def hold(self, op: PendingOp) -> None:
        """Pause the window (while the user picks where to export first)."""
        if op.state == "pending":
            op.timer.stop()

    def resume(self, op: PendingOp) -> None:
        """Restart a held window from the full length."""
        if op.state == "pending":
            op.timer.start()

    async def flush(self, session_id: str | None = None) -> None:
        """Finish operations now (all, or one session's): quit, or a send into a reset.

        Pending ones run at once; one whose window ended a moment ago already
        runs (queued behind other work on the storage thread) and is waited
        for.  Returning earlier would let a send start its turn first: the
        turn's lock then refuses the delete, and the deleted message reaches
        the model and stays.
        """

        def chosen(op: PendingOp) -> bool:
            return session_id is None or op.session_id == session_id

        for op in [op for op in self._running if chosen(op)]:
            await op.ended.wait()
        for op in [op for op in self.pending() if chosen(op)]:
            op.timer.stop()
            await self._run(op)

    # -- execution -----------------------------------------------------------------
    def _execute(self, op: PendingOp) -> None:
        if op.state == "pending":
            self.runner.run(self._run(op), what=op.what)

    async def _run(self, op: PendingOp) -> None:
        if op.state != "pending":
            return
        op.state = "running"
        self._running.add(op)
        try:
            await self._perform(op)
        finally:
            self._running.discard(op)
            op.ended.set()

    async def _perform(self, op: PendingOp) -> None:
        try:
            done = await self.services.storage.run(self._action, op)
        except Exception as exc:  # the window shows it; the session comes back
            op.state = "failed"
            self._ops.pop(op.key, None)
            level = logging.WARNING if is_known(exc) else logging.ERROR  # a bug: with traceback
            log.log(level, "%s of %s failed", op.kind, op.key, exc_info=not is_known(exc))
            self.failed.emit(op, self.runner.readable(exc))
            self.changed.emit()
            return
        op.state = "done"
        op.not_cleaned = done.value
        if op.message_id is not None:
            self._deleted.add(op.message_id)
        if self._ops.get(op.key) is op:
            del self._ops[op.key]
        log.info("%s of %s done", op.kind, op.key)
        self.services.forget_prompts()  # before a turn that waited for it queues its prompt
        self.runner.broadcast(done.changes)
        self.executed.emit(op)

    def _action(self, op: PendingOp) -> Changed[tuple[Path, ...]]:
        """Storage thread: the operation itself; the value names the copies set aside
        that it could not clean (a reset or remove)."""
        store = self.services.store
        if op.kind in ("reset", "remove"):
            if op.kind == "reset":
                ran = reset_session(store, op.session_id, clear_summary=op.clear_summary)
            else:
                ran = remove_session(store, op.session_id)
            return Changed(ran.value.not_cleaned, ran.changes)
        from agenvoy_desktop.operations.messages import delete_message

        assert op.message_id is not None
        return Changed((), delete_message(store, op.session_id, op.message_id))
