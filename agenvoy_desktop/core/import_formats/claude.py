"""Claude's data export: ``conversations.json`` in the zip from Settings → Privacy → Export.

The format (Anthropic's claude.ai data export, conversations.json): a JSON
list of conversations ``{uuid, name, summary, created_at, updated_at,
account: {uuid}, chat_messages}``; each message is ``{uuid, sender: "human" |
"assistant", text, content: [...], created_at, updated_at (ISO 8601 with
microseconds), attachments: [{file_name, file_type, file_size,
extracted_content}], files: [{file_name, file_uuid, file_kind, ...}]}``.

``content`` holds typed blocks, each with ``start_timestamp`` and
``stop_timestamp``: ``text`` (with ``citations``), ``thinking`` (the model's
reasoning, with ``summaries``), ``tool_use`` (``name``, ``input``),
``tool_result`` (``content`` blocks, ``is_error``), ``voice_note``
(``title``, ``text``), and ``token_budget`` or ``flag`` markers.  Only text
and voice notes are what the user read.  ``text`` is the older flat form of
the same words, empty on newer exports, so it serves only when no block has
words.  A long paste becomes an attachment with an empty ``file_name`` and
the pasted words in ``extracted_content``; those words are the message.

Newer exports give each message ``parent_message_uuid`` (the first one's
parent is the all-zero uuid): editing a question or retrying an answer adds a
sibling, and ``chat_messages`` then holds the abandoned branches too.  The
export names no current branch (the web app's ``current_leaf_message_uuid``
is honoured when a file has it), so the branch imported is the one ending in
the newest message, walked up through the parents.  Without parents (older
exports) the list is the conversation as shown.

Where this format is described (public, checked against these): the JSON
schema Polylogue derived from 11K+ exported messages
(github.com/Sinity/polylogue, polylogue/schemas/providers/claude-ai.schema.json);
the Zod schemas of Claude Chat Viewer (github.com/osteele/claude-chat-viewer,
src/schemas/chat.ts and docs/schemas.md), which add ``voice_note`` blocks,
``files_v2`` and the optional ``parent_message_uuid``; and importers that
walk the parent links of bulk exports for the active branch.
"""

from __future__ import annotations

import re
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
_WORD_BLOCKS = frozenset({"text", "voice_note"})
"""Block types whose ``text`` the user read; thinking, tools and markers are not."""
_FILE_LISTS = ("attachments", "files", "files_v2")
"""Where a message lists what was uploaded with it (``files_v2`` repeats ``files``)."""
_ANT_THINKING = re.compile(r"<antThinking>.*?</antThinking>\s*", re.DOTALL)
"""Exports from 2024 keep the model's hidden reasoning inline in the text, in these tags."""


def looks_like(data: object) -> bool:
    """Whether parsed JSON is Claude's: conversations with ``chat_messages``."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and isinstance(first.get("chat_messages"), list)


def read(data: object, where: str) -> tuple[list[ImportedConversation], list[Skip]]:
    """Every conversation of a parsed conversations.json (a list, or one conversation)."""
    return collect(data, where, _conversation)


def _conversation(item: Mapping[str, Any], where: str) -> ImportedConversation:
    raws = item.get("chat_messages")
    if isinstance(raws, list):
        raws = _branch(raws, item.get("current_leaf_message_uuid"))
    messages, skipped = read_messages(raws, where, _message, "no 'chat_messages' list")
    return conversation(
        APP,
        source_id=text_or_none(item.get("uuid")),
        title=text_or_none(item.get("name")),
        messages=messages,
        skipped=skipped,
        created_ns=iso_to_ns(item.get("created_at")),
    )


def _branch(raws: list[Any], leaf: object) -> list[Any]:
    """The messages on the branch the user last saw, oldest first.

    Only when every message names its parent is the list a tree; otherwise
    (older exports, hand-made files) it is already the conversation.  The
    branch ends at *leaf* when that names a message, else at the newest
    message nothing answers (latest ``created_at``, then latest in the list).
    A cycle or a parent outside the list ends the walk instead of looping.
    """
    by_id = _by_id(raws)
    if by_id is None:
        return raws
    if not isinstance(leaf, str) or leaf not in by_id:
        parents = {as_mapping(raw)["parent_message_uuid"] for raw in raws}
        leaves = [(i, u) for i, u in enumerate(by_id) if u not in parents]
        if not leaves:  # every message answers another: a cycle, not a conversation
            return raws
        leaf = max(leaves, key=lambda pair: (_time(by_id[pair[1]]), pair[0]))[1]
    path: list[Any] = []
    node: object = leaf
    while isinstance(node, str) and node in by_id and len(path) < len(by_id):
        path.append(by_id[node])
        node = by_id[node]["parent_message_uuid"]
    path.reverse()
    return path


def _by_id(raws: list[Any]) -> dict[str, Mapping[str, Any]] | None:
    """The messages by uuid, in list order, or None when they do not form a tree."""
    by_id: dict[str, Mapping[str, Any]] = {}
    for raw in raws:
        entry = as_mapping(raw)
        uuid, parent = entry.get("uuid"), entry.get("parent_message_uuid")
        if not (isinstance(uuid, str) and isinstance(parent, str)) or uuid in by_id:
            return None
        by_id[uuid] = entry
    return by_id or None


def _time(raw: Mapping[str, Any]) -> int:
    return iso_to_ns(raw.get("created_at")) or 0


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
    """The words of ``content``'s text and voice-note blocks, else the flat ``text``.

    Tool use, tool results and thinking blocks are not what the user read
    as the answer, so they never count; nor does reasoning that older
    exports keep inline between ``<antThinking>`` tags.
    """
    blocks = raw.get("content")
    if isinstance(blocks, list):
        texts = [
            _ANT_THINKING.sub("", block["text"])
            for block in blocks
            if isinstance(block, Mapping)
            and block.get("type") in _WORD_BLOCKS
            and isinstance(block.get("text"), str)
        ]
        if any(t.strip() for t in texts):
            return "\n\n".join(t for t in texts if t.strip())
    text = raw.get("text")
    return _ANT_THINKING.sub("", text) if isinstance(text, str) else ""


def _with_files(text: str, raw: Mapping[str, Any]) -> str:
    """*text*, then any pasted words, then ``[file: name]`` for each uploaded file.

    An attachment without a name but with ``extracted_content`` is a long
    paste: its words are part of the message.  Named attachments and files
    are only noted, since their text is a document, not something said.
    """
    pastes: list[str] = []
    names: list[str] = []
    for key in _FILE_LISTS:
        items = raw.get(key)
        for item in items if isinstance(items, list) else []:
            entry = as_mapping(item)
            name = text_or_none(entry.get("file_name"))
            pasted = entry.get("extracted_content")
            if name is None and isinstance(pasted, str) and pasted.strip():
                pastes.append(pasted)
            else:
                names.append(name or "unnamed")
    body = "\n\n".join(part for part in [text, *pastes] if part.strip())
    notes = "\n".join(f"[file: {name}]" for name in dict.fromkeys(names))
    return f"{body}\n{notes}" if body and notes else body or notes
