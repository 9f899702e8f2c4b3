"""A scripted JSON model: summary tests drive the real runner with it.

:class:`ScriptedJsonModel` satisfies ``core.model_api.JsonModel``.  Each
``complete_json`` call takes the next answer from a list (or asks a
callable), can fail on chosen calls, and records the prompt it got.  Tokens
are counted as ``len(text) // 4`` (at least 1 for non-empty text), so tests
can size a context in characters.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from agenvoy_desktop.core.model_api import (
    ChatMessage,
    JsonCompletion,
    ModelOutputError,
    StopWhen,
)

Answer = Any
"""A JSON value to return, or an exception instance to raise."""
AnswerFn = Callable[[int, list[ChatMessage]], Answer]


@dataclass
class SeenCall:
    """One complete_json call as the model received it."""

    messages: list[ChatMessage]
    schema: dict[str, Any]
    max_tokens: int

    @property
    def prompt(self) -> str:
        """The user part (previous summary + transcript)."""
        return "\n".join(m.get("content", "") for m in self.messages if m.get("role") == "user")


def count(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class ScriptedJsonModel:
    """Answers from a script; see the module docstring."""

    def __init__(
        self,
        answers: Sequence[Answer] | AnswerFn,
        *,
        name: str = "scripted-json",
        context_size: int = 4096,
        fail_on: Collection[int] = (),
        error: Exception | None = None,
    ) -> None:
        self._answers = answers
        self._name = name
        self._context_size = context_size
        self.fail_on = set(fail_on)
        self.error = error or ModelOutputError("scripted failure")
        self.calls: list[SeenCall] = []
        self.stopped_early = 0
        """Answers that ``stop_when`` ended before their end."""
        self.token_counts = 0
        self.hold: asyncio.Event | None = None
        """When set to an Event, calls from number ``hold_from`` on wait for it."""
        self.hold_from = 0
        self.waiting = asyncio.Event()
        """Set while a call is blocked on ``hold`` (for busy/cancel tests)."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def context_size(self) -> int:
        return self._context_size

    @property
    def prompts(self) -> list[str]:
        return [call.prompt for call in self.calls]

    async def count_tokens(self, text: str) -> int:
        self.token_counts += 1
        return count(text)

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        index = len(self.calls)
        self.calls.append(SeenCall(list(messages), schema, max_tokens))
        if self.hold is not None and index >= self.hold_from:
            self.waiting.set()
            await self.hold.wait()
            self.waiting.clear()
        if index in self.fail_on:
            raise self.error
        answer = self._answers(index, messages) if callable(self._answers) else self._answers[index]
        if isinstance(answer, BaseException):
            raise answer
        text = json.dumps(answer, ensure_ascii=False, sort_keys=True)  # the engine's order
        if stop_when is not None:  # shown the answer at each "}", as the engine does
            ends = (i + 1 for i, char in enumerate(text) if char == "}")
            if finished := next((f for end in ends if (f := stop_when(text[:end]))), None):
                text, answer = finished, json.loads(finished)
                self.stopped_early += 1
        prompt_tokens = sum(count(m.get("content", "")) for m in messages)
        return JsonCompletion(answer, text, prompt_tokens, count(text))


_LINE = re.compile(r"^\[(m\d+) [^\]]*\] \w+: (.*)$", re.MULTILINE)


def numbered_summary(index: int, messages: list[ChatMessage] | None = None) -> dict[str, Any]:
    """A valid answer that says which call produced it ("chunk N").

    Given the prompt, its decision cites the chunk's first message (handle
    ``m1``) and quotes its first words, as a traceable decision must.
    """
    decision = {"decision": f"decision from chunk {index}", "decided_at": "2023-11-14"}
    prompt = "\n".join(m.get("content", "") for m in messages or [])
    if first := _LINE.search(prompt):
        decision["source"] = first.group(1)
        decision["decision"] += ": " + " ".join(first.group(2).split()[:3])[:60]
    return {
        "key_decisions": [decision],
        "past_discussions": [],
        "current_discussion": f"chunk {index}",
    }
