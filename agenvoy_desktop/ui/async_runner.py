"""Run background work from Qt: one call site, progress, success and failure.

The Anki pattern (``aqt/operations``) over asyncio: a widget hands
:meth:`AsyncRunner.run` a coroutine (or a factory that receives the
:class:`Operation`, for work that reports progress or checks for
cancellation), plus what to do on success.  The work runs as an asyncio task
on the qasync loop; anything blocking inside it must sit behind an executor
(``services.storage.run``, a model's worker thread), so the UI thread only
awaits.  Rules for callers:

- never touch a widget inside the background function — only in
  ``on_success`` / ``on_failure``, which run on the UI thread;
- failures become one line in the window's :class:`ErrorStrip`, never a
  traceback dialog: a known failure (:func:`~agenvoy_desktop.core.errors.is_known`)
  is its own message, logged as a warning; anything else is a bug, shown as
  "internal error" with where the log is, and logged with its traceback;
- cancelling is a request: the task is cancelled and ``op.is_cancelled()``
  turns true for code on worker threads, which stops at its next check.

Long work shows progress only when it is still running after
:data:`PROGRESS_DELAY_MS` (Anki's "polite progress"); quick work shows none.
In the window, progress appears in a :class:`ProgressStrip` in the status bar
(built once, so showing it creates no window while a worker is busy); before
the window exists (first-start model preparation) it is a small dialog.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QProgressDialog,
    QToolButton,
    QWidget,
)

from agenvoy_desktop.core.errors import is_known, one_line
from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.operations.changes import Changed, MemoryChanges
from agenvoy_desktop.ui.theme import apply_sheet, strip_style

log = logging.getLogger(__name__)

T = TypeVar("T")
PROGRESS_DELAY_MS = 500
"""Work that ends sooner never shows a progress dialog."""


def readable_error(exc: BaseException, log_path: Path | None = None) -> str:
    """One line for the person: a known failure's message, or "internal error" for a bug.

    A bug's line names its type and where the log (with the traceback) is,
    so a report can quote both; *log_path* is that log when it is known.
    """
    if is_known(exc):
        return one_line(exc)
    text = " ".join(str(exc).split())
    detail = f": {text}" if text else ""
    where = f"details in {log_path}" if log_path is not None else "details are in the log"
    return f"internal error: {type(exc).__name__}{detail} ({where})"


class Operation(QObject):
    """One piece of background work: its progress, cancellation and end.

    :meth:`report`, :meth:`report_counts` and :meth:`is_cancelled` may be
    called from any thread; progress is coalesced so a worker that reports
    10,000 times costs the UI a handful of repaints.
    """

    progressed = Signal(float, str)
    """``(fraction, text)``; fraction is -1 when the total is unknown."""
    finished = Signal()

    def __init__(self, what: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.what = what
        self.task: asyncio.Task[Any] | None = None
        self.error: BaseException | None = None
        self._loop = asyncio.get_running_loop()
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._latest: tuple[float, str] | None = None
        self._done = False
        self.interrupt = True
        """Whether :meth:`cancel` also cancels the asyncio task (else only the flag is set)."""
        self.popup: ProgressPopup | None = None
        """The dialog that shows this work's progress before the window exists (else None)."""

    # -- any thread ------------------------------------------------------------
    def report(self, fraction: float, text: str = "") -> None:
        """Progress from any thread (the ``(fraction, text)`` shape of model preparation)."""
        with self._lock:
            scheduled = self._latest is not None
            self._latest = (float(fraction), text)
        if not scheduled:
            self._loop.call_soon_threadsafe(self._flush)

    def report_counts(self, done: int, total: int) -> None:
        """Progress from any thread (the ``(done, total)`` shape of the store)."""
        self.report(done / total if total else -1.0, f"{done:,} of {total:,}")

    def is_cancelled(self) -> bool:
        return self._cancel.is_set()

    # -- UI thread -------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the work to stop; what it already finished is kept."""
        self._cancel.set()
        if self.interrupt and self.task is not None and not self.task.done():
            self.task.cancel()

    @property
    def done(self) -> bool:
        return self._done

    def _flush(self) -> None:
        with self._lock:
            latest, self._latest = self._latest, None
        if latest is not None and not self._done:
            self.progressed.emit(*latest)

    def _finish(self) -> None:
        self._done = True
        self.finished.emit()


