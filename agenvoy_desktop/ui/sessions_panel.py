"""The sessions sidebar: list, new, rename, search across titles and content.

Rows come a page at a time from ``operations.sessions.session_page`` (on the
storage thread): the first page at once, the next when the list is scrolled
near its end, so thousands of sessions cost one page to open.  A line under
the list says how many sessions there are.  Each row shows the title, the
last activity and the size.  Searching filters the loaded titles at once
and, a moment after typing stops, searches every session by title and by
content through the archive's keyword index (CJK included), so a session is
found by what was said in it, loaded or not.  A change to a session reloads
that row only; other changes reload the rows loaded so far, keeping the
scroll position.  Renaming edits the row in place; the window writes the title.
"""

from __future__ import annotations

from collections.abc import Callable

import shiboken6
from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QFontMetrics, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
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
from agenvoy_desktop.operations.sessions import (
    PAGE_SIZE,
    UNTITLED,
    SessionPage,
    search_sessions,
    session_page,
    session_window,
    sessions_by_id,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.pending_ops import PendingOp, PendingOps
from agenvoy_desktop.ui.session_list_model import SessionListModel, human_size, relative_time
from agenvoy_desktop.ui.session_listing import Listing
from agenvoy_desktop.ui.theme import colors

__all__ = ["UNTITLED", "SessionListModel", "SessionsPanel", "human_size", "relative_time"]

SEARCH_DELAY_MS = 250
Index = QModelIndex | QPersistentModelIndex
LIST_REFRESH_MS = 500
"""Changes to the list within this time (a turn saves several messages) reload it once."""
FETCH_AHEAD_ROWS = 10
"""The next page is asked for when the view is this many rows from the end of the loaded ones."""


def fit_subtitle(metrics: QFontMetrics, text: str, width: int) -> str:
    """*text* ("activity · messages · size") in *width*: whole parts dropped from the end first.

    "13:20 · 6 m…" said less than "13:20 · 6 messages": a narrow list (a
    large font) now loses the size, then the count, and elides only what is
    left.  The tooltip keeps the whole line.
    """
    parts = text.split(" · ")
    while len(parts) > 1 and metrics.horizontalAdvance(" · ".join(parts)) > width:
        parts.pop()
    return metrics.elidedText(" · ".join(parts), Qt.TextElideMode.ElideRight, width)


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
        sub = fit_subtitle(painter.fontMetrics(), sub, rect.width())
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
        self._current: str | None = None
        self._reveal = False
        """Scroll to the current session once its row arrives (it was chosen before)."""
        self._fetching: Operation | None = None
        self._dirty: set[str] = set()
        """Sessions changed since the list last reloaded their rows."""
        self._reload_all = False
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search…")
        self.search.setToolTip("Search session titles and messages (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_text)
        self.new_button = QPushButton("+ New")
        self.new_button.setToolTip("New session (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.list = self._session_view()
        self.count_label = QLabel()
        """How many sessions there are (and how many of them are loaded)."""
        self.count_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.model.shown.connect(self._on_shown)
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.new_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 6)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.count_label)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self._search_content)
        self._search_op: Operation | None = None
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(LIST_REFRESH_MS)
        self._refresh_timer.timeout.connect(self._reload_changed)
        runner.memory_changed.connect(self._on_memory_changed)

    def _session_view(self) -> QListView:
        """The list itself: one row per loaded session, renamed in place."""
        view = QListView()
        view.setModel(self.model)
        delegate = SessionDelegate(view)
        delegate.closeEditor.connect(lambda *_: self.rename_finished.emit())
        view.setItemDelegate(delegate)
        view.setUniformItemSizes(True)
        view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        view.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.DoubleClicked
        )
        view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        view.customContextMenuRequested.connect(self._context_menu)
        view.selectionModel().currentChanged.connect(self._on_current)
        bar = view.verticalScrollBar()
        bar.valueChanged.connect(self._fetch_if_near_end)
        bar.rangeChanged.connect(self._fetch_if_near_end)
        return view

    # -- data ------------------------------------------------------------------------
    def load_first(
        self, wanted: str | None = None, then: Callable[[str | None], None] | None = None
    ) -> Operation:
        """Show the first page; *then* gets the session to open: *wanted* if it exists, else
        the newest (None: there are none)."""
        store = self.services.store

        def read() -> tuple[SessionPage, bool]:
            return session_page(store), wanted is not None and store.exists(wanted)

        def loaded(result: tuple[SessionPage, bool]) -> None:
            page, exists = result
            self.set_page(page)
            if then is not None:
                then(wanted if exists else page.infos[0].session_id if page.infos else None)

        return self.runner.run(
            self.services.storage.run(read), what="list the sessions", on_success=loaded
        )

    def refresh(self) -> Operation:
        """Reload the rows loaded so far (every page scrolled to stays), and a search's."""
        store, model = self.services.store, self.model
        found, through = model.found, model.browse.last_key()
        if found is not None and (last := found.last_key()) is not None:
            self.runner.run(
                self.services.storage.run(
                    session_window, store, last, title=model.query, matches=found.hits
                ),
                what="search the sessions",
                on_success=lambda page: self._reloaded(found, page, last),
            )
        if through is None:
            return self.runner.run(
                self.services.storage.run(session_page, store),
                what="list the sessions",
                on_success=self.set_page,
            )
        browse = model.browse
        return self.runner.run(
            self.services.storage.run(session_window, store, through),
            what="list the sessions",
            on_success=lambda page: self._reloaded(browse, page, through),
        )

    def _reloaded(self, listing: Listing, page: SessionPage, through: tuple[int, str]) -> None:
        listing.reload(page, through)
        self._show_listings()

    def _on_memory_changed(self, changes: MemoryChanges) -> None:
        """A session new to the list shows at once; other changes coalesce (a turn's bursts)."""
        if not changes.sessions:
            return
        if changes.session_id is None:
            self._reload_all = True
        else:
            self._dirty.add(changes.session_id)
        if changes.session_id is not None and self.model.browse.find(changes.session_id) is None:
            self._refresh_timer.stop()
            self._reload_changed()
        else:
            self._refresh_timer.start()

    def _reload_changed(self) -> None:
        """Reload what changed: the named sessions' rows, or every loaded row."""
        dirty, self._dirty = self._dirty, set()
        if self._reload_all:
            self._reload_all = False
            self.refresh()
        elif dirty:
            self.runner.run(
                self.services.storage.run(sessions_by_id, self.services.store, dirty),
                what="list the sessions",
                on_success=lambda page: self._update_rows(page, dirty),
            )

    def _update_rows(self, page: SessionPage, session_ids: set[str]) -> None:
        self.model.browse.update(page, session_ids, add=True)
        if self.model.found is not None:
            self.model.found.update(page, session_ids, add=False)
        self._show_listings()

    def _show_listings(self) -> None:
        self.model.refilter()
        self._reselect(scroll=self._reveal)

    def set_sessions(self, infos: list[SessionInfo]) -> None:
        """Every session at once (nothing more to load)."""
        self.model.set_sessions(infos)
        self._reselect(scroll=True)

    def set_page(self, page: SessionPage) -> None:
        """The first page of every session (what was loaded before goes)."""
        self.model.set_page(page)
        self._reselect(scroll=True)

    # -- the next page ---------------------------------------------------------------------
    def _fetch_if_near_end(self, *_: int) -> None:
        """Ask for the next page when the view shows (nearly) the last loaded row."""
        if not shiboken6.isValid(self.list):  # the scroll bar's last signals, as the list dies
            return
        if not self.list.isVisible():  # a collapsed list has no end to be near (nor a size)
            return
        bar = self.list.verticalScrollBar()
        per_item = self.list.verticalScrollMode() == QAbstractItemView.ScrollMode.ScrollPerItem
        row = 1 if per_item else max(1, self.list.sizeHintForRow(0))
        if bar.maximum() - bar.value() <= FETCH_AHEAD_ROWS * row:
            self.fetch_more()

    def fetch_more(self) -> Operation | None:
        """Load the next page of what the list shows (None: all loaded, or one is coming)."""
        listing = self.model.listing
        busy = self._fetching is not None and not self._fetching.done
        after = listing.last_key() if listing is not None else None
        if listing is None or after is None or not listing.more or busy:
            return None
        query = self.model.query
        self._fetching = self.runner.run(
            self.services.storage.run(
                session_page,
                self.services.store,
                after,
                PAGE_SIZE,
                title=query,
                matches=listing.hits if query else (),
            ),
            what="list the sessions",
            on_success=lambda page: self._add_page(listing, page),
        )
        return self._fetching

    def _add_page(self, listing: Listing, page: SessionPage) -> None:
        # the page is in: a scroll from now on may ask for the next one (the operation is
        # marked done only after this returns; a scroll to the end in between was dropped)
        self._fetching = None
        if listing is not self.model.browse and listing is not self.model.found:
            return  # a search that has ended
        listing.extend(page)
        self.model.refilter()
        self._reselect(scroll=False)  # the person is scrolling: the view is theirs
        if self.list.verticalScrollBar().maximum() == 0:  # the rows do not fill the view yet
            QTimer.singleShot(0, self._fetch_if_near_end)

    def _on_shown(self) -> None:
        self.count_label.setText(self.model.summary())

    def set_hidden(self, hidden: set[str]) -> None:
        self.model.set_hidden(hidden)
        self._reselect(scroll=False)

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
        self._reveal = session_id is not None and self.model.row_of(session_id) is None
        self._reselect(scroll=True)

    def title_of(self, session_id: str) -> str:
        info = self.model.known(session_id)
        return info.title or UNTITLED if info is not None else UNTITLED

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def rename_current(self) -> None:
        row = self.model.row_of(self._current) if self._current else None
        if row is not None:
            self.list.edit(self.model.index(row))

    def _reselect(self, *, scroll: bool) -> None:
        """Select the current session's row; *scroll*: bring it into view too.

        A reload does not scroll: the person may be looking further down.
        """
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
                if scroll:
                    self.list.scrollTo(index)
                    self._reveal = False
        finally:
            selection.blockSignals(False)
        self.list.viewport().update()

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        sid = str(current.data(SessionListModel.SessionIdRole))
        if sid != self._current:
            self._current, self._reveal = sid, False
            self.session_selected.emit(sid)

    # -- search ------------------------------------------------------------------------
    def _on_search_text(self, text: str) -> None:
        self.model.set_query(text)
        self._reselect(scroll=True)
        if text.strip():
            self._search_timer.start()
        else:
            self._search_timer.stop()

    def _search_content(self) -> None:
        """Search every session (loaded or not) by title and content: the first page."""
        text = self.search.text().strip()
        if not text:
            return
        if self._search_op is not None:
            self._search_op.cancel()

        def show(page: SessionPage) -> None:
            self.model.set_found(text, page)
            self._reselect(scroll=True)

        self._search_op = self.runner.run(
            self.services.storage.run(search_sessions, self.services.store, text),
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
