"""Message actions through the chat panel: copy, edit, regenerate, versions, delete, fork, retry;
and bubbles that wrap instead of widening the chat."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QToolButton
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.tools import Tool
from agenvoy_desktop.core.model_api import ChatEvent, ChatMessage
from agenvoy_desktop.ui.chat_widgets import NO_TEXT, ChatBubble
from agenvoy_desktop.ui.main_window import MainWindow
from tests.conftest import conversation
from tests.scripted_chat import WAIT, Call, ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op

QA = ["first question", "first answer", "second question", "second answer"]


def history(services: AppServices, sid: str) -> list[str]:
    return services.storage.run_sync(
        lambda: [m.content for m in services.store.history(sid).messages]
    )


def texts(window: MainWindow) -> list[str]:
    return [b.text() for b in window.chat.bubbles() if b.isVisibleTo(window.chat.view)]


def click(qtbot: QtBot, bubble: ChatBubble, action: str) -> None:
    """Reach the action the keyboard way: focus the bubble, then press its button with Space.

    Not a mouse click: QTest hit-tests one at the button's centre against its
    geometry, which a row shown a moment ago may not have settled yet — the suspect
    for a delete click lost once in a loaded run (the message stayed on screen).
    Space presses the button whatever its geometry.
    """
    bubble.setFocus(Qt.FocusReason.TabFocusReason)
    button = bubble.action_row.buttons[action]
    qtbot.waitUntil(button.isVisible)
    assert button.isEnabled(), action
    qtbot.keyClick(button, Qt.Key.Key_Space)


def open_seeded(
    qtbot: QtBot, make_window: WindowFactory, services: AppServices, texts_: list[str] = QA
) -> tuple[MainWindow, str]:
    sid = seed(services, "chat", conversation(texts_))
    window = make_window(services)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == len(texts_))
    return window, sid


def test_copy_puts_the_message_on_the_clipboard(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window, _sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[1], "copy")
    assert QGuiApplication.clipboard().text() == "first answer"


def test_every_code_block_has_its_own_copy(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    answer = "One:\n\n```sh\nls -la\n```\n\nTwo:\n\n```python\nprint(1)\n```"
    services = make_services(ScriptedChatModel([]))
    window, _sid = open_seeded(qtbot, make_window, services, ["code please", answer])
    first, second = window.chat.bubbles()[1].view.code_blocks()
    qtbot.mouseClick(second.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "print(1)"
    qtbot.mouseClick(first.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "ls -la"


def test_edit_and_resend_replaces_the_tail(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([["A new answer."]]))
    window, sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[0], "edit")
    composer = window.chat.composer
    assert composer.toPlainText() == "first question"
    assert window.chat.edit_bar.isVisible()
    assert composer.hasFocus()
    composer.setPlainText("a better question")
    qtbot.keyClick(composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert history(services, sid) == ["a better question", "A new answer."]
    # the finished turn reloads the conversation: its bubbles show a moment later
    qtbot.waitUntil(lambda: texts(window) == ["a better question", "A new answer."])
    assert not window.chat.edit_bar.isVisible()


def test_cancel_edit_leaves_the_conversation_alone(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window, sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[2], "edit")
    window.chat.cancel_edit()
    assert window.chat.composer.toPlainText() == ""
    assert window.chat.composer.hasFocus()
    assert history(services, sid) == QA


def test_regenerate_then_page_through_the_versions(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([["A second answer."]]))
    window, sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[3], "regenerate")
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert history(services, sid) == [*QA[:3], "A second answer."]
    answer = window.chat.bubbles()[-1]
    qtbot.waitUntil(lambda: answer.action_row.version_label.text() == "2/2")
    assert texts(window) == [*QA[:3], "A second answer."]
    click(qtbot, answer, "older")
    assert answer.text() == "second answer"
    assert answer.action_row.version_label.text() == "1/2"
    assert not answer.action_row.buttons["older"].isEnabled()
    click(qtbot, answer, "newer")
    assert answer.text() == "A second answer."
    wait_op(qtbot, window.chat.reload())  # the versions come back with the session
    answer = window.chat.bubbles()[-1]
    qtbot.waitUntil(lambda: answer.action_row.version_label.text() == "2/2")


def test_delete_hides_at_once_undo_brings_it_back_and_the_window_end_deletes(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window, sid = open_seeded(qtbot, make_window, services)
    chat = window.chat
    click(qtbot, chat.bubbles()[3], "delete")
    assert texts(window) == QA[:3]
    (toast,) = chat.message_actions.toasts.toasts()
    assert toast.text() == "Message deleted."
    qtbot.mouseClick(toast.buttons["Undo"], Qt.MouseButton.LeftButton)
    assert texts(window) == QA
    assert chat.composer.hasFocus()
    chat.pending.delay_ms = 30
    click(qtbot, chat.bubbles()[3], "delete")
    qtbot.waitUntil(lambda: history(services, sid) == QA[:3])
    qtbot.waitUntil(lambda: len(chat.bubbles()) == 3)
    # the finished delete reloads the conversation: its new bubbles show a moment later
    qtbot.waitUntil(lambda: texts(window) == QA[:3])
    qtbot.waitUntil(lambda: not chat.message_actions.toasts.toasts())


def test_a_send_finalises_a_pending_delete_first(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model = ScriptedChatModel([["Fine."]])
    services = make_services(model)
    window, sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[2], "delete")  # the second question
    window.chat.send("next")
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert history(services, sid) == [QA[0], QA[1], QA[3], "next", "Fine."]
    sent = [m.get("content") for m in model.seen[0].messages]
    assert "second question" not in sent


def test_fork_selects_a_new_session_that_ends_at_the_message(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window, sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[1], "fork")
    qtbot.waitUntil(lambda: window.session_id not in (None, sid))
    forked = window.session_id or ""
    assert history(services, forked) == QA[:2]
    assert history(services, sid) == QA
    qtbot.waitUntil(lambda: texts(window) == QA[:2])
    assert window.sessions.current_session() == forked
    qtbot.waitUntil(lambda: window.sessions.model.rowCount() == 2)


def test_actions_are_off_while_a_turn_runs_in_the_session(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model = ScriptedChatModel([["Thinking", WAIT, " done."]])
    services = make_services(model)
    window, _sid = open_seeded(qtbot, make_window, services)
    window.chat.send("more")
    qtbot.waitUntil(model.waiting.is_set)
    first = window.chat.bubbles()[0]
    buttons = first.action_row.buttons
    assert not buttons["delete"].isEnabled()
    assert not buttons["edit"].isEnabled()
    assert buttons["copy"].isEnabled()
    first.action_requested.emit("delete")  # the context menu path is refused too
    assert first.isVisible()
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert buttons["delete"].isEnabled()


def test_an_empty_answer_says_so_and_retry_answers(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model = ScriptedChatModel([[], ["Here it is."]])
    services = make_services(model)
    window = make_window(services)
    window.chat.send("hello?")
    # The failure is shown by the turn's failure callback, just after the turn ends.
    qtbot.waitUntil(lambda: not window.chat.busy and len(window.chat.bubbles()) == 2)
    answer = window.chat.bubbles()[-1]
    assert answer.problem.isVisible()
    assert answer.problem.text() == NO_TEXT
    assert answer.retry_button.isVisible()
    qtbot.mouseClick(answer.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert texts(window) == ["hello?", "Here it is."]
    assert history(services, window.session_id or "") == ["hello?", "Here it is."]
    assert not window.chat.bubbles()[-1].problem.isVisible()


class FailingOnce(ScriptedChatModel):
    """A model whose first stream breaks (a crashed backend)."""

    failed = False

    async def chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> AsyncIterator[ChatEvent]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the model backend crashed\nsecond line")
        async for event in super().chat(messages, **kwargs):
            yield event


def test_a_failed_answer_says_why_and_retry_answers(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(FailingOnce([["Back again."]]))
    window = make_window(services)
    window.chat.send("are you there?")
    qtbot.waitUntil(lambda: not window.chat.busy and len(window.chat.bubbles()) == 2)
    failed = window.chat.bubbles()[-1]
    assert "the model backend crashed" in failed.problem.text()
    assert "\n" not in failed.problem.text()  # one line
    qtbot.mouseClick(failed.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.chat.busy and texts(window)[-1] == "Back again.")
    assert texts(window) == ["are you there?", "Back again."]
    assert history(services, window.session_id or "") == ["are you there?", "Back again."]


LONG_WORD = "https://example.com/" + "a" * 400
LONG_CODE = "```python\nx = '" + "y" * 400 + "'\n```"


@pytest.mark.parametrize("width", [700, 1400])
def test_long_lines_wrap_and_never_widen_the_chat(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, width: int
) -> None:
    async def read(_args: dict[str, Any]) -> str:
        return "z" * 500

    model = ScriptedChatModel([[Call("read_notes", {"path": "/d/" + "p" * 300})], ["ok"]])
    services = make_services(model)
    services.tools.register(Tool("read_notes", "r", {"type": "object", "properties": {}}, read))
    window, _sid = open_seeded(
        qtbot, make_window, services, [LONG_WORD, f"{LONG_WORD}\n\n{LONG_CODE}"]
    )
    window.resize(width, 800)
    window.chat.send("read " + "q" * 300)
    qtbot.waitUntil(lambda: not window.chat.busy)
    (chip,) = window.chat.chips()
    chip.set_expanded(True)
    view = window.chat.view

    def fits() -> None:
        room = view.viewport().width()
        for widget in [*window.chat.bubbles(), chip]:
            assert widget.width() <= room, (type(widget).__name__, widget.width(), room)
        assert view.horizontalScrollBar().maximum() == 0

    qtbot.waitUntil(fits)
    block = window.chat.bubbles()[1].view.code_blocks()[0]
    assert block.scroller.horizontalScrollBar().maximum() > 0  # the code scrolls inside
    assert block.width() <= view.viewport().width()
    assert chip.header.text().startswith("read_notes(")  # the whole line, elided on screen


def test_set_input_header_puts_a_widget_above_the_composer(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    window = make_window(make_services(ScriptedChatModel([])))
    header = QLabel("model: tiny")
    window.chat.set_input_header(header)
    qtbot.waitUntil(header.isVisible)
    assert (
        header.mapTo(window, header.rect().bottomLeft()).y()
        <= window.chat.composer.mapTo(window, window.chat.composer.rect().topLeft()).y()
    )


def test_the_context_menu_offers_the_same_actions(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window, _sid = open_seeded(qtbot, make_window, services)
    user, answer = window.chat.bubbles()[:2]
    assert [a.text() for a in user.action_row.menu(user).actions()] == [
        "Copy",
        "Edit",
        "Delete",
        "Fork",
    ]
    menu = answer.action_row.menu(answer)
    assert [a.text() for a in menu.actions()] == ["Copy", "Regenerate", "Delete", "Fork"]
    next(a for a in menu.actions() if a.text() == "Copy").trigger()
    assert QGuiApplication.clipboard().text() == "first answer"
    menu.deleteLater()


def test_dismissing_the_delete_toast_returns_to_the_composer(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    window, sid = open_seeded(qtbot, make_window, services)
    click(qtbot, window.chat.bubbles()[1], "delete")
    (toast,) = window.chat.message_actions.toasts.toasts()
    window.chat.bubbles()[0].setFocus()
    close = next(b for b in toast.findChildren(QToolButton) if b.text() == "✕")
    qtbot.mouseClick(close, Qt.MouseButton.LeftButton)
    assert window.chat.composer.hasFocus()
    assert window.chat.pending.deleting(sid)  # dismissing is not undoing
    wait_op(qtbot, window.chat.runner.run(window.chat.pending.flush(sid), what="flush"))
    assert history(services, sid) == [QA[0], *QA[2:]]
