"""A model that fails mid-answer: the user's message and the partial answer are kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from agenvoy_desktop.agent.context import FAILED_NOTE
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, AnswerDelta, MessageSaved, TurnEvent
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatEvent, ChatMessage, TextDelta
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.llm.endpoints import describe_answerer
from agenvoy_desktop.llm.llama_model import ModelRunError
from agenvoy_desktop.llm.openai_chat import EndpointError
from tests.scripted_chat import ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")


class FailingModel(ScriptedChatModel):
    """Streams *pieces*, then raises *error* (as a server that stops mid-answer does)."""

    backend = "endpoint"
    base_url = "http://127.0.0.1:11434/v1"
    model = "llama3.1:8b"
    name = "llama3.1:8b"

    def __init__(self, pieces: Sequence[str], error: Exception) -> None:
        super().__init__([])
        self.pieces = list(pieces)
        self.error = error

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: asyncio.Event | None = None,
        avoid_openings: Sequence[str] = (),
    ) -> AsyncIterator[ChatEvent]:
        for piece in self.pieces:
            yield TextDelta(piece)
            await asyncio.sleep(0)
        raise self.error


@pytest.fixture
def storage(store: MemoryStore) -> Iterator[Storage]:
    """The storage thread, closed (its jobs finished) before the store it writes to."""
    opened = Storage()
    yield opened
    opened.close()


def _turn(
    storage: Storage, store: MemoryStore, model: ScriptedChatModel, sid: str, text: str
) -> list[TurnEvent]:
    agent = Agent(storage, store, model, ToolRegistry([]), config=AgentConfig(window_messages=6))
    events: list[TurnEvent] = []

    async def main() -> None:
        try:
            await agent.run_turn(sid, text, on_event=events.append)
        finally:
            await agent.idle()  # the background embedding of what was saved

    asyncio.run(main())
    return events


def _history(store: MemoryStore, sid: str) -> list[Message]:
    return list(store.history(sid).messages)


@pytest.mark.parametrize(
    "error",
    [
        EndpointError("The server at http://127.0.0.1:11434/v1 stopped mid-answer.", "stream"),
        EndpointError("The server sent a chunk that is not JSON.", "malformed"),
        EndpointError("The model 'llama3.1:8b' was unloaded on the server.", "unloaded"),
        ModelRunError("llama.cpp failed while computing (out of memory)"),
    ],
    ids=["stream", "malformed", "unloaded", "local-run-error"],
)
def test_failure_mid_answer_keeps_partial_marked_interrupted(
    storage: Storage, store: MemoryStore, error: Exception
) -> None:
    sid = store.create_session("t")
    with pytest.raises(type(error)) as caught:
        _turn(storage, store, FailingModel(["Par", "tial"], error), sid, "tell me more")
    assert caught.value is error  # the window shows its one line
    user, answer = _history(store, sid)
    assert (user.role, user.content) == ("user", "tell me more")
    assert (answer.role, answer.content, answer.extra.get("interrupted")) == (
        "assistant",
        "Partial",
        True,
    )
    assert describe_answerer(answer.extra.get("answered_by")) == (
        "llama3.1:8b at http://127.0.0.1:11434 (endpoint)"
    )
    # the next turn sees the interrupted answer, not a dangling question
    model = ScriptedChatModel([["fine"]])
    _turn(storage, store, model, sid, "go on")
    sent = model.seen[0].messages
    assert [m["role"] for m in sent[-4:]] == ["user", "assistant", "system", "user"]  # note
    assert sent[-3]["content"].startswith("Partial\n")
    assert sent[-3]["content"].endswith(FAILED_NOTE)  # not "interrupted by the user"


def test_failure_before_any_text_keeps_the_question_only(
    storage: Storage, store: MemoryStore
) -> None:
    sid = store.create_session("t")
    error = EndpointError("Cannot connect to http://127.0.0.1:11434/v1.", "refused")
    with pytest.raises(EndpointError):
        _turn(storage, store, FailingModel([], error), sid, "hello?")
    (user,) = _history(store, sid)
    assert (user.role, user.content) == ("user", "hello?")


def test_events_show_the_partial_then_its_saving(storage: Storage, store: MemoryStore) -> None:
    sid = store.create_session("t")
    agent = Agent(
        storage,
        store,
        FailingModel(["a", "b"], EndpointError("The server stopped.", "stream")),
        ToolRegistry([]),
    )
    events: list[TurnEvent] = []

    async def main() -> None:
        try:
            await agent.run_turn(sid, "q", on_event=events.append)
        finally:
            await agent.idle()

    with pytest.raises(EndpointError):
        asyncio.run(main())
    deltas = [e.text for e in events if isinstance(e, AnswerDelta)]
    saved = [e.message for e in events if isinstance(e, MessageSaved)]
    assert deltas == ["a", "b"]
    assert [(m.role, m.content, m.extra.get("interrupted")) for m in saved] == [
        ("user", "q", None),
        ("assistant", "ab", True),
    ]


def test_answers_record_who_answered(storage: Storage, store: MemoryStore) -> None:
    sid = store.create_session("t")
    _turn(storage, store, ScriptedChatModel([["hi there"]]), sid, "hi")
    answer = _history(store, sid)[-1]
    assert answer.extra["answered_by"] == {
        "model": "scripted-chat",
        "backend": "llama.cpp",
        "address": None,
    }
