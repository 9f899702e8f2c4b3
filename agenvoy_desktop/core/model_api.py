"""What the memory core needs from a language model, without importing one.

``core`` never imports ``llm`` (dependencies point one way: docs/ARCHITECTURE.md), yet
the rolling summary needs a model that writes schema-constrained JSON.  This
module is the contract: :class:`agenvoy_desktop.llm.engine.ChatEngine`
satisfies :class:`JsonModel`, and tests drive the same code with a scripted
model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

from agenvoy_desktop.core.errors import KnownError

FinishReason = Literal["stop", "length", "tool_calls", "cancelled"]


class ChatMessage(TypedDict, total=False):
    """One message in OpenAI-style chat form (what chat templates expect).

    ``tool_calls`` items look like ``{"id": ..., "type": "function",
    "function": {"name": ..., "arguments": {...}}}`` with ``arguments`` a
    *dict* (chat templates serialise it with ``tojson``); a ``role="tool"``
    message carries ``tool_call_id`` and ``name``.
    """

    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str


class ModelOutputError(KnownError, RuntimeError):
    """The model answered, but not with what was asked (bad JSON, cut off, empty)."""


@dataclass(frozen=True, slots=True)
class JsonCompletion:
    """A schema-constrained answer, parsed, with its token accounting."""

    value: Any
    text: str
    prompt_tokens: int
    completion_tokens: int


StopWhen = Callable[[str], str | None]
"""Given a JSON answer so far: the finished answer to end it with, or None to go on."""


class JsonModel(Protocol):
    """A model that can count tokens and answer under a JSON schema."""

    @property
    def name(self) -> str:
        """Short identifier shown in logs and the summary history."""
        ...

    @property
    def context_size(self) -> int:
        """Tokens the model's context holds (prompt + answer)."""
        ...

    async def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's vocabulary."""
        ...

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        """Answer ``messages`` with JSON that matches ``schema``.

        *stop_when*, where the model generates locally, sees the answer so far
        after each token that closes a JSON object; text it returns (a
        complete answer) ends the generation and is parsed instead.  A remote
        model may ignore it.  Raises :class:`ModelOutputError` when the
        output is not valid JSON (e.g. cut off at ``max_tokens``).
        """
        ...


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the streamed answer (one or more tokens, valid UTF-8)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """The model asked for a tool.  ``error`` is set when its JSON was unusable."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ChatFinished:
    """Always the last event of a chat stream that was not closed early."""

    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    trimmed_messages: int = 0
    """Oldest messages dropped so the prompt fits the context."""
    first_token_s: float | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PromptRead:
    """How much of a long prompt the model has read before it writes (``done`` of ``total``
    tokens still to read).  Only a local model reports it, and only for long prompts."""

    done: int
    total: int


ChatEvent = TextDelta | ToolCallRequest | ChatFinished | PromptRead


class ChatModel(JsonModel, Protocol):
    """A chat model that streams (the engine, or a scripted test double)."""

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: asyncio.Event | None = None,
        avoid_openings: Sequence[str] = (),
    ) -> AsyncIterator[ChatEvent]:
        """Stream the answer to ``messages``.

        ``tools`` are OpenAI-style function specs.  Setting ``stop`` ends the
        generation within one token and the stream ends with
        ``ChatFinished(finish_reason="cancelled")``; closing the iterator or
        cancelling the consuming task stops the worker just as fast.  The
        answer should not start with one of ``avoid_openings`` (a local
        model's sampler rules them out; a server's sampling is its own, and
        an endpoint ignores them).
        """
        ...
