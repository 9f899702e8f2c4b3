"""The sessions sidebar: list, new, rename, search across titles and content.

Rows come from ``operations.sessions.list_sessions`` (on the storage thread) and show the
title, the last activity and the size.  Searching filters by title at once
and, a moment after typing stops, by content through the archive's keyword
index (CJK included), so a session is found by what was said in it.
Renaming edits the row in place; the window writes the title.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QKeySequence, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.store import SessionInfo
from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.operations.sessions import CONTENT_HITS, content_matches, list_sessions
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.pending_ops import PendingOp, PendingOps
from agenvoy_desktop.ui.theme import colors

SEARCH_DELAY_MS = 250
UNTITLED = "New conversation"
SECOND_NS = 1_000_000_000
Index = QModelIndex | QPersistentModelIndex


def relative_time(ns: int, now_ns: int) -> str:
    """ "just now", "5 min ago", "14:02", "yesterday", "3 Mar", "2023-03-03"."""
    if ns <= 0:
        return "never"
    age = (now_ns - ns) / SECOND_NS
    if age < 60:
        return "just now"
    if age < 3600:
        return f"{int(age // 60)} min ago"
    moment, now = datetime.fromtimestamp(ns / 1e9), datetime.fromtimestamp(now_ns / 1e9)
    days = (now.date() - moment.date()).days
    if days == 0:
        return moment.strftime("%H:%M")
    if days == 1:
        return "yesterday"
    return moment.strftime("%d %b") if moment.year == now.year else moment.strftime("%Y-%m-%d")


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


LIST_REFRESH_MS = 500
"""Changes to the list within this time (a turn saves several messages) reload it once."""


class SessionListModel(QAbstractListModel):
    """Sessions in activity order, filtered by the search box."""

    SessionIdRole = Qt.ItemDataRole.UserRole + 1
    SubtitleRole = Qt.ItemDataRole.UserRole + 2
    renamed = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._all: list[SessionInfo] = []
        self._rows: list[SessionInfo] = []
        self._hidden: set[str] = set()
        self._query = ""
        self._content: dict[str, int] = {}
        self._cleared: set[str] = set()
        """Sessions with a reset in its undo window: shown empty until it ends."""
        self._deleting: Counter[str] = Counter()
        """Messages deleted in the view, per session, until their undo window ends."""

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def info(self, row: int) -> SessionInfo:
        return self._rows[row]

    def row_of(self, session_id: str) -> int | None:
        for row, info in enumerate(self._rows):
            if info.session_id == session_id:
                return row
        return None

    def session_ids(self) -> list[str]:
        return [info.session_id for info in self._rows]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        info = self._rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return info.title or UNTITLED
        if role == self.SessionIdRole:
            return info.session_id
        if role == self.SubtitleRole:
            return self._subtitle(info)
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{info.title or UNTITLED}\nsession {info.session_id}\n{self._subtitle(info)}"
        return None

    def _subtitle(self, info: SessionInfo) -> str:
        cleared = info.session_id in self._cleared
        count = 0 if cleared else max(0, info.archived_messages - self._deleting[info.session_id])
        parts = [
            relative_time(info.updated_ns, time.time_ns()),
            f"{count} messages",
            human_size(0 if cleared else info.history_bytes),
        ]
        hits = self._content.get(info.session_id)
        if self._query and hits:  # first: the list is narrow and the rest may be cut
            parts.insert(0, f"{hits}{'+' if hits >= CONTENT_HITS else ''} matches")
        return " · ".join(parts)

    def flags(self, index: Index) -> Qt.ItemFlag:
        base = super().flags(index)
        return base | Qt.ItemFlag.ItemIsEditable if index.isValid() else base

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        title = str(value).strip()
        if role != Qt.ItemDataRole.EditRole or not index.isValid() or not title:
            return False
        info = self._rows[index.row()]
        if title != (info.title or ""):
            self.renamed.emit(info.session_id, title)
        return True

    def set_sessions(self, infos: Sequence[SessionInfo]) -> None:
        self._all = list(infos)
        self._refilter()

    def set_hidden(self, hidden: set[str]) -> None:
        self._hidden = set(hidden)
        self._refilter()

    def follow_pending(self, op: PendingOp, state: str) -> None:
        """Show *op* in its row at once: ``state`` is scheduled, undone, executed or failed.

        A reset shows the row empty while its undo window is open and a
        message delete lowers the count; undoing (or a failure) shows the
        row as it was; once the store has run the operation the row keeps
        the new count until the list reloads from the store.
        """
        sid = op.session_id
        if op.kind == "remove":
            if state == "scheduled":  # a remove subsumes the session's pending reset
                self._cleared.discard(sid)
                self._deleting.pop(sid, None)
            return
        if state == "executed":
            self._patch(sid, op.kind)
        if op.kind == "reset":
            if state == "scheduled":
                self._cleared.add(sid)
            else:
                self._cleared.discard(sid)
        elif op.kind == "delete_message":
            if state == "scheduled":
                self._deleting[sid] += 1
            elif self._deleting[sid] > 0:
                self._deleting[sid] -= 1
        self._rows_changed()

    def _patch(self, session_id: str, kind: str) -> None:
        """The counts the store now has, before the reload says so."""

        def patched(info: SessionInfo) -> SessionInfo:
            if info.session_id != session_id:
                return info
            if kind == "reset":
                return dataclasses.replace(
                    info, archived_messages=0, history_messages=0, history_bytes=0
                )
            return dataclasses.replace(info, archived_messages=max(0, info.archived_messages - 1))

        self._all = [patched(info) for info in self._all]
        self._rows = [patched(info) for info in self._rows]

    def _rows_changed(self) -> None:
        if self._rows:
            self.dataChanged.emit(self.index(0), self.index(len(self._rows) - 1))

    def set_filter(self, query: str, content: dict[str, int]) -> None:
        self._query = query.strip()
        self._content = content
        self._refilter()

    def _refilter(self) -> None:
        needle = self._query.casefold()

        def keep(info: SessionInfo) -> bool:
            if info.session_id in self._hidden:
                return False
            if not needle:
                return True
            title = (info.title or UNTITLED).casefold()
            return needle in title or info.session_id in self._content

        self.beginResetModel()
        self._rows = [info for info in self._all if keep(info)]
        self.endResetModel()


class SessionDelegate(QStyledItemDelegate):
    """Two lines per session: the title, then activity · messages · size."""

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        line = option.fontMetrics.lineSpacing()
        return QSize(120, line * 2 + 14)  # narrow: titles elide, the list never scrolls sideways

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        rect: QRect = opt.rect.adjusted(10, 6, -8, -6)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        palette = opt.palette
        text_role = palette.ColorRole.HighlightedText if selected else palette.ColorRole.Text
        painter.save()
        font = opt.font
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(palette.color(text_role))
        metrics = painter.fontMetrics()
        title = metrics.elidedText(str(index.data()), Qt.TextElideMode.ElideRight, rect.width())
        painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, title)
        font.setBold(False)
        font.setPointSizeF(font.pointSizeF() * 0.9)
        painter.setFont(font)
        muted = palette.color(text_role) if selected else colors(palette).muted
        painter.setPen(muted)
        sub = str(index.data(SessionListModel.SubtitleRole))
        sub = painter.fontMetrics().elidedText(sub, Qt.TextElideMode.ElideRight, rect.width())
        painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, sub)
        painter.restore()


class SessionsPanel(QWidget):
    """The sidebar.  Actions are requests; the window carries them out."""

    session_selected = Signal(str)
    new_requested = Signal()
    rename_requested = Signal(str, str)
    action_requested = Signal(str, str)
    """``(action, session_id)``: reset, remove, export-markdown, export-json, export-remove,
    settings."""
    rename_finished = Signal()
    """The in-place title editor closed (committed or not): the keyboard goes back to the chat."""

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.model = SessionListModel(self)
        self.model.renamed.connect(self.rename_requested)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search…")
        self.search.setToolTip("Search session titles and messages (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_text)
        self.new_button = QPushButton("+ New")
        self.new_button.setToolTip("New session (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.list = QListView()
        self.list.setModel(self.model)
        delegate = SessionDelegate(self.list)
        delegate.closeEditor.connect(lambda *_: self.rename_finished.emit())
        self.list.setItemDelegate(delegate)
        self.list.setUniformItemSizes(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.DoubleClicked
        )
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.list.selectionModel().currentChanged.connect(self._on_current)
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.new_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 6)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)
        self._current: str | None = None
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self._search_content)
        self._search_op: Operation | None = None
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(LIST_REFRESH_MS)
        self._refresh_timer.timeout.connect(self.refresh)
        runner.memory_changed.connect(self._on_memory_changed)

    # -- data ------------------------------------------------------------------------
    def refresh(self) -> Operation:
        """Reload the list from the store."""
        return self.runner.run(
            self.services.storage.run(list_sessions, self.services.store),
            what="list the sessions",
            on_success=self.set_sessions,
        )

    def _on_memory_changed(self, changes: MemoryChanges) -> None:
        """A session new to the list shows at once; other changes coalesce (a turn's bursts)."""
        if not changes.sessions:
            return
        if changes.session_id is not None and self.model.row_of(changes.session_id) is None:
            self._refresh_timer.stop()
            self.refresh()
        else:
            self._refresh_timer.start()

    def set_sessions(self, infos: list[SessionInfo]) -> None:
        self.model.set_sessions(infos)
        self._reselect()

    def set_hidden(self, hidden: set[str]) -> None:
        self.model.set_hidden(hidden)
        self._reselect()

    def follow(self, pending: PendingOps) -> None:
        """Keep the rows in step with resets, removes and deletes and their undo."""

        def on_op(op: PendingOp, state: str) -> None:
            self.model.follow_pending(op, state)
            if op.kind == "remove":
                self.set_hidden(pending.hidden_sessions())

        pending.scheduled.connect(lambda op: on_op(op, "scheduled"))
        pending.undone.connect(lambda op: on_op(op, "undone"))
        pending.executed.connect(lambda op: on_op(op, "executed"))
        pending.failed.connect(lambda op, _message: on_op(op, "failed"))

    def current_session(self) -> str | None:
        return self._current

    def select(self, session_id: str | None) -> None:
        """Mark *session_id* as current (no signal: the window asked for it)."""
        self._current = session_id
        self._reselect()

    def title_of(self, session_id: str) -> str:
        row = self.model.row_of(session_id)
        return self.model.info(row).title or UNTITLED if row is not None else UNTITLED

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def rename_current(self) -> None:
        row = self.model.row_of(self._current) if self._current else None
        if row is not None:
            self.list.edit(self.model.index(row))

    def _reselect(self) -> None:
        row = self.model.row_of(self._current) if self._current else None
        selection = self.list.selectionModel()
        selection.blockSignals(True)
        try:
            if row is None:
                selection.clearSelection()
                selection.setCurrentIndex(QModelIndex(), selection.SelectionFlag.Clear)
            else:
                index = self.model.index(row)
                selection.setCurrentIndex(index, selection.SelectionFlag.ClearAndSelect)
                self.list.scrollTo(index)
        finally:
            selection.blockSignals(False)
        self.list.viewport().update()

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        sid = str(current.data(SessionListModel.SessionIdRole))
        if sid != self._current:
            self._current = sid
            self.session_selected.emit(sid)

    # -- search ------------------------------------------------------------------------
    def _on_search_text(self, text: str) -> None:
        self.model.set_filter(text, {})
        self._reselect()
        if text.strip():
            self._search_timer.start()
        else:
            self._search_timer.stop()

    def _search_content(self) -> None:
        text = self.search.text().strip()
        if not text:
            return
        if self._search_op is not None:
            self._search_op.cancel()
        store = self.services.store

        def show(counts: dict[str, int]) -> None:
            if self.search.text().strip() == text:
                self.model.set_filter(text, counts)
                self._reselect()

        self._search_op = self.runner.run(
            self.services.storage.run(content_matches, store, text),
            what="search the sessions",
            on_success=show,
        )

    # -- menu --------------------------------------------------------------------------
    def _context_menu(self, pos: QPoint) -> None:
        index = self.list.indexAt(pos)
        if not index.isValid():
            return
        self.menu_for(str(index.data(SessionListModel.SessionIdRole))).popup(
            self.list.viewport().mapToGlobal(pos)
        )

    def menu_for(self, session_id: str) -> QMenu:
        """The context menu of one session (also used by tests)."""
        menu = QMenu(self)
        rename = menu.addAction("Rename")
        rename.setShortcut(QKeySequence(Qt.Key.Key_F2))
        rename.triggered.connect(lambda: self._rename(session_id))
        menu.addSeparator()
        entries = (
            ("Session settings…", "settings"),
            (None, ""),
            ("Export as Markdown…", "export-markdown"),
            ("Export as JSON…", "export-json"),
            (None, ""),
            ("Reset (clear messages, keep summary)", "reset"),
            ("Remove", "remove"),
            ("Export first, then remove…", "export-remove"),
        )
        for text, action in entries:
            if text is None:
                menu.addSeparator()
                continue
            item: QAction = menu.addAction(text)
            item.setData(action)
            item.triggered.connect(
                lambda _=False, a=action: self.action_requested.emit(a, session_id)
            )
        return menu

    def _rename(self, session_id: str) -> None:
        row = self.model.row_of(session_id)
        if row is not None:
            self.list.edit(self.model.index(row))
