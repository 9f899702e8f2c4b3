"""Window tests: qasync on pytest-qt's QApplication, a scripted model, a tmp profile.

How asyncio runs here: the window's code is asyncio on the qasync loop, and
pytest-qt drives the Qt event loop (``qtbot.waitUntil`` / ``waitSignal``),
which is what fires qasync's callbacks.  The ``qloop`` fixture creates
``qasync.QEventLoop(qapp)`` and registers it as the running loop for this
thread, exactly as ``loop.run_forever`` would, but without calling it: a
``run_*`` call ends with ``QApplication.exit()``, which leaves Qt's "quit
now" flag set and makes every later nested event loop (``waitSignal``)
return at once.  qasync's own ``QEventLoop(app, already_running=True)``
does the same registration, but its ``stop()`` calls ``QApplication.exit()``
as well (tried: every later nested loop then returned after 0 ms), so the
fixture registers the loop itself with asyncio's hook for loop
implementations.  It is the only loop fixture.  Teardown cancels what is
left, lets it unwind, and closes the loop.  Everything is deterministic:
tests wait on conditions, never on wall-clock sleeps.

Every window test must leave nothing behind: a Qt warning fails it
(``qt_log_level_fail`` in pyproject.toml), and so do a thread still alive,
a window or dialog still open, or a runner operation still unfinished a few
seconds after its fixtures closed.

Qt objects die on the GUI thread.  A Python-owned QObject (a window, an
``AsyncRunner``, qasync's timer object) is destroyed when its wrapper is
freed, and a wrapper caught in a reference cycle is freed by whichever
thread's allocation triggers the next garbage collection — often the
storage worker.  ``~QObject`` on the wrong thread cannot stop the object's
timers: they stay registered and the next one fires into freed memory (a
segfault in ``QTimerInfoList::activateTimers``, several tests later).  So
teardown deletes what the fixtures made with :func:`delete_now`, automatic
collection is off while a window test runs, and what the test left is
collected at its end, here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
import qasync
import shiboken6
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QDialog, QMainWindow
from pytestqt.exceptions import TimeoutError as WaitTimeout
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatModel
from agenvoy_desktop.core.summary import prompt_text
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.ui.app import tune_interpreter
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.main_window import MainWindow
from tests.conftest import FakeClock
from tests.fakes import HashingEmbedder
from tests.ui.inspector_profile import Profile, close_profile, open_profile

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
WAIT_MS = 10_000


EVENT_WAIT_MS = 30_000
"""How long a test waits for the event it expects before calling it a hang.

Tests wait on events, not on time; this is only the guard against an event
that never comes.  pytest-qt's own default, 5 s, is a time assumption: on a
2-core machine with both cores busy, a page of the sessions list took
longer than that to load, and a test failed that had nothing wrong.
"""


@pytest.fixture
def qtbot(qtbot: QtBot) -> QtBot:
    """pytest-qt's qtbot whose waits default to :data:`EVENT_WAIT_MS` (a given timeout stands)."""
    for name in ("waitUntil", "waitSignal", "waitSignals", "waitCallback"):
        wait = getattr(qtbot, name)
        setattr(qtbot, name, partial(_with_timeout, wait))
    return qtbot


