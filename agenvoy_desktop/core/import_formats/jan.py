"""Jan's data folder: ``threads/<id>/thread.json`` plus ``threads/<id>/messages.jsonl``.

The format (Jan's threads and messages specs, which follow OpenAI's Threads
API): ``thread.json`` is ``{id, title, created, updated, ...}``;
``messages.jsonl`` holds one message a line, ``{id, thread_id, role,
content: [{type: "text", text: {value, annotations}}], created_at, status}``,
with ``created_at`` in seconds or milliseconds depending on the version.
A line that is cut short (Jan was closed mid-write) is skipped, not fatal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agenvoy_desktop.core.import_formats.model import (
    ImportedConversation,
    ImportedMessage,
    Skip,
    as_mapping,
    conversation,
    epoch_to_ns,
    json_type,
    known_role,
    text_or_none,
)
from agenvoy_desktop.core.importers import ImportFormatError, strict_loads

APP = "jan"
MESSAGES = "messages.jsonl"
THREAD = "thread.json"


def looks_like_line(data: object) -> bool:
    """Whether one parsed JSON Lines record is a Jan message (typed content parts)."""
    if not isinstance(data, Mapping) or "role" not in data:
        return False
    content = data.get("content")
    first = content[0] if isinstance(content, list) and content else None
    return "thread_id" in data or isinstance(as_mapping(first).get("text"), Mapping)


def read_thread(thread: object, lines: str, where: str) -> tuple[ImportedConversation, list[Skip]]:
    """One thread from its parsed ``thread.json`` (None when absent) and its messages text.

    The returned skips are the thread's message-level ones, also kept on the
    conversation so a caller can report them either way.
    """
    meta = as_mapping(thread)
    messages: list[ImportedMessage] = []
    skipped: list[Skip] = []
    for number, line in enumerate(lines.split("\n"), start=1):
        if not line.strip():
            continue
        found = _message(line, f"{where}:{number}")
        if isinstance(found, Skip):
            skipped.append(found)
        else:
            messages.append(found)
    if all(m.time_ns is not None for m in messages):
        messages.sort(key=lambda m: m.time_ns or 0)  # some versions wrote newest first
    found_conversation = conversation(
        APP,
        source_id=text_or_none(meta.get("id")),
        title=text_or_none(meta.get("title")),
        messages=messages,
        skipped=skipped,
        created_ns=epoch_to_ns(meta.get("created")),
    )
    return found_conversation, skipped


def _message(line: str, where: str) -> ImportedMessage | Skip:
    try:
        data = strict_loads(line)
    except (json.JSONDecodeError, ImportFormatError):
        return Skip(where, "invalid JSON (a line cut short?)")
    if not isinstance(data, Mapping):
        return Skip(where, f"not a message object ({json_type(data)})")
    role = known_role(data.get("role"))
    if role is None or role == "tool":
        return Skip(where, f"not a conversation role ({data.get('role')!r})")
    if data.get("status") == "error":
        return Skip(where, "a reply that failed in Jan")
    text = _text(data.get("content"))
    if not text.strip():
        return Skip(where, "empty message")
    return ImportedMessage(
        role=role,
        content=text,
        time_ns=epoch_to_ns(data.get("created_at")) or epoch_to_ns(data.get("created")),
        source_id=text_or_none(data.get("id")),
    )


def _text(content: object) -> str:
    """Text parts (``text.value``, or a plain string); images as ``[image]``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out: list[str] = []
    for part in content:
        entry: Mapping[str, Any] = as_mapping(part)
        text = entry.get("text")
        if isinstance(text, Mapping) and isinstance(text.get("value"), str):
            out.append(text["value"])
        elif isinstance(text, str):
            out.append(text)
        elif entry.get("type") in ("image_url", "image_file", "image"):
            out.append("[image]")
    return "\n".join(p for p in out if p)
