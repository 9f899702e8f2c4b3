"""ChatEngine on the real llama.cpp path, with the tiny random-weight GGUF.

The tiny model says nothing meaningful, so tests that need particular output
(UTF-8 split across tokens, tool-call tags) replace the worker's token-to-bytes
step with a script; everything else runs llama.cpp for real.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    ModelOutputError,
    TextDelta,
    ToolCallRequest,
)
from agenvoy_desktop.llm.engine import (
    GRAMMAR_CACHE,
    ChatEngine,
    ModelLoadError,
    PromptTooLongError,
)
from agenvoy_desktop.llm.llama_model import LlamaModel
from agenvoy_desktop.llm.sampler import JSON_REPETITION_GUARD, RepetitionGuard, Sampler
from agenvoy_desktop.settings import ModelSettings
from tests.tiny_gguf import write_tiny_llama

HELLO: list[ChatMessage] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say something."},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-chat.gguf")


@pytest.fixture
def engine(tiny_model: Path) -> Iterator[ChatEngine]:
    with ChatEngine(tiny_model, context_size=1024, seed=7) as chat_engine:
        yield chat_engine


async def collect(stream: Any) -> list[ChatEvent]:
    return [event async for event in stream]


def finished(events: list[ChatEvent]) -> ChatFinished:
    last = events[-1]
    assert isinstance(last, ChatFinished)
    assert not any(isinstance(e, ChatFinished) for e in events[:-1])
    return last


def text_of(events: list[ChatEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def hook_pieces(engine: ChatEngine, hook: Callable[[int, bytes], bytes]) -> None:
    """Route every generated token's bytes through ``hook(n, bytes)`` (n counts from 1)."""
    model = engine._model
    assert model is not None, "load the engine first"
    original = model.piece
    count = 0

    def piece(token: int) -> bytes:
        nonlocal count
        count += 1
        return hook(count, original(token))

    model.piece = piece  # type: ignore[method-assign]


def scripted(pieces: list[bytes]) -> Callable[[int, bytes], bytes]:
    return lambda n, _real: pieces[n - 1] if n <= len(pieces) else b""


# -- loading --------------------------------------------------------------------------------------
def test_nothing_loads_until_the_first_call(tiny_model: Path) -> None:
    engine = ChatEngine(tiny_model)
    try:
        assert not engine.loaded
        assert engine.name == "tiny-chat"
        assert engine.context_size == 2048  # min(4096 requested, 2048 trained), from the header
        assert not engine.loaded
        assert asyncio.run(engine.count_tokens("hello")) > 0
        assert engine.loaded
        assert engine.context_size == 2048
    finally:
        engine.close()
        engine.close()  # twice is fine


def test_from_settings(tiny_model: Path) -> None:
    settings = ModelSettings(context_size=512, threads=1, temperature=0.1, max_answer_tokens=64)
    with ChatEngine.from_settings(tiny_model, settings) as engine:
        assert (engine.context_size, engine.threads, engine.temperature) == (512, 1, 0.1)
        assert engine.max_answer_tokens == 64


@pytest.mark.parametrize("content", [b"this is not a model at all" * 100, b""])
def test_garbage_file_is_a_clear_error_and_the_engine_survives(
    tmp_path: Path, content: bytes
) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(content)
    engine = ChatEngine(bad)

    async def scenario() -> None:
        with pytest.raises(ModelLoadError, match=r"broken\.gguf"):
            await engine.load()
        with pytest.raises(ModelLoadError, match=r"broken\.gguf"):
            await collect(engine.chat(HELLO))

    asyncio.run(scenario())
    assert not engine.loaded
    engine.close()


def test_truncated_and_missing_files(tmp_path: Path, tiny_model: Path) -> None:
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_model.read_bytes()[:100_000])
    for path in (truncated, tmp_path / "missing.gguf"):
        with ChatEngine(path) as engine, pytest.raises(ModelLoadError, match=path.name):
            asyncio.run(engine.load())


def test_closed_engine_refuses_work(tiny_model: Path) -> None:
    engine = ChatEngine(tiny_model)
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(engine.count_tokens("x"))
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(collect(engine.chat(HELLO)))


