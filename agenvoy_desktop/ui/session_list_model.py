"""The rows of the sessions list: the pages loaded so far, filtered by the search box.

Rows come a page at a time (:mod:`~agenvoy_desktop.ui.session_listing`), so
a profile with thousands of sessions shows its first rows at once.  Changes
reach the view as row inserts, moves and removals, not as a model reset:
the scroll position, the selection and an open title editor survive a
reload.  Only a new search (or its end) resets the rows.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from datetime import datetime
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import QWidget

from agenvoy_desktop.core.store import SessionInfo
from agenvoy_desktop.operations.sessions import CONTENT_HITS, UNTITLED, SessionPage
from agenvoy_desktop.ui.pending_ops import PendingOp
from agenvoy_desktop.ui.session_listing import Listing

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


def _plural(count: int, word: str) -> str:
    return (
        f"{count:,} {word}"
        if count == 1
        else f"{count:,} {word}{'es' if word.endswith('h') else 's'}"
    )


class SessionListModel(QAbstractListModel):
    """Sessions in activity order, filtered by the search box."""

    SessionIdRole = Qt.ItemDataRole.UserRole + 1
    SubtitleRole = Qt.ItemDataRole.UserRole + 2
    renamed = Signal(str, str)
    shown = Signal()
    """The rows or the totals changed (the panel's count line follows)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.browse = Listing()
        """Every session, as far as the person has scrolled."""
        self.found: Listing | None = None
        """A search's results; None while no answer for the current text has come."""
        self._rows: list[SessionInfo] = []
        self._hidden: set[str] = set()
        self._query = ""
        self._cleared: set[str] = set()
        """Sessions with a reset in its undo window: shown empty until it ends."""
        self._deleting: Counter[str] = Counter()
        """Messages deleted in the view, per session, until their undo window ends."""

    # -- reading -----------------------------------------------------------------------
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

    def known(self, session_id: str) -> SessionInfo | None:
        """The session's row if any listing has it loaded (shown or not)."""
        for listing in (self.browse, self.found):
            info = listing.find(session_id) if listing is not None else None
            if info is not None:
                return info
        return None

    @property
    def query(self) -> str:
        return self._query

    @property
    def listing(self) -> Listing | None:
        """Where the rows come from; None while a search's answer is awaited."""
        return self.found if self._query else self.browse

    def summary(self) -> str:
        """The count line: how many sessions there are and how many are loaded."""
        listing = self.listing
        if listing is None:
            return "Searching…"
        hidden = sum(1 for sid in self._hidden if listing.find(sid) is not None)
        total = max(len(self._rows), listing.total - hidden)
        word = "match" if self._query else "session"
        if listing.more:
            return f"{len(self._rows):,} of {_plural(total, word)}"
        return _plural(total, word) if total or not self._query else "No matches"

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
            _plural(count, "message"),
            human_size(0 if cleared else info.history_bytes),
        ]
        hits = self.found.hits.get(info.session_id) if self._query and self.found else None
        if hits:  # first: the list is narrow and the rest may be cut
            found = f"{hits:,}+ matches" if hits >= CONTENT_HITS else _plural(hits, "match")
            parts.insert(0, found)
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

    # -- what the panel feeds in ----------------------------------------------------------
    def set_sessions(self, infos: list[SessionInfo]) -> None:
        """Every session at once (the whole list, nothing more to load)."""
        self.set_page(SessionPage(list(infos), len(infos), False))

    def set_page(self, page: SessionPage) -> None:
        """The first page of every session: what was loaded before goes."""
        self.browse.replace(page)
        self.refilter()

    def set_hidden(self, hidden: set[str]) -> None:
        self._hidden = set(hidden)
        self.refilter()

    def set_query(self, query: str) -> None:
        """New search text: the loaded rows whose title matches show until the search answers."""
        self._query = query.strip()
        self.found = None
        self.refilter(reset=True)

    def set_found(self, query: str, page: SessionPage) -> None:
        """A search's first page (ignored when the text changed meanwhile)."""
        if query.strip() == self._query and self._query:
            self.found = Listing(page)
            self.refilter(reset=True)

    def follow_pending(self, op: PendingOp, state: str) -> None:
        """Show *op* in its row at once: ``state`` is scheduled, undone, executed or failed.

        A reset shows the row empty while its undo window is open and a
        message delete lowers the count; undoing (or a failure) shows the
        row as it was; once the store has run the operation the row keeps
        the new count (or, for a remove, is gone) until the list reloads.
        """
        sid = op.session_id
        if op.kind == "remove":
            if state == "scheduled":  # a remove subsumes the session's pending reset
                self._cleared.discard(sid)
                self._deleting.pop(sid, None)
            elif state == "executed":
                self._forget(sid)
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

    def _forget(self, session_id: str) -> None:
        self.browse.drop(session_id, counted=True)
        if self.found is not None:
            self.found.drop(session_id, counted=False)
        self.refilter()

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

        for listing in (self.browse, self.found):
            if listing is not None:
                listing.patch(patched)
        self._rows = [patched(info) for info in self._rows]

    def _rows_changed(self) -> None:
        if self._rows:
            self.dataChanged.emit(self.index(0), self.index(len(self._rows) - 1))
        self.shown.emit()

    # -- from the listings to the rows ------------------------------------------------------
    def _visible(self) -> list[SessionInfo]:
        listing = self.listing
        if listing is not None:
            infos = listing.infos
        else:  # typing: the loaded titles that match, until the search (of all) answers
            needle = self._query.casefold()
            infos = [i for i in self.browse.infos if needle in (i.title or UNTITLED).casefold()]
        return [info for info in infos if info.session_id not in self._hidden]

    def refilter(self, *, reset: bool = False) -> None:
        """Bring the rows in line with the listings, the hidden set and the search."""
        rows = self._visible()
        if reset or not self._rows:
            self.beginResetModel()
            self._rows = rows
            self.endResetModel()
        else:
            self._sync(rows)
        self._rows_changed()

    def _sync(self, rows: list[SessionInfo]) -> None:
        """Turn the current rows into *rows* with removals, moves and inserts.

        A view told of each change keeps its scroll position, its selection
        and an open editor; a reset would lose all three.
        """
        keep = {info.session_id for info in rows}
        for row in reversed(range(len(self._rows))):
            if self._rows[row].session_id not in keep:
                self.beginRemoveRows(QModelIndex(), row, row)
                del self._rows[row]
                self.endRemoveRows()
        ids = [info.session_id for info in self._rows]
        if ids == [info.session_id for info in rows[: len(ids)]]:  # a page added at the end
            self._rows[:] = rows[: len(ids)]
            if len(rows) > len(ids):
                self.beginInsertRows(QModelIndex(), len(ids), len(rows) - 1)
                self._rows += rows[len(ids) :]
                self.endInsertRows()
            return
        present = set(ids)
        for target, info in enumerate(rows):
            if target < len(self._rows) and self._rows[target].session_id == info.session_id:
                self._rows[target] = info
            elif info.session_id in present:
                self._move_up(info, target)
            else:
                self.beginInsertRows(QModelIndex(), target, target)
                self._rows.insert(target, info)
                self.endInsertRows()

    def _move_up(self, info: SessionInfo, target: int) -> None:
        source = next(
            n
            for n in range(target + 1, len(self._rows))
            if self._rows[n].session_id == info.session_id
        )
        self.beginMoveRows(QModelIndex(), source, source, QModelIndex(), target)
        del self._rows[source]
        self._rows.insert(target, info)
        self.endMoveRows()
