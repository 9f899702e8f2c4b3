"""Reading messages written by others: JSON Lines and reference history.json.

Both formats funnel into :func:`build_messages`, which validates roles,
assigns our ids and fills in missing times (a reference file only has the
``當前時間:`` header on some messages; the rest inherit their neighbour's time).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.messages import ROLES, Message, content_text, new_message_id
from agenvoy_desktop.core.timeutil import parse_iso, split_time_header

_KNOWN_KEYS = frozenset({"id", "role", "content", "time", "ref"})


class ImportFormatError(ValueError):
    """The input is not something we can import; the message says where and why."""


@dataclass(frozen=True, slots=True)
class RawMessage:
    """A message as read, before ids and missing times are settled."""

    role: str
    content: str
    time_ns: int | None
    ref: str | None
    extra: Mapping[str, Any]
    our_id: str | None = None


def raw_from_mapping(data: object, where: str) -> RawMessage:
    """Validate one foreign message object."""
    if not isinstance(data, Mapping):
        raise ImportFormatError(f"{where}: expected a JSON object with 'role' and 'content'")
    role = data.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ImportFormatError(f"{where}: 'role' must be one of {sorted(ROLES)}, got {role!r}")
    if "content" not in data and not data.get("tool_calls"):
        raise ImportFormatError(f"{where}: missing 'content'")
    header_ns, content = split_time_header(content_text(data.get("content")))
    time_ns = header_ns
    if data.get("time") is not None:
        try:
            time_ns = parse_iso(str(data["time"]))
        except ValueError as exc:
            raise ImportFormatError(f"{where}: {exc}") from None
    ref = data.get("ref", data.get("id")) if "ref" in data or "id" in data else None
    extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    return RawMessage(
        role=role,
        content=content,
        time_ns=time_ns,
        ref=None if ref is None else str(ref),
        extra=extra,
    )


def build_messages(raws: Iterable[RawMessage], fallback_ns: int) -> list[Message]:
    """Settle ids and times; a message without a time takes its predecessor's."""
    items = list(raws)
    known = [r.time_ns for r in items if r.time_ns is not None]
    last = known[0] if known else fallback_ns
    out: list[Message] = []
    for raw in items:
        if raw.time_ns is not None:
            last = raw.time_ns
        out.append(
            Message(
                id=raw.our_id or new_message_id(),
                role=raw.role,
                content=raw.content,
                time_ns=last,
                ref=raw.ref,
                extra=dict(raw.extra),
            )
        )
    return out


def parse_jsonl(path: Path, text: str) -> list[RawMessage]:
    """Messages of a JSON Lines text, one object a line; blank lines skipped."""
    out: list[RawMessage] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
        out.append(raw_from_mapping(data, f"{path}:{number}"))
    return out


def read_history_array(path: Path, data: object) -> list[RawMessage]:
    """Messages of a history.json array (ours or the reference implementation's)."""
    if not isinstance(data, list):
        raise ImportFormatError(f"{path}: expected a JSON array of messages")
    return [raw_from_mapping(item, f"{path}: message {i + 1}") for i, item in enumerate(data)]


def _exported_messages(text: str) -> list[Any] | None:
    """The ``messages`` of our own JSON export (``{"format": "agenvoy-session", …}``)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None  # JSON Lines (or broken JSON, which the JSONL reader reports)
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return list(data["messages"])
    return None


def read_import_file(path: Path, fallback_ns: int) -> list[Message]:
    """Read JSON Lines or a history.json array, detected by the first character."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ImportFormatError(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if b"\x00" in raw[:4096]:
        raise ImportFormatError(f"{path}: binary data, not JSON")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFormatError(f"{path}: not UTF-8 text") from None
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"{path}: invalid JSON at line {exc.lineno} ({exc.msg})"
            ) from None
        raws = read_history_array(path, data)
    elif (exported := _exported_messages(text)) is not None:
        raws = read_history_array(path, exported)
    else:
        raws = parse_jsonl(path, text)
    if not raws:
        raise ImportFormatError(f"{path}: no messages in file")
    return build_messages(raws, fallback_ns)
