"""The memory inspector over a prepared profile: every tab, edits, filters, search.

Work runs through the app's real AsyncRunner on a qasync loop; tests wait
for results with ``qtbot.waitUntil`` (never sleeps).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QDialogButtonBox, QLineEdit, QWidget
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.context import WINDOW_STEP, turn_note_index
from agenvoy_desktop.core.summarizer import PassProgress
from agenvoy_desktop.core.summary import (
    SUMMARY_VERSION,
    KeyDecision,
    PastDiscussion,
    Summary,
    load_summary,
    read_records,
    save_summary,
)
from agenvoy_desktop.llm import e5_convert
from agenvoy_desktop.llm.catalogue import E5_NAME
from agenvoy_desktop.llm.discovery import DiscoveredModel
from agenvoy_desktop.llm.gguf_info import read_gguf_info
from agenvoy_desktop.llm.model_prep import prepare_e5_model
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.inspector.errors_tab import COLUMNS, ErrorsTab
from agenvoy_desktop.ui.inspector.recall_tab import clip_around, highlight, query_terms
from agenvoy_desktop.ui.inspector.summary_tab import FIRST_COLUMN_SHARE, describe_run
from tests.llm.test_e5_convert import pack
from tests.tiny_gguf import write_tiny_llama
from tests.ui.conftest import Wait
from tests.ui.inspector_profile import Profile


def open_tab(panel: InspectorPanel, name: str, session_id: str | None) -> None:
    panel.set_session(session_id)
    panel.show_tab(name)


# -- summary ---------------------------------------------------------------------
def test_summary_tab_shows_sections_cursor_and_history(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.snapshot is not None)
    assert tab.decisions.rowCount() == 3
    assert tab.decisions.item(0, 0).text().startswith("Stay two nights in a ryokan")
    assert tab.decisions.item(0, 1).text() == "2023-11-14"
    assert tab.discussions.rowCount() == 2
    assert tab.discussions.item(1, 0).text().splitlines()[0] == "Food"
    assert "cherry-blossom" in tab.current_label.text()
    info = tab.info_label.text()
    assert "Summarized up to:" in info
    assert "10 messages folded in" in info
    assert "Last pass:" in info
    assert "Waiting:</b> 2 older messages" in info
    assert tab.history.rowCount() == 3  # newest first
    assert tab.history_empty.isHidden()
    assert tab.history.item(0, 0).text().splitlines()[0] == "Pass"
    assert tab.history.item(1, 0).text().splitlines()[0] == "Failed"
    assert tab.history.item(1, 1).text().startswith("model answer: empty summary")
    assert "messages #0–#5 (6) · summarized up to start → #5" in tab.history.item(2, 1).text()
    tab.raw_button.click()
    assert json.loads(tab.raw_view.toPlainText())["version"] == SUMMARY_VERSION
    assert tab.stack.currentIndex() == 1


def test_a_key_decision_links_to_its_source_message(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    source = inspected.messages[inspected.main][3]
    save_summary(
        folder,
        Summary(
            key_decisions=(
                KeyDecision("Book the ryokan in Arashiyama", "2023-11-14", source=source.id),
                KeyDecision("Pack a light jacket", "2023-11-14", by_user=True),
                KeyDecision("Haruka Express", "2023-11-14"),  # an older file: no source
            ),
            current_discussion="Trip plans.",
        ),
    )
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.decisions.rowCount() == 3 and tab.source_button(0) is not None)
    button = tab.source_button(0)
    assert button is not None
    assert button.text() == "Show"
    with qtbot.waitSignal(panel.message_activated) as signal:
        button.click()
    assert signal.args == [source.id]
    assert tab.source_button(1) is None
    assert tab.decisions.item(1, 2).text() == "you"
    assert tab.decisions.item(2, 2).text() == "—"
    assert "not binding" in tab.decisions.item(2, 0).toolTip()


def test_a_long_topic_leaves_room_for_what_was_said(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    """In a side panel's width every column of the discussions stays in sight."""
    tab = panel.summary_tab
    long_topic = "Positive reinforcement can really help you bond with your dogs"
    save_summary(
        inspected.folder(inspected.main),
        Summary(
            past_discussions=(
                PastDiscussion(long_topic, "A workshop at the local pet store.", "2023-05-11"),
            ),
            current_discussion="Dogs.",
        ),
    )
    panel.resize(330, 700)
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.discussions.rowCount() == 1)
    table = tab.discussions
    width = table.viewport().width()
    header = table.horizontalHeader()
    qtbot.waitUntil(lambda: header.sectionSize(0) <= width * FIRST_COLUMN_SHARE + 1)
    assert header.sectionViewportPosition(1) < width / 2  # "What was said" has half or more
    assert tab.discussions.item(0, 0).text().splitlines()[1] == "2023-05-11"
    narrow = header.sectionSize(0)
    panel.resize(1000, 700)  # wider: the topic takes more of it, wrapped over fewer lines
    qtbot.waitUntil(lambda: header.sectionSize(0) > narrow)


