"""Narrow panels wrap or fold instead of scrolling sideways.

The wrapping button and check box (their text wraps, they keep their
accessible names), the timeline's kind column giving way to the event's
text, and the error memory's table folding into one column of wrapped rows.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from agenvoy_desktop.operations.timeline import TimelineEvent
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector.errors_tab import COLUMNS, COMPACT_HEADER
from agenvoy_desktop.ui.inspector.panel import InspectorPanel
from agenvoy_desktop.ui.inspector.wrapping import CheckRow, WrappingButton
from agenvoy_desktop.ui.timeline_panel import TimelinePanel, with_kind
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, Wait

LONG = "Look for running servers on this computer"


def _host(qtbot: QtBot, widget: QWidget, width: int) -> QWidget:
    host = QWidget()
    qtbot.addWidget(host)
    QVBoxLayout(host).addWidget(widget)
    host.resize(width, 300)
    host.show()
    qtbot.waitExposed(host)
    return host


def test_a_wrapping_button_grows_in_height_instead_of_width(qtbot: QtBot) -> None:
    button = WrappingButton(LONG)
    one_line = button.sizeHint()
    host = _host(qtbot, button, 160)
    qtbot.waitUntil(lambda: button.width() < one_line.width())
    assert button.height() > one_line.height()  # a second line
    assert button.minimumSizeHint().width() < one_line.width()
    label = button.label
    assert label.height() >= label.heightForWidth(label.width())  # every line shows
    assert button.accessibleName() == LONG
    assert button.label_text() == LONG
    with qtbot.waitSignal(button.clicked):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    host.close()


def test_a_check_rows_text_wraps_and_a_click_on_it_toggles_the_box(qtbot: QtBot) -> None:
    row = CheckRow("Skip the context window when searching")
    row.setToolTip("why")
    host = _host(qtbot, row, 140)
    qtbot.waitUntil(lambda: row.label.height() > row.label.fontMetrics().height() * 1.5)
    assert row.box.text() == ""
    assert row.box.accessibleName() == "Skip the context window when searching"
    assert row.label.buddy() is row.box
    assert row.box.toolTip() == row.label.toolTip() == "why"
    qtbot.mouseClick(row.label, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert row.box.isChecked()
    row.box.setEnabled(False)
    qtbot.mouseClick(row.label, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert row.box.isChecked()  # a disabled box stays as it is
    host.close()


def test_a_hidden_kind_leads_the_events_text_unless_the_text_says_it() -> None:
    def event(kind: str, text: str) -> TimelineEvent:
        return TimelineEvent(0, kind, text)

    assert with_kind(event("tool", "read_file(path=1) · done")) == (
        "Tool call · read_file(path=1) · done"
    )
    assert with_kind(event("message", "You: hello")) == "You: hello"
    assert with_kind(event("summary", "Summary pass · 6 messages")) == "Summary pass · 6 messages"
    assert with_kind(event("recall", "Recalled 2 earlier messages")).startswith("Recalled")
    assert with_kind(event("errors", "Hint for x: y")) == "Error memory · Hint for x: y"


def test_a_narrow_timeline_folds_its_kind_into_the_events_text(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    timeline = TimelinePanel(make_services(ScriptedChatModel([])), runner)
    qtbot.addWidget(timeline)
    timeline.model.set_events([TimelineEvent(0, "tool", "read_file(path='a') · done")])
    timeline.resize(1000, 400)
    timeline.show()
    view, model = timeline.view, timeline.model
    qtbot.waitUntil(lambda: not view.isColumnHidden(1))
    assert not view.isColumnHidden(0)
    assert model.index(0, 2).data() == "read_file(path='a') · done"
    timeline.resize(240, 400)
    qtbot.waitUntil(lambda: view.isColumnHidden(1))
    assert view.isColumnHidden(0)
    assert model.index(0, 2).data() == "Tool call · read_file(path='a') · done"
    assert view.horizontalScrollBar().maximum() == 0
    timeline.resize(1000, 400)
    qtbot.waitUntil(lambda: not view.isColumnHidden(1))
    assert model.index(0, 2).data() == "read_file(path='a') · done"


def test_a_narrow_error_table_folds_into_one_column_of_wrapped_records(
    qtbot: QtBot, panel: InspectorPanel, wait_for: Wait
) -> None:
    panel.show_tab("errors")
    tab = panel.errors_tab
    wait_for(lambda: tab.model.rowCount() == 4)
    table, proxy = tab.table, tab.proxy
    wait_for(lambda: not table.isColumnHidden(COLUMNS.index("Symptom")))
    assert proxy.headerData(0, Qt.Orientation.Horizontal) == "Tool"
    assert not table.wordWrap()
    record = tab.visible_records()[0]
    assert tab.select_record(record.id)
    panel.resize(260, 700)
    wait_for(lambda: table.isColumnHidden(COLUMNS.index("Symptom")))
    assert tab.selected() == record  # folding keeps the selection
    assert all(table.isColumnHidden(c) for c in range(1, len(COLUMNS)))
    assert proxy.headerData(0, Qt.Orientation.Horizontal) == COMPACT_HEADER
    assert table.wordWrap()
    first = proxy.index(0, 0).data()
    assert first.startswith(f"{record.tool} · {record.outcome}\n")
    assert record.symptom[:20] in first
    assert table.horizontalScrollBar().maximum() == 0
    assert table.rowHeight(0) > 2 * table.fontMetrics().height()  # its lines show
    panel.resize(1000, 700)
    wait_for(lambda: not table.isColumnHidden(COLUMNS.index("Symptom")))
    assert proxy.index(0, 0).data() == record.tool
    assert table.rowHeight(0) < 2 * table.fontMetrics().height()
