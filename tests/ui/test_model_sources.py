"""The switcher's More models menu leads to the Models tab's actions; a long row is elided."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from agenvoy_desktop.llm.discovery import DiscoveredModel
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.model_switcher import BIGGER_MODEL_HINT, MORE_MODELS, ModelSwitcher
from tests.scripted_chat import ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama
from tests.ui.conftest import ServicesFactory, WindowFactory


def switcher_of(window: MainWindow) -> ModelSwitcher:
    (switcher,) = window.chat.findChildren(ModelSwitcher)
    return switcher


def choose(switcher: ModelSwitcher, name: str) -> None:
    action = next(a for a in switcher.more_menu.actions() if a.objectName() == name)
    action.trigger()


def test_the_menu_names_where_models_come_from_and_what_a_bigger_one_changes(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    switcher = switcher_of(window)
    texts = [a.text() for a in switcher.more_menu.actions() if a.text()]
    assert texts == [text for _name, text, _tip in MORE_MODELS]
    hint = next(a for a in switcher.more_menu.actions() if a.objectName() == "hint")
    assert BIGGER_MODEL_HINT in hint.defaultWidget().text()  # type: ignore[attr-defined]
    assert switcher.more_button.toolTip() == BIGGER_MODEL_HINT


def test_find_shows_the_models_tab_and_looks(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    tab = window.inspector.models_tab
    looked: list[bool] = []

    def discover() -> list[DiscoveredModel]:
        looked.append(True)
        return []

    tab.discover = discover
    window.set_pane_shown(1 + 1, False)  # the side panel hidden: the entry brings it back
    choose(switcher_of(window), "find")
    assert window.side.currentWidget() is window.inspector
    assert window.inspector.current_tab() is tab
    assert window.splitter.pane_shown(2)
    qtbot.waitUntil(lambda: bool(looked) and tab.search_button.isEnabled())


def test_connect_opens_the_add_endpoint_dialog(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    choose(switcher_of(window), "connect")
    dialog = window.inspector.models_tab.endpoints_box.dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    dialog.reject()


def test_add_file_catalogues_the_chosen_gguf_and_the_switcher_lists_it(
    qtbot: QtBot,
    make_services: ServicesFactory,
    make_window: WindowFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gguf = write_tiny_llama(tmp_path / "bigger.gguf")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *_a: (str(gguf), "")))
    window = make_window(make_services(ScriptedChatModel([])))
    switcher = switcher_of(window)
    before = switcher.combo.count()
    choose(switcher, "add_file")
    qtbot.waitUntil(lambda: any(e.path == gguf for e in switcher.entries))
    assert switcher.combo.count() > before


def test_a_long_row_is_elided_in_a_narrow_chat_at_a_large_font(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    model = ScriptedChatModel([])
    model.name = "qwen2.5-coder-0.5b-instruct-q4_k_m-with-a-long-name"
    services = make_services(model)
    services.chat_choice = "/models/qwen.gguf"  # shown as a row of its own
    holder = QWidget()
    qtbot.addWidget(holder)
    font = QFont(holder.font())
    font.setPointSize(13)
    holder.setFont(font)
    switcher = ModelSwitcher(services, runner)
    QHBoxLayout(holder).addWidget(switcher)
    holder.resize(420, 80)
    holder.show()
    qtbot.waitUntil(lambda: switcher.combo.count() == 1)
    qtbot.waitUntil(lambda: switcher.sampling_button.geometry().right() <= switcher.width())
    combo = switcher.combo
    full = combo.fontMetrics().horizontalAdvance(combo.currentText())
    assert combo.width() < full  # shrunk with the chat: the text is elided, not cut
    assert switcher.more_button.isVisible()
    assert switcher.more_button.geometry().right() <= switcher.width()
