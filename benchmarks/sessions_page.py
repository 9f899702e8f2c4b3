"""Sessions list: time from creating the panel to its first rows painted, paged vs whole.

Builds (once, cached under ``--profile``) a profile of N small sessions
(four messages each) and then, in one process and alternating, times:

* ``paged``: ``SessionsPanel.load_first()`` — the first page, sized alone;
* ``whole``: every session sized (``list_sessions``) and handed to the same
  panel at once — what the list did before it loaded in pages;
* ``baseline`` (with ``--baseline-module``): an older ``sessions_panel.py``
  (e.g. ``git show <rev>:agenvoy_desktop/ui/sessions_panel.py > old.py``)
  doing its own ``refresh()``.

Each time runs from the panel's constructor to a synchronous repaint of the
list after the rows arrived.  Reports the median of the rounds and the
ratio whole / paged.  Run under the team's timing lock.

    .venv/bin/python benchmarks/sessions_page.py [--sessions 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import qasync
from PySide6.QtWidgets import QApplication, QWidget

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.operations.sessions import list_sessions
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.ui.app import tune_interpreter
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.sessions_panel import SessionsPanel

T0 = 1_700_000_000_000_000_000


def build_profile(root: Path, count: int) -> AppPaths:
    """*count* sessions of four short messages, activity one second apart (cached)."""
    paths = app_paths(root)
    marker = root / f"built-{count}"
    if marker.exists():
        return paths
    tick = [T0]

    def clock() -> int:
        tick[0] += 1_000_000_000
        return tick[0]

    store = open_memory(paths, None, clock=clock)
    for n in range(count):
        sid = store.create_session(f"Session {n:04d} about topic {n % 37}")
        roles = ("user", "assistant")
        texts = [f"message {k} of session {n} word{n % 97}" for k in range(4)]
        store.append(
            sid,
            [Message(new_message_id(), roles[k % 2], t, clock()) for k, t in enumerate(texts)],
            embed=False,
        )
    store.close()
    marker.touch()
    return paths


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_sessions_panel", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


Start = Callable[[AppServices, AsyncRunner], tuple[QWidget, Operation]]


def paged(services: AppServices, runner: AsyncRunner) -> tuple[QWidget, Operation]:
    panel = SessionsPanel(services, runner)
    panel.resize(300, 800)
    panel.show()
    return panel, panel.load_first()


def whole(services: AppServices, runner: AsyncRunner) -> tuple[QWidget, Operation]:
    panel = SessionsPanel(services, runner)
    panel.resize(300, 800)
    panel.show()
    op = runner.run(
        services.storage.run(list_sessions, services.store),
        what="list the sessions",
        on_success=panel.set_sessions,
    )
    return panel, op


def baseline_of(module: ModuleType) -> Start:
    def start(services: AppServices, runner: AsyncRunner) -> tuple[QWidget, Operation]:
        panel = module.SessionsPanel(services, runner)
        panel.resize(300, 800)
        panel.show()
        return panel, panel.refresh()

    return start


async def timed(start: Start, services: AppServices, runner: AsyncRunner) -> tuple[float, int]:
    """Seconds from the panel's constructor to its first rows painted, and the rows shown."""
    began = time.perf_counter()
    panel: Any
    panel, op = start(services, runner)
    if not op.done:
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def end() -> None:
            if not finished.done():
                finished.set_result(None)

        op.finished.connect(end)
        await finished
    list_view = panel.list  # either panel's list view
    list_view.viewport().repaint()
    took = time.perf_counter() - began
    rows = int(list_view.model().rowCount())
    panel.close()
    panel.deleteLater()
    await asyncio.sleep(0.05)
    return took, rows


async def measure(services: AppServices, starts: dict[str, Start], rounds: int) -> dict[str, Any]:
    runner = AsyncRunner()
    times: dict[str, list[float]] = {name: [] for name in starts}
    rows: dict[str, int] = {}
    for _round in range(rounds + 1):  # the first round warms the caches and is dropped
        for name, start in starts.items():
            took, rows[name] = await timed(start, services, runner)
            if _round:
                times[name].append(took)
    await runner.shutdown()
    return {
        name: {"median_ms": round(statistics.median(ts) * 1000, 1), "rows": rows[name]}
        for name, ts in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", type=Path, default=Path(".bench-cache/sessions-page"))
    parser.add_argument("--baseline-module", type=Path)
    args = parser.parse_args()
    paths = build_profile(args.profile / str(args.sessions), args.sessions)
    app = QApplication([])
    app.setQuitOnLastWindowClosed(False)  # each panel closes
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    tune_interpreter()  # as the app does
    starts: dict[str, Start] = {"paged": paged, "whole": whole}
    if args.baseline_module is not None:
        starts["baseline"] = baseline_of(load_module(args.baseline_module))
    services = AppServices.open(paths)
    try:
        result = loop.run_until_complete(measure(services, starts, args.rounds))
    finally:
        services.close()
    paged_ms = result["paged"]["median_ms"]
    for name, figures in result.items():
        ratio = figures["median_ms"] / paged_ms if paged_ms else float("nan")
        print(f"{name:9s} {figures['median_ms']:8.1f} ms  rows {figures['rows']:5d}  x{ratio:.1f}")


if __name__ == "__main__":
    main()
