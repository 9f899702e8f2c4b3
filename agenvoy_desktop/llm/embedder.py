"""Sentence embeddings with a llama.cpp embedding model (all-MiniLM-L6-v2 by default).

:class:`Embedder` owns one model and one llama.cpp context, both used only on
its single worker thread (a llama.cpp context is not thread-safe): callers on
any thread submit lists of texts and get futures back.  Texts are tokenised
like the reference sentence-transformers model ([CLS] text [SEP], truncated to
``max_tokens`` with the final [SEP] kept), packed several sequences to a
llama.cpp batch, mean-pooled by llama.cpp and L2-normalised here.

The worker talks to llama.cpp through llama-cpp-python's C bindings rather
than its ``Llama`` class: ``Llama(verbose=False)`` silences loading by
redirecting the whole process's stdout/stderr file descriptors, which is not
safe while other threads run.  llama.cpp's own log lines are routed into the
``agenvoy_desktop.llm.llama_cpp`` logger instead (see :func:`route_llama_logs`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import logging
import os
import re
import string
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import llama_cpp
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled
from agenvoy_desktop.llm.worker import ModelWorker

log = logging.getLogger(__name__)
llama_log = logging.getLogger("agenvoy_desktop.llm.llama_cpp")

FloatArray = npt.NDArray[np.float32]
_T = TypeVar("_T")

# Tokens per llama.cpp decode call.  BERT attends within one micro-batch, so
# n_ubatch == n_batch; several short sentences share one call.
BATCH_TOKENS = 512
# Most sequences llama.cpp accepts in one batch (LLAMA_MAX_SEQ).
_MAX_SEQS = 256
_MIN_TOKENS = 2  # [CLS] and [SEP]

# ggml_log_level -> logging level (GGML_LOG_LEVEL_CONT = 5 continues the last line).
_LOG_LEVELS = {
    0: logging.DEBUG,
    1: logging.DEBUG,
    2: logging.DEBUG,
    3: logging.WARNING,
    4: logging.ERROR,
}
_LOG_CONT = 5


class EmbedderError(KnownError, RuntimeError):
    """The embedding model could not be loaded or run."""


class _LogRouter:
    """Sends llama.cpp log lines to Python logging; remembers errors per thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed = False
        self._last_level = logging.DEBUG
        self._local = threading.local()
        # Keep a reference: llama.cpp holds a raw pointer to this callback.
        self._callback: Any = llama_cpp.llama_log_callback(self._on_log)

    def install(self) -> None:
        with self._lock:
            if not self._installed:
                llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))
                self._installed = True

    def _on_log(self, level: int, text: bytes | None, _user_data: Any) -> None:
        if level == _LOG_CONT:
            py_level = self._last_level
        else:
            py_level = _LOG_LEVELS.get(level, logging.DEBUG)
            self._last_level = py_level
        message = (text or b"").decode("utf-8", errors="replace").rstrip("\n")
        if not message:
            return
        if py_level >= logging.ERROR:
            errors: list[str] | None = getattr(self._local, "errors", None)
            if errors is not None:
                errors.append(message.strip())
        llama_log.log(py_level, "%s", message)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Keep this thread's llama.cpp errors meanwhile (a failed load quotes them)."""
        self.start_capture()
        try:
            yield
        finally:
            self.stop_capture()

    def start_capture(self) -> None:
        self._local.errors = []

    def captured(self) -> list[str]:
        errors: list[str] = getattr(self._local, "errors", None) or []
        return list(errors)

    def stop_capture(self) -> None:
        self._local.errors = None


LOG_ROUTER = _LogRouter()
_backend_lock = threading.Lock()
_backend_ready = False


def load_or_close(load: Callable[[], None], close: Callable[[], None]) -> None:
    """Run *load* with llama.cpp's errors kept for its message; on failure *close*, re-raise.

    A half-made model or context must be freed before the error leaves the
    worker (the chat model and the embedder load the same way).
    """
    with LOG_ROUTER.capturing():
        try:
            load()
        except BaseException:
            close()
            raise


