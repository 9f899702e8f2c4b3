"""FlowLayout wraps a row of controls; the inspector's tabs fit a narrow side panel."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QLineEdit, QPushButton, QTextEdit, QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from agenvoy_desktop.ui.flow_layout import FlowLayout
from agenvoy_desktop.ui.inspector.panel import MIN_TAB_WIDTH, InspectorPanel


def _row(qtbot: QtBot) -> tuple[QWidget, list[QWidget], QTextEdit]:
    host = QWidget()
    qtbot.addWidget(host)
    column = QVBoxLayout(host)
    flow = FlowLayout()
    combo = QComboBox()
    combo.addItem("Any outcome")
    controls: list[QWidget] = [combo, QLineEdit(), QPushButton("Show expired"), QPushButton("Add…")]
    for control in controls:
        flow.addWidget(control)
    column.addLayout(flow)
    below = QTextEdit()
    column.addWidget(below, 1)
    host.show()
    return host, controls, below


def _lines(controls: list[QWidget]) -> int:
    return len({control.geometry().y() for control in controls})


def test_a_wide_row_is_one_line_and_the_line_edit_takes_the_rest(qtbot: QtBot) -> None:
    host, controls, below = _row(qtbot)
    host.resize(800, 300)
    qtbot.waitUntil(lambda: controls[1].width() > controls[1].sizeHint().width())
    assert _lines(controls) == 1
    right = controls[-1].geometry().right()
    assert right >= host.contentsRect().right() - 20  # the row is filled to the edge
    xs = [control.geometry().x() for control in controls]
    assert xs == sorted(xs)
    assert below.geometry().top() > controls[0].geometry().bottom()


def test_a_narrow_row_wraps_and_pushes_what_follows_down(qtbot: QtBot) -> None:
    host, controls, below = _row(qtbot)
    host.resize(800, 300)
    qtbot.waitUntil(lambda: _lines(controls) == 1)
    top_before = below.geometry().top()
    host.resize(220, 300)
    qtbot.waitUntil(lambda: _lines(controls) > 1)
    for control in controls:
        assert control.geometry().right() <= host.contentsRect().right()  # nothing clipped
    assert below.geometry().top() > top_before
    assert below.geometry().top() > max(c.geometry().bottom() for c in controls)


def test_the_memory_tabs_fit_a_narrow_side_panel(panel: InspectorPanel) -> None:
    """About 310 pixels on a 1280-pixel screen: no tab scrolls sideways there."""
    for tab in (panel.summary_tab, panel.context_tab, panel.recall_tab, panel.errors_tab):
        assert tab.minimumSizeHint().width() <= MIN_TAB_WIDTH, type(tab).__name__
