"""Stopping a summary pass: the model's answer ends at once, not at the end of the chunk.

Each test holds the model mid-answer on a gate that is never opened while
the run is expected to end: a run that still waited for the answer would
hang the test instead of passing it.  Three models: a scripted one that
writes its answer piece by piece, the real llama.cpp engine (the tiny test
model; the starter in the slow test), and an endpoint whose server sends the
start of an answer and then nothing until the client hangs up.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage, JsonCompletion, StopWhen
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import PassProgress, Summarizer, SummaryRunResult
from agenvoy_desktop.core.summarizer.runner import STOPPED
from agenvoy_desktop.core.summary import (
    META_FILE,
    SUMMARY_FILE,
    PassRecord,
    read_records,
)
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.openai_chat import EndpointChatModel
from tests.conftest import SECOND, T0, FakeClock, conversation
from tests.endpoint_server import FaultHandler, fault_server, loopback_only, sse
from tests.scripted_model import ScriptedJsonModel, SeenCall, count, numbered_summary
from tests.tiny_gguf import write_tiny_llama

T = TypeVar("T")
SID = "s1"
GATE_SAFETY_S = 120.0
"""Only so that a broken stop fails the test instead of hanging it (never reached)."""


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    yield from loopback_only()  # the endpoint test talks to a server on 127.0.0.1


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def seed(store: MemoryStore, n: int, start: int = 0) -> list[Message]:
    texts = [f"msg-{i:03d} chose topic {i}" for i in range(start, start + n)]
    messages = conversation(texts, start=T0 + start * SECOND)
    if start == 0:
        store.import_messages(messages, SID)
    else:
        store.append(SID, messages, embed=False)
    return messages


def make(store: MemoryStore, model: Any, **kw: Any) -> Summarizer:
    kw.setdefault("clock", FakeClock(start=T0 + 10_000 * SECOND))
    return Summarizer(store, model, **kw)


def files(store: MemoryStore) -> tuple[bytes, bytes]:
    """summary.json and summary.meta.json as they are on disk."""
    folder = store.folder(SID)
    return (folder / SUMMARY_FILE).read_bytes(), (folder / META_FILE).read_bytes()


def first_pass(store: MemoryStore) -> tuple[bytes, bytes]:
    """A summary to keep: 40 messages, 24 folded; then 20 more wait for the next pass."""
    seed(store, 40)
    result = run(make(store, ScriptedJsonModel(numbered_summary)).run(SID))
    assert result.stopped == "done"
    seed(store, 20, start=40)
    return files(store)


class WritingModel(ScriptedJsonModel):
    """Writes its answer a piece at a time and waits on ``gate`` after the first piece.

    ``stop_when`` sees each piece as the engine shows it; ``writing`` is set
    once the answer has begun; ``ended`` says how the call ended.
    """

    def __init__(self) -> None:
        super().__init__(numbered_summary)
        self.gate = asyncio.Event()
        self.writing = asyncio.Event()
        self.ended = ""

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        text = json.dumps(numbered_summary(len(self.calls), messages), sort_keys=True)
        self.calls.append(SeenCall(list(messages), schema, max_tokens))
        try:
            for end in (i + 1 for i, char in enumerate(text) if char == "}"):
                if stop_when is not None:
                    stop_when(text[:end])
                self.writing.set()
                await self.gate.wait()
        except asyncio.CancelledError:
            self.ended = "cancelled"
            raise
        self.ended = "finished"
        return JsonCompletion(json.loads(text), text, 100, count(text))


def kinds(store: MemoryStore) -> list[str]:
    return [record.kind for record in read_records(store.folder(SID))]


def timeline_kinds(store: MemoryStore) -> list[str]:
    return [kind for _, kind, _ in store.archive.events(SID)]


def check_stopped(store: MemoryStore, before: tuple[bytes, bytes]) -> PassRecord:
    """What every stop mid-answer leaves: the files as they were, a ``stopped`` record."""
    assert files(store) == before  # the previous summary and cursor stay
    record = read_records(store.folder(SID))[-1]
    assert record.kind == STOPPED  # "stopped"
    assert record.error is None
    assert record.messages == 20  # the chunk it was writing
    assert record.cursor_after == record.cursor_before
    assert timeline_kinds(store).count("summary_failed") == 0  # a stop is no failure
    return record


def folds_later(store: MemoryStore) -> None:
    """The stopped chunk's messages are still pending: the next pass folds them."""
    summarizer = make(store, ScriptedJsonModel(numbered_summary))
    assert run(summarizer.pending_count(SID)) == 20
    result = run(summarizer.run(SID))
    assert (result.stopped, result.folded) == ("done", 20)
    assert kinds(store)[-1] == "pass"


