"""The endpoint backend against a real llama-cpp-python server on 127.0.0.1 (no mocked HTTP).

The server runs the tiny random-weight GGUF, so answers are noise; what is
checked is the plumbing: streaming, tool calls, schema-constrained JSON,
token counts, trimming and cancel.  Failures (a killed, paused or strict
server) are in ``test_openai_chat_failures.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    ModelOutputError,
    TextDelta,
    ToolCallRequest,
)
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.openai_chat import EndpointChatModel, EndpointError
from agenvoy_desktop.llm.worker import ModelClosedError
from agenvoy_desktop.settings import SamplingSettings
from tests.endpoint_server import EndpointServer, free_port, loopback_only, start_server
from tests.tiny_gguf import write_tiny_llama

HELLO: list[ChatMessage] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello."},
]
ASCII_NO_EOS = {
    "logit_bias": {"2": -100.0} | {str(3 + byte): -100.0 for byte in range(0x80, 0x100)}
}
"""Bans the tiny model's end-of-sequence token (2) and its non-ASCII bytes (token 3 + byte).

Its answers then run to ``max_tokens`` and every token is a character of its
own: random bytes would often be held back as incomplete UTF-8 by the server.
"""
LONG = 400
"""Tokens for an answer that is cancelled early (a few seconds if it ran to the end)."""
CITIES = ["Oslo", "Lima"]
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": CITIES}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    yield from loopback_only()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-chat.gguf")


@pytest.fixture(scope="module")
def server(tiny_gguf: Path) -> Iterator[EndpointServer]:
    running = start_server(tiny_gguf, tiny_gguf.parent)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def tools_server(tiny_gguf: Path) -> Iterator[EndpointServer]:
    """The server in the chat format that constrains a forced tool choice to the tool's schema."""
    running = start_server(tiny_gguf, tiny_gguf.parent, chat_format="chatml-function-calling")
    yield running
    running.stop()


def model_for(server: EndpointServer, **kwargs: Any) -> EndpointChatModel:
    model = EndpointChatModel(base_url=server.base_url, model=server.alias, name="tiny", **kwargs)
    model.extra_body = dict(ASCII_NO_EOS)
    return model


async def collect(stream: AsyncIterator[ChatEvent]) -> list[ChatEvent]:
    return [event async for event in stream]


def finished(events: list[ChatEvent]) -> ChatFinished:
    assert isinstance(events[-1], ChatFinished)
    assert not any(isinstance(e, ChatFinished) for e in events[:-1])
    return events[-1]


