"""Hand-written exports in each app's real shape, for the import-format tests.

Each builder returns parsed JSON (lists and dicts) shaped like the app's
export, small enough to read at a glance; the tests write them to files,
folders or zips as the app would.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

T0_S = 1_700_000_000
"""2023-11-14T22:13:20Z in Unix seconds, the time every sample starts at."""
T0_NS = T0_S * 1_000_000_000


# -- ChatGPT ---------------------------------------------------------------------------
def gpt_node(
    node_id: str,
    parent: str | None,
    children: list[str],
    role: str | None,
    parts: list[Any] | None = None,
    *,
    time: float | None = None,
    content: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    recipient: str = "all",
) -> dict[str, Any]:
    """One ``mapping`` node; ``role=None`` makes the message-less root."""
    message: dict[str, Any] | None = None
    if role is not None:
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": time,
            "update_time": None,
            "content": content or {"content_type": "text", "parts": parts or []},
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": metadata or {},
            "recipient": recipient,
        }
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def gpt_branching() -> dict[str, Any]:
    """A question answered twice (regenerated); the user kept the second answer.

    Also holds the hidden system node every export starts with, a null
    ``create_time`` and an image part.
    """
    nodes = [
        gpt_node("root", None, ["sys"], None),
        gpt_node(
            "sys",
            "root",
            ["u1"],
            "system",
            [""],
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        gpt_node("u1", "sys", ["a1", "a2"], "user", ["¿Qué es 東京? 🗼"], time=T0_S + 1.5),
        gpt_node("a1", "u1", [], "assistant", ["first answer (discarded)"], time=T0_S + 2),
        gpt_node(
            "a2",
            "u1",
            ["u2"],
            "assistant",
            ["東京 is Tokyo."],
            time=T0_S + 3,
            metadata={"model_slug": "gpt-4o"},
        ),
        gpt_node(
            "u2",
            "a2",
            ["a3"],
            "user",
            content={
                "content_type": "multimodal_text",
                "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                    "what is in this picture? שלום",
                ],
            },
            time=None,
        ),
        gpt_node("a3", "u2", [], "assistant", ["A tower."], time=T0_S + 5),
    ]
    return {
        "title": "Tokyo 🗼",
        "create_time": T0_S,
        "update_time": T0_S + 5,
        "mapping": {n["id"]: n for n in nodes},
        "current_node": "a3",
        "conversation_id": "conv-1",
        "id": "conv-1",
    }


# -- Claude ----------------------------------------------------------------------------
def claude_conversation() -> dict[str, Any]:
    """Two turns: content blocks, the flat ``text`` fallback, an attachment and a file."""
    return {
        "uuid": "c-1",
        "name": "Résumé help",
        "created_at": "2023-11-14T22:13:20.000000Z",
        "updated_at": "2023-11-14T22:20:00.000000Z",
        "account": {"uuid": "acct"},
        "chat_messages": [
            {
                "uuid": "m-1",
                "text": "Please review my CV",
                "content": [{"type": "text", "text": "Please review my CV"}],
                "sender": "human",
                "created_at": "2023-11-14T22:13:21.000000Z",
                "updated_at": "2023-11-14T22:13:21.000000Z",
                "attachments": [
                    {
                        "file_name": "cv.pdf",
                        "file_size": 1234,
                        "file_type": "pdf",
                        "extracted_content": "Jane Doe…",
                    }
                ],
                "files": [{"file_name": "photo.png"}],
            },
            {
                "uuid": "m-2",
                "text": "Looks good.",
                "content": [],
                "sender": "assistant",
                "created_at": "2023-11-14T22:13:30.000000Z",
                "updated_at": "2023-11-14T22:13:30.000000Z",
                "attachments": [],
                "files": [],
            },
            {
                "uuid": "m-3",
                "text": "",
                "content": [{"type": "text", "text": ""}],
                "sender": "human",
                "created_at": "2023-11-14T22:14:00.000000Z",
                "attachments": [],
                "files": [],
            },
        ],
    }


CLAUDE_ROOT = "00000000-0000-4000-8000-000000000000"
"""The parent newer Claude exports give a conversation's first message."""


def claude_block(kind: str, **fields: Any) -> dict[str, Any]:
    """One ``content`` block as newer exports write it (timestamps and flags on each)."""
    return {
        "start_timestamp": "2023-11-14T22:13:21.100000Z",
        "stop_timestamp": "2023-11-14T22:13:21.900000Z",
        "flags": None,
        "type": kind,
        **fields,
    }