# -- the scripted model, stopped while it writes ---------------------------------------------
def test_stop_ends_the_answer_without_waiting_for_it(store: MemoryStore) -> None:
    before = first_pass(store)
    model = WritingModel()
    summarizer = make(store, model)
    passes: list[PassRecord] = []
    progress: list[PassProgress] = []
    summarizer.on_pass(lambda _sid, record: passes.append(record))
    summarizer.on_progress(lambda _sid, step: progress.append(step))

    async def scenario() -> tuple[SummaryRunResult, int]:
        task = asyncio.create_task(summarizer.run(SID))
        await model.writing.wait()
        shown = len(progress)
        assert summarizer.stop(SID)
        return await task, shown  # the model's gate is never opened

    result, shown = run(scenario())
    assert not model.gate.is_set()
    assert model.ended == "cancelled"
    assert (result.stopped, result.passes, result.folded, result.remaining) == (
        "cancelled",
        0,
        0,
        20,
    )
    record = check_stopped(store, before)
    assert passes == [record]  # the window hears of it (the status bar clears)
    assert len(progress) == shown  # the token written as it stopped reports nothing
    assert not summarizer.stop(SID)  # nothing runs any more
    folds_later(store)


def test_cancelling_the_task_mid_answer_is_a_stop(store: MemoryStore) -> None:
    """The Summary tab's Stop cancels the run's task: recorded, then the task ends cancelled."""
    before = first_pass(store)
    model = WritingModel()
    summarizer = make(store, model)

    async def scenario() -> None:
        task = asyncio.create_task(summarizer.run(SID))
        await model.writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert not model.gate.is_set()
    assert model.ended == "cancelled"
    check_stopped(store, before)
    assert not (store.folder(SID) / "summary.lock").exists()
    folds_later(store)


def test_the_cancelled_flag_stops_the_answer_too(store: MemoryStore) -> None:
    before = first_pass(store)
    model = WritingModel()
    summarizer = make(store, model)
    flag = threading.Event()

    async def scenario() -> SummaryRunResult:
        task = asyncio.create_task(summarizer.run(SID, cancelled=flag.is_set))
        await model.writing.wait()
        flag.set()
        return await task

    result = run(scenario())
    assert not model.gate.is_set()
    assert (result.stopped, model.ended) == ("cancelled", "cancelled")
    check_stopped(store, before)


def test_stop_session_ends_the_answer(store: MemoryStore) -> None:
    """Before a reset or remove: the pass in flight stops, and stop_session waits for it."""
    before = first_pass(store)
    model = WritingModel()
    summarizer = make(store, model)

    async def scenario() -> tuple[SummaryRunResult, bool]:
        task = asyncio.create_task(summarizer.run(SID))
        await model.writing.wait()
        await summarizer.stop_session(SID)
        ended = task.done()
        return await task, ended

    result, ended = run(scenario())
    assert ended
    assert (result.stopped, model.ended) == ("cancelled", "cancelled")
    check_stopped(store, before)


# -- stops that find no answer being written: as before -----------------------------------------
def test_a_stop_between_chunks_records_no_stop(store: MemoryStore) -> None:
    seed(store, 56)
    model = ScriptedJsonModel(numbered_summary, context_size=1155)
    summarizer = make(store, model, max_answer_tokens=100)

    def stop_after(_sid: str, _record: PassRecord) -> None:
        summarizer.stop(SID)

    summarizer.on_pass(stop_after)
    result = run(summarizer.run(SID))
    assert (result.stopped, result.passes) == ("cancelled", 1)
    assert kinds(store) == ["pass"]


class LoadingModel(ScriptedJsonModel):
    """Counts tokens only once ``loaded`` is set, as a model still loading does."""

    def __init__(self) -> None:
        super().__init__(numbered_summary)
        self.loading = asyncio.Event()
        self.loaded = asyncio.Event()

    async def count_tokens(self, text: str) -> int:
        self.loading.set()
        await self.loaded.wait()
        return await super().count_tokens(text)


