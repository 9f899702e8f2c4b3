"""What an import will bring in, shown before anything is written; the user picks which.

Also the list of chat histories found on this computer (:class:`FoundHistories`).

The plan (``operations/bulk_import.plan_import``) was read on a worker
thread; this dialog only shows it: the app it came from, each conversation
with its size and dates, whether it was imported before (then only what is
new is added), and what was left out and why.  Open it with ``open()``,
never ``exec()``; ``chosen()`` is the plan reduced to the ticked rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence, Set

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.core.import_formats.discover import FoundHistory
from agenvoy_desktop.core.timeutil import format_iso
from agenvoy_desktop.operations.bulk_import import ImportPlan, PlannedConversation, app_name

_COLUMNS = ("Conversation", "Messages", "Dates", "Status")


class ImportPreview(QDialog):
    """The conversations of a plan, each with a tick box; Import takes the ticked ones."""

    def __init__(self, plan: ImportPlan, existing: Set[str], parent: QWidget | None = None):
        super().__init__(parent)
        self.plan = plan
        self.setWindowTitle("Import chat history")
        self.resize(760, 480)
        layout = QVBoxLayout(self)
        self.summary = QLabel(_summary(plan))
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.table = QTreeWidget()
        self.table.setRootIsDecorated(False)
        self.table.setHeaderLabels(list(_COLUMNS))
        self.table.setUniformRowHeights(True)
        header = self.table.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(_COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        for conv in plan.conversations:
            self.table.addTopLevelItem(_row(conv, conv.session_id in existing))
        self.table.itemChanged.connect(lambda *_: self._update_button())
        layout.addWidget(self.table, 1)
        left_out = _left_out(plan)
        self.left_out = QLabel(left_out)
        self.left_out.setWordWrap(True)
        self.left_out.setVisible(bool(left_out))
        layout.addWidget(self.left_out)
        buttons = QDialogButtonBox()
        self.all_button = QPushButton("Select All")
        self.none_button = QPushButton("Select None")
        self.all_button.clicked.connect(lambda: self._tick_all(True))
        self.none_button.clicked.connect(lambda: self._tick_all(False))
        buttons.addButton(self.all_button, QDialogButtonBox.ButtonRole.ResetRole)
        buttons.addButton(self.none_button, QDialogButtonBox.ButtonRole.ResetRole)
        self.import_button = buttons.addButton("Import", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self._update_button()

    def chosen(self) -> ImportPlan:
        """The plan with only the ticked conversations (what was left out stays reported)."""
        picked = [
            conv
            for index, conv in enumerate(self.plan.conversations)
            if self._item(index).checkState(0) == Qt.CheckState.Checked
        ]
        return ImportPlan(picked, self.plan.skipped, self.plan.failed)

    def _item(self, index: int) -> QTreeWidgetItem:
        item = self.table.topLevelItem(index)
        assert item is not None
        return item

    def _tick_all(self, on: bool) -> None:
        state = Qt.CheckState.Checked if on else Qt.CheckState.Unchecked
        for index in range(self.table.topLevelItemCount()):
            self._item(index).setCheckState(0, state)

    def _update_button(self) -> None:
        plan = self.chosen()
        count = len(plan.conversations)
        self.import_button.setText(
            f"Import {count:,} conversation{'s' if count != 1 else ''} "
            f"({plan.message_count:,} messages)"
        )
        self.import_button.setEnabled(count > 0)


def _row(conv: PlannedConversation, before: bool) -> QTreeWidgetItem:
    first, last = conv.span_ns
    days = format_iso(first)[:10]
    if format_iso(last)[:10] != days:
        days += f" – {format_iso(last)[:10]}"
    status = "imported before" if before else "new"
    item = QTreeWidgetItem([conv.title or "(untitled)", f"{len(conv.messages):,}", days, status])
    if before:
        item.setToolTip(3, "Imported before: only the messages that are not there yet are added")
    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
    item.setCheckState(0, Qt.CheckState.Checked)
    item.setTextAlignment(1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    item.setToolTip(0, f"{conv.title or '(untitled)'}\n{conv.path}")
    return item


def _summary(plan: ImportPlan) -> str:
    """ "ChatGPT: 57 conversations, 4,210 messages, 2023-01-04 – 2024-05-30"."""
    count = len(plan.conversations)
    apps = ", ".join(app_name(a) for a in plan.apps()) or "nothing to import"
    text = f"<b>{apps}</b>: {count:,} conversation{'s' if count != 1 else ''}, "
    text += f"{plan.message_count:,} messages"
    if plan.conversations:
        first = min(c.span_ns[0] for c in plan.conversations)
        last = max(c.span_ns[1] for c in plan.conversations)
        text += f", {format_iso(first)[:10]} – {format_iso(last)[:10]}"
    return (
        text + ". Nothing is written until you press Import; the other app's files are only read."
    )


def _left_out(plan: ImportPlan) -> str:
    """What will not be imported, counted by reason, and the paths that could not be read."""
    reasons = Counter(s.reason for s in plan.skipped)
    reasons.update(s.reason for c in plan.conversations for s in c.skipped)
    parts = []
    if reasons:
        parts.append("Left out: " + "; ".join(f"{n:,} × {r}" for r, n in reasons.items()))
    parts += [f"Could not read {line}" for line in plan.failed]
    return "\n".join(parts)


class FoundHistories(QDialog):
    """Chat histories found on this computer (``core/import_formats/discover``); the one
    chosen is handed to the preview.  Open it with ``open()``."""

    def __init__(self, found: Sequence[FoundHistory], parent: QWidget | None = None):
        super().__init__(parent)
        self.found = list(found)
        self.setWindowTitle("Chat histories on this computer")
        self.resize(640, 320)
        layout = QVBoxLayout(self)
        intro = QLabel(
            "Found these. Pick one to see what it holds before anything is imported; "
            "the other app's files are only read."
            if found
            else "No chat histories of LM Studio or Jan here, and no ChatGPT or Claude export "
            "in Downloads. Export your history from the other app, then use "
            "File → Import Chat History…"
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.list = QTreeWidget()
        self.list.setRootIsDecorated(False)
        self.list.setHeaderLabels(["App", "What", "Changed", "Where"])
        for place in self.found:
            what = f"{place.conversations:,} conversations" if place.conversations else "export"
            day = format_iso(place.modified_ns)[:10] if place.modified_ns else ""
            item = QTreeWidgetItem([app_name(place.app), what, day, str(place.path)])
            item.setToolTip(3, str(place.path))
            self.list.addTopLevelItem(item)
        if (first := self.list.topLevelItem(0)) is not None:
            self.list.setCurrentItem(first)
        header = self.list.header()
        for column in range(3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.list.setVisible(bool(self.found))
        if not self.found:
            self.resize(520, 120)
        self.list.itemDoubleClicked.connect(lambda *_: self.accept())
        layout.addWidget(self.list, 1)
        if not self.found:
            layout.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        if self.found:
            buttons.addButton("Preview Import…", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def chosen(self) -> FoundHistory | None:
        """The selected place (None when nothing was found)."""
        current = self.list.currentItem()
        index = -1 if current is None else self.list.indexOfTopLevelItem(current)
        return self.found[index] if 0 <= index < len(self.found) else None