# -- chat -----------------------------------------------------------------------------------------
def test_chat_streams_text_and_finishes(engine: ChatEngine) -> None:
    events = asyncio.run(collect(engine.chat(HELLO, max_tokens=40)))
    done = finished(events)
    deltas = events[:-1]
    assert deltas
    assert all(isinstance(e, TextDelta) and e.text for e in deltas)
    assert done.finish_reason in {"stop", "length"}
    assert 0 < done.completion_tokens <= 40
    assert done.prompt_tokens > 10
    assert done.first_token_s is not None
    assert 0 < done.first_token_s <= done.duration_s
    text_of(events).encode("utf-8")  # valid UTF-8 (random bytes come out as U+FFFD)


def test_same_seed_same_answer(engine: ChatEngine) -> None:
    async def twice() -> tuple[str, str]:
        first = text_of(await collect(engine.chat(HELLO, max_tokens=30)))
        second = text_of(await collect(engine.chat(HELLO, max_tokens=30)))
        return first, second

    first, second = asyncio.run(twice())
    assert first == second  # also exercises the prompt-prefix cache


def test_an_avoided_opening_is_never_written(engine: ChatEngine) -> None:
    """With every ASCII character banned as an opening, the first token is not one.

    The tiny model's vocabulary is the 256 bytes; which one greedy decoding
    picks differs between CPUs, so the test bans a whole class instead.
    """
    asyncio.run(engine.load())
    model = engine._model
    assert model is not None
    model.vocabulary()  # built before the hook, which would count its 256 lookups
    said: list[bytes] = []
    hook_pieces(engine, lambda _n, real: said.append(real) or real)
    ascii_openings = tuple(chr(code) for code in range(1, 128))
    events = asyncio.run(
        collect(engine.chat(HELLO, max_tokens=4, temperature=0, avoid_openings=ascii_openings))
    )
    assert finished(events).completion_tokens == 4
    assert said[0]
    assert said[0][0] >= 0x80


def test_multibyte_characters_split_across_tokens(engine: ChatEngine) -> None:
    asyncio.run(engine.load())
    hook_pieces(engine, scripted([b"a", b"\xe4", b"\xbd", b"\xa0", b"b", b"\xff", b"\xc3"]))
    events = asyncio.run(collect(engine.chat(HELLO, max_tokens=7)))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["a", "你", "b", "\ufffd", "\ufffd"]
    assert finished(events).finish_reason == "length"


def test_tool_calls_from_the_stream(engine: ChatEngine) -> None:
    answer = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'
    answer += "</tool_call>"
    pieces = [answer[i : i + 3].encode() for i in range(0, len(answer), 3)]
    asyncio.run(engine.load())
    hook_pieces(engine, scripted(pieces))
    events = asyncio.run(collect(engine.chat(HELLO, tools=TOOLS, max_tokens=len(pieces))))
    assert text_of(events) == "Checking."
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("get_weather", {"city": "Oslo"}, None)
    ]
    assert calls[0].id.startswith("call_")
    assert finished(events).finish_reason == "tool_calls"


def test_stop_event_ends_generation_within_one_token(engine: ChatEngine) -> None:
    async def scenario() -> tuple[list[ChatEvent], int]:
        await engine.load()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        generated = 0

        def on_piece(n: int, real: bytes) -> bytes:
            nonlocal generated
            generated = n
            if n == 5:  # ask for a stop from the loop, as the UI's Stop button would
                loop.call_soon_threadsafe(stop.set)
                deadline = time.monotonic() + 5
                while not stop.is_set() and time.monotonic() < deadline:
                    time.sleep(0.001)
            return b"x"

        hook_pieces(engine, on_piece)
        events = await collect(engine.chat(HELLO, max_tokens=500, stop=stop))
        return events, generated

    events, generated = asyncio.run(scenario())
    done = finished(events)
    assert done.finish_reason == "cancelled"
    assert generated == 5  # not one token was sampled after the stop was seen
    assert done.completion_tokens == 5
    assert len(text_of(events)) <= 5


