"""Servers that misbehave: each fault named for what the server did, nothing read unbounded.

A stand-in server on 127.0.0.1 (:func:`tests.endpoint_server.fault_server`)
answers chat requests the wrong way on purpose: a finished answer where a
stream was asked for, an HTML page, a 50 MB body, a stream that ignores the
answer limit or trickles forever, a chunk cut off by a dropped connection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig
from agenvoy_desktop.core.model_api import ChatEvent, ChatFinished, TextDelta, ToolCallRequest
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.llm import endpoint_probe, openai_chat
from agenvoy_desktop.llm.openai_chat import EndpointChatModel, EndpointError
from agenvoy_desktop.llm.openai_stream import CHARS_PER_TOKEN_CEILING, MAX_BODY_BYTES, SLACK_TOKENS
from agenvoy_desktop.llm.openai_wire import parse_chunk, parse_completion
from tests.endpoint_server import (
    Behaviour,
    FaultServer,
    cut_mid_chunk,
    empty_body,
    endless_stream,
    fault_server,
    html_page,
    huge_body,
    loopback_only,
    sse,
    trickle,
    whole_answer,
)
from tests.llm.test_openai_chat import HELLO, SCHEMA, WEATHER_TOOL

URL = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    yield from loopback_only()


def model_for(server: FaultServer, **kwargs: Any) -> EndpointChatModel:
    return EndpointChatModel(
        base_url=server.base_url, model=server.model, name="fault", context_size=4096, **kwargs
    )


async def read_all(
    model: EndpointChatModel, **chat: Any
) -> tuple[list[ChatEvent], EndpointError | None]:
    """Every event of one answer, and the error that ended it (None: it ended normally)."""
    events: list[ChatEvent] = []
    try:
        async for event in model.chat(HELLO, **chat):
            events.append(event)
    except EndpointError as exc:
        return events, exc
    return events, None


def answer_from(behaviour: Behaviour, **chat: Any) -> tuple[list[ChatEvent], EndpointError | None]:
    with fault_server(behaviour) as server:
        return asyncio.run(read_all(model_for(server), **chat))


def failure_from(behaviour: Behaviour, **chat: Any) -> tuple[list[ChatEvent], EndpointError]:
    events, error = answer_from(behaviour, **chat)
    assert error is not None, f"the answer ended without an error: {events}"
    assert "\n" not in str(error)
    assert " — " in str(error)  # what happened — what to do
    return events, error


def text_of(events: list[ChatEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- a model list that never ends, or runs to megabytes ------------------------------------------
GUARD_S = 60.0
"""Only so a regression fails instead of hanging the suite."""


def failure_before_answering(listing: Behaviour) -> EndpointError:
    async def ask(server: FaultServer) -> tuple[list[ChatEvent], EndpointError | None]:
        return await asyncio.wait_for(read_all(model_for(server)), GUARD_S)

    with fault_server(whole_answer("never reached"), listing=listing) as server:
        events, error = asyncio.run(ask(server))
        assert server.requests == []  # the chat request was never sent
    assert events == []
    assert error is not None
    assert " — " in str(error)
    return error


def test_a_model_list_that_trickles_forever_ends_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The read timeout never fires on a trickle: only an overall deadline ends it."""
    monkeypatch.setattr(openai_chat, "SIDE_DEADLINE_S", 1.0)
    error = failure_before_answering(trickle())
    assert error.kind == "deadline"
    assert "/v1/models after 1 s" in str(error)


def test_a_model_list_of_megabytes_is_not_read_whole() -> None:
    error = failure_before_answering(huge_body(prefix=b'{"data": ['))
    assert error.kind == "oversize"
    assert "more than 4 MB" in str(error)


def probe_failure(listing: Behaviour) -> EndpointError:
    """What ``models add-endpoint`` (its probe) says of a server with this model list.

    The probe runs on a thread so a regression fails after GUARD_S; leaving the
    server's block stops it, which ends the probe's request too.
    """
    with (
        ThreadPoolExecutor(1) as pool,
        fault_server(whole_answer("unused"), listing=listing) as server,
    ):
        probed = pool.submit(endpoint_probe.probe_server, server.base_url, None, 3.0)
        with pytest.raises(EndpointError) as caught:
            probed.result(timeout=GUARD_S)
    assert " — " in str(caught.value)
    return caught.value


