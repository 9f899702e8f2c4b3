"""ChatEngine.read_ahead and forget_prompts on the real llama.cpp path (the tiny random-weight
GGUF)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from agenvoy_desktop.agent.read_ahead import ForgetsPrompts
from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage
from agenvoy_desktop.llm.engine import READ_AHEAD_CHUNK, ChatEngine
from agenvoy_desktop.llm.llama_model import LlamaModel
from tests.tiny_gguf import write_tiny_llama

START: list[ChatMessage] = [
    {"role": "system", "content": "You are terse. " * 8},
    {"role": "user", "content": "An earlier question about the weather in Graz."},
    {"role": "assistant", "content": "It was sunny and warm all week. " * 2},
]
NEXT: list[ChatMessage] = [
    *START,
    {"role": "system", "content": "Current local time: 10:00."},
    {"role": "user", "content": "And tomorrow?"},
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-chat.gguf")


@pytest.fixture
def engine(tiny_model: Path) -> Iterator[ChatEngine]:
    with ChatEngine(tiny_model, context_size=1024, seed=7, calibrate=False) as chat_engine:
        yield chat_engine


def _drain(engine: ChatEngine) -> None:
    """Wait until every job queued so far has run (the worker is one thread, first in first out)."""
    engine._worker._pool.submit(lambda: None).result(timeout=60)


def _start_tokens(engine: ChatEngine, messages: list[ChatMessage]) -> list[int]:
    model = engine._model
    assert model is not None
    return model.prompt_tokens(model.template.render(messages, add_generation_prompt=False))


def _count_evaluated(engine: ChatEngine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Prompt tokens each prefill evaluates from now on (one entry per prefill)."""
    counts: list[int] = []
    prefill, decode = LlamaModel._prefill, LlamaModel._decode
    busy = [False]

    def counting_prefill(self: LlamaModel, tokens: Any, *args: Any, **kwargs: Any) -> bool:
        counts.append(0)
        busy[0] = True
        try:
            return prefill(self, tokens, *args, **kwargs)
        finally:
            busy[0] = False

    def counting_decode(self: LlamaModel, batch: Any) -> None:
        if busy[0]:
            counts[-1] += int(batch.n_tokens)
        decode(self, batch)

    monkeypatch.setattr(LlamaModel, "_prefill", counting_prefill)
    monkeypatch.setattr(LlamaModel, "_decode", counting_decode)
    return counts


async def _answer(engine: ChatEngine, messages: list[ChatMessage]) -> None:
    async for _event in engine.chat(messages, max_tokens=2, temperature=0.0):
        pass