def test_stop_set_before_start(engine: ChatEngine) -> None:
    async def scenario() -> list[ChatEvent]:
        stop = asyncio.Event()
        stop.set()
        return await collect(engine.chat(HELLO, stop=stop))

    events = asyncio.run(scenario())
    assert len(events) == 1
    assert (finished(events).finish_reason, finished(events).completion_tokens) == ("cancelled", 0)


def slow_pieces(engine: ChatEngine, seconds: float) -> list[int]:
    """Make each token take ``seconds``; returns a list that records token numbers."""
    seen: list[int] = []

    def on_piece(n: int, real: bytes) -> bytes:
        seen.append(n)
        time.sleep(seconds)
        return b"y"

    hook_pieces(engine, on_piece)
    return seen


def test_closing_the_iterator_stops_the_worker(engine: ChatEngine) -> None:
    async def scenario() -> tuple[int, float]:
        await engine.load()
        seen = slow_pieces(engine, 0.005)
        stream = engine.chat(HELLO, max_tokens=1000)  # ~5 s if it ran to the end
        first = await anext(stream)
        assert isinstance(first, TextDelta)
        await stream.aclose()
        started = time.perf_counter()
        assert await engine.count_tokens("still serving") > 0
        return len(seen), time.perf_counter() - started

    tokens, wait = asyncio.run(scenario())
    assert tokens < 50
    assert wait < 1.0


def test_cancelling_the_consumer_task_stops_the_worker(engine: ChatEngine) -> None:
    async def scenario() -> int:
        await engine.load()
        seen = slow_pieces(engine, 0.005)
        got_one = asyncio.Event()

        async def consume() -> None:
            async for _event in engine.chat(HELLO, max_tokens=1000):
                got_one.set()

        task = asyncio.create_task(consume())
        await got_one.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await engine.count_tokens("next request runs")
        return len(seen)

    assert asyncio.run(scenario()) < 50


def test_concurrent_requests_take_turns(engine: ChatEngine) -> None:
    async def scenario() -> list[tuple[str, float, float]]:
        await engine.load()
        model = engine._model
        assert model is not None
        spans: list[tuple[str, float, float]] = []
        original = model.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spans.append((threading.current_thread().name, start, time.perf_counter()))

        model.generate = generate  # type: ignore[method-assign]
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        results = await asyncio.gather(
            collect(engine.chat(HELLO, max_tokens=200)),
            collect(engine.chat(HELLO, max_tokens=200)),
            engine.complete_json(HELLO, schema, max_tokens=50),
            engine.embed(["a", "b"]),
        )
        assert finished(results[0]).completion_tokens > 0
        assert finished(results[1]).completion_tokens > 0
        return spans

    spans = asyncio.run(scenario())
    assert len(spans) == 3
    assert len({name for name, _, _ in spans}) == 1  # one worker thread
    ordered = sorted(spans, key=lambda span: span[1])
    for (_, _, end), (_, start, _) in itertools.pairwise(ordered):
        assert end <= start  # never two generations at once


def test_close_during_a_stream_ends_it(tiny_model: Path) -> None:
    engine = ChatEngine(tiny_model, seed=1)

    async def scenario() -> list[ChatEvent]:
        await engine.load()
        slow_pieces(engine, 0.005)
        events: list[ChatEvent] = []
        async for event in engine.chat(HELLO, max_tokens=1000):
            events.append(event)
            if len(events) == 3:
                await asyncio.to_thread(engine.close)
        return events

    events = asyncio.run(scenario())
    assert finished(events).finish_reason == "cancelled"