class AsyncRunner(QObject):
    """Starts :class:`Operation` s on the running asyncio loop and keeps them alive."""

    error_reported = Signal(str)
    """A readable failure message for the error strip."""
    busy_changed = Signal(bool)
    memory_changed = Signal(object)
    """A :class:`MemoryChanges` some work made: every panel decides what to reload."""

    def __init__(self, parent: QObject | None = None, *, log_path: Path | None = None) -> None:
        super().__init__(parent)
        self._ops: set[Operation] = set()
        self.progress_host: ProgressStrip | None = None
        """Where progress appears once the window exists (else: a dialog)."""
        self.log_path = log_path
        """The log a bug's traceback goes to, named in its message (None: not known)."""

    def run(
        self,
        work: Awaitable[T] | Callable[[Operation], Awaitable[T]],
        *,
        what: str = "",
        on_success: Callable[[T], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        progress: str | None = None,
        interrupt: bool = True,
    ) -> Operation:
        """Start *work*; see the module docstring.

        *what* completes "Could not …" in failure messages.  *progress*, when
        given, is the label of the dialog shown if the work takes a while.
        ``interrupt=False`` makes Cancel only a request (``op.is_cancelled()``)
        for work that must end by itself, e.g. a thread whose partial result
        is still wanted.
        """
        op = Operation(what, self)
        op.interrupt = interrupt
        awaitable = work(op) if callable(work) and not inspect.isawaitable(work) else work
        op.task = asyncio.ensure_future(self._guard(op, awaitable, on_success, on_failure))
        op.task.add_done_callback(lambda _task: self._settle(op, awaitable))
        self._ops.add(op)
        if len(self._ops) == 1:
            self.busy_changed.emit(True)
        if progress is not None:
            if self.progress_host is not None:
                self.progress_host.track(op, progress)
            else:
                op.popup = ProgressPopup(op, progress, None)
        return op

    def run_change(
        self,
        work: Awaitable[Changed[T] | MemoryChanges]
        | Callable[[Operation], Awaitable[Changed[T] | MemoryChanges]],
        *,
        what: str = "",
        on_success: Callable[[T | None], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        progress: str | None = None,
        interrupt: bool = True,
    ) -> Operation:
        """:meth:`run` for a write: what it changed is broadcast before *on_success*.

        The work returns a :class:`MemoryChanges` or a :class:`Changed`
        value; *on_success* receives the value (None for bare changes).
        """

        async def changing(op: Operation) -> T | None:
            awaitable = work(op) if callable(work) and not inspect.isawaitable(work) else work
            result = await awaitable
            changes = result if isinstance(result, MemoryChanges) else result.changes
            self.broadcast(changes)
            return None if isinstance(result, MemoryChanges) else result.value

        op = self.run(
            changing,
            what=what,
            on_success=on_success,
            on_failure=on_failure,
            progress=progress,
            interrupt=interrupt,
        )
        if inspect.iscoroutine(work):  # cancelled before it began: close, do not warn
            op.finished.connect(lambda: _close_unstarted(work))
        return op

    def broadcast(self, changes: MemoryChanges) -> None:
        """Tell every panel what changed (UI thread)."""
        if not changes.empty:
            self.memory_changed.emit(changes)

    def readable(self, exc: BaseException) -> str:
        """:func:`readable_error` naming this runner's log."""
        return readable_error(exc, self.log_path)

    def report_error(self, what: str, exc: BaseException) -> None:
        """Log *exc* and show it as one line: a warning if known, a bug with its traceback."""
        doing = what or "finish an operation"
        if is_known(exc):
            log.warning("could not %s: %s", doing, one_line(exc))
        else:
            log.error("internal error while trying to %s", doing, exc_info=exc)
        prefix = f"Could not {what}: " if what else ""
        self.error_reported.emit(prefix + self.readable(exc))

    def operations(self) -> list[Operation]:
        """Work still running."""
        return [op for op in self._ops if not op.done]

    async def shutdown(self) -> None:
        """Cancel everything still running and wait until it has stopped."""
        tasks = [op.task for op in self._ops if op.task is not None and not op.task.done()]
        for op in list(self._ops):
            op.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _guard(
        self,
        op: Operation,
        work: Awaitable[T],
        on_success: Callable[[T], None] | None,
        on_failure: Callable[[BaseException], None] | None,
    ) -> None:
        try:
            result = await work
        except (asyncio.CancelledError, OperationCancelledError):
            log.info("%s: cancelled", op.what or "operation")
        except Exception as exc:  # noqa: BLE001 - every failure ends as a readable message
            op.error = exc
            self._fail(op, exc, on_failure)
        else:
            if on_success is not None:
                try:
                    on_success(result)
                except Exception as exc:  # noqa: BLE001 - a broken view update must not go unseen
                    self._fail(op, exc, None)

    def _settle(self, op: Operation, work: Awaitable[Any]) -> None:
        """Bookkeeping once the task is done — also when it was cancelled before it began."""
        if inspect.iscoroutine(work) and inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
            work.close()  # never started: close it rather than warn "never awaited"
        self._ops.discard(op)
        op._finish()
        if not self._ops:
            self.busy_changed.emit(False)

    def _fail(
        self, op: Operation, exc: BaseException, on_failure: Callable[[BaseException], None] | None
    ) -> None:
        if on_failure is None:
            self.report_error(op.what, exc)
            return
        try:
            on_failure(exc)
        except Exception as inner:  # noqa: BLE001 - the failure handler itself failed
            self.report_error(op.what, inner)


def _close_unstarted(work: Any) -> None:
    if inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
        work.close()


class WeightedProgress:
    """Several preparations on one bar that only moves forward.

    Each part gets a share of the bar sized by its weight (the bytes it
    writes), in the order given; a part that reports means the ones before
    it are done.  A part that reports a smaller fraction than before (a
    converter that verifies, then writes) never moves the bar back.
    Thread-safe: parts report from worker threads.
    """

    def __init__(
        self, report: Callable[[float, str], None], parts: dict[str, tuple[str, float]]
    ) -> None:
        """*parts*: ``name -> (label, weight)``; *report* gets ``(fraction, text)``."""
        self._report = report
        total = sum(weight for _, weight in parts.values()) or 1.0
        self._spans: dict[str, tuple[str, float, float]] = {}
        start = 0.0
        for name, (label, weight) in parts.items():
            self._spans[name] = (label, start, weight / total)
            start += weight / total
        self._lock = threading.Lock()
        self._best = 0.0

    @property
    def fraction(self) -> float:
        """The furthest the bar has been."""
        return self._best

    def part(self, name: str) -> Callable[[float, str], None]:
        """The ``progress(fraction, text)`` callback of the part *name*."""
        label, start, share = self._spans[name]

        def report(fraction: float, text: str = "") -> None:
            with self._lock:
                if fraction >= 0:
                    here = start + share * max(0.0, min(1.0, fraction))
                    self._best = max(self._best, here)
                best = self._best
            self._report(best, f"{label}: {text}" if text else label)

        return report


class ProgressPopup(QObject):
    """A non-modal progress dialog that appears only for work that takes a while."""

    def __init__(self, op: Operation, label: str, parent: QWidget | None) -> None:
        super().__init__(op)
        self._op = op
        self._label = label
        self._parent = parent
        self._dialog: QProgressDialog | None = None
        self._last: tuple[float, str] = (-1.0, "")
        self._note = ""
        op.progressed.connect(self._on_progress)
        op.finished.connect(self._close)
        QTimer.singleShot(PROGRESS_DELAY_MS, self._show)

    @property
    def dialog(self) -> QProgressDialog | None:
        return self._dialog

    def _show(self) -> None:
        if self._op.done or self._dialog is not None:
            return
        dialog = QProgressDialog(self._label, "Cancel", 0, 1000, self._parent)
        dialog.setWindowTitle("Agenvoy Desktop")
        dialog.setModal(False)
        dialog.setMinimumDuration(0)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        dialog.canceled.connect(self._op.cancel)
        self._dialog = dialog
        self._apply()
        dialog.show()

    def _on_progress(self, fraction: float, text: str) -> None:
        self._last = (fraction, text)
        self._apply()

    def set_note(self, note: str) -> None:
        """A paragraph under the progress text (what was typed while the work runs)."""
        self._note = note
        self._apply()

    def label_text(self) -> str:
        """What the dialog says: the label, the latest progress text, the note."""
        _fraction, text = self._last
        lines = [self._label, text] if text else [self._label]
        return "\n".join(lines) + (f"\n\n{self._note}" if self._note else "")

    def _apply(self) -> None:
        if self._dialog is None:
            return
        fraction, _text = self._last
        if fraction < 0:
            self._dialog.setRange(0, 0)  # busy indicator
        else:
            self._dialog.setRange(0, 1000)
            self._dialog.setValue(round(max(0.0, min(1.0, fraction)) * 1000))
        self._dialog.setLabelText(self.label_text())

    def _close(self) -> None:
        if self._dialog is not None:
            self._dialog.canceled.disconnect(self._op.cancel)
            self._dialog.close()
            self._dialog.deleteLater()
            self._dialog = None


class ProgressStrip(QWidget):
    """Progress of long work in the status bar: label, bar, Cancel.

    Shows the newest tracked operation that has run for
    :data:`PROGRESS_DELAY_MS`, with a count of the others; hides itself when
    nothing long is running.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setFixedWidth(160)
        self.bar.setTextVisible(False)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.clicked.connect(self.cancel_current)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 4, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.cancel_button)
        self._shown: list[tuple[Operation, str]] = []
        self._progress: dict[Operation, tuple[float, str]] = {}
        self.hide()

    def track(self, op: Operation, label: str) -> None:
        """Show *op* if it is still running after the delay."""
        op.progressed.connect(lambda f, t: self._on_progress(op, f, t))
        op.finished.connect(lambda: self._forget(op))
        QTimer.singleShot(PROGRESS_DELAY_MS, self, lambda: self._appear(op, label))

    def current(self) -> Operation | None:
        return self._shown[-1][0] if self._shown else None

    def cancel_current(self) -> None:
        op = self.current()
        if op is not None:
            op.cancel()
            self.label.setText(self._shown[-1][1] + " — stopping…")

    def _appear(self, op: Operation, label: str) -> None:
        if not op.done:
            self._shown.append((op, label))
            self._update()

    def _on_progress(self, op: Operation, fraction: float, text: str) -> None:
        self._progress[op] = (fraction, text)
        if self.current() is op:
            self._update()

    def _forget(self, op: Operation) -> None:
        self._progress.pop(op, None)
        self._shown = [(o, label) for o, label in self._shown if o is not op]
        self._update()

    def _update(self) -> None:
        if not self._shown:
            self.hide()
            return
        op, label = self._shown[-1]
        fraction, text = self._progress.get(op, (-1.0, ""))
        more = len(self._shown) - 1
        self.label.setText(
            label + (f" {text}" if text else "") + (f"  (+{more} more)" if more else "")
        )
        if fraction < 0:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, 1000)
            self.bar.setValue(round(max(0.0, min(1.0, fraction)) * 1000))
        self.show()


class ErrorStrip(QFrame):
    """Readable failures above the window's content: non-modal, dismissable.

    Newest message first; closing it shows the one before (with a count of
    how many are waiting), so a burst of failures is not lost nor stacked
    into a wall of text.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ErrorStrip")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._messages: list[tuple[str, str]] = []
        self._label = QLabel()
        self._label.setWordWrap(True)
        self._label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._count = QLabel()
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.setAutoRaise(True)
        close.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        layout.addWidget(self._label, 1)
        layout.addWidget(self._count)
        layout.addWidget(close)
        self.hide()

    def show_message(self, text: str, level: str = "error") -> None:
        """Show *text* (level "error" or "info") on top of the queue."""
        self._messages.append((level, text))
        self._update()

    def show_error(self, text: str) -> None:
        self.show_message(text, "error")

    def messages(self) -> list[str]:
        return [text for _, text in self._messages]

    def current(self) -> str:
        return self._messages[-1][1] if self._messages else ""

    def restyle(self) -> None:
        self._update()

    def dismiss(self) -> None:
        if self._messages:
            self._messages.pop()
        self._update()

    def _update(self) -> None:
        if not self._messages:
            self.hide()
            return
        level, text = self._messages[-1]
        apply_sheet(self, lambda palette: strip_style(palette, level))
        self._label.setText(("⚠ " if level == "error" else "ⓘ ") + text)
        waiting = len(self._messages) - 1
        self._count.setText(f"+{waiting} more" if waiting else "")
        self.show()
