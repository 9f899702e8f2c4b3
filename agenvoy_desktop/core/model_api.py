"""What the memory core needs from a language model, without importing one.

``core`` never imports ``llm`` (DESIGN.md §2: dependencies point one way), yet
the rolling summary needs a model that writes schema-constrained JSON.  This
module is the contract: :class:`agenvoy_desktop.llm.engine.ChatEngine`
satisfies :class:`JsonModel`, and tests drive the same code with a scripted
model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypedDict


class ChatMessage(TypedDict, total=False):
    """One message in OpenAI-style chat form (what chat templates expect)."""

    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str


class ModelOutputError(RuntimeError):
    """The model answered, but not with what was asked (bad JSON, cut off, empty)."""


@dataclass(frozen=True, slots=True)
class JsonCompletion:
    """A schema-constrained answer, parsed, with its token accounting."""

    value: Any
    text: str
    prompt_tokens: int
    completion_tokens: int


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
    ) -> JsonCompletion:
        """Answer ``messages`` with JSON that matches ``schema``.

        Raises :class:`ModelOutputError` when the output is not valid JSON
        (e.g. cut off at ``max_tokens``).
        """
        ...