def _with_timeout(wait: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("timeout", EVENT_WAIT_MS)
    return wait(*args, **kwargs)


def delete_now(*objects: QObject | None) -> None:
    """Destroy Qt objects now, on this (the GUI) thread; see the module docstring."""
    for obj in objects:
        if obj is not None and shiboken6.isValid(obj):
            shiboken6.delete(obj)


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close the qasync loop and destroy its timer object on the GUI thread.

    ``QEventLoop.close`` only marks qasync's timer object stopped: the Qt
    timers of pending ``call_later`` handles (a 20 s tool timeout, say) stay
    registered until they fire.  Deleting the object here unregisters them.
    """
    asyncio.events._set_running_loop(None)
    loop.close()
    asyncio.set_event_loop(None)
    timer = getattr(loop, "_timer", None)
    delete_now(timer if isinstance(timer, QObject) else None)


THREAD_GRACE_S = 10.0
"""How long a thread a test started may take to finish once the test's fixtures are closed."""


@pytest.fixture(autouse=True)
def _nothing_left_running(qapp: QApplication) -> Iterator[None]:
    """Fail a test that leaves a thread running or a window or dialog open.

    Autouse fixtures are torn down last, so this looks after every fixture the
    test used has closed: what is still alive then would live on into the
    next test (a storage thread writing to a deleted profile, a dialog
    holding a deleted window's services).
    """
    threads_before = set(threading.enumerate())
    widgets_before = {id(w) for w in qapp.topLevelWidgets()}
    yield
    deadline = time.monotonic() + THREAD_GRACE_S
    leaked = []
    for thread in set(threading.enumerate()) - threads_before:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            leaked.append(thread.name)
    shown = [
        f"{type(w).__name__} {w.windowTitle()!r}"
        for w in qapp.topLevelWidgets()
        if id(w) not in widgets_before
        and shiboken6.isValid(w)
        and w.isVisible()
        and isinstance(w, QMainWindow | QDialog)
    ]
    assert not leaked, f"threads still running after the test: {sorted(leaked)}"
    assert not shown, f"windows still open after the test: {shown}"


@pytest.fixture(autouse=True)
def _collect_on_the_gui_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """No automatic garbage collection during a window test; collect its garbage here.

    Autouse fixtures are set up first and torn down last, so this runs after
    the windows and the loop have been closed.  A module that measures the
    app's responsiveness sets ``AUTOMATIC_GC = True``: there collections run
    as in the app, and only the final one is moved here.
    """
    was_enabled = gc.isenabled()
    if not getattr(request.module, "AUTOMATIC_GC", False):
        gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if was_enabled:
            gc.enable()


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    """The qasync loop, running as far as asyncio is concerned (module docstring)."""
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    asyncio.events._set_running_loop(loop)
    switch, thresholds = sys.getswitchinterval(), gc.get_threshold()
    tune_interpreter()  # as the app does
    try:
        yield loop
    finally:
        sys.setswitchinterval(switch)
        gc.set_threshold(*thresholds)
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        qtbot = QtBot(qapp)
        qtbot.waitUntil(lambda: all(task.done() for task in pending), timeout=WAIT_MS)
        close_loop(loop)


def run(qtbot: QtBot, coro: Coroutine[Any, Any, T], timeout: int = WAIT_MS) -> T:
    """Run *coro* on the qasync loop while Qt events are processed; its result."""
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=timeout)
    return task.result()


SETTLE_MS = 5_000
"""A window's own follow-up reads (a refresh after the test's last click) may finish this late."""


def still_running(qtbot: QtBot, runner: AsyncRunner) -> list[str]:
    """What *runner* is still doing once its in-flight work had time to end: a leak."""

    def settled() -> bool:
        return all(op.done for op in runner.operations())

    with contextlib.suppress(WaitTimeout):  # what is left is reported by the caller
        qtbot.waitUntil(settled, timeout=SETTLE_MS)
    return [op.what for op in runner.operations() if not op.done]


def wait_op(qtbot: QtBot, op: Operation | None, timeout: int = WAIT_MS) -> None:
    """Wait until a runner operation ended; fail if it failed."""
    assert op is not None
    qtbot.waitUntil(lambda: op.done, timeout=timeout)
    assert op.error is None, op.error


@pytest.fixture
def profile(tmp_path: Path) -> AppPaths:
    return app_paths(tmp_path / "profile").ensure()


ServicesFactory = Callable[..., AppServices]


@pytest.fixture
def make_services(profile: AppPaths, qloop: asyncio.AbstractEventLoop) -> Iterator[ServicesFactory]:
    """AppServices on the test profile (HashingEmbedder, a fake clock); closed at teardown."""
    opened: list[AppServices] = []

    def factory(chat_model: ChatModel | None = None, **kwargs: Any) -> AppServices:
        kwargs.setdefault("embedder", HashingEmbedder())
        kwargs.setdefault("clock", FakeClock())
        paths = kwargs.pop("paths", profile)
        services = AppServices.open(paths, chat_model=chat_model, **kwargs)
        opened.append(services)
        return services

    yield factory
    for services in opened:
        services.close()


