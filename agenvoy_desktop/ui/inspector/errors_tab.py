"""The Error memory tab: what the assistant learned from failed tool calls.

A sortable, filterable table (tool, symptom, action, outcome, created,
expires, hits) over a plain list of :class:`ErrorRecord` — the Qt model only
adapts it — with a detail pane for the selected record: every field, the
outcome to change, renew (another 90 days) and delete.  Where the columns
do not fit (a narrow side panel, a large font) the table folds into one
column whose rows wrap: tool and outcome, then the symptom, then the
action (:meth:`ErrorsTab.fold_columns`); it never scrolls sideways.
"Add…" writes the user's own note (source ``user``).  Every call goes to
``services.errors`` on the storage thread; nothing here touches SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStyle,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.error_memory import ErrorMemory
from agenvoy_desktop.core.error_types import OUTCOMES, ErrorRecord
from agenvoy_desktop.operations.changes import Changed
from agenvoy_desktop.operations.errors import (
    add_record,
    delete_record,
    list_records,
    renew_record,
    set_outcome,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.flow_layout import flow_row
from agenvoy_desktop.ui.inspector.common import InspectorTab, StatusLine, esc, local_time, plural
from agenvoy_desktop.ui.inspector.wrapping import DetailView
from agenvoy_desktop.ui.theme import colors

COLUMNS = ("Tool", "Symptom", "Action", "Outcome", "Created", "Expires", "Hits")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
RECORD_ROLE = Qt.ItemDataRole.UserRole + 2
CELL_CHARS = 90
OUTCOME_COLOURS = {"resolved": "#2e7d32", "failed": "#c62828", "abandoned": "#8d6e63"}
ALL = "__all__"
EMPTY_NOTE = "Tools that failed before, and what worked instead — kept 90 days. Nothing yet."
"""What the empty table says: what error memory is, in plain words."""
STRETCHED = (1, 2)
"""The Symptom and Action columns: they take the width the others leave."""
FOLDING = ((6, 110), (5, 95), (4, 75))
"""Columns hidden when the table is narrower than so many average characters: Hits, then
Expires, then Created (the detail pane below shows them); the rest stay readable."""
COMPACT_HEADER = "Record"
"""The one column's title when the table is folded (tool · outcome, symptom, → action)."""
Index = QModelIndex | QPersistentModelIndex


