"""The main window: shortcuts, layout and last session across restarts, search, export, import."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from agenvoy_desktop.core.error_memory import error_db_path
from agenvoy_desktop.core.export import ExportFormat
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.operations.timeline import KINDS
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.ui import chat_panel
from agenvoy_desktop.ui.async_runner import Operation
from agenvoy_desktop.ui.inspector.panel import InspectorPanel
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.sessions_panel import relative_time
from agenvoy_desktop.ui.theme import _dark_palette, colors
from tests.conftest import SECOND, T0, conversation, msg
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op


def export_to(path: Path) -> Callable[[str, ExportFormat, Callable[[Path | None], None]], None]:
    def choose(_sid: str, _fmt: ExportFormat, then: Callable[[Path | None], None]) -> None:
        then(path)

    return choose


def test_window_has_panels_toolbar_and_menus(
    make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    assert [window.side.tabText(i) for i in range(window.side.count())] == ["Timeline", "Memory"]
    assert isinstance(window.side.widget(1), InspectorPanel)
    toolbar_texts = [a.text() for a in window.findChildren(type(window.new_action))]
    for text in ("New", "Reset", "Remove", "Settings…"):
        assert text in toolbar_texts
    menus = [a.text() for a in window.menuBar().actions()]
    assert menus == ["&File", "&Edit", "&Session", "&View", "&Help"]
    assert not window.reset_action.isEnabled()  # no session yet


def test_shortcuts_new_search_focus(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.session_id is not None)
    qtbot.waitUntil(lambda: window.sessions.model.rowCount() == 1)
    assert window.chat.composer.hasFocus()
    qtbot.keyClick(window.chat.composer, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.sessions.search.hasFocus()
    qtbot.keyClick(window.sessions.search, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    assert window.chat.composer.hasFocus()
    assert window.reset_action.isEnabled()


def test_geometry_splitter_tab_and_last_session_survive_a_restart(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    first = seed(services, "first", conversation(["a", "b"]))
    second = seed(services, "second", conversation(["c", "d"], start=T0 - 100 * SECOND))
    window = make_window(services)
    assert window.session_id == second  # the most recent when nothing is remembered
    window.resize(790, 640)
    window.side.setCurrentIndex(1)
    window.splitter.setSizes([200, 500, 300])
    window.splitter.balance()  # as the next resize would: the chat keeps what it can of half
    sizes = window.splitter.sizes()
    window.select_session(first)
    window.close()

    again = make_window(services)
    assert again.size() == QSize(790, 640)
    assert again.side.currentIndex() == 1
    assert again.splitter.sizes() == sizes
    assert again.session_id == first
    assert (services.paths.config_dir / "window.ini").is_file()


def test_search_filters_by_title_and_by_content_including_cjk(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    alpha = seed(services, "Alpha", conversation(["我們討論記憶系統的設計", "好的"]))
    beta = seed(services, "Beta", conversation(["what is the weather", "sunny"]))
    window = make_window(services)
    model = window.sessions.model
    assert sorted(model.session_ids()) == sorted([alpha, beta])
    window.sessions.search.setText("記憶系統")
    qtbot.waitUntil(lambda: model.session_ids() == [alpha])
    assert model.data(model.index(0), model.SubtitleRole).startswith("1 match · ")
    window.sessions.search.setText("beta")
    qtbot.waitUntil(lambda: model.session_ids() == [beta])
    window.sessions.search.clear()
    assert sorted(model.session_ids()) == sorted([alpha, beta])


def test_rename_in_place_writes_the_title(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "old", conversation(["x", "y"]))
    window = make_window(services)
    model = window.sessions.model
    assert model.setData(model.index(0), "新的標題 renamed")
    qtbot.waitUntil(lambda: window.sessions.title_of(sid) == "新的標題 renamed")
    meta = services.storage.run_sync(services.store.archive.session, sid)
    assert meta is not None
    assert meta.title == "新的標題 renamed"


def test_timeline_lists_events_filters_and_reveals_old_messages(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    messages = conversation([f"entry {i}" for i in range(150)])
    sid = services.storage.run_sync(services.store.import_messages, messages, None, title="big")
    window = make_window(services)
    assert window.session_id == sid
    timeline = window.timeline
    qtbot.waitUntil(lambda: timeline.model.rowCount() == 151)  # 150 messages + the import
    assert timeline.filters["import"].text() == f"{KINDS['import']} (1)"
    timeline.filters["message"].setChecked(False)
    assert [e.kind for e in timeline.model.events()] == ["import"]
    assert timeline.filter_button.text() == f"{len(KINDS) - 1} of {len(KINDS)} kinds"
    timeline.show_kinds(set(KINDS))
    row = next(i for i, e in enumerate(timeline.model.events()) if e.text.endswith("entry 3"))
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) >= chat_panel.PAGE_MESSAGES)
    assert window.chat.view.widget_for(messages[3].id) is None  # not on the first page
    timeline.view.clicked.emit(timeline.model.index(row, 2))
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 150)
    assert window.chat.view.widget_for(messages[3].id) is not None
    assert [b.text() for b in window.chat.bubbles()] == [m.content for m in messages]


def test_export_markdown_and_json_from_the_menu(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))
    seed(services, "exports", [msg("user", "請記住這個", T0), msg("assistant", "好", T0 + SECOND)])
    window = make_window(services)
    window.choose_export_path = export_to(tmp_path / "out.md")
    window.export_md_action.trigger()
    qtbot.waitUntil((tmp_path / "out.md").exists)
    assert "請記住這個" in (tmp_path / "out.md").read_text("utf-8")
    window.choose_export_path = export_to(tmp_path / "out.json")
    window.export_json_action.trigger()
    qtbot.waitUntil((tmp_path / "out.json").exists)
    data = json.loads((tmp_path / "out.json").read_text("utf-8"))
    assert [m["content"] for m in data["messages"]] == ["請記住這個", "好"]
    qtbot.waitUntil(lambda: "Exported to" in window.statusBar().currentMessage())


def test_export_failure_is_a_readable_message(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))
    seed(services, "x", conversation(["a", "b"]))
    window = make_window(services)
    (tmp_path / "taken.md").mkdir()  # a folder where the file should go
    window.choose_export_path = export_to(tmp_path / "taken.md")
    window.export_md_action.trigger()
    qtbot.waitUntil(lambda: bool(window.errors.messages()))
    text = window.errors.current()
    assert text.startswith("Could not export the session:")
    assert "Traceback" not in text
    assert "taken.md" in text
    assert window.errors.isVisible()


def test_import_a_file_with_progress_opens_the_new_session(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    source = tmp_path / "old-chat.jsonl"
    lines = [
        json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"})
        for i in range(300)
    ]
    source.write_text("\n".join(lines), "utf-8")
    wait_op(qtbot, window.import_file(source))
    assert window.session_id is not None
    qtbot.waitUntil(lambda: window.sessions.title_of(window.session_id or "") == "old-chat")
    wait_op(qtbot, window.session_actions.indexing)  # the embedding follows in the background
    info = services.storage.run_sync(services.store.info, window.session_id)
    assert info.archived_messages == 300
    assert info.vectors == 300


def test_long_work_shows_progress_in_the_status_bar_and_cancels(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    release = asyncio.Event()

    async def work(op: Operation) -> None:
        op.report(0.25, "quarter")
        await release.wait()

    op = window.runner.run(work, what="work", progress="Working…")
    strip = window.progress
    assert strip.isHidden()  # nothing for quick work
    qtbot.waitUntil(strip.isVisible)
    assert strip.label.text() == "Working… quarter"
    assert strip.bar.value() == 250
    qtbot.mouseClick(strip.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: op.done)
    assert op.is_cancelled()
    assert op.error is None
    assert strip.isHidden()
    assert window.errors.messages() == []  # a cancel is not an error


def test_bad_import_file_names_the_file(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    bad = tmp_path / "broken.json"
    bad.write_text("[{]", "utf-8")
    op = window.import_file(bad)
    assert op is not None
    qtbot.waitUntil(lambda: op.done)
    assert "broken.json" in window.errors.current()
    assert window.sessions.model.rowCount() == 0


def test_demo_profile_fills_every_panel(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, demo_profile: AppPaths
) -> None:
    services = make_services(ScriptedChatModel([]), paths=demo_profile)
    window = make_window(services)
    titles = {window.sessions.title_of(s): s for s in window.sessions.model.session_ids()}
    assert len(titles) == 4

    def open_session(prefix: str) -> None:
        window.select_session(next(s for t, s in titles.items() if t.startswith(prefix)))

    def kinds() -> set[str]:
        return {e.kind for e in window.timeline.model.events()}

    open_session("Kyoto")
    # the page is shown a batch at a time: wait for its last message, not its chips
    qtbot.waitUntil(lambda: bool(window.chat.bubbles()) and window.chat.bubbles()[-1].interrupted)
    assert len(window.chat.chips()) == 2
    assert window.chat.chips()[0].hint
    assert window.chat.chips()[0].status() == "failed"
    qtbot.waitUntil(lambda: {"message", "tool", "errors"} <= kinds())
    open_session("記憶系統")
    qtbot.waitUntil(lambda: "summary" in kinds())
    assert sum(e.kind == "summary" for e in window.timeline.model.events()) == 2
    open_session("Weekly")
    qtbot.waitUntil(lambda: {"import", "compaction"} <= kinds())


def test_light_and_dark_follow_the_application_palette(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    light = app.palette()
    assert not colors(window.chat.palette()).dark
    try:
        app.setPalette(_dark_palette())
        qtbot.waitUntil(lambda: colors(window.chat.palette()).dark)
        assert colors(_dark_palette()).assistant_bubble in window.chat.styleSheet()
    finally:
        app.setPalette(light)
    qtbot.waitUntil(lambda: not colors(window.chat.palette()).dark)
    assert colors(light).assistant_bubble in window.chat.styleSheet()


def test_relative_time() -> None:
    now = T0 + 10 * 86_400 * SECOND
    assert relative_time(now - 10 * SECOND, now) == "just now"
    assert relative_time(now - 5 * 60 * SECOND, now) == "5 min ago"
    assert relative_time(0, now) == "never"
    assert relative_time(now - 400 * 86_400 * SECOND, now)[:2] in ("20",)


def test_main_window_type_is_exported() -> None:
    assert MainWindow.__name__ == "MainWindow"


SMOKE = """
import sys
import agenvoy_desktop.ui.app as app
from PySide6.QtCore import QTimer
show = app.MainWindow.show

