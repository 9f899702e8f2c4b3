"""Screenshots of the window on a demo profile (the README shows them).

    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python scripts/screenshots.py [OUT] [--keep]

Builds the demo profile of ``scripts/demo_profile.py`` in a temporary folder
(never the real profile), starts the app the way ``agenvoy-desktop`` does
(``AppServices.start``: the real embedding and starter models, prepared into
that folder), then shows each panel, inspector tab and dialog and saves PNGs
made with ``QWidget.grab()`` into OUT (default ``docs/screenshots``).
``--keep`` leaves the temporary profile for a look around.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import qasync
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialog, QWidget

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from demo_profile import build_demo_profile  # noqa: E402

from agenvoy_desktop.agent.services import AppServices  # noqa: E402
from agenvoy_desktop.paths import AppPaths, app_paths  # noqa: E402
from agenvoy_desktop.ui.app import APP_NAME, tune_interpreter  # noqa: E402
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation  # noqa: E402
from agenvoy_desktop.ui.main_window import MainWindow  # noqa: E402
from agenvoy_desktop.ui.theme import _dark_palette, apply_theme  # noqa: E402

WINDOW = (1360, 860)
SIDE_WIDE = [230, 560, 570]


def prepare(folder: Path) -> AppPaths:
    """Models into the throw-away profile, then the demo sessions (real embeddings)."""
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.llm.model_prep import prepare_embedding_model

    paths = app_paths(folder).ensure()
    embedder = Embedder(prepare_embedding_model(paths.models_dir))
    try:
        build_demo_profile(folder, embedder=embedder)
    finally:
        embedder.close()
    return paths


async def finished(op: Operation) -> None:
    """Wait for a runner operation to end (a signal, not polling)."""
    ended = asyncio.Event()
    op.finished.connect(ended.set)
    if not op.done:
        await ended.wait()


class Shooter:
    """Drives the window from one shot to the next and saves the pictures."""

    def __init__(self, window: MainWindow, runner: AsyncRunner, out: Path) -> None:
        self.window, self.runner, self.out = window, runner, out
        self.saved: list[Path] = []
        self._idle = asyncio.Event()
        runner.busy_changed.connect(lambda busy: self._idle.clear() if busy else self._idle.set())

    async def settle(self, extra_s: float = 0.4) -> None:
        """Until no operation runs, then a moment for layouts and fades."""
        await asyncio.sleep(0.15)
        if self.runner.operations():
            self._idle.clear()
            await asyncio.wait_for(self._idle.wait(), timeout=60)
        await asyncio.sleep(extra_s)

    def grab(self, name: str, widget: QWidget | None = None) -> None:
        path = self.out / f"{name}.png"
        (widget or self.window).grab().save(str(path))
        self.saved.append(path)
        print(path)  # noqa: T201

    async def open_session(self, title_prefix: str) -> str:
        sessions = self.window.sessions
        sid = next(
            s for s in sessions.model.session_ids() if sessions.title_of(s).startswith(title_prefix)
        )
        self.window.select_session(sid)
        await self.settle()
        return sid


async def shoot_chat(shots: Shooter) -> None:
    """The overview, the timeline, tool chips with a hint, an interrupted answer, code."""
    w = shots.window
    await shots.open_session("記憶系統")
    w.side.setCurrentIndex(0)
    await shots.settle()
    shots.grab("window")
    shots.grab("timeline", w.side)
    await shots.open_session("Kyoto")
    chips = w.chat.chips()
    if chips:
        chips[0].set_expanded(True)
        await shots.settle(0.2)
        w.chat.view.show_widget(w.chat.bubbles()[0])
    await shots.settle(0.3)
    shots.grab("chat-tools-hint-interrupted", w.chat)
    await shots.open_session("Python packaging")
    shots.grab("chat-code", w.chat)


async def shoot_inspector(shots: Shooter) -> None:
    """Every inspector tab, with a wider side panel."""
    w = shots.window
    w.splitter.setSizes(SIDE_WIDE)
    w.side.setCurrentIndex(1)
    await shots.open_session("記憶系統")
    inspector = w.inspector
    for name in inspector.tab_names():
        inspector.show_tab(name)
        if name == "recall":
            inspector.recall_tab.query_edit.setText("向量索引 vector index")
            inspector.recall_tab.search()
        await shots.settle(0.6)
        shots.grab(f"inspector-{name}")
    w.splitter.setSizes([250, 640, 470])
    w.side.setCurrentIndex(0)


async def shoot_actions(shots: Shooter) -> None:
    """Search, reset with its Undo toast, the no-model banner, settings."""
    w = shots.window
    w.sessions.search.setText("記憶")
    await shots.settle(0.8)
    shots.grab("search-sessions")
    w.sessions.search.clear()
    await shots.settle()
    op = w.reset_session(w.session_id)
    await shots.settle(0.5)
    shots.grab("reset-with-undo")
    if op is not None:
        w.undo(op)
    await shots.settle()
    services = w.services
    model, problem = services.chat_model, services.chat_problem
    services.set_chat_model(None)
    w.chat.refresh_model_state()
    await shots.settle(0.2)
    shots.grab("no-chat-model", w.chat)
    services.set_chat_model(model, problem)
    w.chat.refresh_model_state()
    dialog = w.open_settings("Models")
    await shots.settle(0.4)
    shots.grab("settings", dialog)
    dialog.reject()


async def shoot_dark(shots: Shooter) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    app.setStyle("Fusion")
    app.setPalette(_dark_palette())
    await shots.settle(0.6)
    shots.grab("window-dark")


async def run(out: Path, profile: Path) -> int:
    paths = await asyncio.to_thread(prepare, profile)
    services = await asyncio.to_thread(AppServices.start, paths)
    runner = AsyncRunner()
    window = MainWindow(services, runner)
    window.resize(*WINDOW)
    window.setWindowState(Qt.WindowState.WindowNoState)
    window.show()
    try:
        await finished(window.start())
        shots = Shooter(window, runner, out)
        for step in (shoot_chat, shoot_inspector, shoot_actions, shoot_dark):
            await step(shots)
    finally:
        for dialog in window.findChildren(QDialog):
            dialog.close()
        window.close()
        await window.pending.flush()
        await runner.shutdown()
        await asyncio.to_thread(services.close)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--keep", action="store_true", help="keep the temporary profile")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    profile = Path(tempfile.mkdtemp(prefix="agenvoy-demo-"))
    tune_interpreter()
    app = QApplication([sys.argv[0]])
    app.setApplicationName(APP_NAME)
    app.setQuitOnLastWindowClosed(False)
    apply_theme(app)
    try:
        with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(app)) as loop:
            return loop.run(run(args.out, profile))
    finally:
        if args.keep:
            print(f"demo profile kept in {profile}")  # noqa: T201
        else:
            shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
