"""How the endpoint backend fails: one clear line, the partial answer kept, the summary retried.

Each test that kills or pauses its server gets a server of its own (a real
``llama_cpp.server`` process on 127.0.0.1).  A paused (SIGSTOPped) server is
the slow one: the kernel still accepts the connection, nothing answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.model_api import ChatEvent, ChatFinished, TextDelta
from agenvoy_desktop.llm.openai_chat import EndpointChatModel, EndpointError
from agenvoy_desktop.llm.openai_wire import http_error, parse_chunk
from tests.endpoint_server import EndpointServer, loopback_only, start_server
from tests.llm.test_openai_chat import ASCII_NO_EOS, HELLO, LONG, SCHEMA, WEATHER_TOOL
from tests.tiny_gguf import write_tiny_llama

URL = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    yield from loopback_only()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-chat.gguf")


@pytest.fixture
def own_server(tiny_gguf: Path, tmp_path: Path) -> Iterator[EndpointServer]:
    """A server this test may kill or pause."""
    running = start_server(tiny_gguf, tmp_path)
    yield running
    running.stop()


def model_for(server: EndpointServer, **kwargs: Any) -> EndpointChatModel:
    model = EndpointChatModel(base_url=server.base_url, model=server.alias, name="tiny", **kwargs)
    model.extra_body = dict(ASCII_NO_EOS)
    return model


async def read_until_failure(
    model: EndpointChatModel, after_first: Any
) -> tuple[list[ChatEvent], EndpointError]:
    """Stream an answer, call ``after_first()`` at its first delta; what came, and the error."""
    events: list[ChatEvent] = []
    try:
        async for event in model.chat(HELLO, max_tokens=LONG):
            if not events:
                after_first()
            events.append(event)
    except EndpointError as exc:
        return events, exc
    raise AssertionError(f"the stream ended without an error after {len(events)} events")


def assert_one_line(error: EndpointError, server: EndpointServer) -> None:
    message = str(error)
    assert server.base_url in message
    assert "\n" not in message
    assert " — " in message  # what happened — what to do


# -- mid-stream --------------------------------------------------------------------------------
def test_a_server_killed_mid_stream_keeps_the_deltas_and_raises(own_server: EndpointServer) -> None:
    events, error = asyncio.run(read_until_failure(model_for(own_server), own_server.kill))
    assert events
    assert all(isinstance(e, TextDelta) for e in events)
    assert error.kind == "stream"
    assert_one_line(error, own_server)


def test_a_server_that_stops_answering_mid_stream_times_out(own_server: EndpointServer) -> None:
    model = model_for(own_server, read_timeout=1.0)
    events, error = asyncio.run(read_until_failure(model, own_server.pause))
    assert events
    assert all(isinstance(e, TextDelta) for e in events)
    assert error.kind == "timeout"
    assert "1 s" in str(error)
    assert_one_line(error, own_server)


def test_a_server_that_never_answers_times_out_before_any_delta(
    own_server: EndpointServer,
) -> None:
    model = model_for(own_server, read_timeout=0.5)
    asyncio.run(model.load())
    own_server.pause()
    events, error = asyncio.run(read_until_failure(model, lambda: None))
    assert events == []
    assert error.kind == "timeout"


def test_stop_works_while_a_server_has_not_answered_yet(own_server: EndpointServer) -> None:
    model = model_for(own_server, read_timeout=600.0)  # a stop that waited would hang the test
    asyncio.run(model.load())
    own_server.pause()  # like a server evaluating a long prompt: not even headers yet

    async def scenario() -> list[ChatEvent]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.3, stop.set)
        return [event async for event in model.chat(HELLO, stop=stop)]

    events = asyncio.run(scenario())
    assert len(events) == 1
    assert isinstance(events[0], ChatFinished)
    assert events[0].finish_reason == "cancelled"


# -- the summary's retries -------------------------------------------------------------------
def test_complete_json_retries_a_server_that_was_away(
    own_server: EndpointServer, caplog: pytest.LogCaptureFixture
) -> None:
    model = model_for(own_server, read_timeout=3.0)
    model.extra_body = {}
    model.retry_delays = (0.5,) * 40
    asyncio.run(model.load())
    own_server.pause()

    async def scenario() -> Any:
        async def resume_after_a_failed_try() -> None:
            while not any("trying again" in r.getMessage() for r in caplog.records):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            own_server.resume()

        resumer = asyncio.create_task(resume_after_a_failed_try())
        try:
            return (await model.complete_json(HELLO, SCHEMA, max_tokens=40)).value
        finally:
            resumer.cancel()

    with caplog.at_level(logging.WARNING, logger="agenvoy_desktop.llm.openai_chat"):
        value = asyncio.run(scenario())
    assert set(value) == {"mood", "n"}
    assert any(
        "timeout" in r.getMessage() or "sent nothing" in r.getMessage() for r in caplog.records
    )


def test_a_refused_key_is_not_retried_and_says_what_to_do(tiny_gguf: Path, tmp_path: Path) -> None:
    server = start_server(tiny_gguf, tmp_path, extra_args=["--api_key", "right-key"])
    try:
        wrong = model_for(server, api_key="wrong-key")
        wrong.retry_delays = (3600.0,)  # a retry would hang the test
        with pytest.raises(EndpointError) as caught:
            asyncio.run(wrong.complete_json(HELLO, SCHEMA, max_tokens=20))
        assert caught.value.kind == "auth"
        assert_one_line(caught.value, server)
        asyncio.run(model_for(server, api_key="right-key").load())
    finally:
        server.stop()


# -- refusals ------------------------------------------------------------------------------------
def test_chat_with_a_model_the_server_lacks_says_so(own_server: EndpointServer) -> None:
    model = EndpointChatModel(base_url=own_server.base_url, model="gone-13b", name="gone")
    with pytest.raises(EndpointError) as caught:
        asyncio.run(anext(model.chat(HELLO)))
    assert caught.value.kind == "unloaded"
    assert "gone-13b" in str(caught.value)


def test_an_http_error_from_the_server_is_one_line(own_server: EndpointServer) -> None:
    model = model_for(own_server)
    model.extra_body = {"temperature": "hot"}  # the server refuses the request (HTTP 500)
    with pytest.raises(EndpointError) as caught:
        asyncio.run(anext(model.chat(HELLO)))
    assert caught.value.kind == "http"
    assert caught.value.status == 500
    assert "temperature" in str(caught.value)
    assert_one_line(caught.value, own_server)


def test_a_server_that_fails_after_accepting_the_request_is_a_stream_error(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    server = start_server(tiny_gguf, tmp_path, chat_format="chatml-function-calling")
    try:
        model = model_for(server)
        model.extra_body = {}
        missing = {"type": "function", "function": {"name": "not_offered"}}
        with pytest.raises(EndpointError) as caught:
            asyncio.run(anext(model.chat(HELLO, tools=[WEATHER_TOOL], tool_choice=missing)))
        assert caught.value.kind == "stream"
        assert_one_line(caught.value, server)
    finally:
        server.stop()


# -- what a chunk may hold (pure functions, no HTTP) ---------------------------------------
@pytest.mark.parametrize(
    "data", ["{not json", "[1, 2]", '{"choices": 3}', '{"choices": [{"x": 1}]}']
)
def test_a_malformed_chunk_is_one_line(data: str) -> None:
    with pytest.raises(EndpointError) as caught:
        parse_chunk(data, URL)
    assert caught.value.kind == "malformed"
    assert URL in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_error_chunk_ends_the_stream_with_the_server_words() -> None:
    with pytest.raises(EndpointError, match="out of memory") as caught:
        parse_chunk('{"error": {"message": "CUDA out of\\nmemory", "code": 500}}', URL)
    assert caught.value.kind == "stream"
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (401, {"error": {"message": "bad key"}}, "auth"),
        (404, {"error": {"message": 'model "qwen" not found, try pulling it first'}}, "unloaded"),
        (400, {"error": {"message": "model 'x' is not loaded"}}, "unloaded"),
        (500, "Internal Server Error", "http"),
        (503, {"detail": "Loading model"}, "http"),
    ],
)
def test_http_statuses_map_to_kinds(status: int, body: object, kind: str) -> None:
    error = http_error(status, body, URL, "qwen")
    assert error.kind == kind
    assert error.status == status
    assert error.transient == (status >= 500)
