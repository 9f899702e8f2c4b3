"""Reading messages written by others: JSON Lines and reference history.json.

Both formats funnel into :func:`build_messages`, which validates roles,
assigns our ids and fills in missing times (a reference file only has the
``當前時間:`` header on some messages; the rest inherit their neighbour's time).

Everything is validated here, before the store is even opened, so a bad file
gets one line naming the place and changes nothing: content must be text,
times must be storable, numbers finite, strings valid Unicode and each
message within the size limit.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.import_keys import IMPORT_KEY, content_key
from agenvoy_desktop.core.messages import (
    MAX_MESSAGE_BYTES,
    ROLES,
    Message,
    check_size,
    encoded_size,
    new_message_id,
)
from agenvoy_desktop.core.timeutil import check_time_ns, parse_iso, split_time_header

_KNOWN_KEYS = frozenset({"id", "role", "content", "time", "ref"})


class ImportFormatError(KnownError, ValueError):
    """The input is not something we can import; the message says where and why."""


class TimeOutOfRangeError(ImportFormatError):
    """A message time the archive cannot store (before 1970, after 2261).

    Its own type so a reader that skips such messages (history.json) can
    count them apart from the unreadable ones, and ``doctor`` can say why.
    """


class _NonFiniteNumberError(ValueError):
    """NaN or ±Infinity in the input (Python's json accepts them; JSON does not)."""


@dataclass(frozen=True, slots=True)
class RawMessage:
    """A message as read, before ids and missing times are settled."""

    role: str
    content: str
    time_ns: int | None
    ref: str | None
    extra: Mapping[str, Any]
    our_id: str | None = None


def _reject_constant(name: str) -> Any:
    raise _NonFiniteNumberError(name)


def _finite_float(text: str) -> float:
    """A JSON float; ``1e999`` would silently become Infinity, so it is refused too."""
    value = float(text)
    if not math.isfinite(value):
        raise _NonFiniteNumberError(text)
    return value


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses what cannot be written back as strict JSON.

    Raises :class:`json.JSONDecodeError` for syntax errors and
    :class:`ImportFormatError` (without a location) for NaN/Infinity and for
    nesting deeper than Python can parse.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except _NonFiniteNumberError as exc:
        raise ImportFormatError(f"{exc} is not a JSON number (only finite numbers)") from None
    except RecursionError:
        raise ImportFormatError("JSON nested too deeply") from None


def _content(data: Mapping[str, Any], where: str) -> str:
    """The message text; only text (or OpenAI-style text parts) is accepted.

    Numbers, objects, booleans and null used to be turned into strings like
    ``"{'evil': True}"``; now they are refused.  A missing or null content is
    allowed only on an assistant message that calls tools.
    """
    value = data.get("content")
    if isinstance(value, str):
        return value
    if value is None and data.get("tool_calls"):
        return ""
    if "content" not in data:
        raise ImportFormatError(f"{where}: missing 'content'")
    if isinstance(value, list) and value:
        texts = [part.get("text") if isinstance(part, Mapping) else None for part in value]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(t for t in texts if t)
    raise ImportFormatError(
        f"{where}: 'content' must be a string, got {_json_type(value)}"
        + (" (only text parts are accepted in a list)" if isinstance(value, list) else "")
    )


_JSON_TYPES = {
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "a list",
    dict: "an object",
}


def _json_type(value: object) -> str:
    """How JSON would name *value*'s type, for error messages."""
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def _time(data: Mapping[str, Any], header_ns: int | None, where: str) -> int | None:
    """The message's time: its ``time`` field, else its ``當前時間:`` header, else None."""
    value = data.get("time")
    if value is None:
        if header_ns is not None:
            _in_range(header_ns, None, where)
        return header_ns
    if not isinstance(value, str):
        raise ImportFormatError(
            f"{where}: 'time' must be an ISO 8601 string, got {_json_type(value)}"
        )
    try:
        ns = parse_iso(value)
    except ValueError as exc:
        raise ImportFormatError(f"{where}: {exc}") from None
    return _in_range(ns, value, where)


def _in_range(ns: int, shown: str | None, where: str) -> int:
    try:
        return check_time_ns(ns, shown)
    except ValueError as exc:
        raise TimeOutOfRangeError(f"{where}: {exc}") from None


def _ref(data: Mapping[str, Any], where: str) -> str | None:
    """The caller's own id: a string or an integer, kept as text."""
    key = "ref" if "ref" in data else "id"
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise ImportFormatError(f"{where}: '{key}' must be a string or an integer")


def raw_from_mapping(data: object, where: str, max_bytes: int = MAX_MESSAGE_BYTES) -> RawMessage:
    """Validate one foreign message object."""
    if not isinstance(data, Mapping):
        raise ImportFormatError(f"{where}: expected a JSON object with 'role' and 'content'")
    role = data.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ImportFormatError(f"{where}: 'role' must be one of {sorted(ROLES)}, got {role!r}")
    try:
        check_size(encoded_size(data), max_bytes)
    except ValueError as exc:
        raise ImportFormatError(f"{where}: {exc}") from None
    header_ns, content = split_time_header(_content(data, where))
    return RawMessage(
        role=role,
        content=content,
        time_ns=_time(data, header_ns, where),
        ref=_ref(data, where),
        extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS},
    )


