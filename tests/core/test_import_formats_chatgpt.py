"""ChatGPT's conversations.json: the branch the user saw, hidden nodes skipped with reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.import_formats import ImportedSource, read_source
from agenvoy_desktop.core.import_formats.chatgpt import read
from agenvoy_desktop.core.importers import ImportFormatError
from tests.core.import_format_samples import T0_NS, T0_S, gpt_branching, gpt_node


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _one(data: dict[str, Any]) -> Any:
    conversations, _ = read([data], "conversations.json")
    assert len(conversations) == 1
    return conversations[0]


def test_follows_current_node_through_the_regenerated_branch(tmp_path: Path) -> None:
    source = read_source(_write(tmp_path, [gpt_branching()]))
    assert source.app == "chatgpt"
    (conv,) = source.conversations
    assert (conv.title, conv.source_id) == ("Tokyo 🗼", "conv-1")
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "¿Qué es 東京? 🗼"),
        ("assistant", "東京 is Tokyo."),
        ("user", "[image]\nwhat is in this picture? שלום"),
        ("assistant", "A tower."),
    ]
    assert conv.messages[1].extra == {"model": "gpt-4o"}
    assert conv.messages[1].source_id == "a2"
    assert conv.skipped[0].reason == "hidden in ChatGPT"


def test_null_create_time_takes_the_neighbours_time() -> None:
    conv = _one(gpt_branching())
    times = [m.time_ns for m in conv.messages]
    assert times[0] == T0_NS + 1_500_000_000
    assert times[2] == times[1] == T0_NS + 3_000_000_000  # the image message had null
    assert times == sorted(times)


def test_without_current_node_the_newest_regeneration_wins() -> None:
    data = gpt_branching()
    data["current_node"] = None
    conv = _one(data)
    assert conv.messages[-1].content == "A tower."
    data["mapping"]["u1"]["children"] = ["a2", "a1"]  # a1 now the newest child
    assert _one(data).messages[-1].content == "first answer (discarded)"


def test_hidden_context_tool_traffic_and_empty_messages_are_skipped_with_reasons() -> None:
    nodes = [
        gpt_node("root", None, ["ctx"], None),
        gpt_node(
            "ctx",
            "root",
            ["u"],
            "user",
            content={"content_type": "user_editable_context", "user_profile": "I am..."},
        ),
        gpt_node("u", "ctx", ["call"], "user", ["run it"], time=T0_S),
        gpt_node(
            "call",
            "u",
            ["out"],
            "assistant",
            content={"content_type": "code", "language": "python", "text": "print(1)"},
            recipient="python",
        ),
        gpt_node(
            "out",
            "call",
            ["think"],
            "tool",
            content={"content_type": "execution_output", "text": "1"},
        ),
        gpt_node(
            "think",
            "out",
            ["empty"],
            "assistant",
            content={"content_type": "thoughts", "thoughts": []},
        ),
        gpt_node("empty", "think", ["code"], "assistant", [""]),
        gpt_node(
            "code",
            "empty",
            ["odd"],
            "assistant",
            content={"content_type": "code", "language": "unknown", "text": "x = 1"},
        ),
        gpt_node("odd", "code", [], "assistant", content={"content_type": "mystery"}),
    ]
    conv = _one({"title": "t", "mapping": {n["id"]: n for n in nodes}, "current_node": "odd"})
    assert [m.content for m in conv.messages] == ["run it", "```\nx = 1\n```"]
    assert [s.reason for s in conv.skipped] == [
        "custom instructions (context, not conversation)",
        "a call to the tool 'python'",
        "tool output (code, browsing or image results)",
        "the model's hidden reasoning",
        "empty message",
        "unsupported content type 'mystery'",
    ]
    assert conv.skipped[0].where == "conversations.json: conversation 1: message 1"


def test_attachments_are_noted_by_name() -> None:
    nodes = [
        gpt_node(
            "u",
            None,
            [],
            "user",
            ["see file"],
            metadata={"attachments": [{"id": "f", "name": "report.xlsx"}]},
        )
    ]
    conv = _one({"mapping": {"u": nodes[0]}, "current_node": "u"})
    assert conv.messages[0].content == "see file\n[file: report.xlsx]"


def test_a_cycle_in_the_tree_ends_the_walk() -> None:
    nodes = [gpt_node("a", "b", ["b"], "user", ["one"]), gpt_node("b", "a", ["a"], "user", ["two"])]
    conv = _one({"mapping": {n["id"]: n for n in nodes}, "current_node": "b"})
    assert [m.content for m in conv.messages] == ["one", "two"]


@pytest.mark.parametrize(
    "item",
    [
        {"mapping": {"x": "not a node"}, "current_node": "x"},
        {"mapping": {"x": {"message": [1, 2], "parent": ["list"]}}, "current_node": "x"},
        {"mapping": {"x": {"message": {"author": "me", "content": 5}}}, "current_node": "x"},
        {"mapping": {"x": {"parent": None, "children": [["unhashable"]]}}},
    ],
)
def test_wrong_types_inside_are_skipped_not_tracebacks(item: dict[str, Any]) -> None:
    conversations, skipped = read([item, gpt_branching()], "c.json")
    assert len(conversations) == 1
    assert skipped[0].where == "c.json: conversation 1"


def test_a_file_that_is_not_a_list_of_conversations_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, {"mapping": "nope"})
    with pytest.raises(ImportFormatError, match=r"conversations\.json: neither a ChatGPT"):
        read_source(tmp_path)
    assert path.exists()


def test_a_huge_conversation_parses(tmp_path: Path) -> None:
    """20,000 messages in one linear branch (a long-running chat)."""
    count = 20_000
    mapping: dict[str, Any] = {"n0": gpt_node("n0", None, ["n1"], None)}
    for i in range(1, count + 1):
        role = "user" if i % 2 else "assistant"
        children = [f"n{i + 1}"] if i < count else []
        mapping[f"n{i}"] = gpt_node(
            f"n{i}", f"n{i - 1}", children, role, [f"message {i} 😀"], time=T0_S + i
        )
    data = [{"title": "long", "mapping": mapping, "current_node": f"n{count}"}]
    source: ImportedSource = read_source(_write(tmp_path, data))
    (conv,) = source.conversations
    assert len(conv.messages) == count
    assert conv.messages[-1].content == f"message {count} 😀"