def claude_message(
    uuid: str, parent: str, sender: str, second: int, content: list[dict[str, Any]], **more: Any
) -> dict[str, Any]:
    """A newer-export message *second* s after T0: empty flat ``text``, words in blocks."""
    at = datetime.fromtimestamp(T0_S + second, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "uuid": uuid,
        "text": "",
        "content": content,
        "sender": sender,
        "created_at": at,
        "updated_at": at,
        "attachments": [],
        "files": [],
        "parent_message_uuid": parent,
        **more,
    }


def claude_branching() -> dict[str, Any]:
    """A newer export's conversation: an edited question leaves an abandoned branch.

    The first question was edited (``q1-old`` → ``q1``) after its answer, so
    ``chat_messages`` holds both; nothing names the current branch, and the
    newest leaf (``a2``) ends it.  The kept question carries a long paste (an
    attachment without a name) and an image listed in both ``files`` and
    ``files_v2``; the answers hold thinking, a tool call and its result.
    """
    image = {"file_kind": "image", "file_uuid": "f-1", "file_name": "chart.png"}
    return {
        "uuid": "c-2",
        "name": "Chart review",
        "summary": "",
        "created_at": "2023-11-14T22:13:20.000000Z",
        "updated_at": "2023-11-14T22:16:00.000000Z",
        "account": {"uuid": "acct"},
        "chat_messages": [
            claude_message(
                "q1-old", CLAUDE_ROOT, "human", 1, [claude_block("text", text="old question")]
            ),
            claude_message(
                "a1-old", "q1-old", "assistant", 2, [claude_block("text", text="old answer")]
            ),
            claude_message(
                "q1",
                CLAUDE_ROOT,
                "human",
                30,
                [claude_block("text", text="What does this log say?", citations=[])],
                attachments=[
                    {
                        "file_name": "",
                        "file_size": 18,
                        "file_type": "txt",
                        "extracted_content": "ERROR disk full",
                    },
                    {
                        "file_name": "report.pdf",
                        "file_size": 9000,
                        "file_type": "pdf",
                        "extracted_content": "a long report",
                    },
                ],
                files=[image],
                files_v2=[image],
            ),
            claude_message(
                "a1",
                "q1",
                "assistant",
                40,
                [
                    claude_block("thinking", thinking="The disk is full.", summaries=[]),
                    claude_block("tool_use", name="web_search", input={"query": "disk"}),
                    claude_block(
                        "tool_result",
                        name="web_search",
                        content=[{"type": "text", "text": "results"}],
                        is_error=False,
                    ),
                    claude_block("text", text="The disk is full.", citations=[]),
                    claude_block("token_budget"),
                ],
            ),
            claude_message(
                "q2", "a1", "human", 90, [claude_block("voice_note", title="Memo", text="Thanks!")]
            ),
            claude_message(
                "a2", "q2", "assistant", 95, [claude_block("text", text="You're welcome.")]
            ),
        ],
    }


# -- Open WebUI ------------------------------------------------------------------------
def owui_chat(ms: bool = False) -> dict[str, Any]:
    """A chat with a regenerated answer; ``currentId`` points at the second one."""
    scale = 1000 if ms else 1
    messages = {
        "q": {
            "id": "q",
            "parentId": None,
            "childrenIds": ["a-old", "a-new"],
            "role": "user",
            "content": "مرحبا, how are you?",
            "timestamp": (T0_S + 1) * scale,
            "files": [{"type": "file", "name": "notes.txt"}],
        },
        "a-old": {
            "id": "a-old",
            "parentId": "q",
            "childrenIds": [],
            "role": "assistant",
            "content": "old answer",
            "timestamp": (T0_S + 2) * scale,
        },
        "a-new": {
            "id": "a-new",
            "parentId": "q",
            "childrenIds": [],
            "role": "assistant",
            "content": "Fine, thanks!",
            "timestamp": (T0_S + 3) * scale,
            "model": "llama3:8b",
        },
    }
    return {
        "id": "owui-1",
        "user_id": "u",
        "title": "Greeting",
        "chat": {
            "id": "",
            "title": "Greeting",
            "models": ["llama3:8b"],
            "messages": [messages["q"], messages["a-old"]],
            "history": {"messages": messages, "currentId": "a-new"},
            "timestamp": T0_S * 1000,
        },
        "created_at": T0_S,
        "updated_at": T0_S + 3,
    }


