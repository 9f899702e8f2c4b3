"""Window tests: qasync on pytest-qt's QApplication, a scripted model, a tmp profile.

How asyncio runs here: the window's code is asyncio on the qasync loop, and
pytest-qt drives the Qt event loop (``qtbot.waitUntil`` / ``waitSignal``),
which is what fires qasync's callbacks.  The ``qloop`` fixture creates
``qasync.QEventLoop(qapp)`` and registers it as the running loop for this
thread, exactly as ``loop.run_forever`` would, but without calling it: a
``run_*`` call ends with ``QApplication.exit()``, which leaves Qt's "quit
now" flag set and makes every later nested event loop (``waitSignal``)
return at once.  Teardown cancels what is left, lets it unwind, and closes
the loop.  Everything is deterministic: tests wait on conditions, never on
wall-clock sleeps.

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
import gc
import importlib.util
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
import qasync
import shiboken6
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatModel
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.ui.app import tune_interpreter
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.main_window import MainWindow
from tests.conftest import FakeClock
from tests.fakes import HashingEmbedder

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
WAIT_MS = 10_000


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
    for runner, window in made:  # stop the work first, then the widgets it reports to
        run(qtbot, runner.shutdown())
        window.close()
        delete_now(window, runner)


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
