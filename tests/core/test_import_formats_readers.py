"""Claude, Open WebUI, LM Studio and Jan exports, each read from its real shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.import_formats import read_source
from agenvoy_desktop.core.import_formats.model import epoch_to_ns
from tests.core.import_format_samples import (
    T0_NS,
    T0_S,
    claude_branching,
    claude_conversation,
    jan_message,
    jan_thread,
    lms_conversation,
    lms_current,
    owui_chat,
)

SECOND = 1_000_000_000


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


# -- Claude ----------------------------------------------------------------------------
def test_claude_prefers_content_blocks_and_notes_files(tmp_path: Path) -> None:
    source = read_source(_write(tmp_path / "conversations.json", [claude_conversation()]))
    assert source.app == "claude"
    (conv,) = source.conversations
    assert (conv.title, conv.source_id) == ("Résumé help", "c-1")
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "Please review my CV\n[file: cv.pdf]\n[file: photo.png]"),
        ("assistant", "Looks good."),  # no text blocks: the flat text
    ]
    assert conv.messages[0].time_ns == T0_NS + SECOND
    assert [s.reason for s in conv.skipped] == ["empty message"]


def test_claude_skips_tool_and_thinking_blocks(tmp_path: Path) -> None:
    data = claude_conversation()
    data["chat_messages"][1]["content"] = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Part one."},
        {"type": "tool_use", "name": "web_search", "input": {}},
        {"type": "text", "text": "Part two."},
    ]
    data["chat_messages"].append({"sender": "robot", "text": "?"})
    (conv,) = read_source(_write(tmp_path / "c.json", [data])).conversations
    assert conv.messages[1].content == "Part one.\n\nPart two."
    assert conv.skipped[-1].reason == "not a conversation role ('robot')"


def test_claude_drops_inline_ant_thinking(tmp_path: Path) -> None:
    """2024 exports keep hidden reasoning inline in a text block, between tags."""
    data = claude_conversation()
    data["chat_messages"][1]["content"] = [
        {
            "type": "text",
            "text": " I'll draw it.\n\n<antThinking>A new artifact fits:\nit is reusable."
            "</antThinking>\n\nHere is the chart.",
        }
    ]
    data["chat_messages"][2]["text"] = "<antThinking>only reasoning</antThinking>"
    (conv,) = read_source(_write(tmp_path / "c.json", [data])).conversations
    assert conv.messages[1].content == " I'll draw it.\n\nHere is the chart."
    assert "antThinking" not in "".join(m.content for m in conv.messages)


def test_claude_newer_export_follows_the_newest_branch(tmp_path: Path) -> None:
    source = read_source(_write(tmp_path / "conversations.json", [claude_branching()]))
    (conv,) = source.conversations
    assert [(m.source_id, m.role, m.content) for m in conv.messages] == [
        (
            "q1",
            "user",
            "What does this log say?\n\nERROR disk full\n[file: report.pdf]\n[file: chart.png]",
        ),
        ("a1", "assistant", "The disk is full."),  # no thinking, tool call or result
        ("q2", "user", "Thanks!"),  # a voice note's words
        ("a2", "assistant", "You're welcome."),
    ]
    assert conv.messages[0].time_ns == T0_NS + 30 * SECOND
    assert conv.skipped == []


def test_claude_current_leaf_names_the_branch(tmp_path: Path) -> None:
    data = claude_branching()
    data["current_leaf_message_uuid"] = "a1-old"
    (conv,) = read_source(_write(tmp_path / "c.json", [data])).conversations
    assert [m.content for m in conv.messages] == ["old question", "old answer"]


@pytest.mark.parametrize("broken", ["missing parent", "cycle"])
def test_claude_messages_that_are_no_tree_keep_the_list(tmp_path: Path, broken: str) -> None:
    data = claude_branching()
    messages = data["chat_messages"]
    if broken == "missing parent":
        del messages[3]["parent_message_uuid"]
    else:
        data["chat_messages"] = messages = messages[:2]
        messages[0]["parent_message_uuid"] = "a1-old"
    (conv,) = read_source(_write(tmp_path / "c.json", [data])).conversations
    assert [m.source_id for m in conv.messages] == [m["uuid"] for m in messages]


# -- Open WebUI ------------------------------------------------------------------------
@pytest.mark.parametrize("ms", [False, True])
def test_open_webui_walks_history_to_current_id(tmp_path: Path, ms: bool) -> None:
    source = read_source(_write(tmp_path / "chat-export-1.json", [owui_chat(ms)]))
    assert source.app == "open_webui"
    (conv,) = source.conversations
    assert conv.title == "Greeting"
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "مرحبا, how are you?\n[file: notes.txt]"),
        ("assistant", "Fine, thanks!"),
    ]
    assert [m.time_ns for m in conv.messages] == [T0_NS + SECOND, T0_NS + 3 * SECOND]
    assert conv.messages[1].extra == {"model": "llama3:8b"}


def test_open_webui_multimodal_content_keeps_the_text(tmp_path: Path) -> None:
    chat = owui_chat()
    chat["chat"]["history"]["messages"]["a-new"]["content"] = [
        {"type": "text", "text": "Here it is:"},
        {"type": "image_url", "image_url": {"url": "data:..."}},
    ]
    (conv,) = read_source(_write(tmp_path / "one.json", [chat])).conversations
    assert conv.messages[-1].content == "Here it is:"


def test_open_webui_falls_back_to_the_flat_list(tmp_path: Path) -> None:
    chat = owui_chat()
    chat["chat"]["history"] = {"messages": {}, "currentId": None}
    (conv,) = read_source(_write(tmp_path / "one.json", chat)).conversations
    assert [m.content for m in conv.messages][-1] == "old answer"


def test_open_webui_bare_chat_object_imports_the_same(tmp_path: Path) -> None:
    """One chat saved on its own: the inner ``chat`` object, without the export's wrapper."""
    inner = {"title": "Greeting", **owui_chat()["chat"]}
    source = read_source(_write(tmp_path / "chat.json", inner))
    assert source.app == "open_webui"
    (conv,) = source.conversations
    assert conv.title == "Greeting"
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert [m.time_ns for m in conv.messages] == [T0_NS + SECOND, T0_NS + 3 * SECOND]


