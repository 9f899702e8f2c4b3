"""The message record shared by history.json, the archive and search.

A message is immutable once written.  ``id`` is ours and stable (it links the
history file, the archive row and the vector); ``ref`` is the caller's own id
from an import, kept so benchmarks and users can find their messages again.
Tool traffic (assistant tool calls, tool results) keeps its extra fields
verbatim in ``extra``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.core.timeutil import format_iso, parse_iso

ROLES = frozenset({"user", "assistant", "system", "tool"})
_CORE_KEYS = frozenset({"id", "role", "content", "time", "ref"})


def new_message_id() -> str:
    """A fresh, globally unique message id."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Message:
    """One stored message."""

    id: str
    role: str
    content: str
    time_ns: int
    ref: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_tool_traffic(self) -> bool:
        """Tool results and assistant messages that only call tools."""
        return self.role == "tool" or bool(self.extra.get("tool_calls"))

    def to_json(self) -> dict[str, Any]:
        """The history.json form."""
        data: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "time": format_iso(self.time_ns),
        }
        if self.ref is not None:
            data["ref"] = self.ref
        data.update(self.extra)
        return data

    def extra_json(self) -> str | None:
        """``extra`` serialised for the archive (None when empty)."""
        return json.dumps(self.extra, ensure_ascii=False, sort_keys=True) if self.extra else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        """Parse our own history.json element (see :mod:`importers` for foreign ones)."""
        extra = {k: v for k, v in data.items() if k not in _CORE_KEYS}
        ref = data.get("ref")
        return cls(
            id=str(data["id"]),
            role=str(data["role"]),
            content=content_text(data.get("content")),
            time_ns=parse_iso(str(data["time"])),
            ref=None if ref is None else str(ref),
            extra=extra,
        )


def content_text(content: object) -> str:
    """Message content as text: strings as-is, OpenAI-style part lists joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        ]
        return "\n".join(p for p in parts if p)
    return str(content)
