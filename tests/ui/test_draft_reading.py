"""A pause in typing hands the message so far to the agent, whose model reads its prompt."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.ui.chat_panel import DRAFT_PAUSE_MS
from tests.agent.test_read_ahead import ReadingModel
from tests.conftest import T0, conversation
from tests.ui.conftest import ServicesFactory, WindowFactory, seed

QUESTION = "Where do I live?"


def _drafts(model: ReadingModel) -> list[str]:
    """The message of each draft's prompt read ahead (a session's prompt start, read when it
    is opened, ends with its last answer and the opening of a note instead)."""
    return [str(read[-1]["content"]) for read, _tools in model.read if read[-1]["role"] == "user"]


def test_the_session_opened_is_read_before_anything_is_typed(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """At the app's start or after a switch, the first turn in a session does not read its
    whole prompt: the window's opening it hands the session to the agent."""
    model = ReadingModel([["Fine, thanks."]])
    services = make_services(model)
    other = seed(services, "other", conversation(["Hi", "Hello!"]))
    sid = seed(services, "today", conversation(["Good morning", "Morning!"], start=T0 + 10**12))
    window = make_window(services)
    window.select_session(other)
    window.select_session(sid)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 2)

    def said(read: list[ChatMessage]) -> object:
        return next(m["content"] for m in reversed(read) if m["role"] != "system")

    qtbot.waitUntil(lambda: bool(model.read) and said(model.read[-1][0]) == "Morning!")
    start = model.read[-1][0]
    if start[-1]["role"] == "system":  # a small model's: the opening of the note
        start = start[:-1]
    window.chat.send("How are you?")
    qtbot.waitUntil(lambda: not window.chat.busy and len(window.chat.bubbles()) == 4)
    assert list(model.seen[0].messages[: len(start)]) == start


def test_a_typed_question_is_read_before_it_is_sent(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model = ReadingModel([["You live in Graz."]])
    services = make_services(model)
    seed(services, "intro", conversation(["Hi! I'm Lena and I live in Graz.", "Hello!"]))
    sid = seed(services, "today", conversation(["Good morning", "Morning!"], start=T0 + 10**12))
    window = make_window(services)
    window.select_session(sid)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 2)
    window.chat.composer.setFocus()
    qtbot.keyClicks(window.chat.composer, QUESTION)
    qtbot.waitUntil(lambda: QUESTION in _drafts(model), timeout=10 * DRAFT_PAUSE_MS)
    read, tools = model.read[-1]
    assert any("Graz" in str(m["content"]) for m in read[:-1])  # what recall found for it
    qtbot.keyClick(window.chat.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.chat.busy and len(window.chat.bubbles()) == 4)
    assert read == list(model.seen[0].messages)
    assert tools == model.seen[0].tools


def test_nothing_is_read_for_an_edit(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """An edit replaces the message it edits and what follows: its prompt is another."""
    model = ReadingModel([])
    services = make_services(model)
    sid = seed(services, "today", conversation(["Good morning", "Morning!"]))
    window = make_window(services)
    window.select_session(sid)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 2)
    window.chat.start_edit(window.chat.bubbles()[0])
    qtbot.keyClicks(window.chat.composer, " to you")
    with qtbot.waitSignal(window.chat._draft_timer.timeout, timeout=10 * DRAFT_PAUSE_MS):
        pass  # the pause has been handled once the signal is seen
    assert _drafts(model) == []


def test_text_typed_before_a_regenerate_is_read_after_it(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """A turn forgets the draft it did not answer; the panel hands it over again."""
    model = ReadingModel([["Morning again!"]])
    services = make_services(model)
    sid = seed(services, "today", conversation(["Good morning", "Morning!"]))
    window = make_window(services)
    window.select_session(sid)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 2)
    qtbot.keyClicks(window.chat.composer, QUESTION)
    qtbot.waitUntil(lambda: QUESTION in _drafts(model), timeout=10 * DRAFT_PAUSE_MS)
    window.chat.regenerate(window.chat.bubbles()[1])
    qtbot.waitUntil(lambda: bool(model.seen) and not window.chat.busy)

    def read_again() -> None:
        said = [str(m["content"]) for m in model.read[-1][0]]
        assert said[-1] == QUESTION
        assert "Morning again!" in said

    qtbot.waitUntil(read_again, timeout=10 * DRAFT_PAUSE_MS)