def one_line(text: str, width: int = CELL_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def compact_text(record: ErrorRecord) -> str:
    """A record in one cell of a folded table: what the columns say, a part a line."""
    lines = [f"{record.tool} · {record.outcome}", one_line(record.symptom)]
    if record.action.strip():
        lines.append(f"→ {one_line(record.action)}")
    return "\n".join(lines)


class ErrorTableModel(QAbstractTableModel):
    """Adapts a list of records to a table; knows nothing about storage."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.records: list[ErrorRecord] = []
        self.now_ns = 0
        self.compact = False
        """One column: the first cell says the whole record on wrapped lines."""

    def set_compact(self, compact: bool) -> None:
        """Say the whole record in the first column (folded), or only the tool."""
        if compact == self.compact:
            return
        self.compact = compact  # not a reset: the selection stays
        self.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, 0)
        if self.records:
            first, last = self.index(0, 0), self.index(len(self.records) - 1, 0)
            self.dataChanged.emit(first, last)

    def set_records(self, records: Sequence[ErrorRecord], now_ns: int) -> None:
        self.beginResetModel()
        self.records = list(records)
        self.now_ns = now_ns
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.records)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COMPACT_HEADER if self.compact and section == 0 else COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record = self.records[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if self.compact and column == 0:
                return compact_text(record)
            return self.display(record, column)
        if role == SORT_ROLE:
            return self._sort_key(record, column)
        if role == RECORD_ROLE:
            return record
        if role == Qt.ItemDataRole.ToolTipRole and column in (1, 2):
            return record.symptom if column == 1 else record.action or None
        if role == Qt.ItemDataRole.ToolTipRole and self.compact and column == 0:
            return "\n".join(part for part in (record.symptom, record.action) if part)
        if role == Qt.ItemDataRole.TextAlignmentRole and self.compact and column == 0:
            return int(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        if role == Qt.ItemDataRole.ForegroundRole:
            if column == 3:
                return QColor(OUTCOME_COLOURS.get(record.outcome, "#455a64"))
            if column == 5 and record.is_expired(self.now_ns):
                return QColor("#c62828")
        if role == Qt.ItemDataRole.TextAlignmentRole and column == 6:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    @staticmethod
    def display(record: ErrorRecord, column: int) -> str:
        """What column *column* shows of *record* in the full table."""
        values = (
            record.tool,
            one_line(record.symptom),
            one_line(record.action) or "—",
            record.outcome,
            local_time(record.created_ns),
            local_time(record.expires_ns).split(" ")[0],
            str(record.hits),
        )
        return values[column]

    @staticmethod
    def _sort_key(record: ErrorRecord, column: int) -> Any:
        keys: tuple[Any, ...] = (
            record.tool.lower(),
            record.symptom.lower(),
            record.action.lower(),
            record.outcome,
            record.created_ns,
            record.expires_ns,
            record.hits,
        )
        return keys[column]

    def row_of(self, record_id: int) -> int:
        return next((i for i, r in enumerate(self.records) if r.id == record_id), -1)


class ErrorFilter(QSortFilterProxyModel):
    """Tool and outcome filters plus a text match; sorts by each column's raw value."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tool: str | None = None
        self.outcome: str | None = None
        self.text = ""
        self.setSortRole(SORT_ROLE)

    def set_filters(self, tool: str | None, outcome: str | None, text: str) -> None:
        self.beginFilterChange()
        self.tool, self.outcome, self.text = tool, outcome, text.strip().lower()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        if not isinstance(model, ErrorTableModel):
            return True
        record = model.records[source_row]
        if self.tool is not None and record.tool != self.tool:
            return False
        if self.outcome is not None and record.outcome != self.outcome:
            return False
        if self.text:
            haystack = " ".join(
                (record.tool, record.symptom, record.cause, record.action, *record.keywords)
            ).lower()
            return self.text in haystack
        return True


class AddErrorDialog(QDialog):
    """The user's own note: tool, symptom, cause, action, outcome, keywords.

    Opened with ``open()``; OK emits :attr:`submitted` and the tab answers
    with :meth:`show_error` (the dialog stays open) or :meth:`accept`.
    """

    submitted = Signal(dict)

    def __init__(self, tools: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add to the error memory")
        self.setMinimumWidth(520)
        self.tool = QComboBox()
        self.tool.setEditable(True)
        self.tool.addItems(list(tools))
        self.tool.setCurrentText("")
        self.symptom = _text_box("The error message, or what went wrong")
        self.cause = _text_box("Why it happened (optional)")
        self.action = _text_box("What was done about it")
        self.outcome = QComboBox()
        for outcome in OUTCOMES:
            self.outcome.addItem(outcome.capitalize(), outcome)
        self.keywords = QLineEdit()
        self.keywords.setPlaceholderText("comma, separated, words (optional)")
        form = QFormLayout()
        form.addRow("Tool:", self.tool)
        form.addRow("Symptom:", self.symptom)
        form.addRow("Cause:", self.cause)
        form.addRow("Action:", self.action)
        form.addRow("Outcome:", self.outcome)
        form.addRow("Keywords:", self.keywords)
        hint = QLabel(
            "Resolved: the assistant applies this fix when the tool fails alike. "
            "Failed or abandoned: it will not try this again."
        )
        hint.setWordWrap(True)
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._submit)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(hint)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)

    def fields(self) -> dict[str, Any]:
        words = [w.strip() for w in self.keywords.text().split(",") if w.strip()]
        return {
            "tool": self.tool.currentText().strip(),
            "symptom": self.symptom.toPlainText().strip(),
            "cause": self.cause.toPlainText().strip(),
            "action": self.action.toPlainText().strip(),
            "outcome": self.outcome.currentData(),
            "keywords": words,
        }

    def show_error(self, text: str) -> None:
        self.error_label.setStyleSheet(f"color: {colors(self.palette()).error_fg};")
        self.error_label.setText(text)
        self.error_label.show()

    def _submit(self) -> None:
        fields = self.fields()
        if not fields["tool"]:
            self.show_error("Name the tool this note is about.")
        elif not fields["symptom"]:
            self.show_error("Describe the symptom: the error message or what went wrong.")
        else:
            self.submitted.emit(fields)


def _text_box(placeholder: str) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setPlaceholderText(placeholder)
    box.setTabChangesFocus(True)
    box.setFixedHeight(64)
    return box