def route_llama_logs() -> None:
    """Route llama.cpp's log output (process-wide) into Python logging; idempotent."""
    global _backend_ready  # noqa: PLW0603 - one process-wide llama.cpp backend
    LOG_ROUTER.install()
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_backend_init()
            _backend_ready = True


# GGUF keys written by minilm_convert (KEY_STRIP_ACCENTS, KEY_MAX_WORD_CHARS) and
# e5_convert (KEY_NFKC, KEY_QUERY_PREFIX, KEY_PASSAGE_PREFIX).
_KEY_STRIP_ACCENTS = "agenvoy.tokenizer.strip_accents"
_KEY_MAX_WORD_CHARS = "agenvoy.tokenizer.max_input_chars_per_word"
_KEY_NFKC = "agenvoy.tokenizer.nfkc"
_KEY_QUERY_PREFIX = "agenvoy.embedding.query_prefix"
_KEY_PASSAGE_PREFIX = "agenvoy.embedding.passage_prefix"
_UNK_TEXT = " [UNK] "  # parsed by llama.cpp as the special token, like the reference does


class _TextPrep:
    """What the reference BertNormalizer does that llama.cpp's WordPiece does differently.

    * accents: NFD, then drop non-spacing marks (Mn) and control/format characters.  llama.cpp's
      own stripping is lossy (Hangul syllables keep only their first jamo; Devanagari vowel
      signs, category Mc, are dropped), so the converter turns it off and asks for this instead;
    * words longer than ``max_word_chars`` characters become [UNK], as in WordPiece;
    * ``nfkc`` (SentencePiece models): NFKC, control characters dropped and tab or line
      breaks read as spaces, which SentencePiece's compiled character map does and
      llama.cpp's unigram tokenizer cannot without it.

    Lower-casing, whitespace and punctuation splitting are left to llama.cpp (they agree).
    """

    def __init__(self, strip_accents: bool, max_word_chars: int, nfkc: bool = False) -> None:
        self.strip_accents = strip_accents
        self.max_word_chars = max_word_chars
        self.nfkc = nfkc
        self._long_run = re.compile(rf"\S{{{max_word_chars + 1},}}") if max_word_chars else None

    def __call__(self, text: str) -> str:
        if self.nfkc:
            text = unicodedata.normalize("NFKC", text).translate(_CONTROL_TABLE)
        if self.strip_accents and not text.isascii():
            text = unicodedata.normalize("NFD", text).translate(_strip_table())
        if self._long_run is not None and self._long_run.search(text):
            text = _unk_long_words(text, self.max_word_chars)
        return text


_CONTROL_TABLE: dict[int, str | None] = {
    **dict.fromkeys((*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F, 0x8F, 0x9F)),
    **dict.fromkeys((0x09, 0x0A, 0x0C, 0x0D, 0x1680, *range(0x200B, 0x2010)), " "),
    **dict.fromkeys((0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD), " "),
}
"""Where SentencePiece's map for XLM-R differs from NFKC: controls go, odd spaces become one."""


@cache
def _strip_table() -> dict[int, None]:
    """str.translate table deleting Mn marks and Cc/Cf/Co characters (but not tab/newlines)."""
    drop = {"Mn", "Cc", "Cf", "Co"}
    code_points: Iterable[int] = (*range(0x20000), *range(0xE0000, 0xE1000))
    return {
        cp: None
        for cp in code_points
        if unicodedata.category(chr(cp)) in drop and chr(cp) not in "\t\n\r"
    }