def test_adding_an_endpoint_whose_model_list_trickles_ends_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(endpoint_probe, "PROBE_DEADLINE_S", 1.0)
    error = probe_failure(trickle())
    assert error.kind == "deadline"
    assert "still sending after 1 s" in str(error)


def test_adding_an_endpoint_whose_model_list_is_megabytes_is_refused() -> None:
    error = probe_failure(huge_body(prefix=b'{"data": ['))
    assert error.kind == "oversize"


# -- a finished answer where a stream was asked for ------------------------------------------
def test_a_non_streamed_answer_is_taken_whole() -> None:
    events, error = answer_from(whole_answer("Hello from a server that ignores stream."))
    assert error is None
    assert text_of(events) == "Hello from a server that ignores stream."
    finished = events[-1]
    assert isinstance(finished, ChatFinished)
    assert finished.finish_reason == "stop"
    assert (finished.prompt_tokens, finished.completion_tokens) == (12, 7)


def test_a_non_streamed_tool_call_is_taken_whole() -> None:
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
    }
    events, error = answer_from(whole_answer(None, [call]), tools=[WEATHER_TOOL])
    assert error is None
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert [(c.id, c.name, c.arguments, c.error) for c in calls] == [
        ("call_7", "get_weather", {"city": "Oslo"}, None)
    ]
    finished = events[-1]
    assert isinstance(finished, ChatFinished)
    assert finished.finish_reason == "tool_calls"


def test_the_summary_takes_a_non_streamed_json_answer() -> None:
    with fault_server(whole_answer('{"mood": "calm", "n": 3}')) as server:
        model = model_for(server)
        completion = asyncio.run(model.complete_json(HELLO, SCHEMA, max_tokens=40))
    assert completion.value == {"mood": "calm", "n": 3}


def test_a_whole_completion_parses_arguments_given_as_an_object() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": "",
                    "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    chunk = parse_completion(json.dumps(body), URL)
    assert chunk.tool_parts == [
        {"index": 0, "id": None, "function": {"name": "f", "arguments": '{"a": 1}'}}
    ]
    assert chunk.finish_reason == "tool_calls"


def test_a_whole_completion_that_is_an_error_gives_the_server_words() -> None:
    with pytest.raises(EndpointError, match="model crashed") as caught:
        parse_completion('{"error": {"message": "model crashed"}}', URL)
    assert caught.value.kind == "stream"


def test_an_event_holding_a_whole_message_is_read_like_a_delta() -> None:
    chunk = parse_chunk(
        '{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}', URL
    )
    assert (chunk.text, chunk.finish_reason) == ("hi", "stop")


# -- not a chat answer at all ----------------------------------------------------------------
def test_an_html_page_is_named_as_one() -> None:
    events, error = failure_from(html_page)
    assert error.kind == "malformed"
    assert "answered with an HTML page, not OpenAI chat JSON (is the URL the API's?)" in str(error)
    assert not any(isinstance(e, TextDelta) for e in events)


def test_an_empty_body_is_named_as_one() -> None:
    _, error = failure_from(empty_body)
    assert error.kind == "stream"  # the server failed after taking the request: worth a retry
    assert "answered with an empty body: no answer at all" in str(error)
    assert "stopped sending" not in str(error)


def test_plain_text_is_not_taken_for_a_stream_that_stopped() -> None:
    _, error = failure_from(huge_body(4096, line=b"Service ready.\n"))
    assert error.kind == "malformed"
    assert "Service ready." in str(error)
    assert "stopped sending" not in str(error)


@pytest.mark.parametrize(
    "prefix",
    [b"", b'{"choices": [{"message": {"content": "'],
    ids=["one-line", "json"],
)
def test_a_50_mb_body_is_read_only_up_to_the_cap(prefix: bytes) -> None:
    line = b"x" * 4096 if not prefix else b"a" * 4095 + b"\n"
    _, error = failure_from(huge_body(prefix=prefix, line=line))
    assert error.kind == "oversize"
    assert f"sent more than {MAX_BODY_BYTES // 2**20} MB" in str(error)


def test_a_50_mb_event_is_read_only_up_to_the_cap() -> None:
    prefix = b'data: {"choices": [{"delta": {"content": "'
    events, error = failure_from(huge_body(prefix=prefix, line=b"x" * 4096))
    assert error.kind == "oversize"
    assert not any(isinstance(e, TextDelta) for e in events)


