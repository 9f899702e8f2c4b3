"""The Context tab names who answers next and who wrote the last answer, and labels what
it shows."""

from __future__ import annotations

import os
from pathlib import Path

from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.not_remembered import EXAMPLES, example_count, example_messages
from agenvoy_desktop.agent.recall import BLOCK_HEADERS, RecallItem, format_block
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.operations.context import ContextView
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.inspector.context_tab import recalled_count, render_html
from tests.conftest import T0
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, Wait, seed


class RemoteDouble(ScriptedChatModel):
    """Looks like an endpoint on another machine; counts tokens locally (no network)."""

    backend = "endpoint"
    base_url = "https://api.example.com/v1"
    model = "gpt-x"
    name = "far"


def test_context_tab_names_the_answering_backends(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner, wait_for: Wait
) -> None:
    services = make_services(chat_model=RemoteDouble([]))
    local = {"model": "qwen2.5-coder-0.5b", "backend": "llama.cpp", "address": None}
    sid = seed(
        services,
        "trip",
        [
            Message("u1", "user", "Where should we stay in Kyoto?", T0),
            Message("a1", "assistant", "Near Gion.", T0 + 1, extra={"answered_by": local}),
        ],
    )
    panel = InspectorPanel(services, runner)
    qtbot.addWidget(panel)
    panel.resize(900, 500)
    panel.show()
    panel.set_session(sid)
    panel.show_tab("context")
    tab = panel.context_tab
    wait_for(lambda: tab.view is not None)
    text = tab.answered_label.text()
    assert "Answers next: <b>far (gpt-x) at https://api.example.com (remote endpoint)</b>" in text
    assert "text leaves this machine" in text
    assert "Last answer by: <b>qwen2.5-coder-0.5b (llama.cpp, in-process)</b>" in text
    assert tab.answered_label.isVisible()
    shots = os.environ.get("AGENVOY_SCREENSHOTS")
    if shots:
        panel.grab().save(str(Path(shots) / "context_answered_by.png"))


def test_the_context_tab_counts_recalled_lines_under_any_header() -> None:
    block = format_block([RecallItem("m", "s", "t", 0, "user", "4721")], header=BLOCK_HEADERS["zh"])
    assert recalled_count("You are Agenvoy.\n\n" + block.text) == 1
    assert recalled_count("You are Agenvoy.") == 0


def test_the_context_tab_labels_the_made_up_exchanges() -> None:
    """The "I don't know" exchanges are sent as messages; the tab says they are made up."""
    sent: list[ChatMessage] = [
        {"role": "system", "content": "You are Agenvoy."},
        *example_messages(EXAMPLES["zh"]),
        {"role": "user", "content": "我住在哪个城市？"},
    ]
    assert example_count(sent) == 4
    page = render_html(ContextView(sent, 16))
    assert page.count("made-up example") == 4
    assert example_count(sent[:1] + sent[5:]) == 0


def test_the_context_tab_shows_the_turn_note_apart_from_the_window(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner, wait_for: Wait
) -> None:
    """The note before the last user message is labelled, holds the recalled lines the
    summary counts, and is not counted as a message of the window."""
    block = format_block([RecallItem("m", "s", "t", 0, "user", "4721")], header=BLOCK_HEADERS["en"])
    sent: list[ChatMessage] = [
        {"role": "system", "content": "You are Agenvoy."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": block.text},
        {"role": "user", "content": "What is my bike lock code?"},
    ]
    page = render_html(ContextView(sent, 16))
    assert page.count("Turn note") == 1
    assert page.count("System prompt") == 1
    services = make_services()
    sid = seed(services, "s", [Message("u1", "user", "hi", T0)])
    panel = InspectorPanel(services, runner)
    qtbot.addWidget(panel)
    panel.set_session(sid)
    panel.show_tab("context")
    tab = panel.context_tab
    wait_for(lambda: tab.view is not None)
    tab._show(ContextView(sent, 16, 8))
    summary = tab.summary_label.text()
    assert "1 recalled message" in summary
    assert "3 messages</b> from the window (N = 16, in steps of 8)" in summary
