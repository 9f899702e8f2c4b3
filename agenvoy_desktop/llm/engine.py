"""The chat model: streaming chat, schema-constrained JSON and embeddings on llama.cpp.

:class:`ChatEngine` is the async face the agent, the summary and the window
use (it satisfies :class:`~agenvoy_desktop.core.model_api.ChatModel`).  Behind
it one worker thread owns the llama.cpp model and context (a llama.cpp context
is not thread-safe): requests queue on that thread and run one at a time, and
their tokens travel back to the caller's asyncio loop through
``loop.call_soon_threadsafe``.  Loading is lazy and happens on the worker, so
the caller's loop never waits on the disk.

The worker drives llama.cpp through llama-cpp-python's C bindings (like
:mod:`agenvoy_desktop.llm.embedder`), not its ``Llama`` class:
``Llama(verbose=False)`` silences llama.cpp by redirecting the whole process's
stdout/stderr file descriptors around every load and generation, which would
swallow what other threads print (the CLI streams answers to stdout), and
``verbose=True`` prints to stderr itself.  llama.cpp's log goes to the
``agenvoy_desktop.llm.llama_cpp`` logger.  Our own token loop is short: a
prefill that reuses the KV cache of the previous prompt's common prefix, then
sample / decode one token at a time, with a cancellation check before each
step, so ``stop`` takes effect within one token.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import ctypes
import json
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp.llama_grammar import LlamaGrammar

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    FinishReason,
    JsonCompletion,
    ModelOutputError,
    TextDelta,
)
from agenvoy_desktop.llm.chat_format import ChatTemplate, fit_messages
from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled
from agenvoy_desktop.llm.embedder import LOG_ROUTER, route_llama_logs
from agenvoy_desktop.llm.gguf_info import ModelFileError, read_gguf_info
from agenvoy_desktop.llm.tool_calls import ToolCallStream
from agenvoy_desktop.llm.worker import ModelWorker
from agenvoy_desktop.settings import ModelSettings, default_threads

log = logging.getLogger(__name__)

_T = TypeVar("_T")
FloatArray = npt.NDArray[np.float32]
Tokens = list[int]

PROMPT_BATCH = 512
"""Prompt tokens per llama_decode call (llama.cpp's usual n_batch)."""
EMBED_CONTEXT = 512
"""Tokens an embedded text may have (longer texts are truncated)."""
MIN_CONTEXT = 256
JSON_TEMPERATURE = 0.2
"""Low but not zero: greedy decoding gets stuck in loops more easily inside a grammar."""
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05
_ALL_LAYERS = 0x7FFFFFFF


class ModelLoadError(RuntimeError):
    """The model file is missing, not a GGUF, damaged, or llama.cpp cannot run it."""


class PromptTooLongError(ModelOutputError):
    """A :meth:`ChatEngine.complete_json` prompt does not fit the context; nothing was dropped."""


class _Cancelled(Exception):
    """A queued request whose consumer went away before it started."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class _LlamaModel:
    """A loaded model, its chat context and (lazily) an embedding context.

    Worker thread only.  ``_past`` mirrors the tokens in the chat context's
    KV cache, so the next prompt re-evaluates only what changed (a chat turn
    shares the system prompt, tool list and history with the one before).
    """

    def __init__(self, path: Path, *, n_ctx: int, threads: int, gpu_layers: int, name: str) -> None:
        self.path = path
        self.name = name
        self.threads = threads
        self._model: Any = None
        self.context: Any = None
        self._embed_ctx: Any = None
        self._embed_batch: Any = None
        route_llama_logs()
        try:
            read_gguf_info(path)  # a clear message for missing / non-GGUF / truncated files
        except ModelFileError as exc:
            raise ModelLoadError(str(exc)) from exc
        LOG_ROUTER.start_capture()
        try:
            self._load(n_ctx, gpu_layers)
        except BaseException:
            self.close()
            raise
        finally:
            LOG_ROUTER.stop_capture()
        self._past: Tokens = []
        self._pieces: dict[int, bytes] = {}
        self._one = (llama_cpp.llama_token * 1)()
        self._one_batch = llama_cpp.llama_batch_get_one(self._one, 1)
        self.template = self._chat_template()

    def _load(self, n_ctx: int, gpu_layers: int) -> None:
        params = llama_cpp.llama_model_default_params()
        if llama_cpp.llama_supports_gpu_offload():
            params.n_gpu_layers = _ALL_LAYERS if gpu_layers < 0 else gpu_layers
        else:
            params.n_gpu_layers = 0
        params.use_extra_bufts = extra_buffers_enabled()
        self._model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), params)
        if not self._model:
            self._model = None
            raise ModelLoadError(self._failure("llama.cpp could not load the model"))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(self._model))
        limit = self.n_ctx_train if self.n_ctx_train > 0 else n_ctx
        self.n_ctx = max(min(MIN_CONTEXT, limit), min(n_ctx, limit))
        self.n_embd = int(llama_cpp.llama_model_n_embd(self._model))
        self.context = self._new_context(self.n_ctx, embeddings=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._memory = llama_cpp.llama_get_memory(self.context)

    def _new_context(self, n_ctx: int, *, embeddings: bool) -> Any:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_ctx if embeddings else PROMPT_BATCH
        params.n_ubatch = params.n_batch
        params.n_seq_max = 1
        params.n_threads = self.threads
        params.n_threads_batch = self.threads
        params.no_perf = True
        if embeddings:
            params.embeddings = True
            params.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_MEAN
        ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not ctx:
            raise ModelLoadError(self._failure("llama.cpp could not create a context"))
        return ctx

    def _failure(self, what: str) -> str:
        errors = LOG_ROUTER.captured()
        detail = "; ".join(errors[-3:]) if errors else "corrupt or unsupported GGUF?"
        return f"{self.path}: {what} ({detail})"

    def _chat_template(self) -> ChatTemplate:
        raw = llama_cpp.llama_model_chat_template(self._model, None)
        source = raw.decode("utf-8", errors="replace") if raw else None
        return ChatTemplate(
            source,
            bos_token=self._special_text(llama_cpp.llama_vocab_bos(self.vocab)),
            eos_token=self._special_text(llama_cpp.llama_vocab_eos(self.vocab)),
            model=self.name,
        )

    def _special_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._token_bytes(token, special=True).decode("utf-8", errors="replace")

    # -- tokens -------------------------------------------------------------------------------
    def tokenize(self, text: str, *, add_special: bool = False) -> Tokens:
        """Token ids of ``text``; special tokens written in it (``<|im_start|>``) are parsed."""
        data = text.encode("utf-8", errors="replace")
        size = len(data) + 8
        while True:
            buf = (llama_cpp.llama_token * size)()
            n = int(
                llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, size, add_special, True)
            )
            if n >= 0:
                return list(buf[:n])
            if -n <= size:
                raise RuntimeError(f"{self.path}: tokenization failed")
            size = -n

    def prompt_tokens(self, prompt: str) -> Tokens:
        """The rendered prompt's tokens, with BOS added unless the template wrote it."""
        bos = self.template.bos_token
        add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        tokens = self.tokenize(prompt, add_special=add_bos and not (bos and prompt.startswith(bos)))
        return tokens or [self._fallback_token()]

    def _fallback_token(self) -> int:
        """Something to decode when a text has no tokens at all (an empty prompt)."""
        bos = int(llama_cpp.llama_vocab_bos(self.vocab))
        return bos if bos >= 0 else int(llama_cpp.llama_vocab_eos(self.vocab))

    def piece(self, token: int) -> bytes:
        """The bytes a generated token stands for (control tokens are empty)."""
        cached = self._pieces.get(token)
        if cached is None:
            cached = self._pieces[token] = self._token_bytes(token, special=False)
        return cached

    def _token_bytes(self, token: int, *, special: bool) -> bytes:
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(llama_cpp.llama_token_to_piece(self.vocab, token, buf, size, 0, special))
            if n >= 0:
                return buf.raw[:n]
            size = -n

    # -- generation ---------------------------------------------------------------------------
    def make_sampler(
        self, *, temperature: float, seed: int | None, grammar: str | None
    ) -> _Sampler:
        """Sampling state for one request; the caller closes it."""
        return _Sampler(self, temperature=temperature, seed=seed, grammar=grammar)

    def generate(
        self,
        tokens: Tokens,
        sampler: _Sampler,
        max_new: int,
        cancelled: Callable[[], bool],
        on_token: Callable[[int], None],
    ) -> tuple[FinishReason, int]:
        """Prefill ``tokens`` and sample up to ``max_new`` tokens: (finish reason, generated).

        ``cancelled`` is asked before every decode and before every sample.
        """
        if not self._prefill(tokens, cancelled):
            return "cancelled", 0
        generated = 0
        vocab = self.vocab
        while generated < max_new and len(self._past) < self.n_ctx:
            if cancelled():
                return "cancelled", generated
            token = sampler.sample()
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                return "stop", generated
            generated += 1
            on_token(token)
            if generated >= max_new or cancelled():
                break
            self._one[0] = token
            self._decode(self._one_batch)
            self._past.append(token)
        return ("cancelled" if cancelled() else "length"), generated

    def _prefill(self, tokens: Tokens, cancelled: Callable[[], bool]) -> bool:
        """Evaluate ``tokens``, reusing the cached common prefix; False if cancelled."""
        keep = min(_common_prefix(self._past, tokens), len(tokens) - 1)
        if keep < len(self._past):
            if not llama_cpp.llama_memory_seq_rm(self._memory, 0, keep, -1):
                llama_cpp.llama_memory_clear(self._memory, True)
                keep = 0
            del self._past[keep:]
        for start in range(keep, len(tokens), PROMPT_BATCH):
            if cancelled():
                return False
            chunk = tokens[start : start + PROMPT_BATCH]
            array = (llama_cpp.llama_token * len(chunk))(*chunk)
            self._decode(llama_cpp.llama_batch_get_one(array, len(chunk)))
            self._past.extend(chunk)
        return True

    def _decode(self, batch: Any) -> None:
        rc = int(llama_cpp.llama_decode(self.context, batch))
        if rc != 0:
            llama_cpp.llama_memory_clear(self._memory, True)
            self._past.clear()
            raise RuntimeError(f"{self.path}: llama_decode failed with code {rc}")

    # -- embeddings ---------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Mean-pooled, L2-normalised hidden states of the chat model, one row per text."""
        out = np.zeros((len(texts), self.n_embd), dtype=np.float32)
        if not texts:
            return out
        ctx, n_max = self._embedding_context()
        batch = self._embed_batch
        memory = llama_cpp.llama_get_memory(ctx)
        for row, text in enumerate(texts):
            tokens = self.tokenize(text, add_special=True)[:n_max]
            if not tokens:
                tokens = [self._fallback_token()]
            for i, token in enumerate(tokens):
                batch.token[i] = token
                batch.pos[i] = i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1
            batch.n_tokens = len(tokens)
            if memory:
                llama_cpp.llama_memory_clear(memory, True)
            rc = int(llama_cpp.llama_decode(ctx, batch))
            if rc != 0:
                raise RuntimeError(f"{self.path}: llama_decode (embeddings) failed with code {rc}")
            pooled = llama_cpp.llama_get_embeddings_seq(ctx, 0)
            if not pooled:
                raise RuntimeError(f"{self.path}: llama.cpp returned no pooled embedding")
            out[row] = np.ctypeslib.as_array(pooled, shape=(self.n_embd,))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.maximum(norms, 1e-12, out=norms)
        out /= norms
        return out

    def _embedding_context(self) -> tuple[Any, int]:
        n_max = min(EMBED_CONTEXT, self.n_ctx_train if self.n_ctx_train > 0 else EMBED_CONTEXT)
        if self._embed_ctx is None:
            LOG_ROUTER.start_capture()
            try:
                self._embed_ctx = self._new_context(n_max, embeddings=True)
            finally:
                LOG_ROUTER.stop_capture()
            self._embed_batch = llama_cpp.llama_batch_init(n_max, 0, 1)
        return self._embed_ctx, n_max

    def close(self) -> None:
        if self._embed_batch is not None:
            llama_cpp.llama_batch_free(self._embed_batch)
            self._embed_batch = None
        for attr in ("_embed_ctx", "context"):
            ctx = getattr(self, attr)
            if ctx is not None:
                llama_cpp.llama_free(ctx)
                setattr(self, attr, None)
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class _Sampler:
    """Token sampling for one request (worker thread only).

    A JSON-schema grammar is checked lazily, the way llama.cpp's own
    ``common_sampler`` does it: sample without the grammar, ask the grammar
    whether that one token is allowed, and only if it is not, apply the
    grammar to the whole vocabulary and sample again.  Applying it to every
    one of Qwen's 151,936 tokens costs ~50 ms per token, twice a decode.
    """

    def __init__(
        self, model: _LlamaModel, *, temperature: float, seed: int | None, grammar: str | None
    ) -> None:
        self._ctx = model.context
        self._grammar: Any = None
        self._chain = self._new_chain(temperature, seed)
        if grammar is not None:
            self._grammar = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar.encode("utf-8"), b"root"
            )
            if not self._grammar:
                self._grammar = None
                self.close()
                raise ValueError("llama.cpp rejected the grammar built from the JSON schema")
            self._one = (llama_cpp.llama_token_data * 1)()
            self._one_array = llama_cpp.llama_token_data_array(
                data=self._one, size=1, selected=-1, sorted=False
            )
            self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(model.vocab))
            self._ids = np.arange(self._n_vocab, dtype=np.int32)
            self._candidates = np.zeros(self._n_vocab, dtype=_TOKEN_DATA)

    @staticmethod
    def _new_chain(temperature: float, seed: int | None) -> Any:
        params = llama_cpp.llama_sampler_chain_default_params()
        params.no_perf = True
        chain = llama_cpp.llama_sampler_chain_init(params)
        add = llama_cpp.llama_sampler_chain_add
        if temperature <= 0:
            add(chain, llama_cpp.llama_sampler_init_greedy())
            return chain
        add(chain, llama_cpp.llama_sampler_init_top_k(TOP_K))
        add(chain, llama_cpp.llama_sampler_init_top_p(TOP_P, 1))
        add(chain, llama_cpp.llama_sampler_init_min_p(MIN_P, 1))
        add(chain, llama_cpp.llama_sampler_init_temp(temperature))
        add(chain, llama_cpp.llama_sampler_init_dist(_seed(seed)))
        return chain

    def sample(self) -> int:
        """The next token from the context's last logits."""
        token = int(llama_cpp.llama_sampler_sample(self._chain, self._ctx, -1))
        if self._grammar is None:
            return token
        if not self._allowed(token):
            token = self._resample()
        llama_cpp.llama_sampler_accept(self._grammar, token)
        return token

    def _allowed(self, token: int) -> bool:
        self._one[0] = llama_cpp.llama_token_data(token, 1.0, 0.0)
        self._one_array.size = 1
        self._one_array.selected = -1
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        return bool(np.isfinite(self._one[0].logit))

    def _resample(self) -> int:
        """Grammar over the whole vocabulary, then the usual chain."""
        logits = llama_cpp.llama_get_logits_ith(self._ctx, -1)
        candidates = self._candidates
        candidates["id"] = self._ids  # the chain sorted the last round's candidates in place
        candidates["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        candidates["p"] = 0.0
        array = llama_cpp.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(array))
        llama_cpp.llama_sampler_apply(self._chain, ctypes.byref(array))
        if array.selected < 0:
            raise RuntimeError("the grammar left no token to sample")
        return int(array.data[array.selected].id)

    def close(self) -> None:
        for attr in ("_chain", "_grammar"):
            sampler = getattr(self, attr)
            if sampler is not None:
                llama_cpp.llama_sampler_free(sampler)
                setattr(self, attr, None)


