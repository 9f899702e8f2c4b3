"""The settings dialog: values round-trip through settings.json; bad values are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm import e5_convert
from agenvoy_desktop.llm.catalogue import E5_NAME
from agenvoy_desktop.llm.model_prep import prepare_e5_model
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.settings import AppearanceSettings, Settings, load_settings
from agenvoy_desktop.ui import settings_dialog
from agenvoy_desktop.ui.elided import ElidedLabel
from agenvoy_desktop.ui.settings_dialog import MIB, SettingsDialog, SettingsForm, validate_form
from tests.fakes import HashingEmbedder
from tests.llm.test_e5_convert import pack
from tests.scripted_chat import ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama


@pytest.fixture
def services(paths: AppPaths) -> Iterator[AppServices]:
    opened = AppServices.open(paths, embedder=HashingEmbedder(64), chat_model=ScriptedChatModel([]))
    yield opened
    opened.close()


def make_dialog(qtbot: QtBot, services: AppServices) -> SettingsDialog:
    dialog = SettingsDialog(services)
    qtbot.addWidget(dialog)
    dialog.open()
    return dialog


def click_ok(dialog: SettingsDialog) -> None:
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()


def test_dialog_shows_current_settings(qtbot: QtBot, services: AppServices) -> None:
    services.settings.memory.window_messages = 24
    services.settings.allowed_folders = ["/tmp"]
    dialog = make_dialog(qtbot, services)
    assert dialog.window_spin.value() == 24
    assert dialog.history_spin.value() == pytest.approx(5.0)
    assert dialog.idle_spin.value() == 300
    assert dialog.allowed_folders() == ["/tmp"]
    assert dialog.chat_picker.value() == ""
    assert dialog.form() == SettingsForm.from_settings(services.settings)


def test_changes_persist_across_a_restart(qtbot: QtBot, paths: AppPaths, tmp_path: Path) -> None:
    allowed = tmp_path / "notes"
    allowed.mkdir()
    services = AppServices.open(
        paths, embedder=HashingEmbedder(64), chat_model=ScriptedChatModel([])
    )
    dialog = make_dialog(qtbot, services)
    dialog.window_spin.setValue(8)
    dialog.history_spin.setValue(2.5)
    dialog.idle_spin.setValue(600)
    dialog.threads_spin.setValue(3)
    dialog.context_spin.setValue(8192)
    dialog.temperature_spin.setValue(0.3)
    assert dialog.load_at_start_check.isChecked()  # on by default
    dialog.load_at_start_check.setChecked(False)
    assert dialog.read_ahead_check.isChecked()  # on by default
    dialog.read_ahead_check.setChecked(False)
    assert dialog.add_folder(str(allowed))
    assert not dialog.add_folder(str(allowed) + "/")  # listed once
    with qtbot.waitSignal(dialog.accepted):
        click_ok(dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert services.agent is not None
    assert services.agent.config.window_messages == 8
    assert services.agent.config.read_ahead is False  # at once
    services.close()

    reopened = AppServices.open(paths, embedder=HashingEmbedder(64))
    try:
        settings = reopened.settings
        assert settings.memory.window_messages == 8
        assert settings.memory.max_history_bytes == int(2.5 * MIB)
        assert settings.memory.summary_idle_seconds == 600
        assert settings.models.threads == 3
        assert settings.models.context_size == 8192
        assert settings.models.temperature == pytest.approx(0.3)
        assert settings.models.load_at_start is False
        assert settings.models.read_ahead is False
        assert settings.allowed_folders == [str(allowed.resolve())]
    finally:
        reopened.close()


def test_remove_allowed_folder(qtbot: QtBot, services: AppServices, tmp_path: Path) -> None:
    services.settings.allowed_folders = [str(tmp_path)]
    dialog = make_dialog(qtbot, services)
    assert not dialog.remove_button.isEnabled()
    dialog.folder_list.item(0).setSelected(True)
    assert dialog.remove_button.isEnabled()
    dialog.remove_button.click()
    assert dialog.allowed_folders() == []
    click_ok(dialog)
    saved = json.loads(services.paths.settings_file.read_text("utf-8"))
    assert saved["allowed_folders"] == []


def test_bad_values_are_refused_with_clear_messages(
    qtbot: QtBot, services: AppServices, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    dialog = make_dialog(qtbot, services)
    dialog.window_spin.setValue(4)
    dialog.folder_list.addItem(str(gone))
    dialog.context_spin.setValue(1024)
    dialog.answer_spin.setValue(1024)
    dialog.chat_picker.set_value(str(tmp_path / "missing.gguf"))
    click_ok(dialog)
    assert dialog.result() != QDialog.DialogCode.Accepted
    assert dialog.isVisible()
    text = dialog.errors.text()
    assert f"Allowed folder {gone} does not exist any more" in text
    assert "The answer limit (1,024 tokens) leaves no room" in text
    assert f"the file {tmp_path / 'missing.gguf'} does not exist" in text
    assert not services.paths.settings_file.exists()  # nothing saved
    assert services.settings.memory.window_messages == 16  # nothing applied


def test_a_model_file_path_is_accepted(qtbot: QtBot, services: AppServices, tmp_path: Path) -> None:
    model = write_tiny_llama(tmp_path / "mine.gguf")
    dialog = make_dialog(qtbot, services)
    dialog.chat_picker.set_value(str(model))
    click_ok(dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert services.settings.models.chat_model == str(model)


def test_a_failed_save_keeps_the_dialog_open(
    qtbot: QtBot, services: AppServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse() -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(services, "save_settings", refuse)
    dialog = make_dialog(qtbot, services)
    dialog.window_spin.setValue(10)
    click_ok(dialog)
    assert "could not be saved" in dialog.errors.text()
    assert "Permission denied" in dialog.errors.text()
    assert services.settings.memory.window_messages == 16  # rolled back


def test_open_data_folder(
    qtbot: QtBot, services: AppServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[QUrl] = []
    monkeypatch.setattr(settings_dialog.QDesktopServices, "openUrl", opened.append)
    dialog = make_dialog(qtbot, services)
    dialog.open_folder(services.paths.config_dir)
    assert opened == [QUrl.fromLocalFile(str(services.paths.config_dir))]


def test_a_long_profile_path_is_elided_and_leaves_the_labels_whole(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """A long home folder (a long user name) widened the folder row until the form's
    labels ("Memory and settings:") were cut to half: the path is elided in the middle
    instead, whole in its tooltip."""
    paths = app_paths(tmp_path / ("a-very-long-folder-name-" * 8) / "profile")
    opened = AppServices.open(paths, embedder=HashingEmbedder(64), chat_model=ScriptedChatModel([]))
    try:
        dialog = make_dialog(qtbot, opened)
        tabs = dialog.tabs
        tabs.setCurrentIndex([tabs.tabText(i) for i in range(tabs.count())].index("Folders"))
        qtbot.waitUntil(dialog.isVisible)
        labels = [
            w
            for w in dialog.findChildren(QLabel)
            if w.isVisible() and w.text() == "Memory and settings:"
        ]
        assert labels
        assert labels[0].width() >= labels[0].sizeHint().width()
        config = str(paths.config_dir)
        shown = [w for w in dialog.findChildren(ElidedLabel) if w.toolTip() == config]
        assert shown
        assert shown[0].text() == config  # the whole path; elided on screen only
        assert shown[0].width() < shown[0].fontMetrics().horizontalAdvance(config)
    finally:
        opened.close()


def test_validate_form_ranges(tmp_path: Path) -> None:
    form = SettingsForm.from_settings(Settings())
    assert validate_form(form) == []
    form.window_messages = 1
    form.max_history_bytes = 1000
    form.temperature = 3.0
    form.allowed_folders = ["relative/dir", str(tmp_path / "file.txt")]
    (tmp_path / "file.txt").write_text("x")
    form.embedding_model = "no-such-model"
    errors = validate_form(form)
    assert "The window size must be between 2 and 256 (it is 1)." in errors
    assert any(e.startswith("The history limit (MiB) must be between 0.25") for e in errors)
    assert any(e.startswith("The temperature must be between 0 and 2") for e in errors)
    assert "Allowed folder “relative/dir” is not a full path." in errors
    assert any("is a file, not a folder" in e for e in errors)
    assert any("“no-such-model” is neither a model in the catalogue" in e for e in errors)
    assert not any("no-such-model" in e for e in validate_form(form, {"no-such-model"}))


def test_appearance_page_round_trips_and_old_files_load(
    qtbot: QtBot, services: AppServices
) -> None:
    dialog = make_dialog(qtbot, services)
    assert "Appearance" in [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())]
    assert dialog.theme_combo.currentData() == "system"
    assert dialog.font_spin.text() == "System default"
    assert dialog.form().font_size == 0
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData("light"))
    dialog.font_spin.setValue(12)
    click_ok(dialog)
    saved = json.loads(services.paths.settings_file.read_text("utf-8"))
    assert saved["appearance"] == {"theme": "light", "font_size": 12}
    assert load_settings(services.paths.settings_file).appearance.font_size == 12

    old = services.paths.settings_file
    old.write_text(json.dumps({"version": 1, "memory": {"window_messages": 20}}), "utf-8")
    assert load_settings(old).appearance == AppearanceSettings()  # written before the page
    old.write_text(json.dumps({"appearance": {"theme": "neon", "font_size": 999}}), "utf-8")
    assert load_settings(old).appearance == AppearanceSettings()  # nonsense is ignored


def test_validate_form_appearance() -> None:
    form = SettingsForm.from_settings(Settings())
    form.theme = "neon"
    form.font_size = 40
    errors = validate_form(form)
    assert "The theme “neon” is unknown: choose Light, Dark or System." in errors
    assert "The font size (pt) must be between 9 and 16 (it is 40)." in errors


def test_the_optional_e5_model_is_offered_by_name(
    qtbot: QtBot, services: AppServices, tmp_path: Path
) -> None:
    packed = tmp_path / e5_convert.SOURCE_FILE
    packed.write_bytes(pack())
    prepare_e5_model(services.paths.models_dir, source=packed, source_sha256=None)
    dialog = make_dialog(qtbot, services)
    embed_items = [
        dialog.embed_picker.combo.itemData(i) for i in range(dialog.embed_picker.combo.count())
    ]
    chat_items = [
        dialog.chat_picker.combo.itemData(i) for i in range(dialog.chat_picker.combo.count())
    ]
    assert E5_NAME in embed_items
    assert E5_NAME not in chat_items
    dialog.embed_picker.set_value(E5_NAME)
    click_ok(dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert services.settings.models.embedding_model == E5_NAME