# -- an answer that does not end ----------------------------------------------------------------
def test_a_stream_past_the_answer_limit_is_cut_there_and_what_came_is_kept() -> None:
    events, error = failure_from(endless_stream(), max_tokens=50)
    assert error.kind == "oversize"
    assert "answer limit of 50 tokens" in str(error)
    text = text_of(events)
    assert text.startswith("word word")
    assert len(text) <= (50 + SLACK_TOKENS) * CHARS_PER_TOKEN_CEILING
    assert not any(isinstance(e, ChatFinished) for e in events)


def test_one_huge_chunk_past_the_answer_limit_is_shown_up_to_the_limit() -> None:
    def one_chunk(handler: Any, _stopping: Any) -> None:
        handler.start("text/event-stream")
        handler.wfile.write(sse({"content": "y" * 100_000}) + b"data: [DONE]\n\n")

    events, error = failure_from(one_chunk, max_tokens=10)
    assert error.kind == "oversize"
    assert text_of(events) == "y" * ((10 + SLACK_TOKENS) * CHARS_PER_TOKEN_CEILING)


def test_a_turn_keeps_what_was_shown_when_the_server_ignores_the_limit(
    store: MemoryStore,
) -> None:
    sid = store.create_session("t")
    storage = Storage()
    try:
        with fault_server(endless_stream()) as server:
            config = AgentConfig(window_messages=6, max_answer_tokens=30)
            agent = Agent(storage, store, model_for(server), ToolRegistry([]), config=config)

            async def turn() -> None:
                try:
                    await agent.run_turn(sid, "talk", on_event=lambda _event: None)
                finally:
                    await agent.idle()

            with pytest.raises(EndpointError, match="answer limit of 30 tokens"):
                asyncio.run(turn())
    finally:
        storage.close()
    user, answer = store.history(sid).messages
    assert (user.role, user.content) == ("user", "talk")
    assert answer.content.startswith("word word")
    assert answer.extra.get("interrupted") is True
    assert answer.extra.get("interrupted_by") == "error"


def test_the_answer_limit_is_the_models_own_when_the_caller_gives_none() -> None:
    with fault_server(endless_stream()) as server:
        model = model_for(server)
        model.max_answer_tokens = 20
        events, error = asyncio.run(read_all(model))
    assert error is not None
    assert "answer limit of 20 tokens" in str(error)
    assert server.requests[0]["max_tokens"] == 20
    assert text_of(events)


def test_a_trickling_server_is_cut_at_the_overall_deadline() -> None:
    with fault_server(endless_stream(interval_s=0.02)) as server:
        model = model_for(server, answer_deadline=0.5)  # read timeout stays the default 120 s
        events, error = asyncio.run(read_all(model, max_tokens=1_000_000))
    assert error is not None
    assert error.kind == "deadline"
    assert "still answering after 0.5 s" in str(error)
    assert not error.transient
    assert all(isinstance(e, TextDelta) for e in events)


def test_the_summary_is_not_retried_after_the_deadline() -> None:
    with fault_server(endless_stream(interval_s=0.02)) as server:
        model = model_for(server, answer_deadline=0.3)
        model.retry_delays = (3600.0,)  # a retry would hang the test
        with pytest.raises(EndpointError) as caught:
            asyncio.run(model.complete_json(HELLO, SCHEMA, max_tokens=1_000_000))
    assert caught.value.kind == "deadline"


# -- a dropped connection ------------------------------------------------------------------------
def test_a_chunk_cut_by_a_dropped_connection_is_the_drop() -> None:
    events, error = failure_from(cut_mid_chunk)
    assert error.kind == "stream"
    assert "dropped mid-answer" in str(error)
    assert "not OpenAI chat JSON" not in str(error)
    assert text_of(events) == "Hello there"


def test_an_unterminated_last_event_that_is_whole_still_counts() -> None:
    def sloppy(handler: Any, _stopping: Any) -> None:
        handler.start("text/event-stream")
        handler.wfile.write(sse({"content": "fine"}, finish="stop") + b"data: [DONE]")

    events, error = answer_from(sloppy)
    assert error is None
    assert text_of(events) == "fine"
