"""A scripted chat model: the agent's logic tests drive turns with it.

Each call to :meth:`ScriptedChatModel.chat` consumes one script step: a list
of items — ``str`` (a text delta), :class:`Call` (a tool call), or
:data:`WAIT` (block until the test releases ``gate`` — for cancel tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    JsonCompletion,
    PromptRead,
    StopWhen,
    TextDelta,
    ToolCallRequest,
)

WAIT = object()


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class Seen:
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None
    avoid_openings: tuple[str, ...] = ()
    max_tokens: int | None = None


class ScriptedChatModel:
    """Satisfies core.model_api.ChatModel; records what it was sent."""

    name = "scripted-chat"
    context_size = 4096

    def __init__(self, script: Sequence[Sequence[object]]) -> None:
        self.script = [list(step) for step in script]
        self.seen: list[Seen] = []
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self._ids = 0

    async def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        raise NotImplementedError

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: asyncio.Event | None = None,
        avoid_openings: Sequence[str] = (),
    ) -> AsyncIterator[ChatEvent]:
        self.seen.append(
            Seen(
                [dict(m) for m in messages],  # type: ignore[misc]
                list(tools) if tools else None,
                tuple(avoid_openings),
                max_tokens,
            )
        )
        step = self.script.pop(0) if self.script else ["(script exhausted)"]
        produced = 0
        called = False
        for item in step:
            if stop is not None and stop.is_set():
                yield ChatFinished("cancelled", 10, produced)
                return
            if item is WAIT:
                self.waiting.set()
                await self.gate.wait()
                continue
            if isinstance(item, PromptRead):  # a long prompt's progress, passed through
                yield item
                continue
            if isinstance(item, Call):
                self._ids += 1
                called = True
                yield ToolCallRequest(
                    f"call_{self._ids}", item.name, item.arguments, "{}", item.error
                )
            else:
                produced += 1
                yield TextDelta(str(item))
            await asyncio.sleep(0)
        if stop is not None and stop.is_set():
            yield ChatFinished("cancelled", 10, produced)
            return
        yield ChatFinished("tool_calls" if called else "stop", 10, produced)
