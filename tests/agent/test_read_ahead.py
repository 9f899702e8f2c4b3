"""Reading the next turn's prompt start ahead: what is read is how the next prompt starts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from agenvoy_desktop.agent.read_ahead import ReadsAhead
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.store import MemoryStore
from tests.scripted_chat import Call, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")


class ReadingModel(ScriptedChatModel):
    """The scripted model, recording what it is asked to read ahead."""

    def __init__(self, script: Sequence[Sequence[object]]) -> None:
        super().__init__(script)
        self.read: list[tuple[list[ChatMessage], list[dict[str, Any]] | None]] = []
        self.stopped = 0

    def read_ahead(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> None:
        self.read.append(([dict(m) for m in messages], list(tools) if tools else None))  # type: ignore[misc]

    def stop_reading_ahead(self) -> None:
        self.stopped += 1


def _tools() -> ToolRegistry:
    async def echo(args: dict[str, Any]) -> str:
        return str(args.get("text", ""))

    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return ToolRegistry([Tool("echo", "echo text", schema, echo)])


@pytest.fixture
def storage() -> Iterator[Storage]:
    running = Storage()
    yield running
    running.close()


def _agent(
    storage: Storage, store: MemoryStore, script: list[list[object]], **config: Any
) -> tuple[Agent, ReadingModel]:
    model = ReadingModel(script)
    summary = {"text": ""}
    agent = Agent(
        storage,
        store,
        model,
        _tools(),
        summary_text=lambda _sid: summary["text"],
        config=AgentConfig(**config),
    )
    agent.summary_for_test = summary  # type: ignore[attr-defined]
    return agent, model


async def _turn(agent: Agent, sid: str, text: str) -> None:
    await agent.run_turn(sid, text)
    await agent.idle()


def _starts_with(prompt: Sequence[ChatMessage], start: Sequence[ChatMessage]) -> bool:
    return list(prompt[: len(start)]) == list(start) and len(prompt) > len(start)


def test_the_scripted_double_is_a_reader() -> None:
    assert isinstance(ReadingModel([]), ReadsAhead)
    assert not isinstance(ScriptedChatModel([]), ReadsAhead)


def test_what_is_read_is_the_start_of_the_next_prompt(storage: Storage, store: MemoryStore) -> None:
    """Over a window that jumps (6 messages, step 4) and a summary that changes, each
    read-ahead is exactly how the next turn's first prompt starts, tools included."""
    sid = store.create_session("t")
    script: list[list[object]] = [[f"answer {i}"] for i in range(8)]
    agent, model = _agent(storage, store, script, window_messages=6, window_step=4)

    async def main() -> None:
        for i in range(8):
            if i == 5:
                agent.summary_for_test["text"] = "- the user likes tea"  # type: ignore[attr-defined]
                agent.read_ahead_later()  # as the end of a summary pass does
                await agent.idle()
            await _turn(agent, sid, f"message {i}")

    asyncio.run(main())
    # every turn but the last was followed by a read-ahead (and one more after the "pass")
    assert len(model.read) == 8 + 1
    # the read after turn 4 is replaced by the one after the summary changed
    reads = model.read[:4] + model.read[5:]
    for (start, tools), seen in zip(reads, model.seen[1:], strict=False):
        assert _starts_with(seen.messages, start)
        assert tools == seen.tools
        assert seen.messages[len(start)]["role"] in {"system", "user"}  # the note or the message
    assert "likes tea" in model.read[5][0][0]["content"]


def test_the_assumed_tools_are_the_last_turns_first_round(
    storage: Storage, store: MemoryStore
) -> None:
    sid = store.create_session("t")
    script: list[list[object]] = [[Call("echo", {"text": "x"})], ["done"]]
    agent, model = _agent(storage, store, script)
    asyncio.run(_turn(agent, sid, "echo x please"))
    offered = model.seen[0].tools
    assert offered is not None
    assert model.read[-1][1] == offered


def test_only_the_session_last_talked_in_is_read(storage: Storage, store: MemoryStore) -> None:
    first, second = store.create_session("a"), store.create_session("b")
    agent, model = _agent(storage, store, [["one"], ["two"]])

    async def main() -> None:
        await _turn(agent, first, "hello")
        await _turn(agent, second, "hi")
        agent.read_ahead_later(first)  # a summary pass of the other session ended
        await agent.idle()

    asyncio.run(main())
    assert len(model.read) == 2
    assert "hi" in [m["content"] for m in model.read[-1][0]]


def test_a_model_that_cannot_read_ahead_is_left_alone(storage: Storage, store: MemoryStore) -> None:
    sid = store.create_session("t")
    model = ScriptedChatModel([["fine"]])
    agent = Agent(storage, store, model, _tools())
    asyncio.run(_turn(agent, sid, "hello"))
    agent.stop_reading_ahead()  # nothing to stop, nothing raised


def test_a_start_ready_only_once_the_next_turn_began_is_not_read(
    storage: Storage, store: MemoryStore
) -> None:
    """The next message was sent before the read-ahead's storage hop returned: reading
    then would only be called off by the turn's call (and resume between its rounds)."""
    sid = store.create_session("t")
    agent, model = _agent(storage, store, [["one"], ["two"]])

    async def main() -> None:
        await agent.run_turn(sid, "hello")  # its read-ahead's hop queues behind the next turn's
        await agent.run_turn(sid, "and again")
        await agent.idle()

    asyncio.run(main())
    assert len(model.read) == 1
    assert "two" in [m["content"] for m in model.read[0][0]]


def test_a_start_prepared_before_the_model_forgot_is_not_read(
    storage: Storage, store: MemoryStore
) -> None:
    """A reset or delete ran while a read-ahead's storage hop was out: the start it brings
    back may hold the words that went, so it is dropped, and the start read instead is
    prepared again from the store as it is now."""
    sid = store.create_session("t")
    agent, model = _agent(storage, store, [["one"]])

    async def main() -> None:
        await agent.run_turn(sid, "my bike lock code is 4721")  # asks for a read
        agent.prompts_forgotten()  # before that read's storage hop returns
        await agent.idle()

    asyncio.run(main())
    assert len(model.read) == 1  # the read asked for first was dropped, the new one read
    assert "one" in [m["content"] for m in model.read[0][0]]