def test_the_next_prompt_evaluates_only_what_follows_the_start(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(engine.load())
    start = _start_tokens(engine, START)
    assert len(start) > 2 * READ_AHEAD_CHUNK  # read in several chunks
    counts = _count_evaluated(engine, monkeypatch)
    engine.read_ahead(START)
    _drain(engine)
    model = engine._model
    assert model is not None
    assert model._past == start
    asyncio.run(_answer(engine, NEXT))
    whole = len(model.prompt_tokens(model.template.render(NEXT)))
    assert counts[0] == len(start)  # the read-ahead
    assert counts[1] == whole - len(start)  # the turn: its note and message only


def test_nothing_is_loaded_for_a_read_ahead(tiny_model: Path) -> None:
    with ChatEngine(tiny_model, context_size=1024, calibrate=False) as engine:
        engine.read_ahead(START)
        _drain(engine)
        assert not engine.loaded


def test_a_waiting_call_goes_first_and_the_read_ahead_resumes_after_it(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read-ahead queued behind a busy worker, a chat call behind it: the read-ahead gives
    way before its first chunk, the call runs, then the read-ahead finishes."""
    asyncio.run(engine.load())
    counts = _count_evaluated(engine, monkeypatch)
    gate = threading.Event()
    order: list[str] = []
    busy = engine._worker.submit(lambda _model: gate.wait(30))
    engine.read_ahead(START)

    async def main() -> None:
        asked = asyncio.create_task(_answer(engine, [{"role": "user", "content": "Hi"}]))
        await asyncio.sleep(0)  # the call's task runs up to its queue: it is now waiting
        assert any(r is not engine._reading for r in engine._active)
        gate.set()
        await asked
        order.append("answered")

    asyncio.run(main())
    busy.result(timeout=30)
    _drain(engine)
    _drain(engine)
    model = engine._model
    assert model is not None
    assert order == ["answered"]
    assert counts[0] == 0  # the read-ahead gave way at once
    assert model._past == _start_tokens(engine, START)  # and finished after the call


@pytest.mark.parametrize("stop", ["stop_reading_ahead", "forget_prompts"])
def test_a_stopped_read_ahead_reads_nothing(engine: ChatEngine, stop: str) -> None:
    """Called off, or forgotten (a reset ran) while it waited behind a busy worker."""
    asyncio.run(engine.load())
    gate = threading.Event()
    busy = engine._worker.submit(lambda _model: gate.wait(30))
    engine.read_ahead(START)
    getattr(engine, stop)()
    gate.set()
    busy.result(timeout=30)
    _drain(engine)
    model = engine._model
    assert model is not None
    assert model._past == []


def test_a_newer_read_ahead_replaces_the_queued_one(engine: ChatEngine) -> None:
    asyncio.run(engine.load())
    gate = threading.Event()
    busy = engine._worker.submit(lambda _model: gate.wait(30))
    engine.read_ahead(START)
    engine.read_ahead(START[:1])
    gate.set()
    busy.result(timeout=30)
    _drain(engine)
    model = engine._model
    assert model is not None
    assert model._past == _start_tokens(engine, START[:1])


OTHER: list[ChatMessage] = [
    {"role": "system", "content": "Fold these messages into a summary. " * 12},
    {"role": "user", "content": "A note about the red pen."},
]


def _cells_hold_nothing(context: Any) -> bool:
    return int(llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(context), 0)) < 0


def test_forgetting_empties_the_cache_and_the_saved_states(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_answer(engine, NEXT))
    asyncio.run(_answer(engine, OTHER))  # NEXT's state is saved before it is dropped
    asyncio.run(engine.embed(["the weather in Graz"]))
    model = engine._model
    assert model is not None
    assert model._past
    assert model._snapshots.held == 1
    saved = model._snapshots._states[0].data
    assert any(bytes(saved))
    assert not _cells_hold_nothing(model.context)
    assert not _cells_hold_nothing(model._embed_ctx)

    engine.forget_prompts().result(timeout=60)
    assert model._past == []
    assert model._snapshots.held == 0
    assert not any(bytes(saved))  # zeroed, not only dropped
    assert _cells_hold_nothing(model.context)
    assert _cells_hold_nothing(model._embed_ctx)

    counts = _count_evaluated(engine, monkeypatch)
    asyncio.run(_answer(engine, NEXT))
    assert counts == [len(model.prompt_tokens(model.template.render(NEXT)))]  # from zero
    assert model._snapshots.restored == 0


def test_a_queued_forget_waits_for_the_running_call(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(engine.load())
    started, gate = threading.Event(), threading.Event()
    order: list[str] = []
    generate, forget = LlamaModel.generate, LlamaModel.forget_prompts

    def held_generate(self: LlamaModel, *args: Any, **kwargs: Any) -> Any:
        started.set()
        gate.wait(30)
        result = generate(self, *args, **kwargs)
        order.append("answered")
        return result

    def noted_forget(self: LlamaModel) -> None:
        order.append("forgot")
        forget(self)

    monkeypatch.setattr(LlamaModel, "generate", held_generate)
    monkeypatch.setattr(LlamaModel, "forget_prompts", noted_forget)

    async def main() -> ChatFinished:
        finished: list[ChatFinished] = []

        async def answer() -> None:
            async for event in engine.chat(NEXT, max_tokens=2, temperature=0.0):
                if isinstance(event, ChatFinished):
                    finished.append(event)

        asked = asyncio.create_task(answer())
        assert await asyncio.to_thread(started.wait, 30)  # the answer is being written
        forgotten = engine.forget_prompts()
        assert not forgotten.done()
        gate.set()
        await asked
        await asyncio.wrap_future(forgotten)
        return finished[0]

    finished = asyncio.run(main())
    assert finished.finish_reason != "cancelled"  # the running call was not cut short
    assert order == ["answered", "forgot"]
    model = engine._model
    assert model is not None
    assert model._past == []


def test_nothing_is_loaded_to_forget_and_a_closed_engine_forgets_at_once(
    tiny_model: Path,
) -> None:
    with ChatEngine(tiny_model, context_size=1024, calibrate=False) as engine:
        assert isinstance(engine, ForgetsPrompts)  # what AppServices.forget_prompts asks
        engine.forget_prompts().result(timeout=60)
        assert not engine.loaded
    assert engine.forget_prompts().result(timeout=0) is None
