"""Session export: Markdown for people, JSON for programs (core/export.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenvoy_desktop.core.export import (
    EXPORT_FORMAT,
    collect,
    fenced,
    suggested_filename,
    to_markdown,
    write_export,
)
from agenvoy_desktop.core.importers import read_history_array, read_import_file
from agenvoy_desktop.core.store import MemoryStore, UnknownSessionError
from agenvoy_desktop.core.summary import KeyDecision, PastDiscussion, Summary, save_summary
from tests.conftest import SECOND, T0, conversation, msg


def _session(store: MemoryStore) -> str:
    sid = store.create_session("記憶系統 design")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": {"path": "notes.txt"}},
    }
    store.append(
        sid,
        [
            msg("user", "請幫我看 notes.txt", T0),
            msg("assistant", "", T0 + SECOND, tool_calls=[call]),
            msg(
                "tool",
                "error: no such file",
                T0 + 2 * SECOND,
                tool_call_id="call_1",
                name="read_file",
                is_error=True,
                error_hint="[error memory] apply this fix: use an absolute path",
            ),
            msg("assistant", "The file is missing; ```code``` stays intact", T0 + 3 * SECOND),
            msg("user", "ok", T0 + 4 * SECOND),
            msg("assistant", "Half an ans", T0 + 5 * SECOND, interrupted=True),
        ],
    )
    return sid


def test_markdown_holds_every_message_tool_traffic_and_marks(store: MemoryStore) -> None:
    sid = _session(store)
    text = to_markdown(collect(store, sid), T0)
    assert text.startswith("# 記憶系統 design\n")
    assert "請幫我看 notes.txt" in text
    assert "Tool call: `read_file`" in text
    assert '"path": "notes.txt"' in text
    assert "### Tool result · read_file" in text
    assert "> [error memory] apply this fix: use an absolute path" in text
    assert "*(answer interrupted)*" in text
    assert "6 messages" in text


def test_markdown_includes_the_summary(store: MemoryStore) -> None:
    sid = _session(store)
    summary = Summary(
        key_decisions=(KeyDecision("Use SQLite FTS5", "2024-01-02"),),
        past_discussions=(PastDiscussion("Search", "keyword vs semantic", "2024-01-02"),),
        current_discussion="Exports",
    )
    save_summary(store.folder(sid), summary)
    text = to_markdown(collect(store, sid), T0)
    assert "## Summary" in text
    assert "- Use SQLite FTS5 (2024-01-02)" in text
    assert "**Search** (2024-01-02): keyword vs semantic" in text


def test_json_export_keeps_messages_verbatim_and_reimports(
    store: MemoryStore, tmp_path: Path
) -> None:
    sid = _session(store)
    path = write_export(store, sid, tmp_path / "out.json", "json", T0)
    data = json.loads(path.read_text("utf-8"))
    assert data["format"] == EXPORT_FORMAT
    assert data["session_id"] == sid
    assert data["title"] == "記憶系統 design"
    originals = [row.message for row in store.archive.messages(sid)]
    assert [m["id"] for m in data["messages"]] == [m.id for m in originals]
    assert data["messages"][2]["error_hint"].startswith("[error memory]")
    raws = read_history_array(path, data["messages"])
    assert [r.content for r in raws] == [m.content for m in originals]
    again = read_import_file(path, T0)  # the export file itself imports
    assert [m.content for m in again] == [m.content for m in originals]


def test_export_includes_messages_compaction_trimmed(open_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = open_store(max_history_bytes=4000)
    sid = store.create_session("long")
    store.append(sid, conversation([f"message {i} " + "x" * 200 for i in range(40)]))
    assert len(store.history(sid).messages) < 40
    data = json.loads(
        write_export(store, sid, tmp_path / "long.json", "json", T0).read_text("utf-8")
    )
    assert len(data["messages"]) == 40


def test_markdown_export_is_written_atomically(store: MemoryStore, tmp_path: Path) -> None:
    sid = _session(store)
    target = tmp_path / "deep" / "x.md"
    target.parent.mkdir()
    write_export(store, sid, target, "markdown", T0)
    assert target.read_text("utf-8").startswith("# ")
    assert [p.name for p in target.parent.iterdir()] == ["x.md"]


def test_unknown_session_is_a_clear_error(store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(UnknownSessionError, match="nope"):
        write_export(store, "nope", tmp_path / "x.md", "markdown", T0)
    assert not (tmp_path / "x.md").exists()


def test_fence_outgrows_backticks_in_content() -> None:
    assert fenced("a ```` b", "")[0] == "`````"
    assert fenced("plain", "json") == ["```json", "plain", "```"]


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("記憶系統 design", "記憶系統-design.md"),
        ("a/b:c*?", "abc.md"),
        (None, "session-abc.md"),
        ("///", "session-abc.md"),
    ],
)
def test_suggested_filename_is_safe(title: str | None, expected: str) -> None:
    assert suggested_filename(title, "abc", "markdown") == expected
