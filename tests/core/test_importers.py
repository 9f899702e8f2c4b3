"""Reading foreign messages: JSON Lines, history arrays, validation messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenvoy_desktop.core.importers import ImportFormatError, read_import_file
from agenvoy_desktop.core.messages import Message, content_text
from agenvoy_desktop.core.timeutil import format_iso, parse_iso
from tests.conftest import T0


def _write(tmp_path: Path, text: str | bytes, name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path


def test_jsonl_with_ids_times_and_blank_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '{"role": "user", "content": "hi", "time": "2024-03-01T02:00:00Z", "id": "m1"}\n'
        "\n"
        '{"role": "assistant", "content": "hello", "id": 7}\n'
        '{"role": "user", "content": "later", "time": "2024-03-01T03:00:00+01:00"}\n',
    )
    messages = read_import_file(path, T0)
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert [m.ref for m in messages] == ["m1", "7", None]
    first = parse_iso("2024-03-01T02:00:00Z")
    assert [m.time_ns for m in messages] == [first, first, first]
    assert len({m.id for m in messages}) == 3
    assert "m1" not in {m.id for m in messages}


def test_missing_times_use_fallback(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"role": "user", "content": "a"}\n{"role": "user", "content": "b"}')
    assert [m.time_ns for m in read_import_file(path, T0)] == [T0, T0]


def test_tool_traffic_and_content_parts(tmp_path: Path) -> None:
    rows = [
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c", "name": "ls"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    path = _write(tmp_path, "\n".join(json.dumps(r) for r in rows))
    call, tool, user = read_import_file(path, T0)
    assert call.content == ""
    assert call.is_tool_traffic
    assert {k: v for k, v in tool.extra.items() if k != "import_key"} == {
        "tool_call_id": "c",
        "name": "ls",
    }
    assert tool.is_tool_traffic
    assert user.content == "a\nb"
    assert not user.is_tool_traffic
    assert content_text(None) == ""
    assert content_text(3) == "3"


def test_history_array_with_bom(tmp_path: Path) -> None:
    data = [{"role": "user", "content": "當前時間: 2024-03-01 10:00:00\nhi"}]
    path = _write(tmp_path, b"\xef\xbb\xbf" + json.dumps(data).encode(), "history.json")
    [message] = read_import_file(path, T0)
    assert message.content == "hi"


BAD_INPUTS: list[tuple[str, str | bytes, str]] = [
    (
        "invalid json line",
        '{"role": "user", "content": "ok"}\n{"role": \n',
        r"in\.jsonl:2: invalid JSON",
    ),
    ("not an object", '"user says hi"\n', r":1: expected a JSON object"),
    ("bad role", '{"role": "robot", "content": "x"}\n', r":1: 'role' must be one of"),
    ("missing role", '{"content": "x"}\n', r":1: 'role'"),
    ("missing content", '{"role": "user"}\n', r":1: missing 'content'"),
    ("bad time", '{"role": "user", "content": "x", "time": "yesterday"}\n', r":1: not an ISO"),
    ("empty file", "\n\n", "no messages"),
    ("binary", bytes(range(256)), "binary data"),
    ("latin-1", "café".encode("latin-1"), "not UTF-8"),
    ("broken array", '[{"role": "user", "content": "x"},', r"invalid JSON at line 1"),
    ("array of junk", "[1, 2]", r"message 1: expected a JSON object"),
    ("object not array", '{"role": "user", "content": "x"} trailing', r":1: invalid JSON"),
    ("time not text", '{"role": "user", "content": "x", "time": 1700000000}\n', r":1: 'time' must"),
    ("id a boolean", '{"role": "user", "content": "x", "id": true}\n', r":1: 'id' must be"),
    ("content parts", '{"role": "user", "content": [{"text": 1}]}\n', r":1: 'content' must"),
    ("null, no tool call", '{"role": "assistant", "content": null}\n', r"got null"),
    ("nan in an array", '[{"role": "user", "content": "x", "p": NaN}]', r"in\.jsonl: NaN is not"),
    ("deep nesting", '{"role": "user", "content": "x", "d": ' + "[" * 100_000 + "\n", "deeply"),
]


@pytest.mark.parametrize(("name", "data", "error"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_names_the_problem(
    tmp_path: Path, name: str, data: str | bytes, error: str
) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ImportFormatError, match=error):
        read_import_file(path, T0)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="no such file"):
        read_import_file(tmp_path / "absent.jsonl", T0)
    with pytest.raises(ImportFormatError, match="folder"):
        read_import_file(tmp_path, T0)


def test_message_json_round_trip() -> None:
    message = Message("id1", "tool", "out", T0 + 5, ref="r", extra={"tool_call_id": "c"})
    data = message.to_json()
    assert data == {
        "id": "id1",
        "role": "tool",
        "content": "out",
        "time": format_iso(T0 + 5),
        "ref": "r",
        "tool_call_id": "c",
    }
    assert Message.from_json(data) == message
    assert message.extra_json() == '{"tool_call_id": "c"}'
    assert Message("x", "user", "", T0).extra_json() is None


def test_jsonl_lines_end_at_newline_only(tmp_path: Path) -> None:
    """U+2028/U+2029/U+0085 are legal raw inside JSON strings; CRLF files work too."""
    rows = [
        '{"role": "user", "content": "a\u2028b\u2029c\x85d"}',
        '{"role": "user", "content": "f"}',
    ]
    path = _write(tmp_path, "\r\n".join(rows) + "\r\n")
    first, second = read_import_file(path, T0)
    assert first.content == "a\u2028b\u2029c\x85d"
    assert second.content == "f"
