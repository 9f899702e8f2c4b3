"""Reset and remove with an undo window instead of a confirmation dialog.

Clicking Reset or Remove changes the *view* at once (the chat empties, the
session leaves the list) and schedules the real operation; the store runs it
when the undo window (10 s) ends, unless the user pressed Undo.  After that
the core's journal makes it final and crash-safe (``core/lifecycle.py``).

What a crash does: while an operation is pending nothing has been deleted
yet, so a crash inside the undo window keeps the data — the safe side; the
user simply sees the session again at the next start.  Once the store has
started the operation, its journal rolls it forward at the next start.

Quitting finalises every pending operation (:meth:`PendingOps.flush`):
closing the window is not an undo.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from PySide6.QtCore import QObject, QTimer, Signal

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import is_known
from agenvoy_desktop.operations.sessions import remove_session, reset_session
from agenvoy_desktop.ui.async_runner import AsyncRunner

log = logging.getLogger(__name__)

UNDO_WINDOW_MS = 10_000
OpKind = Literal["reset", "remove"]


@dataclass(eq=False)
class PendingOp:
    """One reset/remove waiting for its undo window to end."""

    kind: OpKind
    session_id: str
    title: str
    timer: QTimer = field(repr=False)
    state: Literal["pending", "running", "done", "undone", "failed"] = "pending"


class PendingOps(QObject):
    """Schedules, undoes and finally runs resets and removes."""

    scheduled = Signal(object)
    """A :class:`PendingOp` entered its undo window."""
    undone = Signal(object)
    executed = Signal(object)
    failed = Signal(object, str)

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

    # -- queries -------------------------------------------------------------------
    def pending_for(self, session_id: str) -> PendingOp | None:
        op = self._ops.get(session_id)
        return op if op is not None and op.state == "pending" else None

    def hidden_sessions(self) -> set[str]:
        """Sessions the list must not show: removed, undo window still open or running."""
        return {sid for sid, op in self._ops.items() if op.kind == "remove"}

    def pending(self) -> list[PendingOp]:
        return [op for op in self._ops.values() if op.state == "pending"]

    # -- actions ---------------------------------------------------------------------
    def schedule(self, kind: OpKind, session_id: str, title: str) -> PendingOp:
        """Start the undo window; a remove replaces a pending reset of the same session."""
        previous = self._ops.get(session_id)
        if previous is not None and previous.state == "pending":
            previous.timer.stop()
            if previous.kind == "remove":
                kind = "remove"  # removing subsumes resetting
            previous.state = "undone"
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.setInterval(self.delay_ms)
        op = PendingOp(kind, session_id, title, timer)
        timer.timeout.connect(lambda: self._execute(op))
        self._ops[session_id] = op
        timer.start()
        log.info("%s of %s scheduled (undo window %d ms)", kind, session_id, self.delay_ms)
        self.scheduled.emit(op)
        return op

    def undo(self, op: PendingOp) -> bool:
        """Cancel *op* if its window is still open; False when it already ran."""
        if op.state != "pending":
            return False
        op.timer.stop()
        op.state = "undone"
        self._ops.pop(op.session_id, None)
        log.info("%s of %s undone", op.kind, op.session_id)
        self.undone.emit(op)
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
        """Run pending operations now (all, or one session's): quit, or a send into a reset."""
        ops = [op for op in self.pending() if session_id is None or op.session_id == session_id]
        for op in ops:
            op.timer.stop()
            await self._run(op)

    # -- execution -----------------------------------------------------------------
    def _execute(self, op: PendingOp) -> None:
        if op.state == "pending":
            self.runner.run(self._run(op), what=f"{op.kind} the session")

    async def _run(self, op: PendingOp) -> None:
        if op.state != "pending":
            return
        op.state = "running"
        action = reset_session if op.kind == "reset" else remove_session
        try:
            changes = await self.services.storage.run(action, self.services.store, op.session_id)
        except Exception as exc:  # the window shows it; the session comes back
            op.state = "failed"
            self._ops.pop(op.session_id, None)
            level = logging.WARNING if is_known(exc) else logging.ERROR  # a bug: with traceback
            log.log(level, "%s of %s failed", op.kind, op.session_id, exc_info=not is_known(exc))
            self.failed.emit(op, self.runner.readable(exc))
            return
        op.state = "done"
        if self._ops.get(op.session_id) is op:
            del self._ops[op.session_id]
        log.info("%s of %s done", op.kind, op.session_id)
        self.runner.broadcast(changes)
        self.executed.emit(op)
