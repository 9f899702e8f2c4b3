"""What the core needs from an embedding model, and what it embeds.

The core never imports the llama.cpp engine: the composition root (CLI,
agent, UI) hands it any object with the :class:`TextEmbedder` shape.  Vectors
are float32 rows, L2-normalised, so inner product is cosine similarity.

A message is not embedded bare: :func:`embedding_parts` adds the head of
the message it follows, and cuts a long message into parts that each
fit the model's 256 tokens (each part becomes its own vector), instead of
letting the model silently drop everything past its limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from typing import Protocol

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.archive import MAX_PARTS
from agenvoy_desktop.core.messages import Message


class TextEmbedder(Protocol):
    """An embedding model running on its own worker thread."""

    @property
    def dim(self) -> int: ...

    def submit(self, texts: Sequence[str]) -> Future[npt.NDArray[np.float32]]: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def embed_queries(embedder: TextEmbedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Vectors for search questions, in the model's query form where it has one.

    e5 was trained with ``"query: "`` before a question and ``"passage: "`` before
    what answers it (``llm.embedder.Embedder.embed_query``); MiniLM has one form.
    An embedder without ``embed_query`` (a test double) embeds questions as text.
    """
    embed_query = getattr(embedder, "embed_query", None)
    vectors = embed_query(texts) if callable(embed_query) else embedder.embed(texts)
    return np.asarray(vectors, dtype=np.float32)


# -- what is embedded ---------------------------------------------------------------
EMBED_TEXT_VERSION = 1
"""Bump when :func:`embedding_parts` changes: stored vectors are then re-embedded."""

MODEL_TOKENS = 256
"""The embedding model's input limit ([CLS] and [SEP] included); longer input is cut."""
PART_TOKENS = 160
"""Estimated tokens of message text per vector.  With the context (40) and its
label, a part estimates at most ~205 tokens; the estimate undershoots the
real count by at most ~23 % (below), so a part stays under the model's 254."""
CONTEXT_TOKENS = 40
"""Estimated tokens of the previous message shown as context."""

_PIECE = re.compile(r"[^\W\d_]+|\d+|[^\w\s]|_", re.UNICODE)
_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def estimate_tokens(text: str) -> int:
    """WordPiece tokens of *text*, estimated from above without the tokenizer.

    A word costs one token per 6 letters (rounded up: rare long words split
    into pieces), a number one per 3 digits, punctuation one each and a CJK
    character one.  Measured against MiniLM's own tokenizer on 1,961 LoCoMo
    turns: at or above the real count for 96.5 % of them (mean 37.5 vs 34.3),
    and never more than 23 % below it.
    """
    total = 0
    for piece in _PIECE.findall(text):
        cjk = len(_CJK_CHAR.findall(piece))
        rest = len(piece) - cjk
        per = 3 if piece.isdigit() else 6
        total += cjk + (-(-rest // per) if rest else 0)
    return total


def _clip(text: str, budget: int) -> str:
    """The head of *text* holding about *budget* estimated tokens (whole words)."""
    if estimate_tokens(text) <= budget:
        return text
    out: list[str] = []
    used = 0
    for word in text.split():
        cost = estimate_tokens(word)
        if out and used + cost > budget:
            break
        out.append(word)
        used += cost
    return " ".join(out)


def split_parts(text: str, budget: int = PART_TOKENS, most: int = MAX_PARTS) -> list[str]:
    """Cut *text* into parts of about *budget* estimated tokens at sentence ends.

    A sentence longer than a part is cut between words.  More than *most*
    parts: the budget grows until they fit (each part then loses its tail to
    the model's limit rather than the message losing its end entirely).
    """
    text = text.strip()
    if estimate_tokens(text) <= budget:
        return [text]
    while True:
        parts = _pack(_units(text, budget), budget)
        if len(parts) <= most:
            return parts
        budget *= 2


def _units(text: str, budget: int) -> list[tuple[str, int]]:
    """Sentences (long ones cut between words) with their estimated tokens."""
    units: list[tuple[str, int]] = []
    for sentence in _SENTENCE_END.split(text):
        cost = estimate_tokens(sentence)
        if cost <= budget:
            units.append((sentence, cost))
            continue
        for word in sentence.split():
            units.append((word, estimate_tokens(word)))
    return units


def _pack(units: Sequence[tuple[str, int]], budget: int) -> list[str]:
    parts: list[list[str]] = [[]]
    used = 0
    for unit, cost in units:
        if parts[-1] and used + cost > budget:
            parts.append([])
            used = 0
        parts[-1].append(unit)
        used += cost
    return [" ".join(p) for p in parts if p]


def embedding_parts(message: Message, previous: Message | None = None) -> list[str]:
    """The texts embedded for one message: one per part of its content.

    Each part carries the head of the previous readable message, so a short
    reply ("yes, the blue one") is found by what it answered.  Measured on
    LoCoMo (semantic R@10, benchmarks/RESULTS.md): bare text 0.452, with the
    previous message 0.474, with the previous message and the date 0.451 (the
    date words made every message of a day alike), so the date is left out.
    """
    context = ""
    if previous is not None and previous.content.strip():
        context = f"(after: {_clip(' '.join(previous.content.split()), CONTEXT_TOKENS)}) "
    return [f"{context}{part}" for part in split_parts(message.content)]


def readable(message: Message) -> bool:
    """Whether a message can serve as another's context (not tool traffic, not empty)."""
    return not message.is_tool_traffic and bool(message.content.strip())


def with_previous(history: Sequence[Message], ids: Iterable[str]) -> dict[str, Message | None]:
    """For each of *ids* found in *history*, the readable message before it (or None)."""
    wanted = set(ids)
    out: dict[str, Message | None] = {}
    last: Message | None = None
    for message in history:
        if message.id in wanted:
            out[message.id] = last
        if readable(message):
            last = message
    return out