def test_context_overflow_is_trimmed_not_raised(tiny_model: Path) -> None:
    history: list[ChatMessage] = [{"role": "system", "content": "System rules."}]
    for n in range(30):
        history.append({"role": "user", "content": f"question {n} " + "q" * 60})
        history.append({"role": "assistant", "content": f"answer {n} " + "a" * 60})
    history.append({"role": "user", "content": "the last question"})
    with ChatEngine(tiny_model, context_size=512, seed=3) as engine:
        events = asyncio.run(collect(engine.chat(history, max_tokens=64)))
        done = finished(events)
        assert done.trimmed_messages > 0
        assert done.trimmed_messages % 2 == 0
        assert done.prompt_tokens <= 512 - 64
        assert done.completion_tokens > 0

        huge: list[ChatMessage] = [{"role": "user", "content": "start " + "z" * 5000 + " end"}]
        done = finished(asyncio.run(collect(engine.chat(huge, max_tokens=64))))
        assert done.prompt_tokens <= 512 - 64
        assert done.completion_tokens > 0


# -- JSON and embeddings ----------------------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {
        "mood": {"type": "string", "enum": ["calm", "busy"]},
        "count": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2},
    },
    "required": ["mood", "count", "tags"],
    "additionalProperties": False,
}


def test_complete_json_follows_the_schema(engine: ChatEngine) -> None:
    result = asyncio.run(engine.complete_json(HELLO, SCHEMA, max_tokens=400))
    value = result.value
    assert set(value) == {"mood", "count", "tags"}
    assert value["mood"] in {"calm", "busy"}
    assert isinstance(value["count"], int)
    assert isinstance(value["tags"], list)
    assert len(value["tags"]) <= 2
    assert all(isinstance(tag, str) and len(tag) <= 8 for tag in value["tags"])
    assert result.prompt_tokens > 0
    assert 0 < result.completion_tokens <= 400


LIST_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "minItems": 4,
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {"n": {"type": "string", "enum": ["a", "b"]}},
                "required": ["n"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


def test_stop_when_ends_a_json_answer_with_its_own_text(engine: ChatEngine) -> None:
    """The summarizer's loop stop: shown the answer at each closed object, it may end it."""
    shown: list[str] = []

    def stop(text: str) -> str | None:
        shown.append(text)
        return '{"items": []}'

    whole = asyncio.run(engine.complete_json(HELLO, LIST_SCHEMA, max_tokens=200))
    assert len(whole.value["items"]) == 4
    ended = asyncio.run(engine.complete_json(HELLO, LIST_SCHEMA, max_tokens=200, stop_when=stop))
    assert ended.value == {"items": []}
    assert ended.text == '{"items": []}'
    assert len(shown) == 1  # asked once, at the first "}", and not again
    assert "}" in shown[0]
    assert shown[0].count("}") < whole.text.count("}")
    assert ended.completion_tokens < whole.completion_tokens
    again = asyncio.run(engine.complete_json(HELLO, LIST_SCHEMA, max_tokens=200))
    assert again.value == whole.value  # nothing of the ended answer is left behind


def test_complete_json_cut_off_is_a_model_output_error(engine: ChatEngine) -> None:
    with pytest.raises(ModelOutputError, match="cut off at 3 tokens"):
        asyncio.run(engine.complete_json(HELLO, SCHEMA, max_tokens=3))


def test_complete_json_never_trims_its_prompt(tiny_model: Path) -> None:
    long_input: list[ChatMessage] = [{"role": "user", "content": "w" * 2000}]
    with (
        ChatEngine(tiny_model, context_size=512) as engine,
        pytest.raises(PromptTooLongError, match="512-token context"),
    ):
        asyncio.run(engine.complete_json(long_input, SCHEMA, max_tokens=50))


def test_json_answers_get_the_repetition_guard_and_chat_does_not(engine: ChatEngine) -> None:
    asyncio.run(engine.load())
    model = engine._model
    assert model is not None
    guards: list[RepetitionGuard | None] = []
    original = model.make_sampler

    def spy(**kwargs: Any) -> Sampler:
        guards.append(kwargs.get("repetition"))
        return original(**kwargs)

    model.make_sampler = spy  # type: ignore[method-assign]
    asyncio.run(engine.complete_json(HELLO, SCHEMA, max_tokens=400))
    asyncio.run(collect(engine.chat(HELLO, max_tokens=4)))
    assert guards == [JSON_REPETITION_GUARD, None]


def longest_repeat(tokens: list[int]) -> int:
    """The length of the longest token sequence that occurs twice."""
    length = 0
    while True:
        grams = [tuple(tokens[i : i + length + 1]) for i in range(len(tokens) - length)]
        if len(set(grams)) == len(grams):
            return length
        length += 1


@pytest.mark.parametrize("prompt", ["abc", "the quick brown fox"])
def test_repetition_guard_breaks_loops(tiny_model: Path, prompt: str) -> None:
    """Greedy decoding of the random model loops; with DRY no long run comes back.

    The penalty grows with the length of the run it would continue, so
    runs up to ``allowed_length`` stay possible and longer ones do not.
    """
    model = LlamaModel(tiny_model, n_ctx=512, threads=1, gpu_layers=0, name="tiny")
    try:
        sampler = model.make_sampler(
            temperature=0.0, seed=1, grammar=None, repetition=JSON_REPETITION_GUARD
        )
        out: list[int] = []
        try:
            model.generate(model.tokenize(prompt), sampler, 120, lambda: False, out.append)
        finally:
            sampler.close()
    finally:
        model.close()
    assert len(out) == 120
    assert longest_repeat(out) <= 2 * JSON_REPETITION_GUARD.allowed_length


def test_grammar_cache_keeps_the_newest_schemas(engine: ChatEngine) -> None:
    for n in range(GRAMMAR_CACHE + 3):
        schema = {
            "type": "object",
            "properties": {f"k{n}": {"type": "integer"}},
            "required": [f"k{n}"],
        }
        asyncio.run(engine.complete_json(HELLO, schema, max_tokens=40))
    assert len(engine._grammars) == GRAMMAR_CACHE
    assert f'"k{GRAMMAR_CACHE + 2}"' in next(reversed(engine._grammars))


def test_embeddings_are_pooled_and_normalised(engine: ChatEngine) -> None:
    texts = ["hello world", "hello world", "something else entirely", ""]
    vectors = asyncio.run(engine.embed(texts))
    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[1], rtol=1e-5)
    assert float(vectors[0] @ vectors[2]) < 0.9999
    assert asyncio.run(engine.embed([])).shape == (0, 64)
    with pytest.raises(TypeError):
        asyncio.run(engine.embed("not a list"))


