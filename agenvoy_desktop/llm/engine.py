"""The chat model's async face: streaming chat, schema-constrained JSON and embeddings.

:class:`ChatEngine` is what the agent, the summary and the window use (it
satisfies :class:`~agenvoy_desktop.core.model_api.ChatModel`).  Behind it one
worker thread owns the :class:`~agenvoy_desktop.llm.llama_model.LlamaModel` (a
llama.cpp context is not thread-safe): requests queue on that thread and run
one at a time, and their tokens travel back to the caller's asyncio loop
through ``loop.call_soon_threadsafe``.  Loading is lazy and happens on the
worker, so the caller's loop never waits on the disk.  This module also owns
the prompt policy: trimming a chat to fit the context, refusing a JSON prompt
that does not fit, building grammars from JSON schemas and parsing the answers.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from llama_cpp.llama_grammar import LlamaGrammar

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    JsonCompletion,
    ModelOutputError,
    PromptRead,
    StopWhen,
    TextDelta,
)
from agenvoy_desktop.llm.calibration import (
    Calibration,
    calibrate,
    calibration_key,
    stored_calibration,
)
from agenvoy_desktop.llm.chat_format import fit_messages
from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled, thread_plan
from agenvoy_desktop.llm.gguf_info import ModelFileError, read_gguf_info
from agenvoy_desktop.llm.gpu_offload import OffloadPlan, plan_offload, remember_chat_plan
from agenvoy_desktop.llm.llama_model import (
    PROMPT_BATCH,
    FloatArray,
    LlamaModel,
    ModelLoadError,
    Tokens,
    effective_context,
)
from agenvoy_desktop.llm.sampler import JSON_REPETITION_GUARD, chat_guard
from agenvoy_desktop.llm.tool_calls import ToolCallStream, tool_names
from agenvoy_desktop.llm.worker import ModelClosedError, ModelWorker
from agenvoy_desktop.paths import machine_cache_dir
from agenvoy_desktop.settings import ModelSettings, SamplingSettings

__all__ = [
    "JSON_TEMPERATURE",
    "ChatEngine",
    "ModelLoadError",
    "PromptTooLongError",
    "extra_buffers_enabled",  # re-exported: benchmarks/chat_throughput.py reports it
]

log = logging.getLogger(__name__)

READ_AHEAD_CHUNK = 128
"""Prompt tokens a read-ahead evaluates between its checks for a waiting call (~1 s on 2 cores)."""

_T = TypeVar("_T")

JSON_TEMPERATURE = 0.2
"""Low but not zero: greedy decoding gets stuck in loops more easily inside a grammar."""
DRAFT_JSON = True
"""JSON answers (the rolling summary) decode with guesses looked up in the prompt and
the answer so far (:mod:`.lookup`): starter, 6 interleaved pairs, answer tokens
per second 1.31-1.34x (``benchmarks/lab/draft_ab.py``)."""
DRAFT_CHAT = True
"""Chat answers too: decoding 1.36x over 6 pairs, none slower once a refused guess
shortens the next one (with fixed 4-token guesses short prose lost up to 16 %)."""
GRAMMAR_CACHE = 8
"""Grammars kept per engine (see ``ChatEngine._grammar``)."""
REMEMBER_USER_MESSAGE = True
"""A chat answer's penalties and repetition guard count the user's last message as
already said (``Sampler.remember``): measured with the starter on 24 statements, 20
greetings and 32 memory questions (``benchmarks/lab/echo_guard.py``), answers copying five
words of the message fell from 18 to 5, memory answers stayed 32/32.  Not for a round
that offers tools: a search query should quote the user.  A switch for the benchmark."""


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    """The text of the last user message ("" if there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _copied(tools: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """A request's own copy of the tool specs (None for none)."""
    return [dict(t) for t in tools] if tools else None


def _log_read_ahead_failure(future: concurrent.futures.Future[None]) -> None:
    """A read-ahead has no caller to tell: a failure is logged (the next turn reads it all)."""
    if future.cancelled():
        return
    error = future.exception()
    if error is not None and not isinstance(error, _Cancelled):
        log.warning("reading the next prompt ahead failed", exc_info=error)


class PromptTooLongError(ModelOutputError):
    """A :meth:`ChatEngine.complete_json` prompt does not fit the context; nothing was dropped."""


class _Cancelled(Exception):
    """A queued request whose consumer went away before it started."""


@dataclass(eq=False, kw_only=True)
class _Request:
    """What the worker needs to know about one queued call, shared with the caller's loop."""

    stop: asyncio.Event | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.perf_counter)

    def cancelled(self) -> bool:
        # asyncio.Event.is_set() only reads a bool, so the worker may ask it directly:
        # no hop through the loop, the check is as fresh as it can be.
        return self.cancel.is_set() or (self.stop is not None and self.stop.is_set())

    def raise_if_cancelled(self) -> None:
        """Drop a job whose caller gave up (or whose engine closed) while it waited."""
        if self.cancel.is_set():
            raise _Cancelled


@dataclass(eq=False, kw_only=True)
class _ChatRequest(_Request):
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None
    max_tokens: int
    temperature: float
    sampling: SamplingSettings
    avoid_openings: tuple[str, ...] = ()


@dataclass(eq=False, kw_only=True)
class _ReadAhead(_Request):
    """The known start of the next prompt, to be read while nothing else runs."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None


@dataclass(frozen=True, slots=True)
class _End:
    """The worker's job for a stream is over (its future holds any exception)."""

    future: concurrent.futures.Future[None]


class ChatEngine:
    """One chat model on one worker thread, with an asyncio API.

    Constructing it reads nothing; the model loads on the worker at the first
    call (or :meth:`load`).  Calls queue and run one at a time.

    ``threads`` is the decode thread count (None: the physical cores); prompts
    get every logical core unless it asks for fewer than the physical cores
    (:func:`~agenvoy_desktop.llm.cpu_features.thread_plan`).  ``gpu_layers``
    -1 offloads as many layers as fit (:mod:`~agenvoy_desktop.llm.gpu_offload`).
    With ``calibrate`` the first load of a model on this machine measures its
    best prompt batch (:mod:`~agenvoy_desktop.llm.calibration`).
    """

    def __init__(
        self,
        model_path: Path,
        *,
        context_size: int = 4096,
        threads: int | None = None,
        gpu_layers: int = -1,
        temperature: float = 0.7,
        max_answer_tokens: int = 1024,
        seed: int | None = None,
        name: str | None = None,
        sampling: SamplingSettings | None = None,
        calibrate: bool = True,
    ) -> None:
        if context_size < 1:
            raise ValueError(f"context_size must be positive, got {context_size}")
        if max_answer_tokens < 1:
            raise ValueError(f"max_answer_tokens must be positive, got {max_answer_tokens}")
        self.model_path = Path(model_path)
        self.requested_context = context_size
        self.threads, self.threads_batch = thread_plan(threads)
        self.gpu_layers = gpu_layers
        self.calibrate = calibrate
        self.prompt_batch = PROMPT_BATCH
        """Prompt tokens per llama_decode call: the calibrated size once loaded."""
        self.calibration: Calibration | None = None
        self.offload: OffloadPlan | None = None
        """Layers on the GPU and why, once loaded."""
        self.temperature = temperature
        self.max_answer_tokens = max_answer_tokens
        self.seed = seed
        self.sampling = sampling or SamplingSettings(temperature=temperature)
        """Chat answers' sampling (the model's settings); read when each request is made."""
        self._name = name or self.model_path.stem
        self._trained_context: int | None = None
        self._grammars: dict[str, str] = {}  # worker only
        self._lock = threading.Lock()  # guards _active
        self._active: set[_Request] = set()
        self._reading: _ReadAhead | None = None  # the newest read-ahead (guarded by _lock)
        self._worker = ModelWorker(
            self._load,
            thread_name="agenvoy-chat",
            closed_message=f"chat engine {self.name!r} is closed",
        )

    @classmethod
    def from_settings(
        cls, model_path: Path, settings: ModelSettings, sampling: SamplingSettings | None = None
    ) -> ChatEngine:
        return cls(
            model_path,
            context_size=settings.context_size,
            threads=settings.threads,
            gpu_layers=settings.gpu_layers,
            temperature=settings.temperature,
            max_answer_tokens=settings.max_answer_tokens,
            sampling=sampling,
        )

    # -- facts ----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def _model(self) -> LlamaModel | None:
        """The model once the worker has loaded it (read it on the worker only)."""
        return self._worker.model

    @property
    def context_size(self) -> int:
        """Tokens of context (prompt + answer): min(setting, the model's trained context).

        Before the model is loaded this reads the GGUF header once (a fraction
        of a second for a 150k-token vocabulary).
        """
        model = self._model
        if model is not None:
            return model.n_ctx
        if self._trained_context is None:
            try:
                self._trained_context = read_gguf_info(self.model_path).context_length or 0
            except ModelFileError:
                self._trained_context = 0  # unreadable: the load will say why

        return effective_context(self.requested_context, self._trained_context)

    # -- calls ----------------------------------------------------------------------------------
    async def load(self) -> None:
        """Load the model on the worker (idempotent); raises :class:`ModelLoadError`."""
        await self._call(lambda model: None)

    async def count_tokens(self, text: str) -> int:
        return await self._call(lambda model: len(model.tokenize(text)))

    async def count_prompt_tokens(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """Tokens of the prompt :meth:`chat` renders from *messages* and *tools*, untrimmed.

        The Context tab shows this as the exact total: the chat template adds
        role markers and the tool list, which counting each message alone misses.
        """
        batch = list(messages)
        specs = [dict(t) for t in tools] if tools else None

        def count(model: LlamaModel) -> int:
            return len(model.prompt_tokens(model.template.render(batch, specs)))

        return await self._call(count)

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Mean-pooled, L2-normalised embeddings from the chat model: float32 (n, n_embd)."""
        if isinstance(texts, str):
            raise TypeError("expected a sequence of strings, not a single string")
        batch = list(texts)
        for text in batch:
            if not isinstance(text, str):
                raise TypeError(f"texts must be str, got {type(text).__name__}")
        return await self._call(lambda model: model.embed(batch))

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: asyncio.Event | None = None,
        avoid_openings: Sequence[str] = (),
    ) -> AsyncGenerator[ChatEvent, None]:
        """Stream the answer: text deltas and tool calls, then :class:`ChatFinished`.

        ``temperature`` overrides :attr:`sampling`'s; the rest of it applies
        as it is when the call is made.  The answer never starts with one of
        ``avoid_openings`` (:mod:`.openings`).  Once ``stop`` is set no further
        delta is delivered and the stream ends with
        ``ChatFinished(finish_reason="cancelled")``.  Closing the iterator
        or cancelling the consuming task stops the worker within one token.
        """
        request = _ChatRequest(
            messages=[m.copy() for m in messages],
            tools=_copied(tools),
            max_tokens=max_tokens if max_tokens is not None else self.max_answer_tokens,
            temperature=temperature if temperature is not None else self.sampling.temperature,
            sampling=self.sampling,
            stop=stop,
            avoid_openings=tuple(avoid_openings),
        )
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ChatEvent | _End] = asyncio.Queue()

        def push(item: ChatEvent | _End) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the consumer's loop is gone
                request.cancel.set()

        future = self._submit(lambda model: self._chat_job(model, request, push), request)
        future.add_done_callback(lambda done: push(_End(done)))
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _End):
                    self._raise_failure(item.future)
                    yield self._unfinished(request)
                    return
                if isinstance(item, ChatFinished):
                    yield item
                    return
                if not request.cancelled():
                    yield item
        finally:
            request.cancel.set()
            future.cancel()

    async def complete_json(
        self,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        """An answer constrained by ``schema`` (a llama.cpp grammar), parsed.

        *stop_when* is asked after every token that closes a JSON object
        (``}`` in its text) and may end the answer early with a finished
        one (see :class:`~agenvoy_desktop.core.model_api.JsonModel`).  Raises
        :class:`ModelOutputError` when the answer is empty, cut off at
        ``max_tokens`` or not JSON, and :class:`PromptTooLongError` when the
        prompt and ``max_tokens`` do not fit the context (nothing is trimmed:
        a summary must not silently lose its input).
        """
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        schema_text = json.dumps(schema, sort_keys=True, ensure_ascii=False)
        request = _Request()
        copied = [m.copy() for m in messages]
        return await self._call(
            lambda model: self._json_job(
                model, copied, schema_text, max_tokens, request, stop_when=stop_when
            ),
            request,
        )

    def read_ahead(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> None:
        """Read *messages*, the known start of the next prompt, into the KV cache meanwhile.

        Right after an answer the next turn's start is known: the system
        prompt, the summary and the window's history up to that answer.  Read
        while the person reads the answer, the next turn evaluates only what
        is new (its note and message), also after the window's start jumped or
        a summary pass rewrote the summary, when it would otherwise read its
        whole prompt again (~1,000 tokens, 10-25 s on 2 cores without AMX).
        It gives way to every other call: between chunks of
        :data:`READ_AHEAD_CHUNK` tokens it stops when another call waits and
        queues itself again behind it.  A newer read-ahead replaces it; before
        the model is loaded it does nothing.  Returns at once.
        """
        request = _ReadAhead(messages=[m.copy() for m in messages], tools=_copied(tools))
        with self._lock:
            if self._reading is not None:
                self._reading.cancel.set()
            self._reading = request
        self._queue_read_ahead(request)

    def stop_reading_ahead(self) -> None:
        """Call off the read-ahead, queued or running (its head is about to change)."""
        with self._lock:
            if self._reading is not None:
                self._reading.cancel.set()
                self._reading = None

    def forget_prompts(self) -> concurrent.futures.Future[None]:
        """Forget every prompt read so far: a session was reset or removed, or a message
        deleted, and nothing of its text may stay in the model's memory.

        Calls off the read-ahead, then queues on the worker, in order with the
        other calls (a running one finishes first), a job that empties the
        chat context's KV cache and the saved states
        (:meth:`LlamaModel.forget_prompts`); the next prompt is read from its
        first token.  A model not loaded holds nothing and is not loaded for
        it; a closed engine has freed its model.  Returns at once: the future
        ends once the caches are empty (a failure is also logged).
        """
        self.stop_reading_ahead()
        forgotten: concurrent.futures.Future[None] = concurrent.futures.Future()
        request = _Request()

        def check() -> None:
            if self._model is None:
                raise _Cancelled  # nothing loaded: nothing held

        def settle(job: concurrent.futures.Future[None]) -> None:
            error = None if job.cancelled() else job.exception()
            if error is None or isinstance(error, _Cancelled):
                forgotten.set_result(None)
                return
            log.warning("%s: forgetting the prompts read failed", self.name, exc_info=error)
            forgotten.set_exception(error)

        try:
            job = self._submit(lambda model: model.forget_prompts(), request, check=check)
        except ModelClosedError:
            forgotten.set_result(None)
            return forgotten
        job.add_done_callback(settle)
        return forgotten

    def _queue_read_ahead(self, request: _ReadAhead) -> None:
        def check() -> None:
            if request.cancelled() or self._model is None:
                raise _Cancelled

        with contextlib.suppress(ModelClosedError):
            future = self._submit(
                lambda model: self._read_ahead_job(model, request), request, check=check
            )
            future.add_done_callback(_log_read_ahead_failure)

    def close(self) -> None:
        """Stop the worker (a running generation ends within one token) and free the model."""
        self._worker.close(stop_running=self._cancel_active)

    def _cancel_active(self) -> None:
        with self._lock:
            active = list(self._active)
        for request in active:
            request.cancel.set()

    def __enter__(self) -> ChatEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- worker plumbing ------------------------------------------------------------------------
    def _submit(
        self,
        job: Callable[[LlamaModel], _T],
        request: _Request,
        *,
        check: Callable[[], None] | None = None,
    ) -> concurrent.futures.Future[_T]:
        # Registered before the worker's closed check: a close that passes
        # that check later still finds (and cancels) this request.
        with self._lock:
            self._active.add(request)
        try:
            future = self._worker.submit(job, check=check or request.raise_if_cancelled)
        except RuntimeError:
            self._forget(request)
            raise
        future.add_done_callback(lambda _: self._forget(request))
        return future

    def _forget(self, request: _Request) -> None:
        with self._lock:
            self._active.discard(request)

    def _load(self) -> LlamaModel:
        """Load the model (worker thread, first job), measuring its prompt batch once."""
        started = time.perf_counter()
        offload = plan_offload(self.model_path, self.gpu_layers, lambda: self.context_size)
        folder = machine_cache_dir()
        key = calibration_key(
            self.model_path, threads_batch=self.threads_batch, gpu_layers=offload.layers
        )
        self.calibration = stored_calibration(folder, key)
        model = LlamaModel(
            self.model_path,
            n_ctx=self.requested_context,
            threads=self.threads,
            threads_batch=self.threads_batch,
            gpu_layers=offload.layers,
            name=self.name,
            prompt_batch=self.calibration.batch if self.calibration else PROMPT_BATCH,
            flash_attn=self.calibration.flash_attn if self.calibration else None,
        )
        if self.calibration is None and self.calibrate:
            self._calibrate(model, key, folder, on_cpu=offload.layers == 0)
        self.offload, self.prompt_batch = offload, model.prompt_batch
        remember_chat_plan(offload)
        log.info(
            "loaded %s (%s, context %d, threads %d/%d, prompt batch %d, flash attention %s, "
            "GPU %s) in %.2f s",
            self.name,
            self.model_path,
            model.n_ctx,
            self.threads,
            self.threads_batch,
            model.prompt_batch,
            {True: "on", False: "off", None: "auto"}[model.flash_attn],
            offload.reason,
            time.perf_counter() - started,
        )
        return model

    def _calibrate(self, model: LlamaModel, key: str, folder: Path, *, on_cpu: bool) -> None:
        """Measure the prompt batch (and, on the CPU, flash attention) on the loaded weights;
        a failure keeps the defaults."""
        try:
            self.calibration = calibrate(
                model,
                key=key,
                model_name=self.model_path.name,
                threads_batch=self.threads_batch,
                cancelled=lambda: self._worker.closed,
                folder=folder,
                attention=on_cpu,
            )
        except RuntimeError as exc:
            log.warning("%s: prompt batch calibration failed: %s", self.name, exc)
            return
        if self.calibration is None:
            return
        try:
            model.use_settings(self.calibration.batch, self.calibration.flash_attn)
        except ModelLoadError as exc:
            if model.context is None:  # not even the old settings could be restored
                model.close()
                raise
            log.warning("%s: keeping prompt batch %d: %s", self.name, model.prompt_batch, exc)

    async def _call(self, job: Callable[[LlamaModel], _T], request: _Request | None = None) -> _T:
        request = request or _Request()
        future = self._submit(job, request)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            request.cancel.set()
            task = asyncio.current_task()
            if (
                future.cancelled()
                and self._worker.closed
                and task is not None
                and not task.cancelling()
            ):
                raise ModelClosedError(f"chat engine {self.name!r} was closed") from None
            raise
        except _Cancelled:
            raise ModelClosedError(f"chat engine {self.name!r} was closed") from None

    def _raise_failure(self, future: concurrent.futures.Future[None]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None and not isinstance(error, _Cancelled):
            raise error

    def _unfinished(self, request: _Request) -> ChatFinished:
        """The last event of a stream whose job never produced one (closed engine)."""
        return ChatFinished("cancelled", 0, 0, duration_s=time.perf_counter() - request.started)

    # -- jobs (worker thread) -------------------------------------------------------------------
    def _chat_job(
        self, model: LlamaModel, request: _ChatRequest, push: Callable[[ChatEvent], None]
    ) -> None:
        tokens, dropped = self._chat_prompt(model, request)
        max_new = min(request.max_tokens, model.n_ctx - len(tokens))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        parser = ToolCallStream(tool_names(request.tools)) if request.tools else None
        first_token: list[float] = []

        def emit(text: str) -> None:
            for event in parser.feed(text) if parser else (TextDelta(text),):
                push(event)

        def on_token(token: int) -> None:
            if not first_token:
                first_token.append(time.perf_counter())
            text = decoder.decode(model.piece(token))
            if text:
                emit(text)

        sampling = request.sampling
        sampler = model.make_sampler(
            temperature=request.temperature,
            seed=self.seed if sampling.seed < 0 else sampling.seed,
            grammar=None,
            repetition=chat_guard(sampling),
            sampling=sampling,
            avoid_openings=request.avoid_openings,
        )
        if REMEMBER_USER_MESSAGE and not request.tools:  # a tool call may quote the user
            sampler.remember(model.tokenize(last_user_text(request.messages)))
        try:
            reason, generated = model.generate(
                tokens,
                sampler,
                max_new,
                request.cancelled,
                on_token,
                drafts=DRAFT_CHAT,
                on_read=lambda done, total: push(PromptRead(done, total)),
            )
        finally:
            sampler.close()
        if reason != "cancelled":
            tail = decoder.decode(b"", final=True)
            if tail:
                emit(tail)
            if parser is not None:
                for event in parser.finish():
                    push(event)
                if parser.calls:
                    reason = "tool_calls"
        push(
            ChatFinished(
                finish_reason=reason,
                prompt_tokens=len(tokens),
                completion_tokens=generated,
                trimmed_messages=dropped,
                first_token_s=first_token[0] - request.started if first_token else None,
                duration_s=time.perf_counter() - request.started,
            )
        )

    def _read_ahead_job(self, model: LlamaModel, request: _ReadAhead) -> None:
        """Evaluate the request's prompt start; behind a waiting call, queue the rest again."""
        prompt = model.template.render(request.messages, request.tools, add_generation_prompt=False)
        tokens = model.prompt_tokens(prompt)
        if len(tokens) > model.n_ctx - min(self.max_answer_tokens, model.n_ctx // 2):
            return  # the next prompt will be trimmed to fit: its start is not these tokens

        def give_way() -> bool:
            with self._lock:
                waiting = any(other is not request for other in self._active)
            return waiting or request.cancelled()

        if model.read_ahead(tokens, give_way, READ_AHEAD_CHUNK) or request.cancelled():
            return
        follow = _ReadAhead(messages=request.messages, tools=request.tools)
        with self._lock:
            if self._reading is not request:
                return  # replaced meanwhile
            self._reading = follow
        self._queue_read_ahead(follow)

    def _chat_prompt(self, model: LlamaModel, request: _ChatRequest) -> tuple[Tokens, int]:
        """Prompt tokens that leave room for the answer, and how many messages were dropped."""
        reserve = min(request.max_tokens, model.n_ctx // 2)
        budget = model.n_ctx - reserve
        template, tools = model.template, request.tools

        def count(messages: Sequence[ChatMessage]) -> int:
            return len(model.prompt_tokens(template.render(messages, tools)))

        fit = fit_messages(request.messages, budget, count)
        if fit.dropped or fit.shortened:
            log.info(
                "%s: prompt trimmed to fit %d tokens: %d oldest messages dropped, %d shortened",
                self.name,
                budget,
                fit.dropped,
                fit.shortened,
            )
        tokens = model.prompt_tokens(template.render(fit.messages, tools))
        if len(tokens) > budget:  # the system prompt and tool list alone are too long
            log.warning("%s: prompt still %d tokens; keeping its end", self.name, len(tokens))
            tokens = tokens[len(tokens) - budget :]
        return tokens, fit.dropped

    def _json_job(
        self,
        model: LlamaModel,
        messages: list[ChatMessage],
        schema_text: str,
        max_tokens: int,
        request: _Request,
        *,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        grammar = self._grammar(schema_text)
        tokens = model.prompt_tokens(model.template.render(messages))
        if len(tokens) + max_tokens > model.n_ctx:
            raise PromptTooLongError(
                f"{self.name}: the prompt takes {len(tokens)} tokens; with {max_tokens} for the "
                f"answer that exceeds the {model.n_ctx}-token context"
            )
        answer = bytearray()
        finished: list[str] = []  # what stop_when ended the answer with

        def on_token(token: int) -> None:
            piece = model.piece(token)
            answer.extend(piece)
            if stop_when is None or b"}" not in piece or finished:
                return
            if (done := stop_when(answer.decode("utf-8", errors="replace"))) is not None:
                finished.append(done)

        sampler = model.make_sampler(
            temperature=JSON_TEMPERATURE,
            seed=self.seed,
            grammar=grammar,
            repetition=JSON_REPETITION_GUARD,
        )
        try:
            reason, generated = model.generate(
                tokens,
                sampler,
                max_tokens,
                lambda: bool(finished) or request.cancelled(),
                on_token,
                drafts=DRAFT_JSON,
            )
        finally:
            sampler.close()
        if finished:
            reason = "stop"
        if reason == "cancelled":
            raise _Cancelled
        text = (finished[0] if finished else answer.decode("utf-8", errors="replace")).strip()
        if not text:
            raise ModelOutputError(f"{self.name}: the model gave an empty answer")
        try:
            # strict=False: llama.cpp's JSON grammar lets control characters (a raw
            # newline, a tab) into strings; they carry meaning, so accept them.
            value = json.loads(text, strict=False)
        except ValueError as exc:
            if reason == "length":
                raise ModelOutputError(
                    f"{self.name}: the JSON answer was cut off at {max_tokens} tokens"
                ) from exc
            raise ModelOutputError(f"{self.name}: the answer is not valid JSON ({exc})") from exc
        return JsonCompletion(value, text, len(tokens), generated)

    def _grammar(self, schema_text: str) -> str:
        """GBNF for a JSON schema, built once per schema (worker thread).

        Only the last few schemas are kept: the summary's schema names the
        chunk's message handles, so it changes with the chunk size.
        """
        grammar = self._grammars.pop(schema_text, None)
        if grammar is None:
            grammar = LlamaGrammar.from_json_schema(schema_text, verbose=False)._grammar
        self._grammars[schema_text] = grammar  # newest last
        while len(self._grammars) > GRAMMAR_CACHE:
            del self._grammars[next(iter(self._grammars))]
        return grammar
