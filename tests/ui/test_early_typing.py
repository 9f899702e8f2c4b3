"""Keys typed while the first start prepares the models are kept, shown and handed over."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QProgressDialog, QWidget
from pytestqt.qtbot import QtBot

from agenvoy_desktop.ui.app import EarlyTyping, show_typing
from agenvoy_desktop.ui.async_runner import AsyncRunner
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory


def press(target: QWidget, key: Qt.Key, text: str = "", shift: bool = False) -> None:
    modifiers = Qt.KeyboardModifier.ShiftModifier if shift else Qt.KeyboardModifier.NoModifier
    QApplication.sendEvent(target, QKeyEvent(QEvent.Type.KeyPress, key, modifiers, text))


def type_text(target: QWidget, text: str) -> None:
    for char in text:
        press(target, Qt.Key.Key_Space if char == " " else Qt.Key.Key_A, char)


def test_keys_are_kept_and_never_reach_the_cancel_button(qtbot: QtBot, qapp: QApplication) -> None:
    dialog = QProgressDialog("Preparing the local models (once)…", "Cancel", 0, 10)
    qtbot.addWidget(dialog)
    cancelled: list[bool] = []
    dialog.canceled.connect(lambda: cancelled.append(True))
    typing = EarlyTyping()
    seen: list[str] = []
    typing.changed.connect(seen.append)
    qapp.installEventFilter(typing)
    try:
        target = dialog.findChildren(QWidget)[0]
        type_text(target, "hi there")  # the space once pressed Cancel
        press(target, Qt.Key.Key_Backspace)
        press(target, Qt.Key.Key_Return, "\r", shift=True)
        type_text(target, "ok")
        assert not typing.send_when_ready
        press(target, Qt.Key.Key_Return, "\r")
    finally:
        qapp.removeEventFilter(typing)
    assert typing.text == "hi ther\nok"
    assert typing.send_when_ready
    assert seen[-1] == typing.text
    assert not cancelled
    assert "sent when the chat is ready" in typing.note()
    assert typing.note().endswith("hi ther\nok▏")
    dialog.close()


def test_escape_still_reaches_the_dialog(qtbot: QtBot, qapp: QApplication) -> None:
    typing = EarlyTyping()
    widget = QWidget()
    qtbot.addWidget(widget)
    qapp.installEventFilter(typing)
    try:
        event = QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)
        assert not typing.eventFilter(widget, event)
    finally:
        qapp.removeEventFilter(typing)
    assert typing.text == ""


def test_the_progress_dialog_shows_the_kept_text(
    qtbot: QtBot, runner: AsyncRunner, qloop: asyncio.AbstractEventLoop
) -> None:
    gate = asyncio.Event()
    op = runner.run(gate.wait(), what="prepare", progress="Preparing the local models (once)…")
    assert op.popup is not None
    typing = EarlyTyping()
    typing.text = "hello"
    show_typing(op, typing)
    assert op.popup.label_text().endswith("message box (Enter: send it when ready):\nhello▏")
    qtbot.waitUntil(lambda: op.popup is not None and op.popup.dialog is not None)
    assert "hello▏" in op.popup.dialog.labelText()  # type: ignore[union-attr]
    gate.set()
    qtbot.waitUntil(lambda: op.done)


def test_the_kept_text_waits_in_the_message_box_and_enter_sends_it(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    model = ScriptedChatModel([["Hi!"]])
    window = make_window(make_services(model))
    waiting = EarlyTyping()
    waiting.text = "What do you remember?"
    assert not waiting.hand_over(window.chat)
    assert window.chat.composer.toPlainText() == "What do you remember?"
    assert not window.chat.busy
    sending = EarlyTyping()
    sending.text, sending.send_when_ready = "Hello", True
    assert sending.hand_over(window.chat)
    window.chat.send()
    qtbot.waitUntil(lambda: not window.chat.busy and len(window.chat.bubbles()) == 2)
    assert [b.text() for b in window.chat.bubbles()] == ["Hello", "Hi!"]