def test_embedding_does_not_disturb_chat(engine: ChatEngine) -> None:
    async def scenario() -> tuple[str, str]:
        before = text_of(await collect(engine.chat(HELLO, max_tokens=20)))
        await engine.embed(["in between"])
        after = text_of(await collect(engine.chat(HELLO, max_tokens=20)))
        return before, after

    before, after = asyncio.run(scenario())
    assert before == after


def test_llama_cpp_writes_to_the_logger_not_the_terminal(
    tiny_model: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agenvoy_desktop.llm.llama_cpp")

    async def scenario(chat_engine: ChatEngine) -> None:
        await collect(chat_engine.chat(HELLO, max_tokens=20))
        await chat_engine.embed(["x"])
        await chat_engine.complete_json(HELLO, SCHEMA, max_tokens=200)

    with ChatEngine(tiny_model, context_size=512, seed=7) as chat_engine:
        asyncio.run(scenario(chat_engine))
    out, err = capfd.readouterr()  # file-descriptor level: what a terminal would show
    assert out == ""
    assert err == ""
    assert any(r.name == "agenvoy_desktop.llm.llama_cpp" for r in caplog.records)


def test_prompt_token_count_includes_the_template_and_the_tools(engine: ChatEngine) -> None:
    """The Context tab's exact total: role markers and the tool list count too."""
    messages: list[ChatMessage] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "What time is it?"},
    ]
    tool = {
        "type": "function",
        "function": {
            "name": "current_time",
            "description": "The current local time.",
            "parameters": {"type": "object", "properties": {}},
        },
    }

    async def main() -> tuple[int, int, int]:
        each = [await engine.count_tokens(m["content"]) for m in messages]
        bare = await engine.count_prompt_tokens(messages)
        with_tools = await engine.count_prompt_tokens(messages, tools=[tool])
        return sum(each), bare, with_tools

    contents, bare, with_tools = asyncio.run(main())
    assert bare > contents
    assert with_tools > bare