@pytest.mark.parametrize("how", ["stop", "cancel"])
def test_a_stop_while_the_model_loads_writes_nothing(store: MemoryStore, how: str) -> None:
    before = first_pass(store)
    model = LoadingModel()
    summarizer = make(store, model)

    async def scenario() -> SummaryRunResult | None:
        task = asyncio.create_task(summarizer.run(SID))
        await model.loading.wait()
        if how == "cancel":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return None
        summarizer.stop(SID)
        model.loaded.set()  # a load cannot be cut short; no answer starts after it
        return await task

    result = run(scenario())
    assert result is None or result.stopped == "cancelled"
    assert model.calls == []
    assert files(store) == before
    assert kinds(store) == ["pass"]


# -- the llama.cpp engine ------------------------------------------------------------------------
class HeldEngine:
    """A :class:`ChatEngine` whose worker thread is held at the answer's first ``}``.

    While held, the engine cannot look at its request, so a run that ends
    meanwhile did not wait for the model.  ``after_release`` counts the
    tokens the engine showed after the gate opened: none, when the stop
    reached the worker (it checks its request after every token).
    """

    def __init__(self, engine: ChatEngine) -> None:
        self.engine = engine
        self.writing = threading.Event()
        self.gate = threading.Event()
        self.after_release = 0

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def context_size(self) -> int:
        return self.engine.context_size

    async def count_tokens(self, text: str) -> int:
        return await self.engine.count_tokens(text)

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        def held(answer: str) -> str | None:
            if self.gate.is_set():
                self.after_release += 1
            elif not self.writing.is_set():
                self.writing.set()
                assert self.gate.wait(GATE_SAFETY_S)
            return stop_when(answer) if stop_when is not None else None

        return await self.engine.complete_json(
            messages, schema, max_tokens=max_tokens, stop_when=held
        )


def stop_engine_mid_answer(store: MemoryStore, engine: ChatEngine) -> None:
    before = first_pass(store)
    held = HeldEngine(engine)
    summarizer = make(store, held)
    progress: list[PassProgress] = []
    summarizer.on_progress(lambda _sid, step: progress.append(step))

    async def scenario() -> tuple[SummaryRunResult, bool, int]:
        task = asyncio.create_task(summarizer.run(SID))
        await asyncio.to_thread(held.writing.wait, GATE_SAFETY_S)
        assert summarizer.stop(SID)
        result = await task
        still_held = not held.gate.is_set()
        shown = len(progress)
        held.gate.set()
        await engine.count_tokens("the worker is free again")
        return result, still_held, shown

    result, still_held, shown = run(scenario())
    assert still_held  # the run ended while the engine was in the middle of its answer
    assert result.stopped == "cancelled"
    assert held.after_release == 0  # the engine wrote no token after the stop
    assert len(progress) == shown
    check_stopped(store, before)


def test_a_stop_ends_the_engines_answer_at_the_next_token(
    store: MemoryStore, tmp_path: Path
) -> None:
    tiny = write_tiny_llama(tmp_path / "tiny.gguf", n_ctx_train=8192)
    with ChatEngine(tiny, context_size=8192, seed=3) as engine:
        stop_engine_mid_answer(store, engine)


@pytest.mark.slow
def test_a_stop_ends_the_starter_models_answer(store: MemoryStore, starter_model: Path) -> None:
    with ChatEngine(starter_model, context_size=8192, threads=2, seed=0) as engine:
        stop_engine_mid_answer(store, engine)


# -- an endpoint ---------------------------------------------------------------------------------
class HangingServer:
    """Sends the start of a JSON answer, then nothing until the client hangs up."""

    def __init__(self) -> None:
        self.answering = threading.Event()
        self.hung_up = threading.Event()

    def __call__(self, handler: FaultHandler, _stopping: threading.Event) -> None:
        handler.start("text/event-stream")
        handler.wfile.write(sse({"role": "assistant", "content": '{"current_discussion": "We'}))
        handler.wfile.flush()
        self.answering.set()
        if handler.rfile.read(1) == b"":  # blocks until the client closes the connection
            self.hung_up.set()


def test_a_stop_closes_the_endpoints_stream(store: MemoryStore) -> None:
    before = first_pass(store)
    server = HangingServer()
    with fault_server(server) as fault:
        model = EndpointChatModel(
            base_url=fault.base_url, model=fault.model, name="fault", context_size=8192
        )
        summarizer = make(store, model)

        async def scenario() -> SummaryRunResult:
            task = asyncio.create_task(summarizer.run(SID))
            assert await asyncio.to_thread(server.answering.wait, GATE_SAFETY_S)
            assert summarizer.stop(SID)
            return await task

        result = run(scenario())
        assert server.hung_up.wait(GATE_SAFETY_S)  # the server learnt the answer is unwanted
    assert result.stopped == "cancelled"
    check_stopped(store, before)
