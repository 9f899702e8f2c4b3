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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.timeutil import check_time_ns, format_iso, parse_iso

ROLES = frozenset({"user", "assistant", "system", "tool"})
_CORE_KEYS = frozenset({"id", "role", "content", "time", "ref"})

MAX_MESSAGE_BYTES = 1024 * 1024
"""The largest message (its history.json line, UTF-8) the store accepts: 1 MiB.

A single huge message used to be accepted and then trigger a compaction
that pushed every other message of the session out of history.json (and
their vectors with it).  At the default history budget (5 MiB, compacted to
80 %) a message of at most 1 MiB always leaves most of the session in place;
a pasted book is better kept as a file in an allowed folder.
"""
MIN_MESSAGE_LIMIT = 64 * 1024
"""The per-message limit never drops below this, however small the budget.

The agent's own messages are bounded by construction (tool results are
clipped to a few thousand characters, answers to ``max_answer_tokens``) and
must always fit, or a turn would fail on a user's tiny ``max_history_bytes``.
"""


class InvalidMessageError(KnownError, ValueError):
    """A message the store must not write; ``str()`` says what is wrong in one line."""


def message_limit(max_history_bytes: int) -> int:
    """Per-message size limit for a session whose history budget is *max_history_bytes*.

    A quarter of the budget, so a message can never be most of the kept 80 %,
    between :data:`MIN_MESSAGE_LIMIT` and :data:`MAX_MESSAGE_BYTES`.
    """
    return min(MAX_MESSAGE_BYTES, max(MIN_MESSAGE_LIMIT, max_history_bytes // 4))


def encoded_size(data: object) -> int:
    """UTF-8 size of *data* as JSON; raises :class:`InvalidMessageError` if it cannot be stored.

    History files are strict JSON in UTF-8: NaN/Infinity have no JSON form
    and a lone surrogate (``"\\ud800"`` in an import) has no UTF-8 form, so
    either would leave a file nothing can read back.
    """
    try:
        return len(json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidMessageError(
            "text with a lone surrogate (a broken \\ud800-style escape), which is not valid Unicode"
        ) from None
    except ValueError:
        raise InvalidMessageError("a NaN or Infinity number, which JSON cannot store") from None
    except (TypeError, RecursionError) as exc:
        raise InvalidMessageError(f"data JSON cannot store ({exc})") from None


def check_size(size: int, limit: int) -> None:
    """Refuse a message of *size* bytes over *limit*, saying both in readable units."""
    if size > limit:
        raise InvalidMessageError(
            f"message too large: {_kib(size)}; the limit is {_kib(limit)} per message"
        )


def _kib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size / 1024:.0f} KiB"


def check_messages(messages: Sequence[Message], limit: int = MAX_MESSAGE_BYTES) -> None:
    """Validate messages before anything is written (store ``append`` / ``import``).

    Checks what the archive and history.json cannot take: a role we do not
    know, content that is not text, a time outside the storable range, NaN,
    lone surrogates, and messages over *limit* bytes.  The message names the
    offending message's position so a caller can point at it.
    """
    for number, message in enumerate(messages, start=1):
        try:
            _check_one(message, limit)
        except ValueError as exc:
            where = f"message {number}" if len(messages) > 1 else "message"
            raise InvalidMessageError(f"{where}: {exc}") from None


def _check_one(message: Message, limit: int) -> None:
    if message.role not in ROLES:
        raise InvalidMessageError(f"'role' must be one of {sorted(ROLES)}, got {message.role!r}")
    if not isinstance(message.content, str):
        raise InvalidMessageError(f"'content' must be text, got {type(message.content).__name__}")
    if not isinstance(message.time_ns, int) or isinstance(message.time_ns, bool):
        raise InvalidMessageError(f"time must be integer nanoseconds, got {message.time_ns!r}")
    check_time_ns(message.time_ns)
    check_size(encoded_size(message.to_json()), limit)


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
        """Parse our own history.json element (see :mod:`importers` for foreign ones).

        A time the archive cannot store, or a role the app does not know,
        raises ValueError: a history file written before times were checked
        (or edited by hand) then loads without that element (the history
        loader keeps the original file) instead of failing every command that
        reads the session — or sending a server a role it refuses.
        """
        extra = {k: v for k, v in data.items() if k not in _CORE_KEYS}
        ref = data.get("ref")
        role = data["role"]
        if not isinstance(role, str) or role not in ROLES:
            raise ValueError(f"'role' must be one of {sorted(ROLES)}, got {role!r}")
        return cls(
            id=str(data["id"]),
            role=role,
            content=content_text(data.get("content")),
            time_ns=check_time_ns(parse_iso(str(data["time"])), str(data["time"])),
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
