"""A session's own system prompt and tools switch, as the model receives them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT, SEARCH_GUIDANCE
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, RecallInjected, TurnEvent, TurnResult
from agenvoy_desktop.core.session_settings import SessionSettings, store_session_settings
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import T0, conversation
from tests.scripted_chat import Call, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")

PIRATE = "You are a pirate assistant. Answer every question like a pirate."
LOCK_FACT = "By the way, my bike lock code is 4721."


def _tools() -> ToolRegistry:
    async def search(_args: dict[str, Any]) -> str:
        return "found nothing"

    schema = {"type": "object", "properties": {}}
    return ToolRegistry([Tool("search_chat_history", "search past chats", schema, search)])


@pytest.fixture
def storage() -> Iterator[Storage]:
    worker = Storage()
    yield worker
    worker.close()


def _turn(
    agent: Agent, sid: str, text: str
) -> tuple[TurnResult, list[TurnEvent], list[dict[str, Any]]]:
    events: list[TurnEvent] = []

    async def main() -> tuple[TurnResult, list[dict[str, Any]]]:
        result = await agent.run_turn(sid, text, on_event=events.append)
        shown = await agent.context_messages(sid)
        return result, [dict(m) for m in shown]

    result, shown = asyncio.run(main())
    return result, events, shown


def _plant(store: MemoryStore) -> None:
    """An older session whose lock code proactive recall would find."""
    old = store.create_session("Bike trip")
    store.append(old, conversation(["Let us leave early.", "Sure.", LOCK_FACT, "Noted."], T0))


def test_custom_prompt_replaces_the_default_and_the_rest_follows(
    store: MemoryStore, storage: Storage
) -> None:
    sid = store.create_session("pirate")
    store_session_settings(store, sid, SessionSettings(PIRATE))
    model = ScriptedChatModel([["Arr, hello!"]])
    agent = Agent(
        storage,
        store,
        model,
        _tools(),
        summary_text=lambda _sid: "Key decisions (binding):\n- speak like a pirate",
    )
    result, _events, shown = _turn(agent, sid, "hi")
    system = model.seen[0].messages[0]["content"]
    assert system.startswith(PIRATE + " " + SEARCH_GUIDANCE)  # tool guidance still follows
    assert DEFAULT_SYSTEM_PROMPT not in system
    assert "Summary of the earlier conversation:" in system
    assert "Current local time:" in system
    assert model.seen[0].tools is not None
    assert result.answer == "Arr, hello!"
    # the Context tab's reading is built the same way
    assert shown[0]["content"].startswith(PIRATE)


def test_other_sessions_keep_the_default_prompt(store: MemoryStore, storage: Storage) -> None:
    pirate = store.create_session("pirate")
    plain = store.create_session("plain")
    store_session_settings(store, pirate, SessionSettings(PIRATE))
    model = ScriptedChatModel([["Hello."]])
    agent = Agent(storage, store, model, _tools(), config=AgentConfig(system_prompt="Be kind."))
    _turn(agent, plain, "hi")
    assert model.seen[0].messages[0]["content"].startswith("Be kind.")


def test_tools_off_is_plain_chat(store: MemoryStore, storage: Storage) -> None:
    _plant(store)
    sid = store.create_session("plain chat")
    store_session_settings(store, sid, SessionSettings(tools=False))
    model = ScriptedChatModel([["I don't know your code."], ["unused"]])
    agent = Agent(storage, store, model, _tools(), config=AgentConfig(small_model=True))
    result, events, shown = _turn(agent, sid, "What is my bike lock code?")
    assert len(model.seen) == 1  # one round, and it must answer
    assert model.seen[0].tools is None
    system = model.seen[0].messages[0]["content"]
    assert LOCK_FACT not in system
    assert SEARCH_GUIDANCE not in system
    assert result.recall_text == ""
    assert result.tools_offered == []
    assert not [e for e in events if isinstance(e, RecallInjected)]
    assert [kind for _t, kind, _d in store.archive.events(sid)] == []
    assert LOCK_FACT not in shown[0]["content"]
    assert SEARCH_GUIDANCE not in shown[0]["content"]


def test_tools_off_ignores_a_tool_call(store: MemoryStore, storage: Storage) -> None:
    """A model that calls a tool anyway gets no tool run: its round is the answer."""
    sid = store.create_session("plain chat")
    store_session_settings(store, sid, SessionSettings(tools=False))
    model = ScriptedChatModel([["Let me look.", Call("search_chat_history", {})]])
    agent = Agent(storage, store, model, _tools())
    result, _events, _shown = _turn(agent, sid, "What did we say?")
    assert result.tool_calls == 0
    assert result.answer == "Let me look."


def test_same_session_with_tools_on_recalls(store: MemoryStore, storage: Storage) -> None:
    """The control for the test above: the planted fact is found when tools are on."""
    _plant(store)
    sid = store.create_session("today")
    model = ScriptedChatModel([["It is 4721."]])
    agent = Agent(storage, store, model, _tools(), config=AgentConfig(small_model=True))
    result, events, _shown = _turn(agent, sid, "What is my bike lock code?")
    assert LOCK_FACT in result.recall_text
    assert any(isinstance(e, RecallInjected) for e in events)