def build_messages(raws: Iterable[RawMessage], fallback_ns: int) -> list[Message]:
    """Settle ids and times; a message without a time takes its predecessor's.

    A message without an id of the file's gets a key from what the file says
    of it (``core/import_keys.py``), so importing the file again adds nothing twice.
    """
    items = list(raws)
    known = [r.time_ns for r in items if r.time_ns is not None]
    last = known[0] if known else fallback_ns
    seen: Counter[tuple[str, str, int | None]] = Counter()
    out: list[Message] = []
    for raw in items:
        if raw.time_ns is not None:
            last = raw.time_ns
        extra = dict(raw.extra)
        if raw.ref is None and not isinstance(extra.get(IMPORT_KEY), str):
            said = (raw.role, raw.content, raw.time_ns)
            extra[IMPORT_KEY] = content_key(*said, seen[said])
            seen[said] += 1
        out.append(
            Message(
                id=raw.our_id or new_message_id(),
                role=raw.role,
                content=raw.content,
                time_ns=last,
                ref=raw.ref,
                extra=extra,
            )
        )
    return out


def parse_jsonl(path: Path, text: str, max_bytes: int = MAX_MESSAGE_BYTES) -> list[RawMessage]:
    """Messages of a JSON Lines text, one object a line; blank lines skipped.

    Lines end at ``\\n`` only (a ``\\r`` before it is JSON whitespace):
    ``str.splitlines`` would also split at U+2028 and friends, which JSON
    allows unescaped inside strings.
    """
    out: list[RawMessage] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = strict_loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{where}: invalid JSON ({exc.msg})") from None
        except ImportFormatError as exc:
            raise ImportFormatError(f"{where}: {exc}") from None
        out.append(raw_from_mapping(data, where, max_bytes))
    return out


def read_history_array(
    path: Path, data: object, max_bytes: int = MAX_MESSAGE_BYTES
) -> list[RawMessage]:
    """Messages of a history.json array (ours or the reference implementation's)."""
    if not isinstance(data, list):
        raise ImportFormatError(f"{path}: expected a JSON array of messages")
    return [
        raw_from_mapping(item, f"{path}: message {i + 1}", max_bytes) for i, item in enumerate(data)
    ]


def _exported_messages(path: Path, text: str) -> list[Any] | None:
    """The ``messages`` of our own JSON export (``{"format": "agenvoy-session", …}``)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = strict_loads(text)
    except json.JSONDecodeError:
        return None  # JSON Lines (or broken JSON, which the JSONL reader reports)
    except ImportFormatError as exc:
        raise ImportFormatError(f"{path}: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return list(data["messages"])
    return None


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ImportFormatError(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    return decode_text(raw, str(path))


def decode_text(data: bytes | bytearray, where: str) -> str:
    """UTF-8 text (a BOM allowed); binary data and other encodings get one line."""
    if b"\x00" in data[:4096]:
        raise ImportFormatError(f"{where}: binary data, not JSON")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFormatError(f"{where}: not UTF-8 text") from None


def parse_json(text: str, where: str) -> object:
    """Strict JSON (:func:`strict_loads`), failing with the file and line."""
    try:
        return strict_loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{where}: invalid JSON at line {exc.lineno} ({exc.msg})") from None
    except ImportFormatError as exc:
        raise ImportFormatError(f"{where}: {exc}") from None


def _array(path: Path, text: str) -> object:
    return parse_json(text, str(path))


def read_import_file(
    path: Path, fallback_ns: int, *, max_message_bytes: int = MAX_MESSAGE_BYTES
) -> list[Message]:
    """Read JSON Lines or a history.json array, detected by the first character.

    *max_message_bytes* is the store's per-message limit
    (:func:`~agenvoy_desktop.core.messages.message_limit`), checked here so
    the error can name the line.
    """
    return read_import_text(
        path, _read_text(path), fallback_ns, max_message_bytes=max_message_bytes
    )


def read_import_text(
    path: Path, text: str, fallback_ns: int, *, max_message_bytes: int = MAX_MESSAGE_BYTES
) -> list[Message]:
    """:func:`read_import_file` of a text already read (*path* names it in errors)."""
    if text.lstrip().startswith("["):
        raws = read_history_array(path, _array(path, text), max_message_bytes)
    elif (exported := _exported_messages(path, text)) is not None:
        raws = read_history_array(path, exported, max_message_bytes)
    else:
        raws = parse_jsonl(path, text, max_message_bytes)
    if not raws:
        raise ImportFormatError(f"{path}: no messages in file")
    return build_messages(raws, fallback_ns)
