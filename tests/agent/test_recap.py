"""'What did we talk about last time?' gets the last conversation (agent/recap)."""

from __future__ import annotations

import asyncio

import pytest

from agenvoy_desktop.agent.recap import HEADERS, asks_for_recap, last_conversation
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, TurnResult
from agenvoy_desktop.core.search import Withheld
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import msg
from tests.scripted_chat import ScriptedChatModel


@pytest.mark.parametrize(
    "text",
    [
        "What did we talk about last time?",
        "What were we talking about?",
        "What have we been chatting about lately?",
        "Where did we leave off?",
        "上次我们聊了什么？",
        "前回は何を話しましたか？",
        "Worüber haben wir gesprochen?",
    ],
)
def test_questions_about_the_last_conversation(text: str) -> None:
    assert asks_for_recap(text)


@pytest.mark.parametrize(
    "text",
    [
        "What did we discuss about the budget?",  # a topic: recall's search finds it
        "What is my bike lock code?",
        "Last time I went to Paris it rained.",
        "What time is it?",
        "上次你推荐的那本书叫什么？",  # "the book you recommended last time"
    ],
)
def test_other_messages_are_not(text: str) -> None:
    assert not asks_for_recap(text)


def _said_in(store: MemoryStore, texts: list[str], start: int) -> str:
    sid = store.create_session(texts[0])
    messages = []
    for i, text in enumerate(texts):
        messages += [
            msg("user", text, start + 2 * i),
            msg("assistant", "Noted.", start + 2 * i + 1),
        ]
    store.append(sid, messages)
    return sid


def test_the_most_recent_other_session_in_the_order_said(store: MemoryStore) -> None:
    _said_in(store, ["We talked about Kyoto.", "The temples were great."], 1)
    latest = _said_in(store, ["I'm a nurse in Lisbon.", "I have two cats."], 100)
    current = store.create_session("now")
    items = last_conversation(store, current)
    assert [i.text for i in items] == ["I'm a nurse in Lisbon.", "I have two cats."]
    assert {i.session_id for i in items} == {latest}
    assert last_conversation(store, latest)[0].text == "We talked about Kyoto."


def test_a_session_in_its_undo_window_is_not_the_last_conversation(store: MemoryStore) -> None:
    """Removed or reset in the window (undo still possible), it is passed over as gone."""
    earlier = _said_in(store, ["We talked about Kyoto.", "The temples were great."], 1)
    latest = _said_in(store, ["I'm a nurse in Lisbon.", "I have two cats."], 100)
    current = store.create_session("now")
    items = last_conversation(store, current, Withheld(sessions=frozenset({latest})))
    assert {i.session_id for i in items} == {earlier}
    told = store.history(latest).messages[0].id  # one message deleted, its undo window open
    items = last_conversation(store, current, Withheld(messages=frozenset({told})))
    assert [i.text for i in items] == ["I have two cats."]


def _ask_recap(store: MemoryStore, answer: str) -> tuple[ScriptedChatModel, TurnResult]:
    """One small-model turn asking about the last conversation, in a new session."""
    sid = store.create_session("now")
    model = ScriptedChatModel([[answer]])
    storage = Storage()
    try:
        agent = Agent(storage, store, model, ToolRegistry([]), config=AgentConfig(small_model=True))
        return model, asyncio.run(agent.run_turn(sid, "What did we talk about last time?"))
    finally:
        storage.close()


def test_a_recap_question_gets_the_last_conversation_in_its_turn(store: MemoryStore) -> None:
    _said_in(store, ["I'm a nurse in Lisbon.", "Can you suggest a quick dinner?"], 1)
    model, result = _ask_recap(store, "You told me you are a nurse in Lisbon.")
    assert result.recall_text.startswith(HEADERS["en"])
    lines = result.recall_text.splitlines()[1:]
    assert "nurse in Lisbon" in lines[0]  # oldest first
    assert "quick dinner" in lines[1]
    assert not result.not_remembered
    assert model.seen[0].messages[0]["content"].endswith(result.recall_text)


def test_a_failed_read_leaves_it_to_recall(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_limit: int) -> list[object]:
        raise RuntimeError("database disk image is malformed")

    monkeypatch.setattr(store.archive, "recent_sessions", broken)
    _model, result = _ask_recap(store, "I don't know.")
    assert result.answer == "I don't know."
