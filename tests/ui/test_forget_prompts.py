"""Reset, remove and message delete leave nothing of the text in the chat model's memory.

Once the store work has run, the window asks the chat model to forget every
prompt it read (a local engine's KV cache and saved states:
``AppServices.forget_prompts``); while the undo window is open, and after
Undo or a failure, nothing is forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from agenvoy_desktop.core import lifecycle
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.ui.main_window import MainWindow
from tests.conftest import conversation
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed

TEXTS = ["my bike lock code is 4512", "noted", "and the red pen", "noted too"]


class ForgettingModel(ScriptedChatModel):
    """A scripted model that notes when it is asked to forget."""

    def __init__(self, script: Sequence[Sequence[object]]) -> None:
        super().__init__(script)
        self.forgot: list[int] = []
        """For each forget, how many prompts the model had been sent by then."""

    def forget_prompts(self) -> None:
        self.forgot.append(len(self.seen))


def opened(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory, undo_ms: int
) -> tuple[ForgettingModel, MainWindow, str]:
    """A window on "notes", every bubble shown, its model noting forgets."""
    model = ForgettingModel([["fresh answer"]])
    services = make_services(model)
    seed(services, "other", conversation(["x", "y"]))
    sid = seed(services, "notes", conversation(TEXTS))
    window = make_window(services, undo_ms=undo_ms)
    assert window.session_id == sid
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == len(TEXTS))
    return model, window, sid


def undo(qtbot: QtBot, window: MainWindow) -> None:
    (toast,) = window.toasts.toasts()
    qtbot.mouseClick(toast.buttons["Undo"], Qt.MouseButton.LeftButton)


@pytest.mark.parametrize("action", ["reset_action", "reset_all_action", "remove_action", "delete"])
def test_a_reset_remove_or_delete_that_ran_makes_the_model_forget(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory, action: str
) -> None:
    model, window, _sid = opened(qtbot, make_services, make_window, undo_ms=50)
    chat = window.chat
    chat.pending.delay_ms = 50  # the chat's own operations (message deletes)
    pending = chat.pending if action == "delete" else window.pending
    with qtbot.waitSignal(pending.executed, timeout=5000):
        if action == "delete":
            chat.message_actions.delete(chat.bubbles()[0])
        else:
            getattr(window, action).trigger()
        assert model.forgot == []  # not while the undo window is open
    assert model.forgot == [0]


def test_an_undone_reset_remove_or_delete_forgets_nothing(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    model, window, sid = opened(qtbot, make_services, make_window, undo_ms=60_000)
    chat = window.chat
    with qtbot.waitSignal(chat.pending.undone):
        chat.message_actions.delete(chat.bubbles()[0])
        (toast,) = chat.message_actions.toasts.toasts()
        qtbot.mouseClick(toast.buttons["Undo"], Qt.MouseButton.LeftButton)
    for action in (window.reset_action, window.remove_action):
        with qtbot.waitSignal(window.pending.undone):
            action.trigger()
            undo(qtbot, window)
        qtbot.waitUntil(lambda: window.session_id == sid)
    assert window.pending.pending() == chat.pending.pending() == []
    assert model.forgot == []


def test_a_failed_remove_forgets_nothing(
    qtbot: QtBot,
    make_services: ServicesFactory,
    make_window: WindowFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, window, _sid = opened(qtbot, make_services, make_window, undo_ms=50)

    def broken(store: MemoryStore, sid: str) -> None:
        raise OSError(13, "Permission denied", str(store.folder(sid)))

    monkeypatch.setattr(lifecycle, "remove_session", broken)
    with qtbot.waitSignal(window.pending.failed, timeout=5000):
        window.remove_action.trigger()
    assert model.forgot == []


def test_a_send_into_a_reset_session_finds_the_model_forgotten_first(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    """The send ends the reset's undo window: the forget is queued before the turn's prompt."""
    model, window, _sid = opened(qtbot, make_services, make_window, undo_ms=60_000)
    window.reset_action.trigger()
    window.chat.send("start again")
    qtbot.waitUntil(lambda: not window.chat.busy and window.pending.pending() == [])
    assert model.forgot == [0]  # before the turn sent its prompt
    assert len(model.seen) == 1
