"""README screenshots of the whole window, no model needed.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/layout_screenshots.py [OUT]

Builds the demo profile of ``scripts/demo_profile.py`` in a temporary folder
(never the real profile) with the tests' hashing embedder and a scripted chat
model, opens the window on it and saves, into OUT (default
``docs/screenshots``):

- ``window-1400x900.png`` and ``window-900x600.png`` (light theme),
- ``window-900x600-models.png``: the inspector's Models tab at the small size,
- ``window-1400x900-dark.png`` and ``window-900x600-dark.png``.

With ``--all`` it also saves 1920 × 1080 in both themes and every
inspector tab at each size (``window-WxH[-dark]-<tab>.png``): the pictures
to look at when checking that nothing is clipped.

The theme is set explicitly (Light, then Dark) so the pictures do not depend
on the desktop the script runs on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "scripts"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import qasync  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from agenvoy_desktop.agent.services import AppServices  # noqa: E402
from agenvoy_desktop.paths import AppPaths  # noqa: E402
from agenvoy_desktop.settings import AppearanceSettings  # noqa: E402
from agenvoy_desktop.ui.app import APP_NAME  # noqa: E402
from agenvoy_desktop.ui.async_runner import AsyncRunner  # noqa: E402
from agenvoy_desktop.ui.main_window import MainWindow  # noqa: E402
from agenvoy_desktop.ui.theme import apply_appearance, apply_theme  # noqa: E402

SIZES = ((1400, 900), (900, 600))
ALL_SIZES = ((1920, 1080), (1400, 900), (900, 600))
SESSION = "記憶系統"
"""The demo session the pictures show (summary, recall, tool calls, CJK text)."""


def pump(condition: Callable[[], object] = lambda: True, timeout: float = 15.0) -> None:
    """Process Qt (and so asyncio) events until *condition* holds, then a little more."""
    app = QApplication.instance()
    assert app is not None
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the window did not reach the state to photograph")
        app.processEvents()
        time.sleep(0.005)
    for _ in range(30):
        app.processEvents()
        time.sleep(0.002)


def build_profile(folder: Path) -> AppPaths:
    """The demo sessions, embedded with the tests' hashing embedder."""
    from demo_profile import build_demo_profile  # type: ignore[import-not-found]

    from tests.fakes import HashingEmbedder

    paths: AppPaths = build_demo_profile(folder, embedder=HashingEmbedder())
    return paths


def open_window(paths: AppPaths) -> tuple[MainWindow, AsyncRunner, AppServices]:
    from tests.fakes import HashingEmbedder
    from tests.scripted_chat import ScriptedChatModel

    services = AppServices.open(paths, embedder=HashingEmbedder(), chat_model=ScriptedChatModel([]))
    runner = AsyncRunner()
    window = MainWindow(services, runner)
    window.show()
    start = window.start()
    pump(lambda: start.done)
    sessions = window.sessions
    sid = next(s for s in sessions.model.session_ids() if sessions.title_of(s).startswith(SESSION))
    window.select_session(sid)
    pump(lambda: not runner.operations())
    return window, runner, services


def add_model(window: MainWindow) -> None:
    """A small GGUF in the catalogue, selected, so the Models tab shows its details."""
    from tests.tiny_gguf import write_tiny_llama

    folder = window.services.paths.data_dir / "downloads"
    folder.mkdir(parents=True, exist_ok=True)
    window.inspector.show_tab("models")
    tab = window.inspector.models_tab
    pump(lambda: tab.view is not None)
    tab.add_file(write_tiny_llama(folder / "tinyllama-1.1b-chat-q4_k_m.gguf"))
    pump(lambda: tab.catalogue_table.rowCount() >= 1)
    tab.catalogue_table.selectRow(0)
    pump()
    catalogue = tab.catalogue_table.parentWidget()  # its group box: title, table, details
    if catalogue is not None:
        tab.scroll_area.verticalScrollBar().setValue(catalogue.y())


def shoot(window: MainWindow, out: Path, name: str, size: tuple[int, int]) -> Path:
    window.resize(*size)
    pump(lambda: not window.runner.operations())
    path = out / f"{name}.png"
    window.grab().save(str(path))
    print(path)  # noqa: T201
    return path


def shoot_all(window: MainWindow, out: Path) -> list[Path]:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    saved: list[Path] = []
    for theme in ("light", "dark"):
        apply_appearance(app, AppearanceSettings(theme=theme))
        suffix = "" if theme == "light" else "-dark"
        window.side.setCurrentIndex(0)
        for width, height in SIZES:
            saved.append(shoot(window, out, f"window-{width}x{height}{suffix}", (width, height)))
        if theme == "light":
            window.side.setCurrentIndex(1)
            add_model(window)
            saved.append(shoot(window, out, "window-900x600-models", (900, 600)))
    return saved


def shoot_every_tab(window: MainWindow, out: Path) -> list[Path]:
    """Each size, both themes, the timeline and every inspector tab."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    saved: list[Path] = []
    for theme in ("light", "dark"):
        apply_appearance(app, AppearanceSettings(theme=theme))
        suffix = "" if theme == "light" else "-dark"
        for width, height in ALL_SIZES:
            window.side.setCurrentIndex(0)
            name = f"window-{width}x{height}{suffix}"
            saved.append(shoot(window, out, name, (width, height)))
            window.side.setCurrentIndex(1)
            for tab in window.inspector.tab_names():
                window.inspector.show_tab(tab)
                saved.append(shoot(window, out, f"{name}-{tab}", (width, height)))
    return saved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--all", action="store_true", help="every size, theme and tab")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="agenvoy-shots-"))
    app = QApplication([sys.argv[0]])
    app.setApplicationName(APP_NAME)
    apply_theme(app)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    asyncio.events._set_running_loop(loop)  # the window's work runs while pump() spins Qt
    try:
        window, runner, services = open_window(build_profile(home / "demo"))
        try:
            (shoot_every_tab if args.all else shoot_all)(window, args.out)
        finally:
            task = asyncio.ensure_future(runner.shutdown())
            pump(task.done)
            window.close()
            services.close()
    finally:
        asyncio.events._set_running_loop(None)
        loop.close()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
