"""The live status line under a pending answer: phases in order, then the answer's speed."""

from __future__ import annotations

from typing import Any

from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.tools import Tool
from agenvoy_desktop.agent.turn import TurnResult
from agenvoy_desktop.ui.turn_status import done_details, done_text, phase_text, tool_phrase
from tests.conftest import conversation
from tests.scripted_chat import WAIT, Call, ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op


def test_tool_phrases_name_the_main_argument() -> None:
    assert tool_phrase("read_text_file", {"path": "/home/me/notes.md"}) == "Reading notes.md…"
    assert tool_phrase("search_rag", {"query": "tax"}) == "Searching your documents for “tax”…"
    assert tool_phrase("search_rag", {}) == "Searching your documents…"
    assert tool_phrase("current_time", {}) == "Checking the time…"
    assert tool_phrase("my_plugin_tool", {}) == "Using my plugin tool…"
    long = tool_phrase("search_chat_history", {"query": "x" * 200})
    assert len(long) < 90
    assert phase_text("recall") == "Looking through your memory…"
    assert phase_text("thinking") == "Thinking…"
    assert phase_text("loading") == "Loading the chat model…"
    assert phase_text("writing") == "Writing…"


def test_done_line_gives_tokens_per_second_and_the_tooltip_the_details() -> None:
    result = TurnResult("s", answer="hi", rounds=2, tool_calls=1, total_s=3.0)
    result.answer_tokens, result.prompt_tokens, result.answer_s = 40, 900, 2.0
    assert done_text(result) == "20.0 tokens/s · 40 tokens in 2.0 s · 3.0 s in all"
    details = done_details(result, "qwen")
    for part in ("Model: qwen", "Prompt: 900 tokens", "Tool calls: 1", "Rounds: 2"):
        assert part in details
    assert done_text(TurnResult("s", answer="abc", total_s=1.0)) == "3 characters · 1.0 s in all"
    assert done_text(TurnResult("s", interrupted=True)) == "Stopped."


def test_the_status_line_follows_the_turn_and_ends_with_its_speed(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    async def read(_args: dict[str, Any]) -> str:
        return "my notes"

    model = ScriptedChatModel(
        [[Call("read_notes", {"path": "/tmp/notes.md"})], ["The ", WAIT, "notes say hi."]]
    )
    services = make_services(model)
    services.tools.register(
        Tool("read_notes", "read notes", {"type": "object", "properties": {}}, read)
    )
    seed(services, "before", conversation(["I keep notes in notes.md", "Noted."]))
    window = make_window(services)
    wait_op(qtbot, window.new_session())
    window.chat.send("what do my notes say?")
    qtbot.waitUntil(model.waiting.is_set)
    line = window.chat.turn_status
    assert line.isVisible()
    assert line.text() == "Writing…"
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert line.phases[:-1] == [
        "Looking through your memory…",
        "Thinking…",
        "Using read notes…",
        "Thinking…",
        "Writing…",
    ]
    assert "tokens/s" in line.phases[-1]
    assert line.text() == line.phases[-1]
    assert "Model: scripted-chat" in line.toolTip()
    assert "Tool calls: 1" in line.toolTip()
    assert "Rounds: 2" in line.toolTip()


def test_the_status_line_is_not_shown_in_another_session(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([["Hi."]]))
    window = make_window(services)
    window.chat.send("hello")
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert window.chat.turn_status.isVisible()
    wait_op(qtbot, window.new_session())
    assert not window.chat.turn_status.isVisible()


def test_a_long_prompt_read_shows_its_share() -> None:
    assert phase_text("thinking", "40") == "Reading your message… 40 %"
    assert phase_text("thinking") == "Thinking…"


def test_a_sessions_last_speed_line_comes_back_with_the_session(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([["Hi."]]))
    window = make_window(services)
    window.chat.send("hello")
    qtbot.waitUntil(lambda: not window.chat.busy)
    first = window.chat.session_id
    shown = window.chat.turn_status.text()
    assert "s in all" in shown
    wait_op(qtbot, window.new_session())
    assert not window.chat.turn_status.isVisible()
    assert first is not None
    window.select_session(first)
    qtbot.waitUntil(window.chat.turn_status.isVisible)
    assert window.chat.turn_status.text() == shown
