"""LM Studio's saved chats: one ``<id>.conversation.json`` per chat.

The format (LM Studio's conversations folder, ``~/.lmstudio/conversations``,
possibly in sub-folders the user made; the file name is the chat's creation
time in ms): ``{name, pinned, createdAt (Unix ms), tokenCount, systemPrompt,
perChatPredictionConfig: {fields: [{key, value}]}, lastUsedModel:
{identifier, ...}, messages: [{versions: [...], currentlySelected}], ...}``.
Each message keeps every version the user generated or edited, and
``currentlySelected`` is the index of the one shown.

A question is ``{type: "singleStep", role: "user", content: [parts]}`` (a
``preprocessed`` copy with retrieved context added may sit beside it; the
words the user typed are ``content``).  An answer is ``{type: "multiStep",
role: "assistant", senderInfo: {senderName: model}, steps: [...]}`` whose
steps are ``contentBlock`` (``content`` parts, ``genInfo``; a ``style`` of
``{type: "thinking"}`` marks the model's reasoning, and ``roleOverride:
"tool"`` a tool's result) or bookkeeping such as ``debugInfoBlock``.  Parts
are ``{type: "text", text}``, ``{type: "file", name, identifier, sizeBytes,
fileType}``, ``{type: "toolCallRequest", toolCallRequest}`` and ``{type:
"toolCallResult", content}``.  Older files kept plain ``{role, content}``
messages; both are read.  Messages carry no times of their own, so they take
the chat's.

The chat's system prompt is ``perChatPredictionConfig``'s
``llm.prediction.systemPrompt`` field, or the older top-level
``systemPrompt``.  It is imported as a ``system`` message ahead of the
conversation, the way the other readers keep a system message.

Where this format is described (public, checked against these): the message
part types of LM Studio's SDK (github.com/lmstudio-ai/lmstudio-js,
packages/lms-shared-types/src/ChatHistoryData.ts); LM Studio Conversation
Converter (github.com/YorkieDev/lm-studio-conversation-converter, script.js),
which reads versions, steps, the system prompt and ``lastUsedModel``; and
tools that write and read the files, which add thinking-styled steps and
tool-call steps with ``roleOverride`` (the file layout itself is LM Studio's
own and undocumented).
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
_SYSTEM_PROMPT_KEY = "llm.prediction.systemPrompt"


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
    prompt = _system_prompt(item)
    if messages and prompt is not None:
        messages.insert(
            0, ImportedMessage(role="system", content=prompt, time_ns=None, source_id=None)
        )
    return conversation(
        APP,
        source_id=None,
        title=text_or_none(item.get("name")),
        messages=messages,
        skipped=skipped,
        created_ns=epoch_to_ns(item.get("createdAt")),
    )


def _system_prompt(item: Mapping[str, Any]) -> str | None:
    """The chat's own system prompt (the per-chat setting first), or None when blank."""
    fields = as_mapping(item.get("perChatPredictionConfig")).get("fields")
    for field in fields if isinstance(fields, list) else []:
        entry = as_mapping(field)
        if entry.get("key") == _SYSTEM_PROMPT_KEY and text_or_none(entry.get("value")):
            return str(entry["value"])
    prompt = item.get("systemPrompt")
    return prompt if isinstance(prompt, str) and prompt.strip() else None


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
    model = text_or_none(as_mapping(version.get("senderInfo")).get("senderName"))
    return ImportedMessage(
        role=role,
        content=text,
        time_ns=None,
        source_id=None,
        extra={"model": model} if model and role == "assistant" else {},
    )


def _text(version: Mapping[str, Any]) -> str:
    """A version's words: its content parts, or the shown content steps of an answer."""
    steps = version.get("steps")
    if isinstance(steps, list):
        blocks = [_parts(as_mapping(step).get("content")) for step in steps if _shown(step)]
        return "\n\n".join(b for b in blocks if b.strip())
    return _parts(version.get("content"))


def _shown(step: object) -> bool:
    """Whether a step is part of the answer the user read.

    Reasoning (a thinking-styled block), a tool's result and bookkeeping
    steps are not, just as the other readers leave out hidden reasoning
    and tool traffic.
    """
    entry = as_mapping(step)
    return (
        entry.get("type") == "contentBlock"
        and as_mapping(entry.get("style")).get("type") != "thinking"
        and entry.get("roleOverride") != "tool"
    )


def _parts(content: object) -> str:
    """Text parts as they are; files as ``[file: name]``; tool calls left out."""
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
            name = text_or_none(entry.get("name")) or text_or_none(entry.get("identifier"))
            out.append(f"[file: {name or 'unnamed'}]")
    return "\n".join(p for p in out if p)
