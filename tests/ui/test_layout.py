"""The window's layout at small and large sizes, collapsing panes, focus after dialogs,
the first-start progress bar, the theme and font size, and the sessions list during undo."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QMessageBox, QSplitter, QWidget
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import AppearanceSettings, load_settings
from agenvoy_desktop.ui import app as app_module
from agenvoy_desktop.ui.async_runner import WeightedProgress
from agenvoy_desktop.ui.main_window import STATE_FILE, MainWindow
from agenvoy_desktop.ui.sessions_panel import SessionListModel
from agenvoy_desktop.ui.theme import apply_appearance, current_theme, is_dark
from agenvoy_desktop.ui.window_layout import MIN_SESSIONS, MIN_SIDE, SESSIONS, SIDE
from tests.conftest import conversation
from tests.scripted_chat import ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama
from tests.ui.conftest import ServicesFactory, WindowFactory, seed


def chat_share(window: MainWindow) -> float:
    return window.chat.width() / window.width()


def settle(qtbot: QtBot, window: MainWindow, width: int, height: int) -> None:
    window.resize(width, height)
    qtbot.waitUntil(lambda: window.width() == width and window.chat.width() > 0)
    qtbot.wait(20)  # the splitter lays out on the resize that follows


def test_a_first_window_fits_its_screen(
    make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """No saved geometry: the window fits the screen (offscreen: 800 x 800), centred."""
    window = make_window(make_services(ScriptedChatModel([])))
    free = window.screen().availableGeometry()
    assert window.width() <= free.width()
    assert window.height() <= free.height()
    assert free.contains(window.geometry())


@pytest.mark.parametrize(("width", "height"), [(1400, 900), (900, 600)])
def test_the_chat_keeps_half_the_window(
    qtbot: QtBot,
    make_window: WindowFactory,
    make_services: ServicesFactory,
    width: int,
    height: int,
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    settle(qtbot, window, width, height)
    assert chat_share(window) >= 0.5
    assert window.sessions.width() >= MIN_SESSIONS
    assert window.side.width() >= MIN_SIDE


def test_side_panes_give_way_then_take_their_width_back(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    settle(qtbot, window, 1400, 900)
    wide = window.splitter.sizes()
    settle(qtbot, window, 900, 600)
    assert window.splitter.sizes()[SIDE] < wide[SIDE]  # the side panel gave way first
    settle(qtbot, window, 1400, 900)
    assert window.splitter.sizes() == wide


def test_collapse_and_restore_panes_survive_a_restart(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    settle(qtbot, window, 1000, 700)
    before = window.chat.width()
    window.side_toggle.trigger()
    assert window.side.isHidden()
    assert not window.side_toggle.isChecked()
    qtbot.waitUntil(lambda: window.chat.width() > before)
    window.sessions_toggle.trigger()
    assert window.sessions.isHidden()
    assert "Ctrl+Shift+M" in window.side_toggle.shortcut().toString()
    assert "Ctrl+Shift+S" in window.sessions_toggle.shortcut().toString()
    window.close()

    again = make_window(services)
    assert again.side.isHidden()
    assert again.sessions.isHidden()
    assert not again.side_toggle.isChecked()
    again.side_toggle.trigger()
    again.sessions_toggle.trigger()
    settle(qtbot, again, 1000, 700)  # the offscreen screen is 800 px wide: restored smaller
    qtbot.waitUntil(lambda: again.side.width() >= MIN_SIDE and chat_share(again) >= 0.5)
    assert again.sessions.width() >= MIN_SESSIONS


def test_hiding_the_pane_with_the_keyboard_in_it_moves_focus_to_the_composer(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.sessions.focus_search()
    window.set_pane_shown(SESSIONS, False)
    assert window.chat.composer.hasFocus()


def test_an_older_layout_that_squeezes_the_chat_is_corrected(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """A window.ini from before the minimums: the side panel took most of the window."""
    services = make_services(ScriptedChatModel([]))
    old = QSplitter(Qt.Orientation.Horizontal)
    for _ in range(3):
        old.addWidget(QWidget())
    old.resize(888, 500)
    old.setSizes([40, 150, 698])
    state = QSettings(str(services.paths.config_dir / STATE_FILE), QSettings.Format.IniFormat)
    state.setValue("splitter", old.saveState())
    state.sync()
    old.deleteLater()
    window = make_window(services)
    settle(qtbot, window, 900, 600)
    assert chat_share(window) >= 0.5
    assert window.sessions.width() >= MIN_SESSIONS
    assert window.side.width() >= MIN_SIDE


# -- focus after dialogs ----------------------------------------------------------------------
def test_focus_returns_to_the_composer_after_every_dialog(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.sessions.focus_search()

    dialog = window.open_settings()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    inner = QMessageBox(dialog)  # a question asked over the settings goes back to them
    inner.setText("Discard?")
    inner.open()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is inner)
    inner.accept()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    inner.deleteLater()
    dialog.reject()
    qtbot.waitUntil(window.chat.composer.hasFocus)
    assert QApplication.activeWindow() is window

    box = QMessageBox(window)
    box.setText("Sure?")
    box.open()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is box)
    box.accept()
    qtbot.waitUntil(window.chat.composer.hasFocus)
    # a shortcut works at once, without clicking the window first
    qtbot.keyClick(window.chat.composer, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.sessions.search.hasFocus()
    box.deleteLater()


def test_focus_returns_to_the_composer_after_renaming_in_place(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    seed(services, "old title", conversation(["a", "b"]))
    window = make_window(services)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.rename_action.trigger()
    editor = QApplication.focusWidget()
    assert editor is not None
    assert window.sessions.list.isAncestorOf(editor)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(window.chat.composer.hasFocus)


# -- first-start progress ---------------------------------------------------------------------
def record(seen: list[float], fraction: float, _text: str) -> None:
    seen.append(fraction)


def test_weighted_progress_only_moves_forward_in_any_order() -> None:
    parts = {"embedding": ("Embedding model", 90.0), "chat": ("Chat model", 490.0)}
    steps = [("embedding", f / 10) for f in range(11)] + [("chat", f / 10) for f in range(11)]
    steps += [("embedding", 0.33), ("chat", 0.0), ("chat", -1.0), ("embedding", 2.0)]
    rng = random.Random(7)
    for _ in range(50):
        rng.shuffle(steps)
        seen: list[float] = []
        bar = WeightedProgress(functools.partial(record, seen), parts)
        for name, fraction in steps:
            bar.part(name)(fraction, "")
        assert all(b >= a for a, b in itertools.pairwise(seen)), seen
        assert 0.0 <= seen[-1] <= 1.0
    bar = WeightedProgress(functools.partial(record, []), parts)
    bar.part("embedding")(1.0, "")
    assert bar.fraction == pytest.approx(90 / 580)  # the share is the bytes' share
    bar.part("chat")(0.5, "assembling")
    assert bar.fraction == pytest.approx((90 + 245) / 580)


def test_first_start_reports_both_preparations_on_one_forward_bar(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The start gives each preparation its own part; reports in any order never go back."""
    reports: list[tuple[float, str]] = []

    class FakeOp:
        def report(self, fraction: float, text: str = "") -> None:
            reports.append((fraction, text))

        def is_cancelled(self) -> bool:
            return False

    def fake_start(_paths: AppPaths, **kwargs: Any) -> str:
        embed, chat = kwargs["progress"], kwargs["chat_progress"]
        for report, fraction in [(embed, 0.35), (embed, 0.33), (chat, 0.1), (embed, 1.0)]:
            report(fraction, "")
        chat(0.05, "starter part 1")
        chat(1.0, "starter model ready")
        return "services"

    monkeypatch.setattr(AppServices, "start", staticmethod(fake_start))
    result: object = app_module._prepare_and_open(tmp_path, FakeOp())  # type: ignore[arg-type]
    assert result == "services"
    fractions = [f for f, _ in reports]
    assert all(b >= a for a, b in itertools.pairwise(fractions)), fractions
    assert fractions[-1] == pytest.approx(1.0)
    assert reports[0][1] == "Embedding model"
    assert reports[-1][1] == "Chat model: starter model ready"


