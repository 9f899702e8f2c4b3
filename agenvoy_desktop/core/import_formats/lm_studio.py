"""LM Studio's saved chats: one ``<id>.conversation.json`` per chat.

The format (LM Studio's conversations folder, ``~/.lmstudio/conversations``,
possibly in sub-folders the user made): ``{name, createdAt (Unix ms),
messages: [{versions: [...], currentlySelected}]}``.  Each message keeps
every version the user generated or edited, and ``currentlySelected`` is the
index of the one shown.  A version is ``{type: "singleStep", role, content:
[{type: "text", text}, {type: "file", ...}]}`` or, for answers,
``{type: "multiStep", role: "assistant", steps: [{type: "contentBlock",
content: [...]}, ...]}``.  Older files kept plain ``{role, content}`` messages;
both are read.  Messages carry no times of their own, so they take the chat's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agenvoy_desktop.core.import_formats.model import (
    ImportedConversation,
    ImportedMessage,
    Skip,
    as_mapping,
    collect,
    conversation,
    epoch_to_ns,
    known_role,
    read_messages,
    text_or_none,
)

APP = "lm_studio"
SUFFIX = ".conversation.json"


def looks_like(data: object) -> bool:
    """Whether parsed JSON is one LM Studio chat: messages with ``versions``.

    The older plain shape is recognised only together with ``createdAt``,
    since ``{"messages": [{role, content}]}`` alone is also our own export.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        return False
    first = data["messages"][0] if data["messages"] else {}
    return isinstance(as_mapping(first).get("versions"), list) or "createdAt" in data


def read(
    data: object, where: str, source_id: str | None = None
) -> tuple[list[ImportedConversation], list[Skip]]:
    """The chat of one parsed ``.conversation.json``; *source_id* names it (its file)."""
    found, skipped = collect(data, where, _conversation)
    return [replace(c, source_id=source_id) for c in found], skipped


def _conversation(item: Mapping[str, Any], where: str) -> ImportedConversation:
    raws = item.get("messages")
    messages, skipped = read_messages(raws, where, _message, "no 'messages' list")
    return conversation(
        APP,
        source_id=None,
        title=text_or_none(item.get("name")),
        messages=messages,
        skipped=skipped,
        created_ns=epoch_to_ns(item.get("createdAt")),
    )


def _selected(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The version the user last saw (``currentlySelected``, else the last one)."""
    versions = raw.get("versions")
    if not isinstance(versions, list):
        return raw  # the older plain shape: the message is its only version
    if not versions:
        return None
    index = raw.get("currentlySelected")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(versions):
        index = len(versions) - 1
    return as_mapping(versions[index])


def _message(raw: object, where: str) -> ImportedMessage | Skip:
    if not isinstance(raw, Mapping):
        return Skip(where, "not a message object")
    version = _selected(raw)
    if version is None:
        return Skip(where, "empty message (no versions)")
    role = known_role(version.get("role"))
    if role is None or role == "tool":
        return Skip(where, f"not a conversation role ({version.get('role')!r})")
    text = _text(version)
    if not text.strip():
        return Skip(where, "empty message")
    return ImportedMessage(role=role, content=text, time_ns=None, source_id=None)


def _text(version: Mapping[str, Any]) -> str:
    """A version's words: its content parts, or each content step of a multi-step answer."""
    steps = version.get("steps")
    if isinstance(steps, list):
        blocks = [
            _parts(as_mapping(step).get("content"))
            for step in steps
            if as_mapping(step).get("type") == "contentBlock"
        ]
        return "\n\n".join(b for b in blocks if b.strip())
    return _parts(version.get("content"))


def _parts(content: object) -> str:
    """Text parts as they are; files as ``[file: name]``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out: list[str] = []
    for part in content:
        entry = as_mapping(part)
        if entry.get("type") == "text" and isinstance(entry.get("text"), str):
            out.append(entry["text"])
        elif entry.get("type") == "file":
            name = text_or_none(entry.get("name")) or text_or_none(entry.get("fileIdentifier"))
            out.append(f"[file: {name or 'unnamed'}]")
    return "\n".join(p for p in out if p)
