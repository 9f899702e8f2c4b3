"""Import from the window: read, preview, pick, import; nothing written before Import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog
from pytestqt.qtbot import QtBot

from agenvoy_desktop.operations.bulk_import import ImportPlan, PlannedConversation
from agenvoy_desktop.ui.import_preview import ImportPreview
from tests.conftest import SECOND, T0, conversation
from tests.core.import_format_samples import gpt_branching, lms_conversation
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, wait_op


def _plan() -> ImportPlan:
    first = PlannedConversation(
        Path("x.json"), "chatgpt", "Trip to Japan", "import-a", conversation(["a", "b"])
    )
    second = PlannedConversation(
        Path("x.json"), "chatgpt", "Tax return", "import-b", conversation(["c"], start=T0 + SECOND)
    )
    return ImportPlan([first, second])


def test_the_preview_shows_each_conversation_and_takes_the_ticked_ones(qtbot: QtBot) -> None:
    dialog = ImportPreview(_plan(), existing={"import-b"})
    qtbot.addWidget(dialog)
    assert "ChatGPT" in dialog.summary.text()
    assert "2 conversations, 3 messages" in dialog.summary.text()
    second = dialog.table.topLevelItem(1)
    assert second is not None
    assert second.text(3) == "imported before"
    assert dialog.import_button.text() == "Import 2 conversations (3 messages)"
    second.setCheckState(0, Qt.CheckState.Unchecked)
    assert [c.title for c in dialog.chosen().conversations] == ["Trip to Japan"]
    assert dialog.import_button.text() == "Import 1 conversation (2 messages)"
    qtbot.mouseClick(dialog.none_button, Qt.MouseButton.LeftButton)
    assert not dialog.import_button.isEnabled()
    qtbot.mouseClick(dialog.all_button, Qt.MouseButton.LeftButton)
    assert len(dialog.chosen().conversations) == 2


def test_an_export_is_previewed_then_only_the_ticked_conversations_import(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([gpt_branching()]), "utf-8")
    wait_op(qtbot, window.session_actions.preview_import(export))
    preview = window.session_actions.last_preview
    assert preview is not None
    qtbot.waitUntil(preview.isVisible)
    assert services.storage.run_sync(services.store.session_ids) == []  # nothing written yet
    preview.accept()
    qtbot.waitUntil(lambda: window.session_id is not None)
    assert len(services.storage.run_sync(services.store.session_ids)) == 1
    assert "new, 0 already there" in window.statusBar().currentMessage()


def test_a_preview_closed_with_cancel_writes_nothing(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([gpt_branching()]), "utf-8")
    wait_op(qtbot, window.session_actions.preview_import(export))
    preview = window.session_actions.last_preview
    assert preview is not None
    qtbot.waitUntil(preview.isVisible)
    preview.reject()
    assert preview.result() == QDialog.DialogCode.Rejected
    assert services.storage.run_sync(services.store.session_ids) == []


def test_find_asks_first_then_offers_what_it_found(
    qtbot: QtBot,
    make_window: WindowFactory,
    make_services: ServicesFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    lms = home / ".lmstudio" / "conversations"
    lms.mkdir(parents=True)
    (lms / "1700000000000.conversation.json").write_text(json.dumps(lms_conversation()))
    monkeypatch.setenv("HOME", str(home))
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    actions = window.session_actions
    actions.find_histories()
    question = actions.last_question
    assert question is not None
    qtbot.waitUntil(question.isVisible)
    assert actions.last_found is None  # nothing is looked at before the answer
    question.accept()
    qtbot.waitUntil(lambda: actions.last_found is not None and actions.last_found.isVisible())
    found = actions.last_found
    assert found is not None
    place = found.chosen()
    assert place is not None
    assert place.path == lms
    found.accept()
    qtbot.waitUntil(lambda: actions.last_preview is not None and actions.last_preview.isVisible())
    assert "LM Studio" in actions.last_preview.summary.text()
    assert services.storage.run_sync(services.store.session_ids) == []