# -- theme and font size ----------------------------------------------------------------------
@pytest.fixture
def appearance(qapp: QApplication) -> Iterator[None]:
    """Puts the application's style, palette and font back after the test."""
    style, palette, font = qapp.style().name(), qapp.palette(), QFont(qapp.font())
    yield
    apply_appearance(qapp, AppearanceSettings())
    qapp.setStyle(style)
    qapp.setPalette(palette)
    qapp.setFont(font)


@pytest.mark.usefixtures("appearance")
def test_theme_and_font_size_apply_at_once_from_the_settings(
    qtbot: QtBot, qapp: QApplication, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    dialog = window.open_settings("Appearance")
    assert dialog.tabs.tabText(dialog.tabs.currentIndex()) == "Appearance"
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData("dark"))
    dialog.font_spin.setValue(15)
    dialog.accept()
    assert current_theme(qapp) == "dark"
    assert is_dark(qapp.palette())
    assert qapp.font().pointSize() == 15
    qtbot.waitUntil(lambda: window.chat.font().pointSize() == 15)
    saved = load_settings(services.paths.settings_file).appearance
    assert saved == AppearanceSettings(theme="dark", font_size=15)

    apply_appearance(qapp, AppearanceSettings(theme="light"))
    assert not is_dark(qapp.palette())
    assert qapp.font().pointSize() != 15  # 0: the platform's size again
    apply_appearance(qapp, AppearanceSettings(theme="system"))
    assert current_theme(qapp) == "system"