class ErrorsTab(InspectorTab):
    """See the module docstring."""

    reload_on = ("errors",)
    session_free = True

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(services, runner, parent)
        self.dialog: AddErrorDialog | None = None
        self._select_after: int | None = None
        self.model = ErrorTableModel(self)
        self.proxy = ErrorFilter(self)
        self.proxy.setSourceModel(self.model)
        self._build()
        self._show_detail(None)

    @property
    def errors(self) -> Any:
        """``services.errors`` (None while the error memory is unavailable)."""
        return getattr(self.services, "errors", None)

    # -- construction ----------------------------------------------------------------------
    def _build(self) -> None:
        self.tool_filter = QComboBox()
        self.tool_filter.addItem("All tools", ALL)
        self.outcome_filter = QComboBox()
        self.outcome_filter.addItem("Any outcome", ALL)
        for outcome in OUTCOMES:
            self.outcome_filter.addItem(outcome.capitalize(), outcome)
        self.text_filter = QLineEdit()
        self.text_filter.setPlaceholderText("Filter by words…")
        self.text_filter.setClearButtonEnabled(True)
        self.expired_check = QCheckBox("Show expired")
        self.add_button = QPushButton("Add…")
        self.add_button.setToolTip("Write your own note the assistant will consult")
        self.add_button.clicked.connect(self.open_add_dialog)
        for combo in (self.tool_filter, self.outcome_filter):
            combo.currentIndexChanged.connect(lambda _i: self.apply_filters())
        self.text_filter.textChanged.connect(lambda _t: self.apply_filters())
        self.expired_check.toggled.connect(lambda _c: self.refresh())
        # wraps in a narrow side panel; the word filter takes what is left of its line
        bar = flow_row(
            self.tool_filter,
            self.outcome_filter,
            self.text_filter,
            self.expired_check,
            self.add_button,
        )

        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(4, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        self.table.viewport().installEventFilter(self)
        header = self.table.horizontalHeader()
        for column in range(len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        for column in STRETCHED:
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch)
        self._fit_header()
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())

        self.count_label = QLabel()
        self.status = StatusLine()
        self.empty_note = QLabel(EMPTY_NOTE)
        self.empty_note.setWordWrap(True)
        self.empty_note.hide()
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self._detail_pane())
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.status)
        layout.addWidget(self.empty_note)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.count_label)

    def _fit_header(self) -> None:
        """Stretched columns never narrower than their titles; the table folds instead.

        Without a minimum the fitted columns (dates, outcome) took a narrow
        panel's whole width and squeezed Symptom and Action to a few pixels
        with a cut title.  Measured again when the font size changes.
        """
        header = self.table.horizontalHeader()
        metrics = header.fontMetrics()
        margin = 2 * header.style().pixelMetric(header.style().PixelMetric.PM_HeaderMargin)
        widest = max(metrics.horizontalAdvance(COLUMNS[c]) for c in STRETCHED)
        header.setMinimumSectionSize(widest + margin + metrics.averageCharWidth() * 2)

    def fold_columns(self) -> None:
        """Hide the dates and the hit count in a narrow panel; fold to one column if still needed.

        The tool's name and the outcome are as wide as their texts, and the
        symptom and action need their titles' width: at 13 pt and up the
        side panel was narrower than that sum and the table scrolled
        sideways by whole columns.  Folded, the first column says the whole
        record on wrapped lines and the rows grow to fit.
        """
        table = self.table
        chars = self.width() / max(1, table.fontMetrics().averageCharWidth())
        folded = {column for column, needed in FOLDING if chars < needed}
        compact = self._columns_width(folded) > table.viewport().width()
        was_compact = self.model.compact
        self.model.set_compact(compact)
        for column in range(1, len(COLUMNS)):
            table.setColumnHidden(column, compact or column in folded)
        table.horizontalHeader().setSectionResizeMode(
            0,
            QHeaderView.ResizeMode.Stretch if compact else QHeaderView.ResizeMode.ResizeToContents,
        )
        table.setWordWrap(compact)
        # rows as tall as their wrapped text, after a sort or a filter too (folded)
        rows = table.verticalHeader()
        if compact:
            rows.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        elif was_compact:
            rows.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
            table.resizeRowsToContents()

    def _columns_width(self, folded: set[int]) -> int:
        """The width the table's shown columns need side by side (tool and outcome whole)."""
        table, header = self.table, self.table.horizontalHeader()
        metrics, header_metrics = table.fontMetrics(), header.fontMetrics()
        pad = 2 * header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin) + 2 * (
            metrics.averageCharWidth()
        )
        records = self.model.records
        total = 0
        for column in range(len(COLUMNS)):
            if column in folded:
                continue
            if column in STRETCHED:
                total += header.minimumSectionSize()
                continue
            texts = [ErrorTableModel.display(r, column) for r in records]
            widest = max((metrics.horizontalAdvance(t) for t in texts), default=0)
            total += max(widest, header_metrics.horizontalAdvance(COLUMNS[column])) + pad
        return total

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The table's viewport resized (the tab, or the vertical scroll bar came or went)."""
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self.fold_columns()
        return False

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit_header()
            self.fold_columns()

    def _detail_pane(self) -> QWidget:
        # A long record scrolls (at 900 x 600 the pane is short); long names and paths
        # break anywhere: in a label they set its width and the pane scrolled sideways.
        self.detail = DetailView()
        self.detail.setMinimumHeight(0)
        self.outcome_edit = QComboBox()
        for outcome in OUTCOMES:
            self.outcome_edit.addItem(outcome.capitalize(), outcome)
        self.save_outcome_button = QPushButton("Save outcome")
        self.save_outcome_button.clicked.connect(
            lambda: self.set_outcome(str(self.outcome_edit.currentData()))
        )
        self.renew_button = QPushButton("Renew")
        self.renew_button.setToolTip("Keep this record for another 90 days")
        self.renew_button.clicked.connect(self.renew_selected)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        actions = flow_row(
            QLabel("Outcome:"),
            self.outcome_edit,
            self.save_outcome_button,
            self.renew_button,
            self.delete_button,
        )
        pane = QWidget()
        column = QVBoxLayout(pane)
        column.setContentsMargins(0, 6, 0, 0)
        column.addLayout(actions)
        column.addWidget(self.detail, 1)
        return pane

    # -- public ----------------------------------------------------------------------------
    def set_session(self, session_id: str | None) -> None:
        """Remembered only as the session a user's note comes from."""
        self.session_id = session_id

    def refresh(self) -> None:
        errors = self.errors
        if errors is None:
            self.model.set_records([], self.services.clock())
            self.status.error("The error memory is not available in this profile.")
            self.add_button.setEnabled(False)
            return
        include = self.expired_check.isChecked()
        storage, clock = self.services.storage, self.services.clock

        async def load(_op: Operation) -> tuple[list[ErrorRecord], int]:
            records = await storage.run(list_records, errors, include_expired=include)
            return records, clock()

        self.jobs.start(
            "load", load, self._show_records, self.status.error, what="read the error memory"
        )

    def apply_filters(self) -> None:
        tool = self.tool_filter.currentData()
        outcome = self.outcome_filter.currentData()
        self.proxy.set_filters(
            None if tool == ALL else str(tool),
            None if outcome == ALL else str(outcome),
            self.text_filter.text(),
        )
        self._update_count()

    def selected(self) -> ErrorRecord | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        record = self.proxy.data(rows[0], RECORD_ROLE)
        return record if isinstance(record, ErrorRecord) else None

    def select_record(self, record_id: int) -> bool:
        row = self.model.row_of(record_id)
        if row < 0:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            return False
        self.table.selectRow(index.row())
        self.table.scrollTo(index)
        return True

    def visible_records(self) -> list[ErrorRecord]:
        """The records as the table shows them now (filtered, sorted)."""
        return [
            self.proxy.data(self.proxy.index(r, 0), RECORD_ROLE)
            for r in range(self.proxy.rowCount())
        ]

    # -- showing -----------------------------------------------------------------------------
    def _show_records(self, answer: tuple[list[ErrorRecord], int]) -> None:
        records, now = answer
        keep = (
            self._select_after
            if self._select_after is not None
            else getattr(self.selected(), "id", None)
        )
        self._select_after = None
        self.model.set_records(records, now)
        self.fold_columns()  # the tools' and outcomes' widths changed
        self.empty_note.setVisible(not records)
        self._fill_tool_filter(sorted({r.tool for r in records}))
        self.apply_filters()
        if keep is None or not self.select_record(keep):
            self._show_detail(None)

    def _fill_tool_filter(self, tools: list[str]) -> None:
        current = self.tool_filter.currentData()
        self.tool_filter.blockSignals(True)
        try:
            self.tool_filter.clear()
            self.tool_filter.addItem("All tools", ALL)
            for tool in tools:
                self.tool_filter.addItem(tool, tool)
            index = self.tool_filter.findData(current)
            self.tool_filter.setCurrentIndex(max(index, 0))
        finally:
            self.tool_filter.blockSignals(False)

    def _update_count(self) -> None:
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        text = plural(total, "record")
        self.count_label.setText(text if shown == total else f"{shown:,} of {text} shown")
        self.count_label.setStyleSheet(f"color: {colors(self.palette()).muted};")

    def _selection_changed(self) -> None:
        self._show_detail(self.selected())

    def _show_detail(self, record: ErrorRecord | None) -> None:
        for widget in (
            self.outcome_edit,
            self.save_outcome_button,
            self.renew_button,
            self.delete_button,
        ):
            widget.setEnabled(record is not None)
        if record is None:
            empty = (
                "No records yet."
                if self.model.rowCount() == 0
                else "Select a record to see it in full."
            )
            self.detail.setText(f"<p style='color:{colors(self.palette()).muted};'>{empty}</p>")
            return
        self.outcome_edit.setCurrentIndex(max(0, self.outcome_edit.findData(record.outcome)))
        self.detail.setText(detail_html(record, self.model.now_ns))

    # -- changes ------------------------------------------------------------------------------
    def _change(
        self,
        what: str,
        call: Callable[[ErrorMemory], Changed[Any]],
        done_text: str,
        select: int | None,
    ) -> None:
        errors = self.errors
        if errors is None:
            return
        storage = self.services.storage

        async def work(_op: Operation) -> Changed[Any]:
            return await storage.run(call, errors)

        def done(_record: object) -> None:
            self.status.info(done_text)
            self._select_after = select

        self.jobs.start_change(
            "change", work, done, lambda m: self.status.error(f"Could not {what}: {m}"), what=what
        )

    def set_outcome(self, outcome: str) -> None:
        record = self.selected()
        if record is None or outcome == record.outcome:
            return
        self._change(
            "change the outcome",
            lambda errors: set_outcome(errors, record.id, outcome),
            f"Record #{record.id} is now “{outcome}”.",
            record.id,
        )

    def renew_selected(self) -> None:
        record = self.selected()
        if record is not None:
            self._change(
                "renew the record",
                lambda errors: renew_record(errors, record.id),
                f"Record #{record.id} is kept for another 90 days.",
                record.id,
            )

    def delete_selected(self) -> None:
        record = self.selected()
        if record is not None:
            self._change(
                "delete the record",
                lambda errors: delete_record(errors, record.id),
                f"Deleted record #{record.id} ({record.tool}).",
                None,
            )

    def open_add_dialog(self) -> AddErrorDialog:
        names = sorted(
            {
                *(t.name for t in self.services.tools.available()),
                *(r.tool for r in self.model.records),
            }
        )
        dialog = AddErrorDialog(names, self)
        dialog.submitted.connect(self.add_record)
        dialog.finished.connect(lambda _r: self._dialog_closed(dialog))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _dialog_closed(self, dialog: AddErrorDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    def add_record(self, fields: dict[str, Any]) -> None:
        """Write the user's note; errors go back to the open dialog."""
        errors = self.errors
        dialog = self.dialog
        if errors is None:
            return
        storage, sid = self.services.storage, self.session_id

        async def work(_op: Operation) -> Changed[ErrorRecord]:
            return await storage.run(add_record, errors, fields, sid)

        def done(record: ErrorRecord) -> None:
            if dialog is not None and self.dialog is dialog:
                dialog.accept()
            self.status.info(f"Added record #{record.id} for {record.tool}.")
            self._select_after = record.id

        def failed(message: str) -> None:
            if dialog is not None and self.dialog is dialog:
                dialog.show_error(message)
            else:
                self.status.error(f"Could not add the record: {message}")

        self.jobs.start_change("add", work, done, failed, what="add the record")


def detail_html(record: ErrorRecord, now_ns: int) -> str:
    """Every field of a record, labelled, for the detail pane."""
    expired = " (expired)" if record.is_expired(now_ns) else ""
    keywords = ", ".join(k for k in record.keywords if not k.startswith("error_type:")) or "—"
    rows = [
        ("Record", f"#{record.id} · {esc(record.tool)} · {esc(record.error_type)}"),
        ("Symptom", esc(record.symptom)),
        ("Cause", esc(record.cause) or "—"),
        ("Action", esc(record.action) or "—"),
        ("Keywords", esc(keywords)),
        (
            "Life",
            f"created {local_time(record.created_ns)} · updated {local_time(record.updated_ns)}"
            f" · expires {local_time(record.expires_ns)}{expired}",
        ),
        (
            "Used",
            f"{plural(record.hits, 'hit')}"
            + (f", last {local_time(record.last_hit_ns)}" if record.last_hit_ns else ""),
        ),
        (
            "Learned",
            f"from the {'user' if record.source == 'user' else 'assistant'}"
            + (f" in session {esc(record.session_id)}" if record.session_id else ""),
        ),
    ]
    # One line per field, not a two-column table: in a narrow pane the value column was
    # a sliver; a line wraps under its label.
    return "".join(
        f"<p style='margin: 0 0 3px 0; white-space: pre-wrap;'><b>{label}:</b> {value}</p>"
        for label, value in rows
    )