# -- LM Studio -------------------------------------------------------------------------
def lms_conversation() -> dict[str, Any]:
    """A chat whose answer was regenerated; ``currentlySelected`` picks the first version."""
    return {
        "name": "Rust lifetimes",
        "pinned": False,
        "createdAt": T0_S * 1000,
        "messages": [
            {
                "versions": [
                    {
                        "type": "singleStep",
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Explain 'a"},
                            {
                                "type": "file",
                                "name": "main.rs",
                                "identifier": "1700000000000 - 412.rs",
                                "sizeBytes": 120,
                                "fileType": "text/plain",
                            },
                        ],
                    }
                ],
                "currentlySelected": 0,
            },
            {
                "versions": [
                    {
                        "type": "multiStep",
                        "role": "assistant",
                        "steps": [
                            {
                                "type": "contentBlock",
                                "content": [{"type": "text", "text": "A lifetime names a scope."}],
                            },
                            {"type": "debugInfoBlock", "debugInfo": "ignored"},
                        ],
                    },
                    {
                        "type": "multiStep",
                        "role": "assistant",
                        "steps": [
                            {"type": "contentBlock", "content": [{"type": "text", "text": "v2"}]}
                        ],
                    },
                ],
                "currentlySelected": 0,
            },
            {"versions": [], "currentlySelected": 0},
        ],
    }


def lms_step(text: str, **more: Any) -> dict[str, Any]:
    """One ``contentBlock`` step of an answer, as LM Studio writes it."""
    return {
        "type": "contentBlock",
        "stepIdentifier": f"{T0_S * 1000}-0",
        "content": [{"type": "text", "text": text}],
        "defaultShouldIncludeInContext": True,
        "shouldIncludeInContext": True,
        **more,
    }


def lms_current() -> dict[str, Any]:
    """A chat as current LM Studio saves it: a system prompt, reasoning and a tool call.

    The per-chat system prompt wins over the older top-level ``systemPrompt``;
    the question keeps a ``preprocessed`` copy with retrieved text; the
    answer thinks, calls a tool, gets its result, then answers.
    """
    tool_call = {
        "type": "toolCallRequest",
        "toolCallRequest": {"id": "1", "type": "function", "name": "clock", "arguments": {}},
    }
    tool_result = {"type": "toolCallResult", "content": "12:00", "toolCallId": "1"}
    return {
        "name": "Lunch time",
        "pinned": False,
        "createdAt": T0_S * 1000,
        "preset": "",
        "tokenCount": 120,
        "systemPrompt": "older prompt",
        "messages": [
            {
                "versions": [
                    {
                        "type": "singleStep",
                        "role": "user",
                        "content": [{"type": "text", "text": "Is it lunch time?"}],
                        "preprocessed": {
                            "role": "user",
                            "content": [{"type": "text", "text": "context… Is it lunch time?"}],
                        },
                    }
                ],
                "currentlySelected": 0,
            },
            {
                "versions": [
                    {
                        "type": "multiStep",
                        "role": "assistant",
                        "senderInfo": {"senderName": "qwen3-8b"},
                        "steps": [
                            lms_step(
                                "Check the clock.",
                                style={"type": "thinking", "ended": True, "title": ""},
                                prefix="<think>",
                                suffix="</think>",
                            ),
                            {**lms_step(""), "content": [tool_call]},
                            {**lms_step(""), "content": [tool_result], "roleOverride": "tool"},
                            lms_step("Yes, it is noon.", genInfo={"stats": {}}),
                            {"type": "debugInfoBlock", "debugInfo": "ignored"},
                        ],
                    }
                ],
                "currentlySelected": 0,
            },
        ],
        "usePerChatPredictionConfig": True,
        "perChatPredictionConfig": {
            "fields": [
                {"key": "llm.prediction.temperature", "value": 0.7},
                {"key": "llm.prediction.systemPrompt", "value": "Answer briefly."},
            ]
        },
        "clientInput": "",
        "clientInputFiles": [],
        "userFilesSizeBytes": 0,
        "lastUsedModel": {"identifier": "qwen3-8b", "indexedModelIdentifier": "qwen3-8b"},
        "notes": [],
        "plugins": [],
        "pluginConfigs": {},
        "disabledPluginTools": [],
        "looseFiles": [],
    }


# -- Jan -------------------------------------------------------------------------------
def jan_thread() -> dict[str, Any]:
    return {"id": "jan_1700000000", "object": "thread", "title": "Physics joke", "created": T0_S}


def jan_message(msg_id: str, role: str, text: str, created: int, **more: Any) -> dict[str, Any]:
    return {
        "id": msg_id,
        "object": "thread.message",
        "thread_id": "jan_1700000000",
        "role": role,
        "content": [{"type": "text", "text": {"value": text, "annotations": []}}],
        "created_at": created,
        "status": "ready",
        **more,
    }
