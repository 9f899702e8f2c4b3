"""The session's history as events in time order, filterable by kind.

Messages, tool calls, summary passes, compactions, resets, imports and
error-memory activity (a hint injected after a failed call, a record written
by ``remember_error``) come from three places — the archive's messages, its
``events`` table, and the summary's pass log — and are merged by
:mod:`agenvoy_desktop.operations.timeline` on the storage thread; this module
only shows them.  Clicking an event that belongs to a message scrolls the
chat to it.  In a narrow panel the time column gives way to the event's
text (the time is in the row's tooltip then), and in a narrower one the
kind column too: the kind then leads the event's text, so the table never
scrolls sideways (:meth:`TimelinePanel.fold_columns`).  A message deleted
in the chat is left out, with its tool calls, while its undo window is
open, as the chat leaves it out (:meth:`TimelinePanel.follow_deletes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QMenu,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.timeutil import format_local
from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.operations.timeline import KIND_LABELS, KINDS, TimelineEvent, load_timeline
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.flow_layout import FlowLayout, flow_row
from agenvoy_desktop.ui.pending_ops import PendingOps

REFRESH_DELAY_MS = 300
OF_A_MESSAGE = ("message", "tool", "errors")
"""Kinds of event that are a message's own (its text, its tool calls): a delete hides them."""
EVENT_CHARS = 24
"""Average characters the event's text keeps at least; the time, then the kind, give way."""
Index = QModelIndex | QPersistentModelIndex


class TimelineModel(QAbstractTableModel):
    """Events filtered by kind; columns: time, kind, description."""

    HEADERS = ("Time", "Kind", "Event")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._all: list[TimelineEvent] = []
        self._rows: list[TimelineEvent] = []
        self._times: dict[int, str] = {}
        self.kinds: set[str] = set(KINDS)
        self.hidden: set[str] = set()
        """Messages deleted in the chat whose undo window is open: their events are left out."""
        self.kind_in_text = False
        """The kind column is hidden (a narrow panel): the event's text names the kind."""

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        event = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            column = index.column()
            if column == 0:  # formatted on demand: the view asks only for visible rows
                text = self._times.get(event.time_ns)
                if text is None:
                    text = self._times[event.time_ns] = format_local(event.time_ns)
                return text
            if column == 1:
                return KIND_LABELS.get(event.kind, event.kind)
            return with_kind(event) if self.kind_in_text else event.text
        if role == Qt.ItemDataRole.ToolTipRole:
            kind = KIND_LABELS.get(event.kind, event.kind)
            return f"{format_local(event.time_ns)} · {kind}\n{event.text}"
        return None

    def event(self, row: int) -> TimelineEvent:  # type: ignore[override]
        return self._rows[row]

    def events(self) -> list[TimelineEvent]:
        return list(self._rows)

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for event in self._all:
            if not self._deleted(event):
                out[event.kind] = out.get(event.kind, 0) + 1
        return out

    def set_events(self, events: Sequence[TimelineEvent]) -> None:
        self._all = list(events)
        self._times.clear()
        self._refilter()

    def set_kinds(self, kinds: set[str]) -> None:
        self.kinds = set(kinds)
        self._refilter()

    def set_kind_in_text(self, on: bool) -> None:
        """Name the kind in the event's text (the kind column is hidden), or not."""
        if on == self.kind_in_text:
            return
        self.kind_in_text = on
        if self._rows:
            last = self.index(len(self._rows) - 1, 2)
            self.dataChanged.emit(self.index(0, 2), last, [Qt.ItemDataRole.DisplayRole])

    def set_hidden(self, message_ids: set[str]) -> None:
        if message_ids != self.hidden:
            self.hidden = set(message_ids)
            self._refilter()

    def _deleted(self, event: TimelineEvent) -> bool:
        return event.message_id in self.hidden and event.kind in OF_A_MESSAGE

    def _shown(self, event: TimelineEvent) -> bool:
        return event.kind in self.kinds and not self._deleted(event)

    def _refilter(self) -> None:
        self.beginResetModel()
        self._rows = [e for e in self._all if self._shown(e)]
        self.endResetModel()


