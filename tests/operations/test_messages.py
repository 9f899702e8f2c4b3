"""Per-message operations as the window calls them, and regeneration through the agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, MessageSaved, TurnEvent, TurnResult
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.message_edit import MessageActionError
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations import messages as message_ops
from agenvoy_desktop.operations.changes import MemoryChanges
from tests.conftest import conversation
from tests.core.consistency import assert_layers_agree, assert_never_found, timeline_texts
from tests.scripted_chat import WAIT, Call, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Prompts carry local times: pin the zone (as the agent tests do)."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def storage() -> Iterator[Storage]:
    worker = Storage()
    yield worker
    worker.close()


def _agent(store: MemoryStore, storage: Storage, script: list[list[object]]) -> Agent:
    async def echo(args: dict[str, Any]) -> str:
        return f"echo {args.get('text', '')}"

    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = ToolRegistry([Tool("echo", "echo text", schema, echo)])
    return Agent(
        storage, store, ScriptedChatModel(script), tools, config=AgentConfig(window_messages=6)
    )


def _turn(agent: Agent, sid: str, text: str) -> TurnResult:
    async def main() -> TurnResult:
        result = await agent.run_turn(sid, text)
        await agent.idle()
        return result

    return asyncio.run(main())


def _regenerate(agent: Agent, sid: str, user_id: str) -> tuple[TurnResult, list[TurnEvent]]:
    events: list[TurnEvent] = []

    async def main() -> TurnResult:
        result = await agent.regenerate(sid, user_id, on_event=events.append)
        await agent.idle()
        return result

    return asyncio.run(main()), events


def _history(store: MemoryStore, sid: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in store.history(sid).messages]


def test_each_write_says_what_it_changed(store: MemoryStore) -> None:
    sid = store.create_session("Notes")
    messages = conversation(["q1", "a1", "q2", "a2", "q3", "a3"])
    store.append(sid, messages)
    changed = message_ops.delete_message(store, sid, messages[5].id)
    assert changed.affects(sid, "messages", "vectors", "timeline", "sessions")
    assert not changed.summary
    assert message_ops.edit_truncate(store, sid, messages[4].id).affects(sid, "messages")
    regen = message_ops.regenerate_truncate(store, sid, messages[3].id)
    assert regen.value == messages[2].id
    assert regen.changes.affects(sid, "messages", "vectors", "timeline")
    fork = message_ops.fork_session(store, sid, messages[1].id, "Copy")
    assert fork.changes.sessions
    assert fork.changes.touches(sid)  # the source's timeline gained a line too
    assert fork.changes.touches(fork.value)
    assert _history(store, fork.value) == [("user", "q1"), ("assistant", "a1")]
    assert_layers_agree(store, fork.value)
    assert isinstance(fork.changes, MemoryChanges)


def test_regenerate_answers_the_same_message_again(store: MemoryStore, storage: Storage) -> None:
    sid = store.create_session("t")
    agent = _agent(store, storage, [["the first answer"], ["a better answer"]])
    _turn(agent, sid, "what is a good name for a cat?")
    first = store.history(sid).messages[-1]
    asked = message_ops.regenerate_truncate(store, sid, first.id).value
    result, events = _regenerate(agent, sid, asked)
    assert result.answer == "a better answer"
    saved = [e.message for e in events if isinstance(e, MessageSaved)]
    assert [m.role for m in saved] == ["assistant"]  # no second copy of the question
    assert _history(store, sid) == [
        ("user", "what is a good name for a cat?"),
        ("assistant", "a better answer"),
    ]
    versions = message_ops.answer_versions(store, sid, asked)
    assert [[m.content for m in v] for v in versions] == [["the first answer"], ["a better answer"]]
    assert_layers_agree(store, sid)
    assert_never_found(store, ["first"], {first.id})
    assert any(t.startswith("Answer regenerated") for t in timeline_texts(store, sid))


def test_an_answer_version_holds_its_tool_traffic(store: MemoryStore, storage: Storage) -> None:
    sid = store.create_session("t")
    script: list[list[object]] = [[Call("echo", {"text": "hi"})], ["echoed hi"], ["plain"]]
    agent = _agent(store, storage, script)
    _turn(agent, sid, "please echo hi for me")
    answer = store.history(sid).messages[-1]
    asked = message_ops.regenerate_truncate(store, sid, answer.id).value
    _regenerate(agent, sid, asked)
    versions = message_ops.answer_versions(store, sid, asked)
    assert [[m.role for m in v] for v in versions] == [
        ["assistant", "tool", "assistant"],
        ["assistant"],
    ]
    assert_layers_agree(store, sid)


def test_regenerate_refuses_a_message_that_is_not_last(
    store: MemoryStore, storage: Storage
) -> None:
    sid = store.create_session("t")
    messages = conversation(["q1", "a1"])
    store.append(sid, messages)
    agent = _agent(store, storage, [["x"]])
    with pytest.raises(MessageActionError, match="not the last"):
        _regenerate(agent, sid, messages[0].id)


def test_actions_are_refused_while_a_reply_is_written(store: MemoryStore, storage: Storage) -> None:
    sid = store.create_session("t")
    messages: list[Message] = conversation(["q1", "a1"])
    store.append(sid, messages)
    agent = _agent(store, storage, [["slow", WAIT, " answer"]])
    model = agent.model
    assert isinstance(model, ScriptedChatModel)

    async def main() -> None:
        task = asyncio.create_task(agent.run_turn(sid, "q2"))
        await model.waiting.wait()
        for action in (
            message_ops.delete_message,
            message_ops.edit_truncate,
            message_ops.regenerate_truncate,
            message_ops.fork_session,
        ):
            with pytest.raises(StoreBusyError, match="reply is being written"):
                await storage.run(action, store, sid, messages[0].id)
        model.gate.set()
        await task
        await agent.idle()

    asyncio.run(main())
    message_ops.delete_message(store, sid, messages[0].id)  # free once the turn ended
    assert_layers_agree(store, sid)
