"""The session settings dialog, the menu entry that opens it and the Context tab that shows them."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.session_settings import (
    SETTINGS_FILE,
    SessionSettings,
    session_settings,
    store_session_settings,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.session_settings_dialog import PRESETS, SessionSettingsDialog
from tests.conftest import conversation
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed

PIRATE = "You are a pirate assistant. Answer like a pirate."


def stored(services: AppServices, sid: str) -> SessionSettings:
    return services.storage.run_sync(session_settings, services.store, sid)


def open_dialog(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, sid: str
) -> SessionSettingsDialog:
    dialog = SessionSettingsDialog(services, runner, sid, "notes")
    qtbot.addWidget(dialog)
    dialog.open()
    qtbot.waitUntil(lambda: dialog.loaded is not None)
    return dialog


def save(qtbot: QtBot, dialog: SessionSettingsDialog) -> None:
    with qtbot.waitSignal(dialog.finished):
        dialog.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    assert dialog.result() == QDialog.DialogCode.Accepted


def test_dialog_round_trip(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "notes", conversation(["hi", "hello"]))
    dialog = open_dialog(qtbot, services, runner, sid)
    assert dialog.prompt_edit.toPlainText() == ""
    assert dialog.prompt_edit.placeholderText() == DEFAULT_SYSTEM_PROMPT
    assert dialog.tools_box.isChecked()
    assert "Default system prompt" in dialog.state_label.text()
    dialog.prompt_edit.setPlainText(PIRATE)
    dialog.tools_box.setChecked(False)
    assert "Custom system prompt" in dialog.state_label.text()
    save(qtbot, dialog)
    assert stored(services, sid) == SessionSettings(PIRATE, tools=False)

    again = open_dialog(qtbot, services, runner, sid)
    assert again.prompt_edit.toPlainText() == PIRATE
    assert not again.tools_box.isChecked()
    again.reset_button.click()
    assert again.prompt_edit.toPlainText() == ""
    again.tools_box.setChecked(True)
    save(qtbot, again)
    assert stored(services, sid) == SessionSettings()


def test_presets_fill_the_editor_and_the_default_text_counts_as_default(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "notes", conversation(["hi", "hello"]))
    dialog = open_dialog(qtbot, services, runner, sid)
    teacher = next(
        i
        for i in range(dialog.preset_combo.count())
        if dialog.preset_combo.itemText(i) == "Teacher"
    )
    dialog.preset_combo.setCurrentIndex(teacher)
    dialog.preset_combo.activated.emit(teacher)
    assert dialog.prompt_edit.toPlainText() == dict(PRESETS)["Teacher"]
    dialog.prompt_edit.setPlainText(DEFAULT_SYSTEM_PROMPT + "\n")
    assert dialog.form() == SessionSettings()
    dialog.reject()


def test_a_damaged_file_is_reported_and_saving_replaces_it(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "notes", conversation(["hi", "hello"]))
    (services.store.folder(sid) / SETTINGS_FILE).write_bytes(b"\xff\x00 not json")
    dialog = open_dialog(qtbot, services, runner, sid)
    assert "cannot be read" in dialog.status.text()
    assert dialog.form() == SessionSettings()
    dialog.prompt_edit.setPlainText("Be brief.")
    save(qtbot, dialog)
    assert stored(services, sid) == SessionSettings("Be brief.")


def test_context_tab_shows_the_persona_and_reloads_after_a_save(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "notes", conversation(["hi", "hello"]))
    panel = InspectorPanel(services, runner)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_session(sid)
    panel.show_tab("context")
    tab = panel.context_tab
    qtbot.waitUntil(lambda: tab.view is not None)
    assert "Default system prompt" in tab.summary_label.text()
    assert tab.view is not None
    assert tab.view.messages[0]["content"].startswith(DEFAULT_SYSTEM_PROMPT)
    assert tab.view.tools

    dialog = tab.edit_settings()
    assert dialog is not None
    qtbot.waitUntil(lambda: dialog.loaded is not None)
    dialog.prompt_edit.setPlainText(PIRATE)
    dialog.tools_box.setChecked(False)
    tab.view = None
    save(qtbot, dialog)
    qtbot.waitUntil(lambda: tab.view is not None)  # the save's broadcast reloaded the tab
    view = tab.view
    assert view is not None
    assert view.messages[0]["content"].startswith(PIRATE)
    assert view.settings == SessionSettings(PIRATE, tools=False)
    assert view.tools == []
    label = tab.summary_label.text()
    assert "Custom system prompt" in label
    assert "tools and memory search off" in label
    assert "System prompt · custom" in tab.browser.toPlainText()
    assert PIRATE in tab.browser.toPlainText()


def test_context_tab_without_a_chat_model_uses_the_session_prompt(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(None)
    sid = seed(services, "notes", conversation(["hi", "hello"]))
    services.storage.run_sync(store_session_settings, services.store, sid, SessionSettings(PIRATE))
    panel = InspectorPanel(services, runner)
    qtbot.addWidget(panel)
    panel.set_session(sid)
    panel.show_tab("context")
    tab = panel.context_tab
    qtbot.waitUntil(lambda: tab.view is not None)
    assert tab.view is not None
    assert tab.view.messages[0]["content"].startswith(PIRATE)
    assert "Custom system prompt" in tab.summary_label.text()


def test_session_menu_opens_the_settings(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "notes", conversation(["hi", "hello"]))
    window = make_window(services)
    menu = window.sessions.menu_for(sid)
    entry = next(a for a in menu.actions() if a.data() == "settings")
    assert entry.text() == "Session settings…"
    entry.trigger()
    dialog = window.findChild(SessionSettingsDialog)
    assert dialog is not None
    assert dialog.isVisible()
    assert dialog.session_id == sid
    assert "notes" in dialog.windowTitle()
    qtbot.waitUntil(lambda: dialog.loaded is not None)
    dialog.reject()