class TimelinePanel(QWidget):
    """Filter buttons over the event list; a click reveals the message in the chat."""

    message_activated = Signal(str)

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self._sid: str | None = None
        self.model = TimelineModel(self)
        self.view = self._build_view()
        self.empty_label = QLabel("No events yet.")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(self._build_filters())
        layout.addWidget(self.view, 1)
        layout.addWidget(self.empty_label, 1)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_DELAY_MS)
        self._timer.timeout.connect(self.refresh)
        runner.memory_changed.connect(self._on_memory_changed)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The view's viewport resized (the panel, or its vertical scroll bar came or went)."""
        if watched is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self.fold_columns()
        return False

    def changeEvent(self, event: QEvent) -> None:
        """A new font size (Settings › Appearance): rows and columns follow it."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            _fit_to_font(self.view)
            self.fold_columns()

    def fold_columns(self) -> None:
        """Hide the time, then the kind, where the event's text would be left too little room.

        The time and kind columns have fixed widths from the font; beside
        them the event's text kept what was left, or the table scrolled
        sideways when nothing was (13 pt and up in a 900-pixel window).  A
        hidden time is in the row's tooltip; a hidden kind leads the text.
        """
        view = self.view
        room = view.viewport().width()
        event = view.fontMetrics().averageCharWidth() * EVENT_CHARS
        time, kind = _column_widths(view)  # a hidden section's size reads 0
        show_kind = kind + event <= room
        show_time = show_kind and time + kind + event <= room
        view.setColumnHidden(0, not show_time)
        view.setColumnHidden(1, not show_kind)
        self.model.set_kind_in_text(not show_kind)

    def _build_filters(self) -> FlowLayout:
        """A menu of kinds (one checkable entry each, with counts) and a summary line."""
        self.kind_menu = QMenu(self)
        self.filters: dict[str, QAction] = {}
        for kind, label in KINDS.items():
            action = self.kind_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(True)
            action.toggled.connect(self._on_filter)
            self.filters[kind] = action
        self.kind_menu.addSeparator()
        self.kind_menu.addAction("Show all kinds", lambda: self.show_kinds(set(KINDS)))
        self.filter_button = QToolButton()
        self.filter_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.filter_button.setMenu(self.kind_menu)
        self.filter_button.setToolTip("Choose which kinds of events are listed")
        self.summary_label = QLabel()
        # wraps: at a large font the count went under the panel's edge beside the button
        row = flow_row(self.filter_button, self.summary_label)
        row.setContentsMargins(0, 0, 0, 0)
        return row

    def _build_view(self) -> QTableView:
        """A flat table with fixed row height and column widths.

        Fixed sizes from the font rather than ResizeToContents, which
        measured thousands of rows on every reload of a long session.
        """
        view = QTableView()
        view.setModel(self.model)
        view.setShowGrid(False)
        view.setWordWrap(False)
        view.setAlternatingRowColors(True)
        view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        rows = view.verticalHeader()
        rows.hide()
        rows.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        view.horizontalHeader().setStretchLastSection(True)
        _fit_to_font(view)
        view.viewport().installEventFilter(self)
        view.clicked.connect(self._on_clicked)
        view.activated.connect(self._on_clicked)
        return view

    def follow_deletes(self, pending: PendingOps) -> None:
        """Leave out the messages *pending* is deleting, as the chat does, until it is undone."""

        def changed() -> None:
            self.model.set_hidden(pending.deleted_messages())
            self._update_labels()
            self.refresh_soon()  # a recall line may quote the message

        pending.changed.connect(changed)

    def set_session(self, session_id: str | None) -> Operation | None:
        self._sid = session_id
        self.model.set_events([])
        self._update_labels()
        return self.refresh()

    def _on_memory_changed(self, changes: MemoryChanges) -> None:
        if changes.affects(self._sid, "timeline", "messages", "summary"):
            self.refresh_soon()

    def refresh_soon(self) -> None:
        """Coalesce bursts (a streaming turn saves several messages) into one reload."""
        self._timer.start()

    def refresh(self) -> Operation | None:
        sid = self._sid
        if sid is None:
            return None

        def show(events: list[TimelineEvent]) -> None:
            if sid == self._sid:
                self.model.set_events(events)
                self._update_labels()
                self.view.scrollToBottom()

        return self.runner.run(
            self.services.storage.run(
                load_timeline, self.services.store, sid, self.services.withheld()
            ),
            what="load the timeline",
            on_success=show,
        )

    def show_cleared(self) -> None:
        self.model.set_events([])
        self._update_labels()

    def show_kinds(self, kinds: set[str]) -> None:
        """List only events of *kinds* (the filter menu does this too)."""
        for kind, action in self.filters.items():
            action.blockSignals(True)
            action.setChecked(kind in kinds)
            action.blockSignals(False)
        self._on_filter()

    def _on_filter(self) -> None:
        self.model.set_kinds({k for k, a in self.filters.items() if a.isChecked()})
        self._update_labels()

    def _update_labels(self) -> None:
        counts = self.model.counts()
        for kind, action in self.filters.items():
            action.setText(f"{KINDS[kind]} ({counts.get(kind, 0)})")
        shown = [k for k, a in self.filters.items() if a.isChecked()]
        self.filter_button.setText(
            "All kinds" if len(shown) == len(KINDS) else f"{len(shown)} of {len(KINDS)} kinds"
        )
        self.summary_label.setText(f"{self.model.rowCount():,} of {sum(counts.values()):,} events")
        empty = self.model.rowCount() == 0
        self.empty_label.setVisible(empty)
        self.view.setVisible(not empty)
        self.empty_label.setText(
            "No events yet." if not any(counts.values()) else "No events of the chosen kinds."
        )

    def _on_clicked(self, index: QModelIndex) -> None:
        if index.isValid():
            message_id = self.model.event(index.row()).message_id
            if message_id:
                self.message_activated.emit(message_id)


def with_kind(event: TimelineEvent) -> str:
    """The event's text led by its kind, unless the text already says it.

    A message reads "You: …" or "Assistant: …", a summary pass "Summary
    pass …", a compaction "Compaction: …": a kind in front would only repeat.
    """
    label = KIND_LABELS.get(event.kind, event.kind)
    word = label.split()[0].lower()
    if event.kind == "message" or event.text.lower().startswith(word):
        return event.text
    return f"{label} · {event.text}"


def _fit_to_font(view: QTableView) -> None:
    """Row height and the time and kind columns' widths from the view's font."""
    metrics = view.fontMetrics()
    view.verticalHeader().setDefaultSectionSize(metrics.height() + 8)
    header = view.horizontalHeader()
    for column, width in enumerate(_column_widths(view)):
        header.resizeSection(column, width)


def _column_widths(view: QTableView) -> tuple[int, int]:
    """The time and kind columns' widths in the view's font."""
    metrics = view.fontMetrics()
    time = metrics.horizontalAdvance("2088-88-88 88:88") + 24
    kind = max(metrics.horizontalAdvance(k) for k in KIND_LABELS.values()) + 24
    return time, kind