WindowFactory = Callable[..., MainWindow]


@pytest.fixture
def make_window(qtbot: QtBot, make_services: ServicesFactory) -> Iterator[WindowFactory]:
    """Shown, started main windows; their work is cancelled at teardown."""
    made: list[tuple[AsyncRunner, MainWindow]] = []

    def factory(services: AppServices, *, undo_ms: int = 10_000, start: bool = True) -> MainWindow:
        runner = AsyncRunner()
        window = MainWindow(services, runner, undo_ms=undo_ms)
        made.append((runner, window))
        window.show()
        if start:
            wait_op(qtbot, window.start())
        return window

    yield factory
    running: list[str] = []
    for runner, window in made:  # stop the work first, then the widgets it reports to
        if window.sessions_watch is not None:  # its delayed reload would start new work
            window.sessions_watch.stop()
        running += still_running(qtbot, runner)
        run(qtbot, runner.shutdown())
        window.close()
        delete_now(window, runner)
    assert not running, f"operations still running after the test: {running}"


def seed(services: AppServices, title: str | None, messages: list[Message]) -> str:
    """A session with *messages*, written before the test drives the window."""
    store = services.store
    sid = services.storage.run_sync(store.create_session, title)
    services.storage.run_sync(store.append, sid, messages)
    return sid


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def demo_profile(tmp_path: Path) -> AppPaths:
    """The screenshot script's demo profile, built with the hashing embedder."""
    builder = load_script("demo_profile")
    paths: AppPaths = builder.build_demo_profile(tmp_path / "demo", embedder=HashingEmbedder())
    return paths


# -- the inspector's prepared profile ----------------------------------------------------
@pytest.fixture
def runner(qloop: asyncio.AbstractEventLoop) -> Iterator[AsyncRunner]:
    """The app's real async bridge on the test loop; its errors are collected."""
    bridge = AsyncRunner()
    errors: list[str] = []
    bridge.error_reported.connect(errors.append)
    bridge.setProperty("test_errors", errors)
    yield bridge
    qtbot = QtBot(QApplication.instance())  # type: ignore[arg-type]
    running = still_running(qtbot, bridge)
    run(qtbot, bridge.shutdown())
    delete_now(bridge)
    assert not running, f"operations still running after the test: {running}"


@pytest.fixture
def inspected(paths: AppPaths) -> Iterator[Profile]:
    """Services over the prepared profile (``inspector_profile``), with a chat model."""
    prepared = open_profile(paths)
    yield prepared
    close_profile(prepared)


@pytest.fixture
def profile_without_model(paths: AppPaths) -> Iterator[Profile]:
    """The prepared profile with no chat model (and so no summarizer)."""
    prepared = open_profile(paths, with_chat_model=False)
    del prepared.services.summarizer  # type: ignore[attr-defined]
    yield prepared
    close_profile(prepared)


Wait = Callable[[Callable[[], object]], None]


@pytest.fixture
def wait_for(qtbot: QtBot) -> Wait:
    """``wait_for(lambda: condition)`` with a generous timeout and a clear failure."""

    def wait(condition: Callable[[], object]) -> None:
        qtbot.waitUntil(lambda: bool(condition()), timeout=WAIT_MS)

    return wait


@pytest.fixture
def panel(qtbot: QtBot, inspected: Profile, runner: AsyncRunner) -> InspectorPanel:
    """The memory inspector over the prepared profile, shown; no session chosen yet."""
    services = inspected.services
    assert services.agent is not None
    services.agent.summary_text = partial(prompt_text, services.store)
    widget = InspectorPanel(services, runner)
    qtbot.addWidget(widget)
    widget.resize(1000, 700)
    widget.show()
    return widget