# -- LM Studio -------------------------------------------------------------------------
def test_lm_studio_takes_the_selected_version(tmp_path: Path) -> None:
    folder = tmp_path / "conversations"
    _write(folder / "1700000000000.conversation.json", lms_conversation())
    _write(folder / "work" / "2.conversation.json", {"name": "broken", "messages": "x"})
    (folder / "work" / "3.conversation.json").write_text("{not json", encoding="utf-8")
    source = read_source(folder)
    assert source.app == "lm_studio"
    (conv,) = source.conversations
    assert (conv.title, conv.source_id) == ("Rust lifetimes", "1700000000000")
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "Explain 'a\n[file: main.rs]"),
        ("assistant", "A lifetime names a scope."),
    ]
    assert all(m.time_ns == T0_NS for m in conv.messages)  # the chat's createdAt
    reasons = [s.reason for s in source.skipped]
    assert reasons[0] == "no messages to import; 1 skipped"
    assert reasons[1].startswith("invalid JSON at line 1")


def test_lm_studio_out_of_range_selection_takes_the_last(tmp_path: Path) -> None:
    data = lms_conversation()
    data["messages"][1]["currentlySelected"] = 9
    (conv,) = read_source(_write(tmp_path / "x.conversation.json", data)).conversations
    assert conv.messages[1].content == "v2"


def test_lm_studio_older_plain_messages(tmp_path: Path) -> None:
    data = {
        "name": "old",
        "createdAt": T0_S * 1000,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    }
    source = read_source(_write(tmp_path / "old.conversation.json", data))
    assert source.app == "lm_studio"
    assert [m.content for m in source.conversations[0].messages] == ["hi", "yo"]


