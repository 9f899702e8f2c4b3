"""A chat model on a server that fails: one clear line, the partial answer kept, the question kept.

:class:`DroppingServer` plays a server that writes part of an answer and then
fails the way :class:`EndpointError` reports it (stopped mid-stream, refused,
an unloaded model); the window must show one line on the answer bubble, keep
what was written marked interrupted, and keep the user's message — on screen
and in the store — so Retry can answer it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.model_api import ChatEvent, ChatMessage, TextDelta
from agenvoy_desktop.llm.openai_chat import EndpointError
from agenvoy_desktop.ui.main_window import MainWindow
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory

STOPPED = EndpointError(
    "The server at http://127.0.0.1:8080/v1 stopped in the middle of the answer "
    "(connection closed) — what it wrote is kept; press Retry.",
    "stream",
)


class DroppingServer(ScriptedChatModel):
    """Fails its first answer after *after* text deltas (0: before any text)."""

    name = "remote-ish"

    def __init__(self, script: Sequence[Sequence[object]], *, after: int, error: Exception):
        super().__init__(script)
        self.after = after
        self.error = error
        self.failed = False

    async def chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> AsyncIterator[ChatEvent]:
        failing, written = not self.failed, 0
        if failing and self.after == 0:
            self.failed = True
            raise self.error
        async for event in super().chat(messages, **kwargs):
            yield event
            written += isinstance(event, TextDelta)
            if failing and written == self.after:
                self.failed = True
                raise self.error


def history(services: AppServices, sid: str) -> list[tuple[str, str, bool]]:
    """(role, text, interrupted) of the session's stored messages."""
    messages = services.storage.run_sync(lambda: services.store.history(sid).messages)
    return [(m.role, m.content, bool(m.extra.get("interrupted"))) for m in messages]


def ask(qtbot: QtBot, window: MainWindow, text: str) -> None:
    window.chat.send(text)
    qtbot.waitUntil(lambda: not window.chat.busy and len(window.chat.bubbles()) == 2)


def test_a_server_that_stops_mid_answer_keeps_the_partial_answer_marked(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model = DroppingServer(
        [["Half of ", "the answer", " never came"], ["A whole answer."]], after=2, error=STOPPED
    )
    services = make_services(model)
    window = make_window(services)
    ask(qtbot, window, "Tell me everything.")

    question, answer = window.chat.bubbles()
    assert question.text() == "Tell me everything."
    assert answer.text() == "Half of the answer"
    assert answer.interrupted
    assert answer.mark.isVisibleTo(answer)
    line = answer.problem.text()
    assert "stopped in the middle of the answer" in line
    assert "\n" not in line
    assert answer.retry_button.isVisibleTo(answer)
    assert window.chat.turn_status.text() == "Answer interrupted."
    sid = window.session_id or ""
    assert history(services, sid) == [
        ("user", "Tell me everything.", False),
        ("assistant", "Half of the answer", True),
    ]
    assert window.errors.messages() == []  # the bubble says it, once

    qtbot.mouseClick(answer.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: not window.chat.busy and window.chat.bubbles()[-1].text() == "A whole answer."
    )
    assert [b.text() for b in window.chat.bubbles()] == ["Tell me everything.", "A whole answer."]
    assert history(services, sid)[-1] == ("assistant", "A whole answer.", False)


def test_a_refused_connection_gives_one_line_and_keeps_the_question(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    refused = EndpointError(
        "Cannot connect to http://127.0.0.1:11434/v1: is the server running?", "refused"
    )
    services = make_services(DroppingServer([["Here now."]], after=0, error=refused))
    window = make_window(services)
    ask(qtbot, window, "Are you there?")

    question, failed = window.chat.bubbles()
    assert question.text() == "Are you there?"
    assert failed.text() == ""
    assert not failed.interrupted
    assert (
        failed.problem.text()
        == "Cannot connect to http://127.0.0.1:11434/v1: is the server running?"
    )
    assert window.chat.turn_status.text() == "No answer."
    sid = window.session_id or ""
    assert history(services, sid) == [("user", "Are you there?", False)]

    qtbot.mouseClick(failed.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: not window.chat.busy and window.chat.bubbles()[-1].text() == "Here now."
    )
    assert history(services, sid) == [
        ("user", "Are you there?", False),
        ("assistant", "Here now.", False),
    ]


def test_an_unloaded_model_mid_answer_reads_as_one_line(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    unloaded = EndpointError(
        "The server no longer has the model 'qwen2.5:7b' loaded — load it there or choose "
        "another model.\nHTTP 404 body: model not found",
        "unloaded",
    )
    services = make_services(DroppingServer([["One ", "two"]], after=1, error=unloaded))
    window = make_window(services)
    ask(qtbot, window, "Count.")

    answer = window.chat.bubbles()[-1]
    assert answer.text() == "One "
    assert answer.interrupted
    assert answer.problem.text().startswith("The server no longer has the model 'qwen2.5:7b'")
    assert "\n" not in answer.problem.text()
    assert window.chat.composer.toPlainText() == ""  # the question is on screen and stored
