"""ChatGPT's data export: ``conversations.json`` in the zip from Settings → Data controls.

The format (OpenAI data export, conversations.json): a JSON list of
conversations ``{title, create_time, update_time, mapping, current_node,
conversation_id | id}``.  ``mapping`` is a tree ``{node_id: {id, message,
parent, children}}``: regenerating an answer or editing a question adds a
sibling branch, and ``current_node`` is the last node of the branch the user
last looked at, so that branch is what we import (walked up through
``parent``, then reversed).  A ``message`` has ``author.role``,
``create_time`` (float seconds, sometimes null), ``recipient`` (``"all"`` or a
tool's name), ``metadata`` and ``content`` with a ``content_type``: ``text``
and ``multimodal_text`` carry ``parts`` (strings, or objects for images and
audio); the other types carry tool traffic, quotes or hidden context.
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
    known_role,
    text_or_none,
)

APP = "chatgpt"

_CONTEXT_TYPES = {
    "user_editable_context": "custom instructions (context, not conversation)",
    "model_editable_context": "ChatGPT memory (context, not conversation)",
    "thoughts": "the model's hidden reasoning",
    "reasoning_recap": "the model's reasoning summary",
    "system_error": "an error ChatGPT showed, not a message",
}
"""Content types that are never part of the visible conversation, and why."""

_PART_NOTES = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "real_time_user_audio_video_asset_pointer": "[audio]",
    "video_container_asset_pointer": "[video]",
}


def looks_like(data: object) -> bool:
    """Whether parsed JSON is ChatGPT's: conversations with a ``mapping`` tree."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and isinstance(first.get("mapping"), Mapping)


def read(data: object, where: str) -> tuple[list[ImportedConversation], list[Skip]]:
    """Every conversation of a parsed conversations.json (a list, or one conversation)."""
    return collect(data, where, _conversation)


def _conversation(item: Mapping[str, Any], where: str) -> ImportedConversation:
    title = text_or_none(item.get("title"))
    source_id = text_or_none(item.get("conversation_id")) or text_or_none(item.get("id"))
    mapping = item.get("mapping")
    messages: list[ImportedMessage] = []
    skipped: list[Skip] = []
    if not isinstance(mapping, Mapping):
        skipped.append(Skip(where, "no 'mapping' object with the messages"))
        mapping = {}
    branch = [(k, n) for k, n in _branch(mapping, item.get("current_node")) if n.get("message")]
    for number, (node_id, node) in enumerate(branch, start=1):
        found = _message(node_id, node, f"{where}: message {number}")
        if isinstance(found, Skip):
            skipped.append(found)
        else:
            messages.append(found)
    return conversation(
        APP,
        source_id=source_id,
        title=title,
        messages=messages,
        skipped=skipped,
        created_ns=epoch_to_ns(item.get("create_time")),
    )


def _branch(mapping: Mapping[str, Any], current: object) -> list[tuple[str, Mapping[str, Any]]]:
    """The nodes from the root to *current*, oldest first.

    Without a usable ``current_node`` (older exports, hand-edited files) the
    branch ends where following each node's last child (its newest
    regeneration) leads.  A cycle or a dangling parent ends the walk instead
    of looping.
    """
    if not isinstance(current, str) or current not in mapping:
        current = _newest_leaf(mapping)
    path: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    node_id: object = current
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = as_mapping(mapping[node_id])
        path.append((node_id, node))
        node_id = node.get("parent")
    path.reverse()
    return path


def _newest_leaf(mapping: Mapping[str, Any]) -> str | None:
    roots = [
        key for key, node in mapping.items() if not _known(as_mapping(node).get("parent"), mapping)
    ]
    node_id = roots[0] if roots else None
    seen: set[str] = set()
    while node_id is not None and node_id not in seen:
        seen.add(node_id)
        children = as_mapping(mapping.get(node_id)).get("children")
        children = [c for c in children if _known(c, mapping)] if isinstance(children, list) else []
        if not children:
            break
        node_id = children[-1]
    return node_id


