"""A loaded chat model on llama.cpp's C API: tokens, the KV-cached token loop, embeddings.

:class:`LlamaModel` owns one llama.cpp model, its chat context and (made at
the first embedding) an embedding context; it is used on the chat engine's
worker thread only, since a llama.cpp context is not thread-safe.  It lives
apart from :mod:`agenvoy_desktop.llm.engine`, which owns the queueing, the
asyncio face and the prompt policy, because this is the only code that speaks
to llama.cpp's C structures.

It drives llama.cpp through llama-cpp-python's C bindings (like
:mod:`agenvoy_desktop.llm.embedder`), not its ``Llama`` class:
``Llama(verbose=False)`` silences llama.cpp by redirecting the whole process's
stdout/stderr file descriptors around every load and generation, which would
swallow what other threads print (the CLI streams answers to stdout), and
``verbose=True`` prints to stderr itself.  llama.cpp's log goes to the
``agenvoy_desktop.llm.llama_cpp`` logger.  Our own token loop is short: a
prefill that reuses the KV cache of the previous prompt's common prefix (or
of a saved earlier state, :mod:`.kv_snapshots`), then sample / decode one
token at a time (or a token and a guess of the next few, :mod:`.lookup`),
with a cancellation check before each step, so ``stop``
takes effect within one token.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import llama_cpp
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.model_api import FinishReason
from agenvoy_desktop.llm.chat_format import ChatTemplate
from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled
from agenvoy_desktop.llm.embedder import LOG_ROUTER, load_or_close, route_llama_logs
from agenvoy_desktop.llm.gguf_info import ModelFileError, read_gguf_info
from agenvoy_desktop.llm.kv_snapshots import MIN_GAIN, KvSnapshots, common_prefix
from agenvoy_desktop.llm.lookup import MAX_DRAFT, NgramDrafts
from agenvoy_desktop.llm.openings import OpeningBan, Vocabulary
from agenvoy_desktop.llm.sampler import JSON_SAMPLING, RepetitionGuard, Sampler
from agenvoy_desktop.settings import SamplingSettings

FloatArray = npt.NDArray[np.float32]
Tokens = list[int]

PROMPT_BATCH = 512
"""Prompt tokens per llama_decode call and micro-batch (llama.cpp's usual n_batch) until
:mod:`agenvoy_desktop.llm.calibration` has measured a better one."""
EMBED_CONTEXT = 512
"""Tokens an embedded text may have (longer texts are truncated)."""
MIN_CONTEXT = 256
_ALL_LAYERS = 0x7FFFFFFF


class ModelLoadError(KnownError, RuntimeError):
    """The model file is missing, not a GGUF, damaged, or llama.cpp cannot run it."""


class ModelRunError(KnownError, RuntimeError):
    """llama.cpp failed while computing (out of memory, a backend failure): the machine's doing.

    Only ``llama_decode`` codes below -1 are this; 1 (no room in the context)
    and -1 (a malformed batch) mean the app built the batch wrong — a bug.
    """


def _decode_failure(path: Path, rc: int, what: str = "llama_decode") -> RuntimeError:
    """The error for a non-zero ``llama_decode`` result (see :class:`ModelRunError`)."""
    if rc < -1:
        return ModelRunError(
            f"{path}: llama.cpp could not compute ({what} code {rc}); the machine may be "
            "out of memory: close other programs or choose a smaller model or context"
        )
    return RuntimeError(f"{path}: {what} failed with code {rc}")


def _flash_attn_type(flash_attn: bool | None) -> int:
    if flash_attn is None:
        return int(llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO)
    if flash_attn:
        return int(llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED)
    return int(llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)


def effective_context(requested: int, trained: int | None) -> int:
    """min(setting, the model's trained context), never below a usable minimum.

    One rule for both sides: the engine answers from the GGUF header before
    loading, the loaded model from llama.cpp's trained context.
    """
    limit = trained if trained and trained > 0 else requested
    return max(min(MIN_CONTEXT, limit), min(requested, limit))


class LlamaModel:
    """A loaded model, its chat context and (lazily) an embedding context.

    Worker thread only.  ``_past`` mirrors the tokens in the chat context's
    KV cache, so the next prompt re-evaluates only what changed (a chat turn
    shares the system prompt, tool list and history with the one before).
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int,
        threads: int,
        gpu_layers: int,
        name: str,
        threads_batch: int | None = None,
        prompt_batch: int = PROMPT_BATCH,
        flash_attn: bool | None = None,
    ) -> None:
        """*threads* decode one token at a time; *threads_batch* (default: the same)
        evaluate prompts, in llama_decode calls of *prompt_batch* tokens.  *flash_attn*
        None leaves flash attention to llama.cpp (its "auto")."""
        self.path = path
        self.name = name
        self.threads = threads
        self.threads_batch = threads_batch if threads_batch and threads_batch > 0 else threads
        self.prompt_batch = max(1, prompt_batch)
        self.flash_attn = flash_attn
        self._model: Any = None
        self.context: Any = None
        self._embed_ctx: Any = None
        self._embed_batch: Any = None
        self._snapshots = KvSnapshots()
        route_llama_logs()
        try:
            read_gguf_info(path)  # a clear message for missing / non-GGUF / truncated files
        except ModelFileError as exc:
            raise ModelLoadError(str(exc)) from exc
        load_or_close(lambda: self._load(n_ctx, gpu_layers), self.close)
        self._past: Tokens = []
        self._pieces: dict[int, bytes] = {}
        self._vocabulary: Vocabulary | None = None
        self._one = (llama_cpp.llama_token * 1)()
        self._one_batch = llama_cpp.llama_batch_get_one(self._one, 1)
        self._draft_batch = llama_cpp.llama_batch_init(MAX_DRAFT + 1, 0, 1)
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
        self.n_ctx = effective_context(n_ctx, self.n_ctx_train)
        self.n_embd = int(llama_cpp.llama_model_n_embd(self._model))
        self.context = self._new_context(self.n_ctx, embeddings=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._memory = llama_cpp.llama_get_memory(self.context)

    def _new_context(
        self,
        n_ctx: int,
        *,
        embeddings: bool,
        batch: int | None = None,
        flash_attn: bool | Literal["current"] | None = "current",
    ) -> Any:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_ctx if embeddings else batch or self.prompt_batch
        params.n_ubatch = params.n_batch
        params.n_seq_max = 1
        params.n_threads = self.threads
        params.n_threads_batch = self.threads_batch
        params.no_perf = True
        if embeddings:
            params.embeddings = True
            params.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_MEAN
        else:
            params.flash_attn_type = _flash_attn_type(
                self.flash_attn if flash_attn == "current" else flash_attn
            )
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
        self,
        *,
        temperature: float,
        seed: int | None,
        grammar: str | None,
        repetition: RepetitionGuard | None = None,
        sampling: SamplingSettings = JSON_SAMPLING,
        avoid_openings: Sequence[str] = (),
    ) -> Sampler:
        """Sampling state for one request; the caller closes it."""
        openings = OpeningBan.of(self.vocabulary(), avoid_openings) if avoid_openings else None
        return Sampler(
            self,
            temperature=temperature,
            seed=seed,
            grammar=grammar,
            repetition=repetition,
            sampling=sampling,
            openings=openings,
        )

    def vocabulary(self) -> Vocabulary:
        """The token pieces sorted for prefix lookups (built at the first use, ~0.3 s)."""
        if self._vocabulary is None:
            size = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
            buf = ctypes.create_string_buffer(256)  # one buffer: a new one per token took 2 s
            pieces = []
            for token in range(size):
                n = int(llama_cpp.llama_token_to_piece(self.vocab, token, buf, 256, 0, False))
                pieces.append(buf.raw[:n] if n > 0 else self._token_bytes(token, special=False))
            self._vocabulary = Vocabulary(pieces)
        return self._vocabulary

    def generate(
        self,
        tokens: Tokens,
        sampler: Sampler,
        max_new: int,
        cancelled: Callable[[], bool],
        on_token: Callable[[int], None],
        *,
        drafts: bool = False,
        on_read: Callable[[int, int], None] | None = None,
    ) -> tuple[FinishReason, int]:
        """Prefill ``tokens`` and sample up to ``max_new`` tokens: (finish reason, generated).

        ``cancelled`` is asked before every decode and before every sample.
        With *drafts*, each decode also evaluates a guess of the next few
        tokens looked up in the text so far (:mod:`.lookup`); the sampler
        still chooses every token, from the logits of its own position, and
        the guess is kept up to the first token it did not choose.  *on_read*
        hears ``(done, total)`` after each batch of a prompt that takes more than one.
        """
        if not self._prefill(tokens, cancelled, on_read):
            return "cancelled", 0
        lookup = NgramDrafts(self._past) if drafts else None
        generated = 0
        vocab = self.vocab
        position = -1  # which of the last decode's logits the next token is sampled from
        guess: list[int] = []  # the last guess, until the sampler has decided on it
        pending: list[int] = []  # its tokens in the KV cache that no sample has reached
        while generated < max_new and len(self._past) < self.n_ctx:
            if cancelled():
                break
            token = sampler.sample(position)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                self._drop_pending(pending)
                return "stop", generated
            guessed = bool(pending) and token == pending[0]
            if guessed:  # already decoded, and so is the logits row after it
                self._past.append(pending.pop(0))
                position += 1
            if lookup is not None and guess and (not guessed or not pending):
                lookup.settle(len(guess) - len(pending))  # the guess is decided
                guess = []
            if not guessed:
                self._drop_pending(pending)
            generated += 1
            on_token(token)
            if lookup is not None:
                lookup.extend((token,))
            if generated >= max_new or cancelled():
                break
            if guessed:
                continue
            guess = lookup.draft(self.n_ctx - len(self._past) - 1) if lookup is not None else []
            self._decode_with(token, guess)
            self._past.append(token)
            pending, position = list(guess), 0
        self._drop_pending(pending)
        return ("cancelled" if cancelled() else "length"), generated

    def _decode_with(self, token: int, guess: Sequence[int]) -> None:
        """Decode *token* at the end of the cache, and *guess* after it with a logits row
        for every position (a guess is checked by sampling each of them)."""
        if not guess:
            self._one[0] = token
            self._decode(self._one_batch)
            return
        batch = self._draft_batch
        start = len(self._past)
        for i, t in enumerate((token, *guess)):
            batch.token[i] = t
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = len(guess) + 1
        self._decode(batch)

    def _drop_pending(self, pending: list[int]) -> None:
        """Forget guessed tokens no sample reached: out of the KV cache and the list."""
        if pending:
            llama_cpp.llama_memory_seq_rm(self._memory, 0, len(self._past), -1)
            pending.clear()

    def read_ahead(self, tokens: Tokens, stop: Callable[[], bool], chunk: int) -> bool:
        """Evaluate *tokens*, the known start of a later prompt, *chunk* tokens at a time.

        What the cache already holds is kept (and a saved state that holds
        more is restored), so a later prompt starting with *tokens* evaluates
        only what follows them.  False if *stop* said so between two chunks:
        what was read by then stays in the cache.
        """
        return self._prefill(tokens, stop, step=chunk)

    def _prefill(
        self,
        tokens: Tokens,
        cancelled: Callable[[], bool],
        on_read: Callable[[int, int], None] | None = None,
        *,
        step: int | None = None,
    ) -> bool:
        """Evaluate ``tokens``, reusing the cached common prefix; False if cancelled."""
        keep = min(common_prefix(self._past, tokens), len(tokens) - 1)
        if self._use_saved_state(tokens, keep):
            keep = min(common_prefix(self._past, tokens), len(tokens) - 1)
        if keep < len(self._past):
            if not llama_cpp.llama_memory_seq_rm(self._memory, 0, keep, -1):
                llama_cpp.llama_memory_clear(self._memory, True)
                keep = 0
            del self._past[keep:]
        step = min(step or self.prompt_batch, self.prompt_batch)
        total = len(tokens) - keep
        for start in range(keep, len(tokens), step):
            if cancelled():
                return False
            chunk = tokens[start : start + step]
            array = (llama_cpp.llama_token * len(chunk))(*chunk)
            self._decode(llama_cpp.llama_batch_get_one(array, len(chunk)))
            self._past.extend(chunk)
            if on_read is not None and total > step:
                on_read(start + len(chunk) - keep, total)
        return True

    def _use_saved_state(self, tokens: Tokens, keep: int) -> bool:
        """Keep the cache's state before a long stretch of it is dropped, and bring back a
        saved state that covers clearly more of *tokens* (see :mod:`.kv_snapshots`)."""
        shared, saved = self._snapshots.best(tokens)
        restore = saved is not None and min(shared, len(tokens) - 1) >= keep + MIN_GAIN
        if restore or len(self._past) - keep >= MIN_GAIN:
            self._snapshots.save(self.context, self._past)
        if saved is None or not restore or not self._snapshots.restore(self.context, saved):
            return False
        self._past = list(saved)
        return True

    def forget_prompts(self) -> None:
        """Empty the chat context's KV cache and the saved states (a session was reset or
        removed, or a message deleted: nothing of its text may stay in memory).

        ``llama_memory_clear`` with its data zeroes the cells as well; the saved
        states are zeroed before they are dropped.  The next prompt evaluates from
        its first token.  The embedding context keeps no prompt between calls
        (each text clears its cells first), but the last text's cells stay until
        the next one: they are cleared too.
        """
        llama_cpp.llama_memory_clear(self._memory, True)
        self._past.clear()
        self._snapshots.clear()
        if self._embed_ctx is not None and (memory := llama_cpp.llama_get_memory(self._embed_ctx)):
            llama_cpp.llama_memory_clear(memory, True)

    def use_prompt_batch(self, batch: int) -> None:
        """Evaluate prompts *batch* tokens at a time from now on (a new chat context)."""
        self.use_settings(batch, self.flash_attn)

    def use_settings(self, batch: int, flash_attn: bool | None) -> None:
        """Prompt batch and flash attention from now on (a new chat context).

        The old context is freed first (never two KV caches of the full size
        at once); if the new one cannot be made the old settings are restored.
        """
        batch = max(1, batch)
        if batch == self.prompt_batch and flash_attn == self.flash_attn:
            return
        llama_cpp.llama_free(self.context)
        self.context = None
        self._past.clear()
        self._snapshots.clear()
        try:
            self.context = self._new_context(
                self.n_ctx, embeddings=False, batch=batch, flash_attn=flash_attn
            )
            self.prompt_batch, self.flash_attn = batch, flash_attn
        finally:
            if self.context is None:
                self.context = self._new_context(self.n_ctx, embeddings=False)
            self._memory = llama_cpp.llama_get_memory(self.context)

    def time_prefill(self, tokens: Sequence[int], batch: int) -> float:
        """Seconds to evaluate *tokens* in a fresh context of micro-batch *batch* (calibration).

        The chat context and its KV cache are left as they are.
        """
        return self.time_turn(tokens, batch, flash_attn=self.flash_attn, steps=0)[0]

    def time_turn(
        self, tokens: Sequence[int], batch: int, *, flash_attn: bool | None, steps: int
    ) -> tuple[float, float]:
        """(seconds to evaluate *tokens*, seconds to decode *steps* more) in a fresh context.

        For calibration: the decoded tokens repeat the prompt's last one (the
        cost of a decode does not depend on which token it is).  The chat
        context and its KV cache are left as they are.
        """
        size = max(len(tokens) + steps, MIN_CONTEXT)
        context = self._new_context(size, embeddings=False, batch=batch, flash_attn=flash_attn)
        try:
            started = time.perf_counter()
            for start in range(0, len(tokens), batch):
                self._decode_into(context, tokens[start : start + batch])
            llama_cpp.llama_synchronize(context)
            prefilled = time.perf_counter()
            for _ in range(steps):
                self._decode_into(context, tokens[-1:])
            llama_cpp.llama_synchronize(context)
            return prefilled - started, time.perf_counter() - prefilled
        finally:
            llama_cpp.llama_free(context)

    def _decode_into(self, context: Any, chunk: Sequence[int]) -> None:
        array = (llama_cpp.llama_token * len(chunk))(*chunk)
        rc = int(llama_cpp.llama_decode(context, llama_cpp.llama_batch_get_one(array, len(chunk))))
        if rc != 0:
            raise _decode_failure(self.path, rc, "llama_decode (calibration)")

    def _decode(self, batch: Any) -> None:
        rc = int(llama_cpp.llama_decode(self.context, batch))
        if rc != 0:
            llama_cpp.llama_memory_clear(self._memory, True)
            self._past.clear()
            self._snapshots.clear()
            raise _decode_failure(self.path, rc)

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
                raise _decode_failure(self.path, rc, "llama_decode (embeddings)")
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
            with LOG_ROUTER.capturing():
                self._embed_ctx = self._new_context(n_max, embeddings=True)
            self._embed_batch = llama_cpp.llama_batch_init(n_max, 0, 1)
        return self._embed_ctx, n_max

    def close(self) -> None:
        self._snapshots.clear()
        if getattr(self, "_draft_batch", None) is not None:
            llama_cpp.llama_batch_free(self._draft_batch)
            self._draft_batch = None
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