def test_summary_pass_history_row_activates_its_first_message(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.history.rowCount() == 3)
    with qtbot.waitSignal(panel.message_activated) as signal:
        tab._history_activated(2, 0)  # the oldest pass: messages 0..5
    assert signal.args == [inspected.messages[inspected.main][0].id]


def test_edit_key_decision_is_saved_like_a_pass(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    before = len(read_records(folder))
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.snapshot is not None)
    tab.decisions.item(1, 0).setText("Keep the budget under 2500 euros")  # an inline edit
    wait_for(lambda: len(read_records(folder)) == before + 1)
    summary = load_summary(folder)
    assert summary is not None
    assert summary.key_decisions[1].decision == "Keep the budget under 2500 euros"
    assert summary.key_decisions[1].decided_at == "2023-11-14"
    assert next(d.decision for d in summary.key_decisions).startswith("Stay two nights")
    record = read_records(folder)[-1]
    assert record.kind == "edit"
    assert record.model == "user"
    wait_for(lambda: tab.history.item(0, 0).text().startswith("Your edit\n"))
    assert tab.status.text() == "Key decision changed."


def test_delete_key_decision_and_undo(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.decisions.rowCount() == 3)
    tab.decisions.selectRow(0)
    tab.delete_button.click()
    wait_for(lambda: tab.decisions.rowCount() == 2)
    summary = load_summary(folder)
    assert summary is not None
    assert len(summary.key_decisions) == 2
    assert not any("ryokan" in d.decision for d in summary.key_decisions)
    assert "Deleted key decision" in tab.status.text()
    assert tab.undo_button.isVisible()
    tab.undo_button.click()
    wait_for(lambda: tab.decisions.rowCount() == 3)
    restored = load_summary(folder)
    assert restored is not None
    assert "ryokan" in restored.key_decisions[0].decision
    assert [r.kind for r in read_records(folder)][-2:] == ["edit", "edit"]
    assert not tab.undo_button.isVisible()


def test_add_key_decision_and_reject_an_invalid_one(
    panel: InspectorPanel, inspected: Profile, runner: AsyncRunner, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.decisions.rowCount() == 3)
    tab.add_decision("Take the Haruka express from the airport")
    wait_for(lambda: tab.decisions.rowCount() == 4)
    summary = load_summary(folder)
    assert summary is not None
    assert summary.key_decisions[-1].decision == "Take the Haruka express from the airport"
    raw = (folder / "summary.json").read_text("utf-8")
    tab.add_decision("x" * 300)
    wait_for(lambda: tab.status.is_error)
    assert "at most 200" in tab.status.text()
    assert (folder / "summary.json").read_text("utf-8") == raw
    wait_for(lambda: tab.decisions.rowCount() == 4)
    wait_for(lambda: all(op.done for op in runner.operations()))


