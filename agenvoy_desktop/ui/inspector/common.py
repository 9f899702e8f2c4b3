"""Pieces every inspector tab shares: a base class, stale-proof jobs, a status line, formatting.

The tabs never touch disk or a model on the UI thread.  Each piece of work is a
coroutine handed to the window's :class:`AsyncRunner`, which runs it on the
qasync loop and calls back on the UI thread.  :class:`Jobs` adds the one rule
every tab needs on top: when the session changes, answers still in flight
for the old one are dropped rather than painted over the new one.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable, Generator
from datetime import datetime
from typing import Any, TypeVar

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import is_known
from agenvoy_desktop.llm.catalogue import ModelCatalogue
from agenvoy_desktop.operations.changes import Changed, MemoryChanges, Part
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.theme import colors

log = logging.getLogger(__name__)
T = TypeVar("T")
Work = Callable[[Operation], Awaitable[T]]


class _Deferred(Awaitable[T]):
    """Creates the work's coroutine only when the runner awaits it.

    ``AsyncRunner.run`` calls the work function at once; a job cancelled
    before its task started would leave a never-awaited coroutine behind
    (a RuntimeWarning).  This object has nothing to leak until awaited.
    """

    def __init__(self, work: Work[T], op: Operation) -> None:
        self._work = work
        self._op = op

    def __await__(self) -> Generator[Any, None, T]:
        return self._work(self._op).__await__()


class Jobs:
    """Runs a tab's work through the runner; drops answers that went stale.

    Each call to :meth:`start` under a *key* cancels the previous job of that
    key, and a job whose answer arrives after :meth:`invalidate` (a session
    switch) is ignored.  Failures reach *on_error* as one readable sentence.
    """

    def __init__(self, runner: AsyncRunner) -> None:
        self.runner = runner
        self._ops: dict[str, Operation] = {}
        self._tokens: dict[str, int] = {}
        self._epoch = 0

    def start(
        self,
        key: str,
        work: Work[T],
        on_done: Callable[[T], None],
        on_error: Callable[[str], None],
        *,
        what: str,
        progress: str | None = None,
    ) -> Operation:
        self.cancel(key)
        token = self._tokens.get(key, 0) + 1
        self._tokens[key] = token
        epoch = self._epoch

        def current() -> bool:
            return self._tokens.get(key) == token and self._epoch == epoch

        def done(value: T) -> None:
            if current():
                self._ops.pop(key, None)
                on_done(value)

        def failed(exc: BaseException) -> None:
            if not is_known(exc):  # a bug: the tab shows one line, the log keeps the traceback
                log.error("internal error while trying to %s", what, exc_info=exc)
            if current():
                self._ops.pop(key, None)
                on_error(self.runner.readable(exc))

        op = self.runner.run(
            lambda op: _Deferred(work, op),
            what=what,
            on_success=done,
            on_failure=failed,
            progress=progress,
        )
        if current() and not op.done:
            self._ops[key] = op
        return op

    def start_change(
        self,
        key: str,
        work: Work[Changed[T]],
        on_done: Callable[[T], None],
        on_error: Callable[[str], None],
        *,
        what: str,
    ) -> Operation:
        """:meth:`start` for a write: what it changed is broadcast, even if the answer is stale."""
        runner = self.runner

        async def changing(op: Operation) -> T:
            changed = await work(op)
            runner.broadcast(changed.changes)
            return changed.value

        return self.start(key, changing, on_done, on_error, what=what)

    def busy(self, key: str) -> bool:
        op = self._ops.get(key)
        return op is not None and not op.done

    def cancel(self, key: str) -> None:
        op = self._ops.pop(key, None)
        self._tokens[key] = self._tokens.get(key, 0) + 1
        if op is not None:
            op.cancel()

    def invalidate(self, *, detach: tuple[str, ...] = ()) -> None:
        """Forget every job in flight (their answers belong to another session).

        Jobs under a *detach* key keep running (a summary pass of the session
        the user left should finish); only their answers are ignored.
        """
        self._epoch += 1
        for key in list(self._ops):
            if key in detach:
                self._ops.pop(key)
            else:
                self.cancel(key)


class InspectorTab(QWidget):
    """What every inspector tab has: the services, its :class:`Jobs`, the session shown.

    The panel calls :meth:`set_session` on every switch and :meth:`refresh`
    once the tab is on screen.  A switch drops the answers still in flight
    for the old session (jobs under :attr:`detach_on_switch` keep running)
    and lets the tab clear what it showed in :meth:`_session_changed`.
    """

    detach_on_switch: tuple[str, ...] = ()
    """Job keys whose work should finish even when the user leaves the session."""
    reload_on: tuple[Part, ...] = ()
    """The parts of memory the tab shows: a change to one of them makes it reload."""
    session_free = False
    """The tab shows the same thing for every session (error memory, models)."""
    no_session_text = ""
    """What the tab says while no session is chosen."""

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.jobs = Jobs(runner)
        self.session_id: str | None = None
        self.hidden_messages: Callable[[], set[str]] = set
        """Ids of messages deleted in the chat whose undo window is still open (any session):
        the chat no longer shows them, so no tab may (the panel sets this)."""

    def set_session(self, session_id: str | None) -> None:
        """Switch sessions; the panel calls :meth:`refresh` when the tab is shown."""
        if session_id == self.session_id:
            return
        self.jobs.invalidate(detach=self.detach_on_switch)
        self.session_id = session_id
        self._session_changed()

    def refresh(self) -> None:
        """Load what the tab shows (on the runner, never on the UI thread)."""
        raise NotImplementedError

    def deletes_changed(self) -> bool:
        """A delete entered or left its undo window; True: the tab must reload to follow.

        Tabs that show messages leave the pending ones out; those that can do it
        with what they hold do it here and answer False.
        """
        return False

    def wants_reload(self, changes: MemoryChanges) -> bool:
        """Whether *changes* touch what the tab shows."""
        if self.session_free:
            return changes.any_of(*self.reload_on)
        return self.session_id is not None and changes.affects(self.session_id, *self.reload_on)

    def _session_changed(self) -> None:
        """Clear what showed the old session (tabs that show one override this)."""

    @property
    def placeholder(self) -> str:
        """The line shown before there is anything: choose a session, or wait for it."""
        return self.no_session_text if self.session_id is None else "Loading…"


class StatusLine(QLabel):
    """One line under a tab for what just happened or went wrong, in words."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hide()

    def info(self, text: str) -> None:
        self._show(text, error=False)

    def error(self, text: str) -> None:
        self._show(text, error=True)

    def clear_message(self) -> None:
        self.clear()
        self.hide()

    def _show(self, text: str, *, error: bool) -> None:
        self.setProperty("error", error)
        c = colors(self.palette())
        colour, weight = (c.error_fg, "600") if error else (c.muted, "normal")
        self.setStyleSheet(f"color: {colour}; font-weight: {weight};")
        self.setText(text)
        self.show()

    @property
    def is_error(self) -> bool:
        return bool(self.property("error")) and not self.isHidden()


def catalogue_of(services: AppServices) -> ModelCatalogue:
    """``services.catalogue``, or one over the profile's models folder (same file)."""
    catalogue = getattr(services, "catalogue", None)
    if isinstance(catalogue, ModelCatalogue):
        return catalogue
    return ModelCatalogue(services.paths.models_dir)


def local_time(ns: int | None, *, seconds: bool = False) -> str:
    """UTC ns as local wall time; "—" for unknown or zero."""
    if not ns:
        return "—"
    fmt = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(ns / 1e9).astimezone().strftime(fmt)


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "bytes" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def esc(text: str) -> str:
    """HTML-escape user text for rich-text labels and browsers."""
    return html.escape(text, quote=True)


def heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.08)
    label.setFont(font)
    return label