def _known(node_id: object, mapping: Mapping[str, Any]) -> bool:
    """Whether *node_id* names a node (ids of the wrong type name none)."""
    return isinstance(node_id, str) and node_id in mapping


def _message(node_id: str, node: Mapping[str, Any], where: str) -> ImportedMessage | Skip:
    """One node's message, or the reason it is left out.

    Nodes without a message (the tree's root placeholder) never get here.
    """
    message = node.get("message")
    if not isinstance(message, Mapping):
        return Skip(where, "not a message object")
    author = as_mapping(message.get("author")).get("role")
    content = as_mapping(message.get("content"))
    kind = content.get("content_type")
    hidden = _hidden(message, author, kind)
    if hidden is not None:
        return Skip(where, hidden)
    role = known_role(author)
    if role is None or role == "tool":
        return Skip(where, f"not a conversation role ({author!r})")
    text = _text(content, kind)
    if text is None:
        return Skip(where, f"unsupported content type {kind!r}")
    text = _with_attachments(text, as_mapping(message.get("metadata")))
    if not text.strip():
        return Skip(where, "empty message")
    return ImportedMessage(
        role=role,
        content=text,
        time_ns=epoch_to_ns(message.get("create_time")),
        source_id=text_or_none(message.get("id")) or node_id,
        extra=_extra(as_mapping(message.get("metadata"))),
    )


def _hidden(message: Mapping[str, Any], author: object, kind: object) -> str | None:
    """Why a message is not part of what the user saw, or None when it is."""
    metadata = as_mapping(message.get("metadata"))
    if metadata.get("is_visually_hidden_from_conversation"):
        return "hidden in ChatGPT"
    if isinstance(kind, str) and kind in _CONTEXT_TYPES:
        return _CONTEXT_TYPES[kind]
    if author == "tool":
        return "tool output (code, browsing or image results)"
    recipient = message.get("recipient")
    if author == "assistant" and recipient not in (None, "all"):
        return f"a call to the tool {recipient!r}"
    return None


def _text(content: Mapping[str, Any], kind: object) -> str | None:
    """The text a content block shows, or None for a type we cannot read."""
    if kind in ("text", "multimodal_text") or "parts" in content:
        return _parts(content.get("parts"))
    text = content.get("text")
    if kind == "code" and isinstance(text, str):
        language = content.get("language")
        tag = language if isinstance(language, str) and language != "unknown" else ""
        return f"```{tag}\n{text}\n```"
    if kind == "tether_browsing_display":
        text = content.get("result")
    return text if isinstance(text, str) else None


def _parts(parts: object) -> str:
    """``parts`` joined: strings as they are, images and audio as short notes."""
    if not isinstance(parts, list):
        return ""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, Mapping):
            out.append(_part(part))
    return "\n".join(p for p in out if p)


def _part(part: Mapping[str, Any]) -> str:
    kind = part.get("content_type")
    if isinstance(part.get("text"), str):  # audio_transcription and text-like parts
        return str(part["text"])
    if isinstance(kind, str) and kind in _PART_NOTES:
        return _PART_NOTES[kind]
    return f"[{kind}]" if isinstance(kind, str) else "[attachment]"


def _with_attachments(text: str, metadata: Mapping[str, Any]) -> str:
    """*text* followed by a ``[file: name]`` line for each attached file."""
    attachments = metadata.get("attachments")
    if not isinstance(attachments, list):
        return text
    names = [text_or_none(as_mapping(item).get("name")) or "unnamed" for item in attachments]
    notes = "\n".join(f"[file: {name}]" for name in names)
    return f"{text}\n{notes}" if text and notes else text or notes


def _extra(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What is worth keeping beside the text: the model that answered."""
    model = text_or_none(metadata.get("model_slug"))
    return {"model": model} if model else {}