def test_summarize_now_folds_waiting_messages_with_progress(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.snapshot is not None)
    assert tab.summarize_button.isEnabled()
    tab.summarize_button.click()
    assert tab.progress.isVisible()
    wait_for(lambda: "Folded 2 messages" in tab.status.text())
    wait_for(lambda: not tab.progress.isVisible())
    summary = load_summary(folder)
    assert summary is not None
    assert summary.key_decisions[0].decision.startswith("decision from chunk 0")
    assert summary.key_decisions[0].source is not None  # traced to a message
    assert read_records(folder)[-1].kind == "pass"
    wait_for(lambda: tab.decisions.item(0, 0).text().startswith("decision from chunk 0"))
    assert tab.source_button(0) is not None
    assert "Waiting" not in tab.info_label.text()


def open_editor(table: QWidget) -> QLineEdit:
    editors = [e for e in table.findChildren(QLineEdit) if e.isVisible()]
    assert len(editors) == 1
    return editors[0]


def test_inline_add_commits_on_enter_and_esc_drops_the_row(
    panel: InspectorPanel, inspected: Profile, runner: AsyncRunner, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.decisions.rowCount() == 3)
    tab.add_button.click()
    assert tab.decisions.rowCount() == 4
    qtbot.keyClick(open_editor(tab.decisions), Qt.Key.Key_Escape)
    wait_for(lambda: tab.decisions.rowCount() == 3)
    tab.add_button.click()
    editor = open_editor(tab.decisions)
    qtbot.keyClicks(editor, "Pack a light jacket")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    wait_for(lambda: len((load_summary(folder) or Summary()).key_decisions) == 4)
    summary = load_summary(folder)
    assert summary is not None
    assert summary.key_decisions[-1].decision == "Pack a light jacket"
    wait_for(lambda: all(op.done for op in runner.operations()))


def test_stop_a_running_summary_keeps_what_was_there(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    raw = (folder / "summary.json").read_text("utf-8")
    records = len(read_records(folder))
    inspected.json_model.hold = asyncio.Event()
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.snapshot is not None)
    tab.summarize_button.click()
    wait_for(lambda: inspected.json_model.calls)
    assert not tab.summarize_button.isEnabled()
    tab.cancel_button.click()
    wait_for(lambda: not tab.progress.isVisible())
    assert tab.summarize_button.isEnabled()
    assert "Stopped" in tab.status.text()
    assert (folder / "summary.json").read_text("utf-8") == raw
    # the pass history notes the stopped pass (written on the storage thread)
    wait_for(lambda: len(read_records(folder)) == records + 1)
    assert read_records(folder)[-1].kind == "stopped"


def test_summary_tab_without_a_chat_model(
    qtbot: QtBot, profile_without_model: Profile, runner: AsyncRunner, wait_for: Wait
) -> None:
    panel = InspectorPanel(profile_without_model.services, runner)
    qtbot.addWidget(panel)
    panel.set_session(profile_without_model.main)
    tab = panel.summary_tab
    wait_for(lambda: tab.snapshot is not None)
    assert tab.decisions.rowCount() == 3
    assert not tab.summarize_button.isEnabled()
    assert "chat model" in tab.summarize_button.toolTip()


def test_describe_run_is_a_sentence() -> None:
    class Result:
        stopped = "failed"
        folded = 3
        passes = 1
        remaining = 4
        error = "model answer: bad JSON"

    text = describe_run(Result())
    assert text.startswith("The summary pass failed: model answer: bad JSON.")