# -- the sessions list during an undo window --------------------------------------------------
def subtitle(window: MainWindow, sid: str) -> str:
    model = window.sessions.model
    row = model.row_of(sid)
    assert row is not None
    return str(model.data(model.index(row), SessionListModel.SubtitleRole))


def test_the_list_shows_a_reset_at_once_and_its_undo(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "chat", conversation(["a", "b", "c", "d"]))
    window = make_window(services, undo_ms=60_000)
    assert "4 messages" in subtitle(window, sid)
    op = window.reset_session(sid)
    assert op is not None
    assert "0 messages" in subtitle(window, sid)
    assert window.undo(op)
    assert "4 messages" in subtitle(window, sid)


def test_the_list_keeps_a_finished_reset_until_it_reloads(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "chat", conversation(["a", "b"]))
    other = seed(services, "other", conversation(["x", "y"]))
    window = make_window(services, undo_ms=50)
    done: list[object] = []
    window.pending.executed.connect(done.append)
    window.reset_session(sid)
    assert "0 messages" in subtitle(window, sid)
    qtbot.waitUntil(lambda: bool(done))
    assert "0 messages" in subtitle(window, sid)
    assert "2 messages" in subtitle(window, other)
    window.remove_session(other)
    assert window.sessions.model.row_of(other) is None
    qtbot.waitUntil(lambda: len(done) == 2)
    window.sessions.refresh()
    qtbot.waitUntil(lambda: window.sessions.model.session_ids() == [sid])
    assert "0 messages" in subtitle(window, sid)


def test_a_message_delete_lowers_the_count_until_undone(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "chat", conversation(["a", "b", "c", "d"]))
    window = make_window(services, undo_ms=60_000)
    op = window.pending.schedule("delete_message", sid, "chat", message_id="m1")
    assert "3 messages" in subtitle(window, sid)
    window.pending.undo(op)
    assert "4 messages" in subtitle(window, sid)


def test_the_models_tab_is_readable_at_900_by_600(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    settle(qtbot, window, 900, 600)
    window.side.setCurrentIndex(1)
    window.inspector.show_tab("models")
    tab = window.inspector.models_tab
    qtbot.waitUntil(lambda: tab.view is not None)
    tab.add_file(write_tiny_llama(tmp_path / "a-model-with-a-rather-long-file-name-q4_k_m.gguf"))
    qtbot.waitUntil(lambda: tab.catalogue_table.rowCount() == 1)
    tab.catalogue_table.selectRow(0)
    qtbot.waitUntil(lambda: "llama" in tab.entry_detail.text())
    table = tab.catalogue_table
    shown = [i for i in range(table.columnCount()) if not table.isColumnHidden(i)]
    assert [table.horizontalHeaderItem(i).text() for i in shown] == ["Name", "Role", "State"]
    assert table.columnWidth(0) >= 80  # the name, elided in the middle, tooltip in full
    assert sum(table.columnWidth(i) for i in shown) <= table.viewport().width()
    detail = tab.entry_detail
    assert detail.width() >= tab.width() - 60  # stacked under the table, not a sliver beside it
    assert detail.horizontalScrollBar().maximum() == 0  # long paths wrap: nothing cut off