def _seed(seed: int | None) -> int:
    return llama_cpp.LLAMA_DEFAULT_SEED if seed is None else seed & 0xFFFFFFFF


def _effective_context(requested: int, trained: int | None) -> int:
    """min(setting, the model's trained context), never below a usable minimum."""
    limit = trained if trained and trained > 0 else requested
    return max(min(MIN_CONTEXT, limit), min(requested, limit))


def _tool_names(tools: Sequence[dict[str, Any]]) -> list[str]:
    """Names of OpenAI-style tool specs (``{"type": "function", "function": {"name": ...}}``)."""
    names = []
    for tool in tools:
        function = tool.get("function")
        spec = function if isinstance(function, dict) else tool
        if isinstance(spec.get("name"), str):
            names.append(spec["name"])
    return names


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


@dataclass(frozen=True, slots=True)
class _End:
    """The worker's job for a stream is over (its future holds any exception)."""

    future: concurrent.futures.Future[None]


class ChatEngine:
    """One chat model on one worker thread, with an asyncio API.

    Constructing it reads nothing; the model loads on the worker at the first
    call (or :meth:`load`).  Calls queue and run one at a time.
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
    ) -> None:
        if context_size < 1:
            raise ValueError(f"context_size must be positive, got {context_size}")
        if max_answer_tokens < 1:
            raise ValueError(f"max_answer_tokens must be positive, got {max_answer_tokens}")
        self.model_path = Path(model_path)
        self.requested_context = context_size
        self.threads = threads if threads and threads > 0 else default_threads()
        self.gpu_layers = gpu_layers
        self.temperature = temperature
        self.max_answer_tokens = max_answer_tokens
        self.seed = seed
        self._name = name or self.model_path.stem
        self._trained_context: int | None = None
        self._grammars: dict[str, str] = {}  # worker only
        self._lock = threading.Lock()  # guards _active
        self._active: set[_Request] = set()
        self._worker = ModelWorker(
            self._load,
            thread_name="agenvoy-chat",
            closed_message=f"chat engine {self.name!r} is closed",
        )

    @classmethod
    def from_settings(cls, model_path: Path, settings: ModelSettings) -> ChatEngine:
        return cls(
            model_path,
            context_size=settings.context_size,
            threads=settings.threads,
            gpu_layers=settings.gpu_layers,
            temperature=settings.temperature,
            max_answer_tokens=settings.max_answer_tokens,
        )

    # -- facts ----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def _model(self) -> _LlamaModel | None:
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

        return _effective_context(self.requested_context, self._trained_context)

    # -- calls ----------------------------------------------------------------------------------
    async def load(self) -> None:
        """Load the model on the worker (idempotent); raises :class:`ModelLoadError`."""
        await self._call(lambda model: None)

    async def count_tokens(self, text: str) -> int:
        return await self._call(lambda model: len(model.tokenize(text)))

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
    ) -> AsyncGenerator[ChatEvent, None]:
        """Stream the answer: text deltas and tool calls, then :class:`ChatFinished`.

        Once ``stop`` is set no further delta is delivered and the stream ends
        with ``ChatFinished(finish_reason="cancelled")``.  Closing the iterator
        or cancelling the consuming task stops the worker within one token.
        """
        request = _ChatRequest(
            messages=[m.copy() for m in messages],
            tools=[dict(t) for t in tools] if tools else None,
            max_tokens=max_tokens if max_tokens is not None else self.max_answer_tokens,
            temperature=temperature if temperature is not None else self.temperature,
            stop=stop,
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
        self, messages: Sequence[ChatMessage], schema: dict[str, Any], *, max_tokens: int
    ) -> JsonCompletion:
        """An answer constrained by ``schema`` (a llama.cpp grammar), parsed.

        Raises :class:`ModelOutputError` when the answer is empty, cut off at
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
            lambda model: self._json_job(model, copied, schema_text, max_tokens, request), request
        )

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
        self, job: Callable[[_LlamaModel], _T], request: _Request
    ) -> concurrent.futures.Future[_T]:
        # Registered before the worker's closed check: a close that passes
        # that check later still finds (and cancels) this request.
        with self._lock:
            self._active.add(request)
        try:
            future = self._worker.submit(job, check=request.raise_if_cancelled)
        except RuntimeError:
            self._forget(request)
            raise
        future.add_done_callback(lambda _: self._forget(request))
        return future

    def _forget(self, request: _Request) -> None:
        with self._lock:
            self._active.discard(request)

    def _load(self) -> _LlamaModel:
        """Load the model (worker thread, first job)."""
        started = time.perf_counter()
        model = _LlamaModel(
            self.model_path,
            n_ctx=self.requested_context,
            threads=self.threads,
            gpu_layers=self.gpu_layers,
            name=self.name,
        )
        log.info(
            "loaded %s (%s, context %d) in %.2f s",
            self.name,
            self.model_path,
            model.n_ctx,
            time.perf_counter() - started,
        )
        return model

    async def _call(self, job: Callable[[_LlamaModel], _T], request: _Request | None = None) -> _T:
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
                raise RuntimeError(f"chat engine {self.name!r} was closed") from None
            raise
        except _Cancelled:
            raise RuntimeError(f"chat engine {self.name!r} was closed") from None

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
        self, model: _LlamaModel, request: _ChatRequest, push: Callable[[ChatEvent], None]
    ) -> None:
        tokens, dropped = self._chat_prompt(model, request)
        max_new = min(request.max_tokens, model.n_ctx - len(tokens))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        parser = ToolCallStream(_tool_names(request.tools)) if request.tools else None
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

        sampler = model.make_sampler(temperature=request.temperature, seed=self.seed, grammar=None)
        try:
            reason, generated = model.generate(
                tokens, sampler, max_new, request.cancelled, on_token
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

    def _chat_prompt(self, model: _LlamaModel, request: _ChatRequest) -> tuple[Tokens, int]:
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
        model: _LlamaModel,
        messages: list[ChatMessage],
        schema_text: str,
        max_tokens: int,
        request: _Request,
    ) -> JsonCompletion:
        grammar = self._grammar(schema_text)
        tokens = model.prompt_tokens(model.template.render(messages))
        if len(tokens) + max_tokens > model.n_ctx:
            raise PromptTooLongError(
                f"{self.name}: the prompt takes {len(tokens)} tokens; with {max_tokens} for the "
                f"answer that exceeds the {model.n_ctx}-token context"
            )
        answer = bytearray()
        sampler = model.make_sampler(temperature=JSON_TEMPERATURE, seed=self.seed, grammar=grammar)
        try:
            reason, generated = model.generate(
                tokens,
                sampler,
                max_tokens,
                request.cancelled,
                lambda t: answer.extend(model.piece(t)),
            )
        finally:
            sampler.close()
        if reason == "cancelled":
            raise _Cancelled
        text = answer.decode("utf-8", errors="replace").strip()
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
        """GBNF for a JSON schema, built once per schema (worker thread)."""
        grammar = self._grammars.get(schema_text)
        if grammar is None:
            grammar = LlamaGrammar.from_json_schema(schema_text)._grammar
            self._grammars[schema_text] = grammar
        return grammar