def show_then_close(self):
    show(self)
    QTimer.singleShot(800, self.close)

app.MainWindow.show = show_then_close
raise SystemExit(app.main(["--data-dir", sys.argv[1]]))
"""


@pytest.mark.slow
def test_the_app_starts_prepares_models_and_quits_cleanly(tmp_path: Path) -> None:
    """``agenvoy-desktop`` without a command: first start, window, close, exit 0."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-c", SMOKE, str(tmp_path / "profile")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    log = (tmp_path / "profile" / "config" / "logs" / "agenvoy-desktop.log").read_text("utf-8")
    assert "window shown" in log
    assert "shutting down" in log
    assert "Traceback" not in log
    assert (tmp_path / "profile" / "config" / "window.ini").is_file()


def test_start_repairs_show_notices_and_index_missing_vectors(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, profile: AppPaths
) -> None:
    store = open_memory(profile, None)  # written without an embedding model: no vectors
    sid = store.create_session("old")
    store.append(sid, conversation([f"message number {i}" for i in range(100)]))
    store.close()
    error_db_path(profile).write_bytes(b"not a database " * 100)
    services = make_services(ScriptedChatModel([]))
    assert services.missing_vectors() == 100  # more than start-up embeds itself
    window = make_window(services)
    qtbot.waitUntil(lambda: services.missing_vectors() == 0)
    info = services.storage.run_sync(services.store.info, sid)
    assert info.vectors == 100
    assert any("error memory" in message for message in window.errors.messages())
