"""Telling the app from the structure, in files, folders and zips; our own formats pass through."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from agenvoy_desktop.core.export import SessionExport, to_json
from agenvoy_desktop.core.import_formats import APPS, detect_app, read_source
from agenvoy_desktop.core.importers import ImportFormatError, read_import_file
from tests.conftest import T0, conversation
from tests.core.import_format_samples import (
    claude_conversation,
    gpt_branching,
    jan_message,
    jan_thread,
    lms_conversation,
    owui_chat,
)


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _zip(path: Path, members: dict[str, object]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            archive.writestr(name, text)
    return path


@pytest.mark.parametrize(
    ("data", "app"),
    [
        ([gpt_branching()], "chatgpt"),
        (gpt_branching(), "chatgpt"),
        ([claude_conversation()], "claude"),
        ([owui_chat()], "open_webui"),
        (owui_chat(), "open_webui"),
        (lms_conversation(), "lm_studio"),
    ],
)
def test_the_app_is_told_by_structure_not_name(tmp_path: Path, data: object, app: str) -> None:
    path = _write(tmp_path / "export.json", data)
    assert detect_app(path) == app
    assert app in APPS


def test_claude_zip_with_a_top_folder(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "data-2024.zip",
        {
            "data-2024/users.json": [{"uuid": "u"}],
            "data-2024/projects.json": [],
            "data-2024/conversations.json": [claude_conversation()],
        },
    )
    source = read_source(path)
    assert source.app == "claude"
    assert source.conversations[0].title == "Résumé help"


def test_jan_threads_in_a_zip(tmp_path: Path) -> None:
    messages = "\n".join(
        json.dumps(jan_message(str(i), "user", f"m{i}", 1_700_000_000 + i)) for i in range(3)
    )
    path = _zip(
        tmp_path / "jan.zip",
        {
            "jan/threads/t1/thread.json": jan_thread(),
            "jan/threads/t1/messages.jsonl": messages,
            "jan/threads/t2/messages.jsonl": "",
            "jan/models/x/model.json": {},
        },
    )
    source = read_source(path)
    assert source.app == "jan"
    assert [c.title for c in source.conversations] == ["Physics joke"]
    assert [(s.where, s.reason) for s in source.skipped] == [
        (f"{path} (jan/threads/t2/messages.jsonl)", "no messages to import")
    ]


def test_a_folder_of_open_webui_exports_notes_other_apps(tmp_path: Path) -> None:
    _write(tmp_path / "chat-export-1.json", [owui_chat()])
    _write(tmp_path / "chat-export-2.json", owui_chat())
    _write(tmp_path / "other.json", [claude_conversation()])
    _write(tmp_path / "settings.json", {"theme": "dark"})
    source = read_source(tmp_path)
    assert source.app == "open_webui"
    assert len(source.conversations) == 2
    assert [s.reason for s in source.skipped] == ["a claude export; import it on its own"]


# -- our own formats -------------------------------------------------------------------
def test_our_json_export_round_trips_as_agenvoy(tmp_path: Path) -> None:
    messages = conversation(["hello 世界", "hi 👋"], start=T0)
    export = SessionExport("s1", "Title", T0, messages, None)
    path = _write(tmp_path / "session.json", to_json(export, T0))
    source = read_source(path)
    assert (source.app, source.conversations) == ("agenvoy", [])
    back = read_import_file(path, T0)
    assert [(m.role, m.content) for m in back] == [(m.role, m.content) for m in messages]


def test_our_history_array_and_json_lines_are_agenvoy(tmp_path: Path) -> None:
    lines = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    history = _write(tmp_path / "history.json", lines)
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text("\n".join(json.dumps(m) for m in lines), encoding="utf-8")
    one_line = tmp_path / "one.jsonl"
    one_line.write_text(json.dumps(lines[0]), encoding="utf-8")
    assert [detect_app(p) for p in (history, jsonl, one_line)] == ["agenvoy"] * 3


# -- malformed -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", "empty file"),
        ("[]", "no conversations in file (an empty list)"),
        ('{"a": 1}', "not a chat export from ChatGPT, Claude"),
        ("[1, 2]", "not a chat export from ChatGPT, Claude"),
        ('"text"', "not a chat export from ChatGPT, Claude"),
        ("[NaN]", "NaN is not a JSON number"),
        ("[" * 100_000, "nested too deeply"),
        ("{broken", ":1: invalid JSON"),
    ],
)
def test_malformed_files_are_one_line(tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError) as caught:
        read_source(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert line in message
    assert "\n" not in message


def test_a_conversations_json_of_the_wrong_shape_is_one_line(tmp_path: Path) -> None:
    path = _zip(tmp_path / "x.zip", {"conversations.json": '{"mapping": 3'})
    with pytest.raises(ImportFormatError, match=r"x\.zip \(conversations\.json\): invalid JSON"):
        read_source(path)


def test_a_folder_with_nothing_known_is_one_line(tmp_path: Path) -> None:
    _write(tmp_path / "notes.json", {"hello": "world"})
    with pytest.raises(ImportFormatError, match=r"no chat export from .* found inside"):
        read_source(tmp_path)


def test_wrong_types_at_the_top_of_a_known_shape(tmp_path: Path) -> None:
    bad = [gpt_branching(), "not an object", 5]
    source = read_source(_write(tmp_path / "c.json", bad))
    assert len(source.conversations) == 1
    assert [s.reason for s in source.skipped] == [
        "not a conversation object (text)",
        "not a conversation object (a number)",
    ]
