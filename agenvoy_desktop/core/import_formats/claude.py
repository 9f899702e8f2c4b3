"""Claude's data export: ``conversations.json`` in the zip from Settings → Privacy → Export.

The format (Anthropic's claude.ai data export, conversations.json): a JSON
list of conversations ``{uuid, name, created_at, updated_at,
chat_messages}``; each message is ``{uuid, sender: "human" | "assistant",
text, content: [{type, text, ...}], created_at (ISO 8601), attachments:
[{file_name, extracted_content, ...}], files: [{file_name}]}``.  ``content``
holds typed blocks (text, and tool use or thinking on newer chats); ``text``
is the older flat form of the same words.  There are no branches: the list is
the conversation as shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenvoy_desktop.core.import_formats.model import (
    ImportedConversation,
    ImportedMessage,
    Skip,
    as_mapping,
    collect,
    conversation,
    iso_to_ns,
    read_messages,
    text_or_none,
)

APP = "claude"
_ROLES = {"human": "user", "user": "user", "assistant": "assistant"}


def looks_like(data: object) -> bool:
    """Whether parsed JSON is Claude's: conversations with ``chat_messages``."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and isinstance(first.get("chat_messages"), list)


def read(data: object, where: str) -> tuple[list[ImportedConversation], list[Skip]]:
    """Every conversation of a parsed conversations.json (a list, or one conversation)."""
    return collect(data, where, _conversation)


def _conversation(item: Mapping[str, Any], where: str) -> ImportedConversation:
    messages, skipped = read_messages(
        item.get("chat_messages"), where, _message, "no 'chat_messages' list"
    )
    return conversation(
        APP,
        source_id=text_or_none(item.get("uuid")),
        title=text_or_none(item.get("name")),
        messages=messages,
        skipped=skipped,
        created_ns=iso_to_ns(item.get("created_at")),
    )


def _message(raw: object, where: str) -> ImportedMessage | Skip:
    if not isinstance(raw, Mapping):
        return Skip(where, "not a message object")
    sender = raw.get("sender")
    role = _ROLES.get(sender) if isinstance(sender, str) else None
    if role is None:
        return Skip(where, f"not a conversation role ({sender!r})")
    text = _with_files(_text(raw), raw)
    if not text.strip():
        return Skip(where, "empty message")
    return ImportedMessage(
        role=role,
        content=text,
        time_ns=iso_to_ns(raw.get("created_at")),
        source_id=text_or_none(raw.get("uuid")),
    )


def _text(raw: Mapping[str, Any]) -> str:
    """The text blocks of ``content`` when there are any, else the flat ``text``.

    Tool use, tool results and thinking blocks are not what the user read
    as the answer, so only ``type: "text"`` blocks count.
    """
    blocks = raw.get("content")
    if isinstance(blocks, list):
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, Mapping)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        if any(t.strip() for t in texts):
            return "\n\n".join(t for t in texts if t.strip())
    text = raw.get("text")
    return text if isinstance(text, str) else ""


def _with_files(text: str, raw: Mapping[str, Any]) -> str:
    """*text* followed by ``[file: name]`` for each attachment and uploaded file."""
    names: list[str] = []
    for key in ("attachments", "files"):
        items = raw.get(key)
        if isinstance(items, list):
            names += [
                text_or_none(as_mapping(item).get("file_name")) or "unnamed" for item in items
            ]
    notes = "\n".join(f"[file: {name}]" for name in dict.fromkeys(names))
    return f"{text}\n{notes}" if text and notes else text or notes