# -- context ---------------------------------------------------------------------
def test_context_tab_shows_prompt_window_and_tokens(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.context_tab
    open_tab(panel, "context", inspected.main)
    wait_for(lambda: tab.view is not None)
    view = tab.view
    assert view is not None
    assert view.messages[0]["role"] == "system"
    assert "Key decisions (binding" in view.messages[0]["content"]
    note = turn_note_index(view.messages)  # the clock, before the last user message
    assert note is not None
    assert [m["role"] for m in view.messages[note:]] == ["system", "user", "assistant"]
    window = len(view.messages) - 2  # the head system message and the note aside
    assert 16 <= window < 16 + WINDOW_STEP  # the window's start moves in steps
    assert view.messages[-1]["content"] == inspected.messages[inspected.main][-1].content
    assert view.total_tokens is not None
    assert view.total_tokens > 100
    assert tab.meter.isVisible()
    assert "of 4,096 tokens" in tab.meter_label.text()
    assert (
        f"{window} messages</b> from the window (N = 16, in steps of {WINDOW_STEP})"
        in tab.summary_label.text()
    )
    text = tab.browser.toPlainText()
    assert "System prompt" in text
    assert "Turn note" in text
    assert "Day three: Nara" in text
    assert "search_chat_history" in view.tools
    assert view.tool_tokens > 0
    assert "Tools offered" in text


def test_context_tab_without_chat_model_still_shows_messages(
    qtbot: QtBot, profile_without_model: Profile, runner: AsyncRunner, wait_for: Wait
) -> None:
    panel = InspectorPanel(profile_without_model.services, runner)
    qtbot.addWidget(panel)
    panel.set_session(profile_without_model.main)
    panel.show_tab("context")
    tab = panel.context_tab
    wait_for(lambda: tab.view is not None)
    assert tab.view is not None
    assert len(tab.view.messages) == 1 + 20 + 1  # head, the stepped window, the turn note
    assert "Key decisions (binding" in tab.view.messages[0]["content"]
    assert not tab.meter.isVisible()
    assert "No chat model is loaded" in tab.summary_label.text()


# -- recall ----------------------------------------------------------------------
def search(panel: InspectorPanel, text: str, mode: str, wait_for: Wait) -> None:
    tab = panel.recall_tab
    tab.mode_combo.setCurrentIndex(tab.mode_combo.findData(mode))
    tab.answer = None
    tab.query_edit.setText(text)
    tab.search()
    wait_for(lambda: tab.answer is not None or tab.status.is_error)


def test_recall_shows_hits_with_scores_and_highlighted_excerpts(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.recall_tab
    open_tab(panel, "recall", inspected.main)
    assert tab.mode_combo.currentData() == "hybrid"  # as the assistant's search does
    assert tab.scope_combo.currentData() == "current"
    wait_for(lambda: "vectors" in tab.stats_label.text())
    assert "28 messages in the archive" in tab.stats_label.text()
    assert "28 vectors" in tab.stats_label.text()
    search(panel, "ryokan", "keyword", wait_for)
    answer = tab.answer
    assert answer is not None
    # the three messages that say it, then a reply that follows one (matched by its context)
    texts = [hit.item.message.content.lower() for hit in answer.result.hits]
    assert all("ryokan" in text for text in texts[:3])
    assert len(texts) == 4
    html = tab.results.toHtml()
    assert "relevance" in html
    assert "#ffe082" in html
    assert "hits in" in tab.summary_label.text()
    hit = answer.result.hits[0].item.message
    with qtbot.waitSignal(panel.message_activated) as signal:
        tab._anchor(QUrl(f"msg:{hit.id}"))
    assert signal.args == [hit.id]
    search(panel, "vegetarian food near Gion", "hybrid", wait_for)
    assert tab.answer is not None
    assert tab.answer.result.hits
    assert "fused" in tab.results.toHtml()


@pytest.mark.parametrize("hostile", ['"*NEAR(', "NEAR(a b", '"', "*", "AND OR NOT", "a:b)"])
def test_recall_survives_hostile_queries(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait, hostile: str
) -> None:
    tab = panel.recall_tab
    open_tab(panel, "recall", inspected.main)
    search(panel, hostile, "keyword", wait_for)
    assert not tab.status.is_error, tab.status.text()
    assert tab.answer is not None
    if not tab.answer.result.hits:
        assert tab.status.isVisible()
        assert "“" in tab.status.text()


def test_recall_readable_message_for_punctuation_and_scope_all(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.recall_tab
    open_tab(panel, "recall", inspected.main)
    search(panel, '"*(', "keyword", wait_for)
    assert "has none" in tab.status.text()
    tab.scope_combo.setCurrentIndex(1)
    search(panel, "KeyError title", "keyword", wait_for)
    assert tab.answer is not None
    assert tab.answer.query.session_id is None
    assert tab.answer.result.hits[0].item.session_id == inspected.other
    assert "Parser bug" in tab.results.toPlainText()
    wait_for(lambda: "All 2 sessions" in tab.stats_label.text())


def test_recall_time_range_filters(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.recall_tab
    open_tab(panel, "recall", inspected.main)
    tab.range_combo.setCurrentIndex(2)  # last 7 days: the profile's messages are older
    search(panel, "ryokan", "keyword", wait_for)
    assert tab.answer is not None
    assert not tab.answer.result.hits
    assert "in that time range" in tab.status.text()


def test_recall_text_helpers() -> None:
    assert query_terms('"*NEAR( 記憶系統 a') == ["NEAR", "記憶系統"]
    marked = highlight("a <b> near NEAR", ["near"])
    assert "&lt;b&gt;" in marked
    assert marked.count("#ffe082") == 2
    clipped = clip_around("x" * 500 + " needle " + "y" * 500, ["needle"], 100)
    assert "needle" in clipped
    assert clipped.startswith("…")
    assert clipped.endswith("…")


# -- error memory ------------------------------------------------------------------
def errors_tab(panel: InspectorPanel, wait_for: Wait, rows: int = 4) -> ErrorsTab:
    panel.show_tab("errors")
    tab = panel.errors_tab
    wait_for(lambda: tab.model.rowCount() == rows)
    return tab


def test_error_table_filters_by_tool_and_outcome(panel: InspectorPanel, wait_for: Wait) -> None:
    tab = errors_tab(panel, wait_for)
    assert [tab.tool_filter.itemText(i) for i in range(tab.tool_filter.count())] == [
        "All tools",
        "list_files",
        "read_text_file",
        "search_chat_history",
    ]
    tab.tool_filter.setCurrentIndex(tab.tool_filter.findData("read_text_file"))
    assert {r.tool for r in tab.visible_records()} == {"read_text_file"}
    assert len(tab.visible_records()) == 2
    assert tab.count_label.text() == "2 of 4 records shown"
    tab.outcome_filter.setCurrentIndex(tab.outcome_filter.findData("failed"))
    assert tab.visible_records() == []
    tab.tool_filter.setCurrentIndex(0)
    assert [r.tool for r in tab.visible_records()] == ["list_files"]
    tab.outcome_filter.setCurrentIndex(0)
    tab.text_filter.setText("pdf")
    assert [r.symptom[:18] for r in tab.visible_records()] == ["UnicodeDecodeError"]


def test_error_table_sorts_by_column(panel: InspectorPanel, wait_for: Wait) -> None:
    tab = errors_tab(panel, wait_for)
    created = [r.created_ns for r in tab.visible_records()]
    assert created == sorted(created, reverse=True)  # newest first by default
    tab.table.sortByColumn(COLUMNS.index("Tool"), Qt.SortOrder.AscendingOrder)
    tools = [r.tool for r in tab.visible_records()]
    assert tools == sorted(tools)
    tab.table.sortByColumn(COLUMNS.index("Outcome"), Qt.SortOrder.DescendingOrder)
    outcomes = [r.outcome for r in tab.visible_records()]
    assert outcomes == sorted(outcomes, reverse=True)


def test_error_detail_edit_outcome_renew_delete(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = errors_tab(panel, wait_for)
    storage, errors = inspected.services.storage, inspected.errors
    target = next(r for r in tab.model.records if r.tool == "list_files")
    assert tab.select_record(target.id)
    assert "outside the allowed folders" in tab.detail.text()
    assert tab.delete_button.isEnabled()

    tab.outcome_edit.setCurrentIndex(tab.outcome_edit.findData("abandoned"))
    tab.save_outcome_button.click()
    wait_for(lambda: "now “abandoned”" in tab.status.text())
    stored = storage.run_sync(errors.get, target.id)
    assert stored is not None
    assert stored.outcome == "abandoned"
    wait_for(lambda: tab.selected() is not None and tab.selected().outcome == "abandoned")  # type: ignore[union-attr]

    old_expiry = stored.expires_ns
    tab.renew_button.click()
    wait_for(lambda: "another 90 days" in tab.status.text())
    renewed = storage.run_sync(errors.get, target.id)
    assert renewed is not None
    assert renewed.expires_ns > old_expiry

    tab.delete_button.click()
    wait_for(lambda: tab.model.rowCount() == 3)
    assert storage.run_sync(errors.get, target.id) is None
    assert tab.selected() is None


def test_error_add_user_note_and_validation(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = errors_tab(panel, wait_for)
    tab.set_session(inspected.main)
    dialog = tab.open_add_dialog()
    assert dialog.isVisible()
    assert dialog.tool.findText("read_text_file") >= 0
    ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    ok.click()
    assert dialog.error_label.text() == "Name the tool this note is about."
    dialog.tool.setCurrentText("x" * 200)
    dialog.symptom.setPlainText("Timeout after 10 s")
    ok.click()
    wait_for(lambda: "limit is 128" in dialog.error_label.text())
    assert dialog.isVisible()
    dialog.tool.setCurrentText("current_time")
    dialog.action.setPlainText("Ask again with a smaller date range")
    dialog.outcome.setCurrentIndex(dialog.outcome.findData("resolved"))
    dialog.keywords.setText("Slow, dates")
    ok.click()
    wait_for(lambda: tab.model.rowCount() == 5)
    assert tab.dialog is None
    record = tab.selected()
    assert record is not None
    assert record.tool == "current_time"
    assert record.source == "user"
    assert record.session_id == inspected.main
    assert "slow" in record.keywords
    assert record.error_type == "timeout"
    assert "Added record" in tab.status.text()


# -- models ----------------------------------------------------------------------
def test_models_tab_catalogue_choice_and_discovery(
    panel: InspectorPanel, inspected: Profile, tmp_path: Path, wait_for: Wait
) -> None:
    tab = panel.models_tab
    panel.show_tab("models")
    wait_for(lambda: tab.view is not None)
    assert "scripted-chat" in tab.in_use_label.text()
    assert "64 dimensions" in tab.in_use_label.text()
    assert "extra buffers" in tab.llama_section.text().lower()  # the real llama.cpp, off-thread
    assert tab.catalogue_table.rowCount() == 0

    model_file = write_tiny_llama(tmp_path / "tiny-chat.gguf")
    tab.add_file(model_file)
    wait_for(lambda: tab.catalogue_table.rowCount() == 1)
    entry = tab.selected_entry()
    assert entry is not None
    assert entry.role == "chat"
    assert entry.path == model_file
    assert "llama" in tab.entry_detail.text()
    assert tab.use_chat_button.isEnabled()
    tab.use_chat_button.click()  # switches now, in the background: no restart
    wait_for(lambda: "is now the chat model" in tab.status.text())
    assert inspected.services.settings.models.chat_model == entry.name
    saved = json.loads(inspected.services.paths.settings_file.read_text("utf-8"))
    assert saved["models"]["chat_model"] == entry.name
    assert inspected.services.chat_model is not None
    assert inspected.services.chat_model.name == entry.name

    (tmp_path / "elsewhere").mkdir()
    other = write_tiny_llama(tmp_path / "elsewhere" / "found.gguf")
    found = DiscoveredModel(
        other, "LM Studio", "found", other.stat().st_size, read_gguf_info(other), None
    )
    known = DiscoveredModel(model_file, "Jan", "tiny", 1, None, None)
    tab.discover = lambda: [found, known]
    tab.search_button.click()
    wait_for(lambda: tab.found_table.rowCount() == 1)
    assert "1 already in the catalogue" in tab.found_label.text()
    tab.found_table.selectRow(0)
    tab.add_found_button.click()
    wait_for(lambda: tab.catalogue_table.rowCount() == 2)
    assert tab.selected_entry() is not None
    assert tab.selected_entry().source == "discovered"  # type: ignore[union-attr]


def test_models_tab_rejects_a_broken_file(
    panel: InspectorPanel, tmp_path: Path, wait_for: Wait
) -> None:
    tab = panel.models_tab
    panel.show_tab("models")
    wait_for(lambda: tab.view is not None)
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a model")
    tab.add_file(bad)
    wait_for(lambda: tab.status.is_error)
    assert "Not added" in tab.status.text()
    assert "broken.gguf" in tab.status.text()


# -- panel -------------------------------------------------------------------------
def test_panel_loads_tabs_lazily_and_refreshes_on_switch(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: panel.summary_tab.snapshot is not None)
    assert panel.context_tab.view is None  # not shown yet, not loaded
    panel.show_tab("context")
    wait_for(lambda: panel.context_tab.view is not None)
    panel.set_session(inspected.other)
    wait_for(lambda: panel.context_tab.view is not None)
    view = panel.context_tab.view
    assert view is not None
    assert len(view.messages) == 1 + 4 + 1  # head, window, the turn note (the clock)
    panel.show_tab("summary")
    wait_for(lambda: panel.summary_tab.snapshot is not None)
    assert panel.summary_tab.snapshot is not None
    assert panel.summary_tab.snapshot.session_id == inspected.other
    assert panel.summary_tab.empty_label.isVisible()
    assert not panel.summary_tab.history_empty.isHidden()  # no passes: says so
    panel.set_session(None)
    assert panel.summary_tab.snapshot is None
    assert "Choose a session" in panel.summary_tab.empty_label.text()
    assert runner_errors(panel) == []


def runner_errors(panel: InspectorPanel) -> list[str]:
    runner = panel.summary_tab.jobs.runner
    errors = runner.property("test_errors")
    return list(errors or [])


def test_models_tab_chooses_the_optional_e5_model_by_name(
    panel: InspectorPanel, inspected: Profile, tmp_path: Path, wait_for: Wait
) -> None:
    packed = tmp_path / e5_convert.SOURCE_FILE
    packed.write_bytes(pack())
    prepare_e5_model(inspected.services.paths.models_dir, source=packed, source_sha256=None)
    tab = panel.models_tab
    panel.show_tab("models")
    wait_for(lambda: tab.catalogue_table.rowCount() == 1)
    assert tab.select_entry(E5_NAME)
    assert "prepared (built in)" in tab.entry_detail.text()
    assert not tab.use_chat_button.isEnabled()
    tab.use_embedding_button.click()
    wait_for(lambda: "is now the embedding model" in tab.status.text())
    assert inspected.services.settings.models.embedding_model == E5_NAME  # by name, not ""
    wait_for(lambda: tab.catalogue_table.item(0, 0).text().startswith("★ "))


def test_summary_tab_lists_facts_with_their_message_and_what_was_let_go(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.snapshot is not None and tab.facts.rowCount() > 0)
    summary = tab.snapshot.summary if tab.snapshot else None
    assert summary is not None
    assert summary.facts
    rows = tab.fact_rows()
    assert len(rows) == len(summary.facts)
    topics = {topic for topic, _, _ in rows}
    assert "Temples" in topics  # "Kiyomizu-dera opens at 6:00…" under its discussion
    budget = next(r for r in rows if "2000 euros" in r[1])
    assert budget[0] == "Other things said"
    button = budget[2]
    assert button is not None
    source = next(f.source for f in summary.facts if f.text == budget[1])
    with qtbot.waitSignal(panel.message_activated) as signal:
        button.click()
    assert signal.args == [source]
    assert tab.let_go.rowCount() == 1
    assert tab.let_go.item(0, 1).text() == "a question"


def test_summary_tab_shows_a_pass_as_it_works(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    open_tab(panel, "summary", inspected.main)
    wait_for(lambda: tab.snapshot is not None)
    summarizer = inspected.services.summarizer
    assert summarizer is not None
    summarizer.emit_progress(inspected.other, PassProgress(16, 0, 16, 0.4))
    assert tab.progress.isHidden()  # another session's pass
    summarizer.emit_progress(inspected.main, PassProgress(16, 0, 16, 0.4))
    assert not tab.progress.isHidden()
    assert tab.progress.format() == "Summarizing 16 messages… 40 %"
    assert tab.progress.value() == 40
