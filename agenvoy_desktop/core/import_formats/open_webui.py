"""Open WebUI's chat export (Settings → Chats → Export, or one chat's Download → JSON).

The format (open-webui's chat model, exported as JSON): a list of
``{id, title, chat, created_at, updated_at, ...}`` where ``chat`` holds
``history: {messages: {id: {id, parentId, childrenIds, role, content,
timestamp, model, files}}, currentId}`` and a flat ``messages`` list.  The
history is a tree (regenerations and edits are siblings) and ``currentId``
is the message the user last looked at, so its branch is what we import; the
flat list is the fallback for exports without a history.  Timestamps are
Unix seconds, in milliseconds on some versions.  A chat saved on its own is
the bare ``chat`` object (``{id, title, models, history, messages, ...}``),
as other tools that read Open WebUI's database write it; it imports the same.
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
    epoch_to_ns,
    iso_to_ns,
    known_role,
    read_messages,
    text_or_none,
)

APP = "open_webui"


def looks_like(data: object) -> bool:
    """Whether parsed JSON is Open WebUI's: chats with a ``chat`` object of messages, or
    one such ``chat`` object alone (its message tree, ``history.messages``, tells it)."""
    first = data[0] if isinstance(data, list) and data else data
    if not isinstance(first, Mapping):
        return False
    chat = first.get("chat")
    if isinstance(chat, Mapping):
        return "history" in chat or "messages" in chat
    return _is_tree(first.get("history"))


def _is_tree(history: object) -> bool:
    """An Open WebUI message tree: messages by id, each knowing its parent."""
    if not isinstance(history, Mapping):
        return False
    nodes = history.get("messages")
    if not isinstance(nodes, Mapping) or not nodes:
        return False
    node = next(iter(nodes.values()))
    return isinstance(node, Mapping) and "parentId" in node


def read(data: object, where: str) -> tuple[list[ImportedConversation], list[Skip]]:
    """Every chat of a parsed export (a list, or one chat)."""
    return collect(data, where, _conversation)


def _conversation(item: Mapping[str, Any], where: str) -> ImportedConversation:
    chat = as_mapping(item.get("chat")) if "chat" in item else item  # a bare chat object
    raws = _branch(as_mapping(chat.get("history")))
    if not raws:
        flat = chat.get("messages")
        raws = list(flat) if isinstance(flat, list) else []
    messages, skipped = read_messages(
        raws, where, _message, "no messages in 'chat.history' or 'chat.messages'"
    )
    created = epoch_to_ns(item.get("created_at")) or iso_to_ns(chat.get("timestamp"))
    return conversation(
        APP,
        source_id=text_or_none(item.get("id")) or text_or_none(chat.get("id")),
        title=text_or_none(item.get("title")) or text_or_none(chat.get("title")),
        messages=messages,
        skipped=skipped,
        created_ns=created,
    )


def _branch(history: Mapping[str, Any]) -> list[object]:
    """The messages from the root to ``currentId``, oldest first (empty if unusable)."""
    nodes = as_mapping(history.get("messages"))
    current = history.get("currentId")
    path: list[object] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in nodes and current not in seen:
        seen.add(current)
        node = nodes[current]
        path.append(node)
        current = as_mapping(node).get("parentId")
    path.reverse()
    return path


def _message(raw: object, where: str) -> ImportedMessage | Skip:
    if not isinstance(raw, Mapping):
        return Skip(where, "not a message object")
    role = known_role(raw.get("role"))
    if role is None or role == "tool":
        return Skip(where, f"not a conversation role ({raw.get('role')!r})")
    text = _with_files(_text(raw.get("content")), raw.get("files"))
    if not text.strip():
        return Skip(where, "empty message")
    model = text_or_none(raw.get("model"))
    return ImportedMessage(
        role=role,
        content=text,
        time_ns=epoch_to_ns(raw.get("timestamp")),
        source_id=text_or_none(raw.get("id")),
        extra={"model": model} if model and role == "assistant" else {},
    )


def _text(content: object) -> str:
    """The message text: a string, or the text parts of a multimodal list."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [as_mapping(p) for p in content]
    texts = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
    return "\n".join(t for t in texts if t)


def _with_files(text: str, files: object) -> str:
    """*text* followed by ``[file: name]`` (or ``[image]``) for each attached file."""
    if not isinstance(files, list):
        return text
    notes: list[str] = []
    for item in files:
        entry = as_mapping(item)
        name = text_or_none(entry.get("name")) or text_or_none(
            as_mapping(entry.get("file")).get("filename")
        )
        notes.append(
            f"[file: {name}]" if name else "[image]" if entry.get("type") == "image" else "[file]"
        )
    joined = "\n".join(notes)
    return f"{text}\n{joined}" if text and joined else text or joined