def text_of(events: list[ChatEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- facts and load --------------------------------------------------------------------------------
def test_constructing_contacts_nothing_and_normalises_the_address() -> None:
    model = EndpointChatModel(base_url="http://127.0.0.1:1/v1/", model="m", name="n")
    assert (model.base_url, model.root_url, model.remote) == (
        "http://127.0.0.1:1/v1",
        "http://127.0.0.1:1",
        False,
    )
    assert EndpointChatModel(base_url="https://example.org/v1", model="m", name="n").remote
    assert model.backend == "endpoint"
    assert model.context_size == 4096


def test_load_checks_that_the_server_serves_the_model(server: EndpointServer) -> None:
    asyncio.run(model_for(server).load())
    absent = EndpointChatModel(base_url=server.base_url, model="absent-7b", name="absent")
    with pytest.raises(EndpointError) as caught:
        asyncio.run(absent.load())
    assert caught.value.kind == "unloaded"
    message = str(caught.value)
    assert server.base_url in message
    assert "absent-7b" in message
    assert "\n" not in message


def test_nothing_listening_is_one_clear_line() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = EndpointChatModel(base_url=url, model="m", name="n")
    with pytest.raises(EndpointError) as caught:
        asyncio.run(collect(model.chat(HELLO)))
    assert caught.value.kind == "refused"
    assert str(caught.value) == f"The server at {url} refused the connection — is it running?"


# -- streaming ---------------------------------------------------------------------------------
def test_chat_streams_text_and_finishes(server: EndpointServer) -> None:
    events = asyncio.run(collect(model_for(server).chat(HELLO, max_tokens=12)))
    done = finished(events)
    assert all(isinstance(e, TextDelta) and e.text for e in events[:-1])
    assert text_of(events)
    assert done.finish_reason == "length"
    assert 0 < done.completion_tokens <= 12
    assert done.prompt_tokens > 0
    assert done.first_token_s is not None
    assert 0 < done.first_token_s <= done.duration_s


def test_the_sampling_seed_makes_answers_repeat(server: EndpointServer) -> None:
    model = model_for(server)
    model.sampling = SamplingSettings(temperature=0.9, seed=1234)

    async def twice() -> tuple[str, str]:
        first = text_of(await collect(model.chat(HELLO, max_tokens=20)))
        second = text_of(await collect(model.chat(HELLO, max_tokens=20)))
        return first, second

    first, second = asyncio.run(twice())
    assert first == second


def test_a_chat_too_long_for_the_context_drops_its_oldest_messages(server: EndpointServer) -> None:
    model = model_for(server, context_size=400)
    history: list[ChatMessage] = []
    for i in range(12):
        history.append({"role": "user", "content": f"question {i} " + "x" * 80})
        history.append({"role": "assistant", "content": f"answer {i} " + "y" * 80})
    history.append({"role": "user", "content": "and now?"})
    events = asyncio.run(collect(model.chat([HELLO[0], *history], max_tokens=8)))
    done = finished(events)
    assert done.trimmed_messages > 0
    assert done.finish_reason == "length"


# -- tool calls --------------------------------------------------------------------------------
def test_a_tool_call_round_trips(tools_server: EndpointServer) -> None:
    model = model_for(tools_server)
    model.extra_body = {}
    ask: list[ChatMessage] = [{"role": "user", "content": "Weather in Oslo?"}]
    forced = {"type": "function", "function": {"name": "get_weather"}}

    async def scenario() -> tuple[list[ChatEvent], list[ChatEvent]]:
        first = await collect(
            model.chat(ask, tools=[WEATHER_TOOL], max_tokens=60, tool_choice=forced)
        )
        calls = [e for e in first if isinstance(e, ToolCallRequest)]
        assert len(calls) == 1
        call = calls[0]
        follow_up: list[ChatMessage] = [
            *ask,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": "sunny, 21 C"},
        ]
        second = await collect(model.chat(follow_up, tools=[WEATHER_TOOL], max_tokens=8))
        return first, second

    first, second = asyncio.run(scenario())
    call = next(e for e in first if isinstance(e, ToolCallRequest))
    assert (call.name, call.error) == ("get_weather", None)
    assert call.arguments["city"] in CITIES
    assert call.id
    assert finished(first).finish_reason == "tool_calls"
    assert finished(second).finish_reason in {"stop", "length", "tool_calls"}


# -- JSON and token counts -------------------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"mood": {"type": "string", "enum": ["calm", "busy"]}, "n": {"type": "integer"}},
    "required": ["mood", "n"],
}


def test_complete_json_follows_the_schema(server: EndpointServer) -> None:
    model = model_for(server)
    model.extra_body = {}

    async def twice() -> list[Any]:
        return [(await model.complete_json(HELLO, SCHEMA, max_tokens=40)).value for _ in range(2)]

    for value in asyncio.run(twice()):
        assert set(value) == {"mood", "n"}
        assert value["mood"] in {"calm", "busy"}
        assert isinstance(value["n"], int)


def test_complete_json_cut_off_is_a_model_output_error(server: EndpointServer) -> None:
    model = model_for(server)
    model.extra_body = {}
    with pytest.raises(ModelOutputError, match="cut off at 3 tokens"):
        asyncio.run(model.complete_json(HELLO, SCHEMA, max_tokens=3))


def test_token_counts_come_from_the_server_tokenizer(
    server: EndpointServer, tiny_gguf: Path
) -> None:
    text = "Count these words, please: ünïcode too."
    model = model_for(server)
    counted = asyncio.run(model.count_tokens(text))
    assert not model.token_counts_estimated
    with ChatEngine(tiny_gguf, context_size=256) as engine:
        assert counted == asyncio.run(engine.count_tokens(text))


# -- cancel ------------------------------------------------------------------------------------
def test_the_stop_event_ends_the_stream_as_cancelled(server: EndpointServer) -> None:
    model = model_for(server)

    async def scenario() -> list[ChatEvent]:
        stop = asyncio.Event()
        events = []
        async for event in model.chat(HELLO, max_tokens=LONG, stop=stop):
            events.append(event)
            stop.set()
        return events

    events = asyncio.run(scenario())
    assert len(events) == 2
    assert finished(events).finish_reason == "cancelled"
    assert finished(events).completion_tokens == 1


def test_stop_set_before_the_start_sends_nothing(server: EndpointServer) -> None:
    async def scenario() -> list[ChatEvent]:
        stop = asyncio.Event()
        stop.set()
        return await collect(model_for(server).chat(HELLO, stop=stop))

    events = asyncio.run(scenario())
    assert len(events) == 1
    assert (finished(events).finish_reason, finished(events).completion_tokens) == ("cancelled", 0)


def test_closing_the_iterator_or_cancelling_the_task_frees_the_model(
    server: EndpointServer,
) -> None:
    model = model_for(server)

    async def scenario() -> str:
        stream = model.chat(HELLO, max_tokens=LONG)
        assert isinstance(await anext(stream), TextDelta)
        await stream.aclose()  # type: ignore[attr-defined]

        got_one = asyncio.Event()

        async def consume() -> None:
            async for _event in model.chat(HELLO, max_tokens=LONG):
                got_one.set()

        task = asyncio.create_task(consume())
        await got_one.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The turn lock was released both times: the next request runs.
        return text_of(await collect(model.chat(HELLO, max_tokens=4)))

    assert asyncio.run(scenario())


def test_close_ends_a_running_stream_and_refuses_new_work(server: EndpointServer) -> None:
    model = model_for(server)

    async def scenario() -> list[ChatEvent]:
        events = []
        async for event in model.chat(HELLO, max_tokens=LONG):
            events.append(event)
            model.close()
        return events

    events = asyncio.run(scenario())
    assert finished(events).finish_reason == "cancelled"
    with pytest.raises(ModelClosedError):
        asyncio.run(collect(model.chat(HELLO)))
