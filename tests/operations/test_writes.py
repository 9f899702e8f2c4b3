"""What a person does to memory, without Qt: each write says what it changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop.core.error_memory import ErrorMemory, ErrorRecordNotFound
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import Summary
from agenvoy_desktop.operations import errors as error_ops
from agenvoy_desktop.operations import sessions as session_ops
from agenvoy_desktop.operations.changes import (
    ERRORS_CHANGED,
    MemoryChanges,
    summary_changes,
    turn_changes,
)
from agenvoy_desktop.operations.summary import read_snapshot, save_edit
from tests.conftest import FakeClock, conversation


def test_changes_combine_and_name_a_session_only_when_both_do() -> None:
    a = MemoryChanges(messages=True, session_id="s1")
    b = MemoryChanges(summary=True, session_id="s1")
    both = a | b
    assert both.messages
    assert both.summary
    assert both.session_id == "s1"
    assert (a | MemoryChanges(errors=True)).session_id is None
    assert both.affects("s1", "summary")
    assert not both.affects("s2", "summary")
    assert not both.affects("s1", "models")
    assert MemoryChanges().empty
    assert not turn_changes("s1").summary  # a turn leaves the summary to its pass
    assert summary_changes("s1").affects("s1", "timeline")


def test_create_rename_and_title_report_the_sessions_list(store: MemoryStore) -> None:
    created = session_ops.create_session(store)
    sid = created.value
    assert created.changes == MemoryChanges(sessions=True, session_id=sid)
    assert [info.session_id for info in session_ops.list_sessions(store)] == [sid]
    changes = session_ops.rename_session(store, sid, "Trip to Kyoto")
    assert changes.sessions
    assert changes.session_id == sid
    assert session_ops.list_sessions(store)[0].title == "Trip to Kyoto"


def test_reset_and_remove_change_everything_of_the_session(store: MemoryStore) -> None:
    sid = store.create_session("Notes")
    store.append(sid, conversation(["my bike lock code is 4721", "noted"]))
    reset = session_ops.reset_session(store, sid)
    assert reset.changes.affects(sid, "messages", "vectors", "timeline", "sessions")
    assert reset.value.not_cleaned == ()  # no copy set aside that could not be cleaned
    assert store.archive.count(sid) == 0
    removed = session_ops.remove_session(store, sid).changes
    assert removed.sessions
    assert removed.session_id == sid
    assert session_ops.list_sessions(store) == []


def test_import_creates_a_session_and_says_so(store: MemoryStore) -> None:
    imported = session_ops.import_conversation(
        store, conversation(["hello", "hi there"]), title="Imported"
    )
    assert imported.changes.affects(imported.value, "sessions", "messages", "vectors")
    assert store.archive.count(imported.value) == 2


def test_export_changes_nothing(store: MemoryStore, tmp_path: Path) -> None:
    sid = store.create_session("Notes")
    store.append(sid, conversation(["hello", "hi there"]))
    written = session_ops.export_session(store, sid, tmp_path / "notes.md", "markdown", 0)
    assert "hello" in written.read_text("utf-8")


def test_error_memory_writes_report_the_error_memory(tmp_path: Path) -> None:
    with ErrorMemory(tmp_path / "errors.sqlite3", None, clock=FakeClock()) as errors:
        added = error_ops.add_record(
            errors,
            {"tool": "read_file", "symptom": "no such file: notes.txt", "outcome": "failed"},
            None,
        )
        assert added.changes == ERRORS_CHANGED
        record_id = added.value.id
        assert error_ops.set_outcome(errors, record_id, "resolved").value.outcome == "resolved"
        assert error_ops.renew_record(errors, record_id).changes == ERRORS_CHANGED
        assert [r.id for r in error_ops.list_records(errors)] == [record_id]
        assert error_ops.delete_record(errors, record_id).changes.errors
        assert error_ops.list_records(errors) == []


def test_a_summary_edit_reports_the_summary_of_that_session(store: MemoryStore) -> None:
    sid = store.create_session("Notes")
    summary = Summary(current_discussion="The user plans a trip to Kyoto.")
    saved = save_edit(store, sid, summary, FakeClock())
    assert saved.changes == summary_changes(sid)
    snapshot = read_snapshot(store, sid)
    assert snapshot.summary is not None
    assert snapshot.summary.current_discussion == summary.current_discussion


@pytest.mark.parametrize("part", ["sessions", "messages", "errors", "models"])
def test_any_of_names_each_part(part: str) -> None:
    assert MemoryChanges(**{part: True}).any_of(part)  # type: ignore[arg-type]


def test_the_cli_error_commands_operations(tmp_path: Path) -> None:
    with ErrorMemory(tmp_path / "errors.sqlite3", None, clock=FakeClock()) as errors:
        fields = {"tool": "read_file", "symptom": "no such file: a.txt", "outcome": "failed"}
        assert error_ops.merged_into(errors, "read_file", "no such file: a.txt") is None
        record = error_ops.add_record(errors, fields, "s1").value
        assert error_ops.merged_into(errors, "read_file", "no such file: a.txt") == record.id
        assert error_ops.get_record(errors, record.id).session_id == "s1"
        with pytest.raises(ErrorRecordNotFound):
            error_ops.get_record(errors, record.id + 1)
        edited = error_ops.edit_record(errors, record.id, {"cause": "wrong folder"}, renew=True)
        assert edited.value.cause == "wrong folder"
        assert edited.changes == ERRORS_CHANGED
        hits = error_ops.search_records(errors, "no such file", limit=3)
        assert [h.record.id for h in hits] == [record.id]
        assert error_ops.purge_expired(errors).value == 0


def test_stats_of_a_session_and_of_the_profile(store: MemoryStore) -> None:
    sid = store.create_session("Notes")
    store.append(sid, conversation(["hello", "hi there"]))
    detail = session_ops.session_stats(store, sid)
    assert detail["archived_messages"] == 2
    assert isinstance(detail["events"], list)
    profile = session_ops.profile_stats(store)
    assert profile["sessions"] == 1
    assert profile["archived_messages"] == 2