def test_lm_studio_current_shape_keeps_the_system_prompt_and_the_answer(tmp_path: Path) -> None:
    source = read_source(_write(tmp_path / "1700000000000.conversation.json", lms_current()))
    (conv,) = source.conversations
    assert [(m.role, m.content) for m in conv.messages] == [
        ("system", "Answer briefly."),  # the per-chat setting, not the older field
        ("user", "Is it lunch time?"),  # what was typed, not the preprocessed copy
        ("assistant", "Yes, it is noon."),  # no reasoning, tool call or tool result
    ]
    assert conv.messages[2].extra == {"model": "qwen3-8b"}
    assert all(m.time_ns == T0_NS for m in conv.messages)
    assert conv.skipped == []


@pytest.mark.parametrize(
    ("fields", "older", "expected"),
    [
        ([], "older prompt", "older prompt"),
        ([{"key": "llm.prediction.systemPrompt", "value": "  "}], "older prompt", "older prompt"),
        ([], "", None),
    ],
)
def test_lm_studio_system_prompt_falls_back_to_the_older_field(
    tmp_path: Path, fields: list[Any], older: str, expected: str | None
) -> None:
    data = lms_current()
    data["perChatPredictionConfig"]["fields"] = fields
    data["systemPrompt"] = older
    (conv,) = read_source(_write(tmp_path / "x.conversation.json", data)).conversations
    system = [m.content for m in conv.messages if m.role == "system"]
    assert system == ([expected] if expected else [])


def test_lm_studio_system_prompt_alone_is_no_conversation(tmp_path: Path) -> None:
    data = lms_current()
    data["messages"] = [{"versions": [], "currentlySelected": 0}]
    source = read_source(_write(tmp_path / "x.conversation.json", data))
    assert source.conversations == []
    assert source.skipped[0].reason == "no messages to import; 1 skipped"


# -- Jan -------------------------------------------------------------------------------
def _jan_folder(root: Path, lines: list[str]) -> Path:
    thread = root / "threads" / "jan_1700000000"
    _write(thread / "thread.json", jan_thread())
    (thread / "messages.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_jan_reads_threads_folder(tmp_path: Path) -> None:
    lines = [
        json.dumps(jan_message("2", "assistant", "Because of gravity 🍎", (T0_S + 2) * 1000)),
        json.dumps(jan_message("1", "user", "Why do apples fall?", (T0_S + 1) * 1000)),
        json.dumps(jan_message("3", "assistant", "", T0_S + 3)),
        json.dumps(jan_message("4", "assistant", "partial", T0_S + 4, status="error")),
        '{"id": "5", "role": "us',
    ]
    source = read_source(_jan_folder(tmp_path / "jan", lines))
    assert source.app == "jan"
    (conv,) = source.conversations
    assert (conv.title, conv.source_id) == ("Physics joke", "jan_1700000000")
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "Why do apples fall?"),
        ("assistant", "Because of gravity 🍎"),
    ]
    assert [s.reason for s in conv.skipped] == [
        "empty message",
        "a reply that failed in Jan",
        "invalid JSON (a line cut short?)",
    ]
    assert conv.skipped[-1].where.endswith("messages.jsonl:5")


def test_jan_single_messages_file_finds_its_title(tmp_path: Path) -> None:
    root = _jan_folder(tmp_path, [json.dumps(jan_message("1", "user", "hello", T0_S))])
    source = read_source(root / "threads" / "jan_1700000000" / "messages.jsonl")
    assert source.app == "jan"
    assert source.conversations[0].title == "Physics joke"


# -- times -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (T0_S, T0_NS),
        (T0_S + 0.5, T0_NS + SECOND // 2),
        (T0_S * 1000, T0_NS),
        (T0_S * 1_000_000, T0_NS),
        (T0_NS, T0_NS),
        (-5, None),
        (float("nan"), None),
        (True, None),
        ("1700000000", None),
        (10**30, None),
    ],
)
def test_epoch_units_are_told_by_magnitude(value: Any, expected: int | None) -> None:
    assert epoch_to_ns(value) == expected