def _splits_words(ch: str) -> bool:
    """Whitespace, punctuation and CJK ideographs end a WordPiece word."""
    return (
        ch.isspace()
        or ch in string.punctuation
        or unicodedata.category(ch).startswith("P")
        or _is_cjk(ord(ch))
    )


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _unk_long_words(text: str, limit: int) -> str:
    parts: list[str] = []
    word: list[str] = []

    def flush() -> None:
        if len(word) > limit:
            parts.append(_UNK_TEXT)
        else:
            parts.extend(word)
        word.clear()

    for ch in text:
        if _splits_words(ch):
            flush()
            parts.append(ch)
        else:
            word.append(ch)
    flush()
    return "".join(parts)


class _EmbeddingModel:
    """A loaded model + context + reusable batch buffers.  Worker thread only."""

    def __init__(self, path: Path, n_threads: int, max_tokens: int) -> None:
        self.path = path
        self._model: Any = None
        self._ctx: Any = None
        route_llama_logs()
        if not path.is_file():
            raise EmbedderError(f"{path}: embedding model file not found")
        load_or_close(lambda: self._load(n_threads, max_tokens), self.close)
        self._alloc_batch()
        self._tok_buf = np.zeros(256, dtype=np.int32)

    def _load(self, n_threads: int, max_tokens: int) -> None:
        model_params = llama_cpp.llama_model_default_params()
        model_params.use_extra_bufts = extra_buffers_enabled()  # quantised models: no SIGILL
        self._model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), model_params)
        if not self._model:
            self._model = None
            raise EmbedderError(self._failure("could not load the embedding model"))
        self.n_embd = int(llama_cpp.llama_model_n_embd(self._model))
        self.name = self._meta("general.name") or self.path.stem
        n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(self._model))
        self.max_tokens = max(_MIN_TOKENS, min(max_tokens, n_ctx_train))
        self.n_batch = max(BATCH_TOKENS, self.max_tokens)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx_train
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = min(_MAX_SEQS, int(llama_cpp.llama_max_parallel_sequences()))
        params.kv_unified = True
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.embeddings = True
        params.no_perf = True
        self._ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not self._ctx:
            self._ctx = None
            raise EmbedderError(self._failure("could not create a llama.cpp context"))
        if int(llama_cpp.llama_pooling_type(self._ctx)) == llama_cpp.LLAMA_POOLING_TYPE_NONE:
            raise EmbedderError(
                f"{self.path}: the model has no pooling type; not a sentence embedding model"
            )
        self.n_seq_max = int(params.n_seq_max)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._prep = _TextPrep(
            strip_accents=self._meta(_KEY_STRIP_ACCENTS) == "true",
            max_word_chars=int(self._meta(_KEY_MAX_WORD_CHARS) or 0),
            nfkc=self._meta(_KEY_NFKC) == "true",
        )
        self.query_prefix = self._meta(_KEY_QUERY_PREFIX) or ""
        self.passage_prefix = self._meta(_KEY_PASSAGE_PREFIX) or ""

    def _meta(self, key: str) -> str | None:
        """A GGUF metadata value as text, or None when the file lacks the key."""
        buf = ctypes.create_string_buffer(256)
        n = int(llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf)))
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def _failure(self, what: str) -> str:
        errors = LOG_ROUTER.captured()
        detail = f": {'; '.join(errors[-3:])}" if errors else " (corrupt or unsupported GGUF?)"
        return f"{self.path}: {what}{detail}"

    def _alloc_batch(self) -> None:
        """A llama_batch whose arrays are numpy buffers we own (filled without Python loops)."""
        n = self.n_batch
        self._tokens = np.zeros(n, dtype=np.int32)
        self._pos = np.zeros(n, dtype=np.int32)
        self._n_seq_id = np.ones(n, dtype=np.int32)
        self._seq = np.zeros(n, dtype=np.int32)
        self._logits = np.ones(n, dtype=np.int8)  # every token is an output for pooling
        self._positions = np.arange(n, dtype=np.int32)
        seq_ptr = ctypes.POINTER(llama_cpp.llama_seq_id)
        base = self._seq.ctypes.data
        itemsize = self._seq.itemsize
        self._seq_ptrs = (seq_ptr * n)(
            *(ctypes.cast(base + i * itemsize, seq_ptr) for i in range(n))
        )
        self._batch = llama_cpp.llama_batch(
            n_tokens=0,
            token=self._tokens.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token)),
            embd=None,
            pos=self._pos.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_pos)),
            n_seq_id=self._n_seq_id.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            seq_id=ctypes.cast(self._seq_ptrs, ctypes.POINTER(seq_ptr)),
            logits=self._logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )

    def _tokenize_full(self, text: str) -> tuple[npt.NDArray[np.int32], int]:
        """All ids of [CLS] text [SEP] in a shared buffer (valid until the next call)."""
        data = self._prep(text).encode("utf-8", errors="replace")
        need = len(data) + 8
        while True:
            if self._tok_buf.size < need:
                self._tok_buf = np.zeros(need, dtype=np.int32)
            buf = self._tok_buf
            n = int(
                llama_cpp.llama_tokenize(
                    self._vocab,
                    data,
                    len(data),
                    buf.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token)),
                    buf.size,
                    True,
                    True,
                )
            )
            if n >= 0:
                return buf, n
            if -n <= buf.size:
                raise EmbedderError(f"{self.path}: tokenization failed")
            need = -n

    def token_ids(self, text: str) -> list[int]:
        buf, n = self._tokenize_full(text)
        return [int(i) for i in buf[:n]]

    def tokenize(self, text: str) -> npt.NDArray[np.int32]:
        """[CLS] text [SEP] ids, truncated to max_tokens keeping the final [SEP]."""
        buf, n = self._tokenize_full(text)
        if n > self.max_tokens:
            return np.concatenate((buf[: self.max_tokens - 1], buf[n - 1 : n]))
        return buf[:n].copy()

    def embed(self, texts: Sequence[str], prefix: str = "") -> FloatArray:
        out = np.empty((len(texts), self.n_embd), dtype=np.float32)
        seqs = [self.tokenize(prefix + text) for text in texts]
        start = 0
        while start < len(seqs):
            end, n_tokens = start, 0
            while (
                end < len(seqs)
                and end - start < self.n_seq_max
                and n_tokens + len(seqs[end]) <= self.n_batch
            ):
                n_tokens += len(seqs[end])
                end += 1
            self._decode(seqs[start:end], n_tokens, out[start:end])
            start = end
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.maximum(norms, 1e-12, out=norms)
        out /= norms
        return out

    def _decode(self, seqs: list[npt.NDArray[np.int32]], n_tokens: int, out: FloatArray) -> None:
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int32, count=len(seqs))
        self._tokens[:n_tokens] = np.concatenate(seqs)
        self._seq[:n_tokens] = np.repeat(np.arange(len(seqs), dtype=np.int32), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        self._pos[:n_tokens] = self._positions[:n_tokens] - starts
        self._batch.n_tokens = n_tokens
        if self._memory:
            llama_cpp.llama_memory_clear(self._memory, True)
        rc = int(llama_cpp.llama_decode(self._ctx, self._batch))
        if rc != 0:
            raise EmbedderError(f"{self.path}: llama_decode failed with code {rc}")
        row_bytes = self.n_embd * out.itemsize
        base = out.ctypes.data
        for i in range(len(seqs)):
            ptr = llama_cpp.llama_get_embeddings_seq(self._ctx, i)
            if not ptr:
                raise EmbedderError(f"{self.path}: no pooled embedding for sequence {i}")
            ctypes.memmove(base + i * row_bytes, ptr, row_bytes)

    def forget_texts(self) -> None:
        """Zero the last batch's cells and token buffers: each text clears the cells
        before it, but the last one's stay until the next (see :meth:`Embedder.forget_texts`)."""
        if self._memory:
            llama_cpp.llama_memory_clear(self._memory, True)
        self._tokens.fill(0)
        self._tok_buf.fill(0)

    def close(self) -> None:
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None


def _as_texts(texts: Sequence[str]) -> tuple[str, ...]:
    """A private copy of *texts*, checked here so that bad input fails on the caller's thread."""
    if isinstance(texts, str):
        raise TypeError("expected a sequence of strings, not a single string")
    batch = tuple(texts)
    for text in batch:
        if not isinstance(text, str):
            raise TypeError(f"texts must be str, got {type(text).__name__}")
    return batch


class Embedder:
    """Runs one llama.cpp embedding model on its own worker thread (a llama.cpp context is not thread-safe)."""  # noqa: E501

    def __init__(
        self, model_path: Path, *, n_threads: int | None = None, max_tokens: int = 256
    ) -> None:
        if max_tokens < _MIN_TOKENS:
            raise ValueError(f"max_tokens must be at least {_MIN_TOKENS}, got {max_tokens}")
        self.model_path = Path(model_path)
        self.n_threads = n_threads if n_threads is not None else (os.cpu_count() or 1)
        self.max_tokens = max_tokens
        self._dim: int | None = None
        self._name: str | None = None
        self._worker = ModelWorker(
            self._load, thread_name="agenvoy-embedder", closed_message="Embedder is closed"
        )

    @property
    def dim(self) -> int:
        """Embedding width (384 for MiniLM); loads the model on the worker the first time."""
        if self._dim is None:
            self._dim = self._run(lambda model: model.n_embd).result()
        return self._dim

    @property
    def model_name(self) -> str:
        """The model's own name (GGUF ``general.name``, else the file's stem).

        The archive stores it with the vectors: vectors of another model are
        re-embedded (``MemoryStore.check_embedding_model``), and the recall
        floors are chosen by it (``agent.recall.floor_for``).
        """
        if self._name is None:
            self._name = self._run(lambda model: model.name).result()
        return self._name

    def submit(self, texts: Sequence[str]) -> concurrent.futures.Future[FloatArray]:
        """Queue *texts* on the worker; the future yields a float32 (n, dim) array.

        A model trained with text kinds (e5: ``"passage: "``) gets the prefix for text
        that is searched; :meth:`embed_query` is for the question that searches it.
        """
        batch = _as_texts(texts)
        return self._run(lambda model: model.embed(batch, model.passage_prefix))

    def embed_query(self, texts: Sequence[str]) -> FloatArray:
        """Embed search questions (blocking): e5's ``"query: "``; the same as :meth:`embed`
        for a model without text kinds (MiniLM)."""
        batch = _as_texts(texts)
        return self._run(lambda model: model.embed(batch, model.query_prefix)).result()

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with [CLS] and [SEP], before truncation to ``max_tokens`` (blocking)."""
        batch = _as_texts(texts)
        return self._run(lambda model: [model.token_ids(text) for text in batch]).result()

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed *texts* (blocking): float32 array (n, dim), rows L2-normalised."""
        return self.submit(texts).result()

    async def aembed(self, texts: Sequence[str]) -> FloatArray:
        """Like :meth:`embed`, awaited without blocking the event loop."""
        return await asyncio.wrap_future(self.submit(texts))

    def forget_texts(self) -> concurrent.futures.Future[None]:
        """A reset, a remove or a message delete has run: the model's cells and token
        buffers, which still hold the last text embedded, are zeroed.  Queued behind a
        running batch; a model not loaded yet is not loaded for it."""
        return self._worker.submit_if_loaded(lambda model: model.forget_texts())

    def close(self) -> None:
        """Stop the worker (queued, not yet started jobs are cancelled) and free the model."""
        self._worker.close()

    def __enter__(self) -> Embedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, job: Callable[[_EmbeddingModel], _T]) -> concurrent.futures.Future[_T]:
        return self._worker.submit(job)

    def _load(self) -> _EmbeddingModel:
        """Load the model (worker thread, first job)."""
        model = _EmbeddingModel(self.model_path, self.n_threads, self.max_tokens)
        self._dim = model.n_embd
        self._name = model.name
        return model
