"""Hand-written exports in each app's real shape, for the import-format tests.

Each builder returns parsed JSON (lists and dicts) shaped like the app's
export, small enough to read at a glance; the tests write them to files,
folders or zips as the app would.
"""

from __future__ import annotations

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
                            {"type": "file", "fileIdentifier": "main.rs"},
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
