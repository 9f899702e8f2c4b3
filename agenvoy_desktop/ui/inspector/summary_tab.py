"""The Summary tab: the rolling summary as a person reads it, and how it got there.

Shows the sections of ``summary.json`` (key decisions — binding — past
discussions with dates, the facts kept word for word with a link to the
message each was said in, the current discussion), what the last pass (or
edit) changed against the summary before it (``summary.previous.json``),
what the last pass let go and why, how far the summary reaches and the last
pass from ``summary.meta.json``, every pass/failure/edit of
``summary.history.jsonl``, and the raw JSON on demand.  "Summarize now" runs
the summarizer with progress.  Each key decision links to the message that
states it ("Show" reveals it in the chat); one without a source (written by
an earlier version) is shown greyed out as not binding.  A key decision can
be added, edited or deleted; the change is saved like a pass
(``save_user_edit``: validated, written atomically, logged as an ``edit``
record) and can be undone once, and the user becomes its source.

Any pass of the shown session shows its progress and a Stop button, whoever
started it ("Summarize now", a turn, the idle timer): the summarizer tells
the tab when a run starts folding and ends (``on_run``) and how far it is
(``on_progress``); Stop is ``Summarizer.stop``.
"""

from __future__ import annotations

from datetime import date
from typing import Any, cast

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.summarizer import PassProgress
from agenvoy_desktop.core.summary import (
    KeyDecision,
    PassRecord,
    Summary,
    facts_by_topic,
)
from agenvoy_desktop.core.summary_facts import Fact
from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.operations.summary import (
    SummaryDiff,
    SummarySnapshot,
    plus_decision,
    read_snapshot,
    save_edit,
    with_decision,
    without_decision,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.flow_layout import FlowLayout, flow_row
from agenvoy_desktop.ui.inspector.common import (
    InspectorTab,
    StatusLine,
    esc,
    heading,
    local_time,
    plural,
)
from agenvoy_desktop.ui.theme import colors

HISTORY_COLUMNS = ("When", "Details")
"""The pass history's columns: two short ones, and the details as text that wraps.

A column per detail (messages, cursor, model, duration, tokens, note) made a
table about 1,000 pixels wide in a side panel of 250 to 400: it scrolled
sideways and the note was never in sight.
"""
KIND_LABELS = {"pass": "Pass", "edit": "Your edit", "failed": "Failed", "stopped": "Stopped"}
REMOVED = "\N{MINUS SIGN}"
"""The sign of what a pass took out of the summary (a hyphen reads as a dash)."""


# -- reading (storage thread) -----------------------------------------------------------


# -- edits (pure) ------------------------------------------------------------------------


def source_text(decision: KeyDecision) -> tuple[str, str]:
    """(cell text, tooltip) of a decision's Source column when it has no message to show."""
    if decision.by_user:
        return "you", "You added or changed this decision in the Summary tab."
    return "—", "Not traced to a message (from an older summary): not binding."


def cursor_text(cursor: dict[str, Any] | None) -> str:
    """A cursor as the archive position of its message (#seq), or "start"."""
    if not cursor or int(cursor.get("seq", -1)) < 0:
        return "start"
    return f"#{cursor.get('seq')}"


def range_text(record: PassRecord) -> str:
    """The chunk a pass folded: "#6–#9 (4)"."""
    if not record.chunk_first or not record.chunk_last:
        return str(record.messages) if record.messages else "—"
    first, last = record.chunk_first.get("seq"), record.chunk_last.get("seq")
    return f"#{first}–#{last} ({record.messages})"


def range_tooltip(record: PassRecord) -> str:
    if not record.chunk_first or not record.chunk_last:
        return ""
    start = local_time(record.chunk_first.get("time_ns"), seconds=True)
    end = local_time(record.chunk_last.get("time_ns"), seconds=True)
    return f"Messages written {start} → {end}"


class SummaryTab(InspectorTab):
    """See the module docstring."""

    detach_on_switch = ("summarize",)
    no_session_text = "Choose a session to see its summary."
    reload_on = ("summary", "messages")

    message_activated = Signal(str)
    _progress = Signal(int, int)

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(services, runner, parent)
        self.snapshot: SummarySnapshot | None = None
        self._undo: Summary | None = None
        self._syncing = False
        self._adding_row = -1
        self._build()
        self._progress.connect(self._show_progress)
        self._follow_progress()
        self._show_empty(self.placeholder)

    # -- construction --------------------------------------------------------------------
    def _build(self) -> None:
        self.info_label = QLabel()
        self.info_label.setWordWrap(True)
        self.info_label.setTextFormat(Qt.TextFormat.RichText)
        self.summarize_button = QPushButton("Summarize now")
        self.summarize_button.clicked.connect(self.summarize_now)
        self.cancel_button = QPushButton("Stop")
        self.cancel_button.clicked.connect(self.cancel_summary)
        self.cancel_button.hide()
        self.raw_button = QPushButton("Show raw JSON")
        self.raw_button.setCheckable(True)
        self.raw_button.toggled.connect(self._toggle_raw)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.hide()
        # The buttons get a row of their own, first in it: beside the cursor line they were
        # pushed past the right edge of a narrow side panel (a 1280-pixel screen).
        # They wrap: side by side they were wider than the panel at 13 pt and up.
        actions = flow_row(self.summarize_button, self.cancel_button, self.raw_button)
        top = QVBoxLayout()
        top.addWidget(self.info_label)
        top.addLayout(actions)

        self.status = StatusLine()
        self.undo_button = QPushButton("Undo")
        self.undo_button.clicked.connect(self.undo_edit)
        self.undo_button.hide()
        status_row = QHBoxLayout()
        status_row.addWidget(self.status, 1)
        status_row.addWidget(self.undo_button)

        self.stack = QStackedWidget()
        self.stack.addWidget(self._readable_view())
        self.raw_view = QPlainTextEdit()
        self.raw_view.setReadOnly(True)
        self.raw_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.stack.addWidget(self.raw_view)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.stack)
        splitter.addWidget(self._history_view())
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([520, 170])
        splitter.setChildrenCollapsible(False)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.progress)
        layout.addLayout(status_row)
        layout.addWidget(splitter, 1)

    def _readable_view(self) -> QWidget:
        self.empty_label = QLabel()
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setStyleSheet(f"color: {colors(self.palette()).muted}; padding: 16px;")
        buttons = self._decision_controls()
        self.discussions = QTableWidget(0, 2)
        self.discussions.setHorizontalHeaderLabels(["Topic", "What was said"])
        header_item = self.discussions.horizontalHeaderItem(0)
        if header_item is not None:
            header_item.setToolTip("The topic, and the day it was last discussed")
        self.discussions.verticalHeader().hide()
        self._discussion_columns = _ShareColumns(
            self.discussions, 1, text_share=1 - FIRST_COLUMN_SHARE
        )
        self.discussions.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.discussions.setWordWrap(True)

        self.current_label = QLabel()
        self.current_label.setWordWrap(True)
        self.current_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.current_label.setStyleSheet(
            f"padding: 8px; border-radius: 6px; background: {colors(self.palette()).chip};"
        )

        self.sections = QWidget()
        column = QVBoxLayout(self.sections)
        column.setContentsMargins(0, 0, 4, 0)
        column.addLayout(buttons)
        column.addWidget(self.decisions)
        column.addSpacing(6)
        column.addWidget(heading("Past discussions"))
        column.addWidget(self.discussions)
        column.addSpacing(6)
        column.addWidget(self._facts_heading())
        column.addWidget(self._facts_table())
        column.addSpacing(6)
        column.addWidget(self._changed_heading())
        column.addWidget(self.unchanged_label)
        column.addWidget(self._changed_table())
        column.addSpacing(6)
        column.addWidget(self._let_go_heading())
        column.addWidget(self._let_go_table())
        column.addSpacing(6)
        column.addWidget(heading("Current discussion"))
        column.addWidget(self.current_label)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(self.sections)

        page = QWidget()
        outer = QVBoxLayout(page)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.empty_label)
        outer.addWidget(scroll, 1)
        self._scroll = scroll
        return page

    def _facts_heading(self) -> QWidget:
        label = heading("Facts kept word for word")
        label.setToolTip(
            "Sentences of the folded messages that name someone, a place, a number, a date, "
            "a choice or a preference, kept as they were said. The assistant reads them with "
            "the summary. A fact that a later message changed shows what it replaced."
        )
        return label

    def _facts_table(self) -> QTableWidget:
        self.facts = QTableWidget(0, 3)
        self.facts.setHorizontalHeaderLabels(["Said", "Fact", "Message"])
        # when even the headers do not fit (a narrow panel, large text) the day goes first;
        # the fact's tooltip still says it
        self._fact_columns = _ShareColumns(self.facts, 1, optional=(0,))
        self.facts.verticalHeader().hide()
        self.facts.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        return self.facts

    def _changed_heading(self) -> QWidget:
        self.changed_heading = heading("Changed in the last pass")
        self.changed_heading.setWordWrap(True)
        self.changed_heading.setToolTip(
            "How the summary differs from the one before the last pass or your last edit: "
            "+ added, \N{MINUS SIGN} removed, ~ changed (with what it was)."
        )
        self.unchanged_label = QLabel()
        self.unchanged_label.setWordWrap(True)
        self.unchanged_label.setStyleSheet(f"color: {colors(self.palette()).muted};")
        return self.changed_heading

    def _changed_table(self) -> QTableWidget:
        self.changed = QTableWidget(0, 2)
        self.changed.setHorizontalHeaderLabels(["Change", "What"])
        self.changed.verticalHeader().hide()
        self._changed_columns = _ShareColumns(self.changed, 1)
        self.changed.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.changed.setToolTip("Double-click a decision or fact to show its message in the chat.")
        self.changed.cellDoubleClicked.connect(self._changed_activated)
        return self.changed

    def _let_go_heading(self) -> QWidget:
        label = heading("Let go in the last pass")
        label.setToolTip(
            "Sentences with a name, number or date that the last pass did not keep, and why. "
            "They are still in the archive: search finds them."
        )
        return label

    def _let_go_table(self) -> QTableWidget:
        self.let_go = QTableWidget(0, 2)
        self.let_go.setHorizontalHeaderLabels(["Sentence", "Why"])
        self.let_go.verticalHeader().hide()
        self._let_go_columns = _ShareColumns(self.let_go, 0)
        self.let_go.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.let_go.setToolTip("Double-click a row to show its message in the chat.")
        self.let_go.cellDoubleClicked.connect(self._let_go_activated)
        return self.let_go

    def _decision_controls(self) -> FlowLayout:
        self.decisions = QTableWidget(0, 3)
        self.decisions.setHorizontalHeaderLabels(["Decision", "Decided", "Source"])
        self.decisions.verticalHeader().hide()
        self._decision_columns = _ShareColumns(self.decisions, 0, optional=(1,))
        self.decisions.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.decisions.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.decisions.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.decisions.itemChanged.connect(self._decision_edited)
        self.decisions.itemDelegate().closeEditor.connect(self._editor_closed)
        self.decisions.itemSelectionChanged.connect(self._update_buttons)
        self.add_button = QPushButton("Add…")
        self.add_button.setToolTip("Add a decision the assistant must follow")
        self.add_button.clicked.connect(self._start_add)
        self.edit_button = QPushButton("Edit")
        self.edit_button.clicked.connect(self._start_edit)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self._delete_selected)
        # the heading grows; the buttons wrap under it when the panel is narrow
        heading_label = self._decisions_heading()
        heading_label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        return flow_row(heading_label, self.add_button, self.edit_button, self.delete_button)

    def _decisions_heading(self) -> QWidget:
        label = heading("Key decisions")
        label.setText("Key decisions <span style='font-weight:normal'>— binding</span>")
        label.setToolTip("The assistant follows these unless you change them.")
        return label

    def _history_view(self) -> QWidget:
        self.history = QTableWidget(0, len(HISTORY_COLUMNS))
        self.history.setHorizontalHeaderLabels(list(HISTORY_COLUMNS))
        self.history.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.history.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.history.verticalHeader().hide()
        self.history.setAlternatingRowColors(True)
        self._history_columns = _ShareColumns(self.history, 1, fit_height=False)
        # A model's name longer than the column breaks at its hyphens instead of "qwen…"
        # in the middle of the wrapped details (the other tables' cells have the whole
        # text in their tooltips).
        self.history.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.history.setToolTip("Double-click a pass to show its first message in the chat.")
        self.history.cellDoubleClicked.connect(self._history_activated)
        box = QWidget()
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 4, 0, 0)
        column.addWidget(heading("Pass history"))
        self.history_empty = QLabel(
            "No passes yet. Each pass that folds messages into the summary is listed here, "
            "newest first."
        )
        self.history_empty.setWordWrap(True)
        column.addWidget(self.history_empty)
        column.addWidget(self.history, 1)
        return box

    def _follow_progress(self) -> None:
        """Show any pass of this session as it works, also the ones run after a turn."""
        summarizer = self.summarizer
        if summarizer is None or not hasattr(summarizer, "on_progress"):
            return
        stops = [summarizer.on_progress(self._pass_progressed)]
        if hasattr(summarizer, "on_run"):
            stops.append(summarizer.on_run(self._run_changed))
        self.destroyed.connect(lambda *_: [stop() for stop in stops])

    def _pass_progressed(self, session_id: str, progress: PassProgress) -> None:
        if session_id != self.session_id:
            return
        self.progress.setRange(0, 100)
        self.progress.setValue(round(progress.fraction * 100))
        self.progress.setFormat(progress.text)
        self.progress.show()
        self.cancel_button.show()

    def _run_changed(self, session_id: str, _folding: bool) -> None:
        """A run of some session started folding or ended: show the shown session's state."""
        if session_id == self.session_id:
            self._show_pass_state()

    def _pass_running(self) -> bool:
        """This tab's own pass (maybe still queued) or any run folding the shown session."""
        if self.jobs.busy("summarize"):
            return True
        summarizer, sid = self.summarizer, self.session_id
        is_folding = getattr(summarizer, "is_folding", None)
        return sid is not None and is_folding is not None and bool(is_folding(sid))

    def _show_pass_state(self) -> None:
        """Progress and Stop while a pass runs for the shown session, hidden otherwise.

        A pass that just showed up (or a session switched to mid-pass) shows
        a busy bar until its next progress report gives the share done.
        """
        if not self._pass_running():
            self.progress.hide()
            self.cancel_button.hide()
        elif self.progress.isHidden():
            self.progress.setRange(0, 0)
            self.progress.setFormat("Summarizing…")
            self.progress.show()
            self.cancel_button.show()
        self._update_buttons()

    # -- services ------------------------------------------------------------------------
    @property
    def summarizer(self) -> Any:
        """``services.summarizer`` (None without a chat model)."""
        return getattr(self.services, "summarizer", None)

    def wants_reload(self, changes: MemoryChanges) -> bool:
        """A pass this tab started reloads at its end, not at every chunk."""
        return super().wants_reload(changes) and not self.jobs.busy("summarize")

    # -- public --------------------------------------------------------------------------
    def _session_changed(self) -> None:
        self.snapshot = None
        self._undo = None
        self.undo_button.hide()
        self.status.clear_message()
        self.progress.hide()  # the old session's pass; the new one's state follows
        self._show_pass_state()
        self._show_empty(self.placeholder)

    def refresh(self) -> None:
        sid = self.session_id
        if sid is None:
            return
        store = self.services.store
        summarizer = self.summarizer
        pending = getattr(summarizer, "pending_count_sync", None)

        async def load(_op: Operation) -> SummarySnapshot:
            return await self.services.storage.run(read_snapshot, store, sid, pending)

        self.jobs.start(
            "load", load, self._show_snapshot, self.status.error, what="read the summary"
        )

    # -- showing -------------------------------------------------------------------------
    def _show_empty(self, text: str) -> None:
        self.empty_label.setText(text)
        self.empty_label.show()
        self._scroll.hide()
        self.info_label.setText("")
        self.raw_view.setPlainText("")
        self.history.setRowCount(0)
        self.history_empty.show()
        self._update_buttons()

    def _show_snapshot(self, snapshot: SummarySnapshot) -> None:
        self.snapshot = snapshot
        self._show_pass_state()  # a pass run after a turn may have ended
        self.info_label.setText(self._info_html(snapshot))
        for problem in snapshot.problems:
            self.status.error(problem)
        self.raw_view.setPlainText(snapshot.raw or "(no summary.json yet)")
        summary = snapshot.summary
        if summary is None or summary.is_empty:
            self._show_empty(
                "No summary yet. Messages older than the context window are folded into the "
                "summary after a turn, when the session is idle, or when you press "
                "“Summarize now”."
            )
            self.info_label.setText(self._info_html(snapshot))
            self.raw_view.setPlainText(snapshot.raw or "(no summary.json yet)")
        else:
            self.empty_label.hide()
            self._scroll.show()
        self._fill_decisions(summary or Summary())
        self._fill_discussions(summary or Summary())
        self._fill_facts(summary or Summary())
        self._fill_changed(snapshot)
        self._fill_let_go(snapshot.records)
        current = (summary.current_discussion.strip() if summary else "") or "—"
        self.current_label.setText(current)
        self._fill_history(snapshot.records)
        self._update_buttons()

    def _info_html(self, snapshot: SummarySnapshot) -> str:
        meta = snapshot.meta
        parts: list[str] = []
        if meta is None or meta.cursor_seq < 0:
            parts.append("<b>Summarized up to:</b> nothing yet")
        else:
            parts.append(
                f"<b>Summarized up to:</b> {esc(local_time(meta.cursor_time_ns, seconds=True))} "
                f"({plural(meta.summarized_messages, 'message')} folded in)"
            )
        last = next((r for r in reversed(snapshot.records) if r.kind == "pass"), None)
        if last is not None:
            parts.append(
                f"<b>Last pass:</b> {esc(local_time(last.time_ns))} · {esc(last.model or '?')} · "
                f"{last.duration_s:.1f} s"
            )
        if snapshot.pending:
            parts.append(f"<b>Waiting:</b> {plural(snapshot.pending, 'older message')}")
        return " &nbsp;·&nbsp; ".join(parts)

    def _fill_decisions(self, summary: Summary) -> None:
        self._syncing = True
        try:
            self.decisions.setRowCount(len(summary.key_decisions))
            for row, decision in enumerate(summary.key_decisions):
                text = QTableWidgetItem(decision.decision)
                # the date too: a narrow table hides its column
                decided = f"\n\nDecided {decision.decided_at}" if decision.decided_at else ""
                text.setToolTip(decision.decision + decided)
                if not decision.binding:
                    text.setForeground(QColor(colors(self.palette()).muted))
                    text.setToolTip(f"{decision.decision}{decided}\n\n{source_text(decision)[1]}")
                when = QTableWidgetItem(decision.decided_at or "—")
                when.setFlags(when.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.decisions.setItem(row, 0, text)
                self.decisions.setItem(row, 1, when)
                self._fill_source(row, decision)
            self._decision_columns.apply()
        finally:
            self._syncing = False

    def _fill_source(self, row: int, decision: KeyDecision) -> None:
        """A "Show" button that reveals the source message, or why there is none."""
        self.decisions.removeCellWidget(row, 2)
        cell = QTableWidgetItem()
        cell.setFlags(cell.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.decisions.setItem(row, 2, cell)
        source = decision.source
        if source is None:
            cell.setText(source_text(decision)[0])
            cell.setToolTip(source_text(decision)[1])
            return
        button = QPushButton("Show")
        button.setFlat(True)
        button.setToolTip("Show the message that states this decision in the chat")
        button.clicked.connect(lambda: self.message_activated.emit(source))
        self.decisions.setCellWidget(row, 2, button)

    def source_button(self, row: int) -> QPushButton | None:
        """The Show button of decision *row* (None when it has no source message)."""
        widget = self.decisions.cellWidget(row, 2)
        return widget if isinstance(widget, QPushButton) else None

    def _fill_discussions(self, summary: Summary) -> None:
        self.discussions.setRowCount(len(summary.past_discussions))
        for row, item in enumerate(summary.past_discussions):
            # The date under the topic: a column of its own left "What was said" a third
            # of a side panel's width.
            topic = f"{item.topic}\n{item.last_discussed}"
            for col, value in enumerate((topic, item.description)):
                cell = QTableWidgetItem(value)
                cell.setToolTip(value)
                self.discussions.setItem(row, col, cell)
        self._discussion_columns.apply()

    def _fill_facts(self, summary: Summary) -> None:
        """The facts under their topics: a spanning row names the topic, its facts follow."""
        self.facts.clearSpans()
        groups = facts_by_topic(summary)
        self.facts.setRowCount(sum(1 + len(facts) for _, facts in groups))
        row = 0
        for topic, facts in groups:
            self.facts.removeCellWidget(row, 2)
            title = QTableWidgetItem(topic)
            font = title.font()
            font.setBold(True)
            title.setFont(font)
            self.facts.setItem(row, 0, title)
            self.facts.setItem(row, 1, QTableWidgetItem())
            self.facts.setSpan(row, 0, 1, 3)
            row += 1
            for fact in facts:
                self._fill_fact(row, fact)
                row += 1
        self._fact_columns.apply()

    def _fill_fact(self, row: int, fact: Fact) -> None:
        text = fact.text if fact.replaced is None else f"{fact.text}\n(was: {fact.replaced})"
        cell = QTableWidgetItem(text)
        cell.setToolTip(f"{fact_said(fact)}: {text}")
        self.facts.setItem(row, 0, QTableWidgetItem(fact_said(fact)))
        self.facts.setItem(row, 1, cell)
        button = QPushButton("Show")
        button.setFlat(True)
        button.setToolTip("Show the message this fact was said in")
        button.clicked.connect(lambda _=False, sid=fact.source: self.message_activated.emit(sid))
        self.facts.setCellWidget(row, 2, button)

    def fact_rows(self) -> list[tuple[str, str, QPushButton | None]]:
        """(topic, fact as shown, its Show button) of each fact row, in order."""
        rows: list[tuple[str, str, QPushButton | None]] = []
        topic = ""
        for row in range(self.facts.rowCount()):
            first = self.facts.item(row, 0)
            if self.facts.columnSpan(row, 0) == 3:
                topic = first.text() if first is not None else ""
                continue
            text = self.facts.item(row, 1)
            button = self.facts.cellWidget(row, 2)
            shown = text.text() if text is not None else ""
            rows.append((topic, shown, button if isinstance(button, QPushButton) else None))
        return rows

    def _fill_changed(self, snapshot: SummarySnapshot) -> None:
        """The last change as rows; one line when it changed nothing; hidden with nothing before."""
        diff = snapshot.diff
        rows = diff_rows(diff) if diff is not None else []
        title = changed_heading(snapshot.records)
        self.changed_heading.setText(title)
        self.changed_heading.setVisible(diff is not None)
        self.unchanged_label.setText(f"Nothing {title[0].lower()}{title[1:]}.")
        self.unchanged_label.setVisible(diff is not None and not rows)
        self.changed.setVisible(bool(rows))
        self.changed.setRowCount(len(rows))
        for row, (change, text, source) in enumerate(rows):
            what = QTableWidgetItem(text)
            what.setToolTip(text)
            what.setData(Qt.ItemDataRole.UserRole, source)
            self.changed.setItem(row, 0, QTableWidgetItem(change))
            self.changed.setItem(row, 1, what)
        self._changed_columns.apply()

    def changed_rows(self) -> list[tuple[str, str]]:
        """(change, what) of each row of the "Changed" section, in order."""
        rows: list[tuple[str, str]] = []
        for row in range(self.changed.rowCount()):
            change, what = self.changed.item(row, 0), self.changed.item(row, 1)
            rows.append((change.text() if change else "", what.text() if what else ""))
        return rows

    def _changed_activated(self, row: int, _col: int) -> None:
        item = self.changed.item(row, 1)
        source = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if isinstance(source, str) and source:
            self.message_activated.emit(source)

    def _fill_let_go(self, records: list[PassRecord]) -> None:
        rows = let_go_rows(records)
        self.let_go.setRowCount(len(rows))
        for row, (text, why, source) in enumerate(rows):
            cell = QTableWidgetItem(text)
            cell.setToolTip(text)
            cell.setData(Qt.ItemDataRole.UserRole, source)
            self.let_go.setItem(row, 0, cell)
            self.let_go.setItem(row, 1, QTableWidgetItem(why))
        self._let_go_columns.apply()

    def _let_go_activated(self, row: int, _col: int) -> None:
        item = self.let_go.item(row, 0)
        source = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if isinstance(source, str) and source:
            self.message_activated.emit(source)

    def _fill_history(self, records: list[PassRecord]) -> None:
        newest = list(reversed(records))
        self.history.setRowCount(len(newest))
        self.history_empty.setVisible(not newest)
        for row, record in enumerate(newest):
            for col, (value, tip) in enumerate(_history_cells(record)):
                cell = QTableWidgetItem(value)
                # rows are as tall as their wrapped details: the kind and time stay at the top
                cell.setTextAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
                if tip:
                    cell.setToolTip(tip)
                if col == 0:
                    cell.setData(Qt.ItemDataRole.UserRole, record)
                if record.kind == "failed":
                    cell.setForeground(QColor(colors(self.palette()).error_fg))
                self.history.setItem(row, col, cell)
        self._history_columns.apply()

    def _update_buttons(self) -> None:
        has_session = self.session_id is not None and self.snapshot is not None
        selected = bool(self.decisions.selectedItems())
        # any pass of this session, not only the tab's own: a pass saves the summary it
        # read when it started, so an edit made meanwhile would be overwritten
        running = self._pass_running()
        self.add_button.setEnabled(has_session and not running)
        self.edit_button.setEnabled(has_session and selected and not running)
        self.delete_button.setEnabled(has_session and selected and not running)
        can_summarize = self.summarizer is not None and self.session_id is not None
        self.summarize_button.setEnabled(can_summarize and not running)
        self.summarize_button.setToolTip(
            "Fold every message older than the context window into the summary now"
            if self.summarizer is not None
            else "Summaries need a chat model (Settings → Models)."
        )

    def _toggle_raw(self, raw: bool) -> None:
        self.stack.setCurrentIndex(1 if raw else 0)
        self.raw_button.setText("Show sections" if raw else "Show raw JSON")

    def _history_activated(self, row: int, _col: int) -> None:
        cell = self.history.item(row, 0)
        record = cell.data(Qt.ItemDataRole.UserRole) if cell else None
        if isinstance(record, PassRecord) and record.chunk_first:
            message_id = record.chunk_first.get("message_id")
            if message_id:
                self.message_activated.emit(str(message_id))

    # -- key decision edits ------------------------------------------------------------
    def current_summary(self) -> Summary:
        snap = self.snapshot
        return snap.summary if snap is not None and snap.summary is not None else Summary()

    def edit_decision(self, index: int, text: str) -> None:
        summary = self.current_summary()
        if summary.key_decisions[index].decision == text.strip():
            return
        self._save(with_decision(summary, index, text), "Key decision changed.")

    def delete_decision(self, index: int) -> None:
        summary = self.current_summary()
        gone = summary.key_decisions[index].decision
        self._save(without_decision(summary, index), f"Deleted key decision “{gone}”.")

    def add_decision(self, text: str) -> None:
        self._save(plus_decision(self.current_summary(), text), "Key decision added.")

    def undo_edit(self) -> None:
        if self._undo is not None:
            previous, self._undo = self._undo, None
            self._save(previous, "Your last change was undone.", undoable=False)

    def _decision_edited(self, item: QTableWidgetItem) -> None:
        if self._syncing or item.column() != 0:
            return
        row = item.row()
        if self._adding_row == row:
            self._adding_row = -1
            if item.text().strip():
                self.add_decision(item.text())
            else:
                self.refresh()
            return
        if row < len(self.current_summary().key_decisions):
            self.edit_decision(row, item.text())

    def _editor_closed(self) -> None:
        """Esc on a new, empty row: drop the row instead of leaving a blank decision."""
        row = self._adding_row
        item = self.decisions.item(row, 0) if row >= 0 else None
        if item is not None and not item.text().strip():
            self._adding_row = -1
            self._fill_decisions(self.current_summary())

    def _start_add(self) -> None:
        self._syncing = True
        row = self.decisions.rowCount()
        self.decisions.insertRow(row)
        self.decisions.setItem(row, 0, QTableWidgetItem(""))
        when = QTableWidgetItem(date.today().isoformat())
        when.setFlags(when.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.decisions.setItem(row, 1, when)
        source = QTableWidgetItem(source_text(KeyDecision("", by_user=True))[0])
        source.setFlags(source.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.decisions.setItem(row, 2, source)
        _fit_height(self.decisions, placeholder_rows=1)
        self._syncing = False
        self._adding_row = row
        self.decisions.setCurrentCell(row, 0)
        self._edit_row(row)

    def _edit_row(self, row: int) -> None:
        item = self.decisions.item(row, 0)
        if item is not None:
            self.decisions.editItem(item)

    def _start_edit(self) -> None:
        row = self.decisions.currentRow()
        if row >= 0:
            self._edit_row(row)

    def _delete_selected(self) -> None:
        row = self.decisions.currentRow()
        if 0 <= row < len(self.current_summary().key_decisions):
            self.delete_decision(row)

    def _save(self, summary: Summary, done_text: str, *, undoable: bool = True) -> None:
        sid = self.session_id
        if sid is None:
            return
        before = self.current_summary()
        summarizer = self.summarizer
        services = self.services

        runner = self.jobs.runner

        async def save(_op: Operation) -> PassRecord:
            if summarizer is not None and hasattr(summarizer, "save_edit"):
                # the summarizer tells its listeners; the window broadcasts from there
                return cast(PassRecord, await summarizer.save_edit(sid, summary))
            changed = await services.storage.run(
                save_edit, services.store, sid, summary, services.clock
            )
            runner.broadcast(changed.changes)
            return changed.value

        def saved(_record: PassRecord) -> None:
            self._undo = before if undoable else None
            self.undo_button.setVisible(self._undo is not None)
            self.status.info(done_text)

        def failed(message: str) -> None:
            self.status.error(f"Not saved: {message}")
            self.refresh()

        self.jobs.start("save", save, saved, failed, what="save the summary")

    # -- summarize now -------------------------------------------------------------------
    def summarize_now(self) -> None:
        """Fold every unsummarised older message in now, showing progress."""
        sid = self.session_id
        summarizer = self.summarizer
        if sid is None or summarizer is None or self.jobs.busy("summarize"):
            return
        report = self._progress.emit

        async def work(op: Operation) -> Any:
            def progress(done: int, total: int) -> None:
                report(done, total)

            # The summarizer's own lock queues this behind a pass a trigger started.
            return await summarizer.run(
                sid, force=True, wait=True, progress=progress, cancelled=op.is_cancelled
            )

        self.progress.setRange(0, 0)
        self.progress.setFormat("Summarizing…")
        self.progress.show()
        self.cancel_button.show()
        self.status.info("Summarizing older messages…")
        op = self.jobs.start(
            "summarize", work, self._summary_done, self._summary_failed, what="summarize"
        )
        op.finished.connect(self._summary_finished)
        self._update_buttons()

    def cancel_summary(self) -> None:
        """Stop the shown session's pass, whoever started it; what was folded in stays.

        ``Summarizer.stop`` ends the model's answer at once; this tab's own
        request is dropped too, also one still queued behind another pass.
        """
        sid, summarizer = self.session_id, self.summarizer
        if sid is not None and summarizer is not None and hasattr(summarizer, "stop"):
            summarizer.stop(sid)
        self.jobs.cancel("summarize")
        self.status.info("Stopped. The messages folded in so far are kept.")
        self._show_pass_state()
        self.refresh()

    def _show_progress(self, done: int, total: int) -> None:
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))
            self.progress.setFormat(f"{done:,} of {total:,} messages folded in")

    def _summary_finished(self) -> None:
        """This tab's own pass ended (maybe after a switch): show the shown session's state."""
        self._show_pass_state()

    def _summary_done(self, result: Any) -> None:
        if getattr(result, "stopped", "") == "failed":
            self.status.error(describe_run(result))
        else:
            self.status.info(describe_run(result))
        self.refresh()

    def _summary_failed(self, message: str) -> None:
        self.status.error(f"The summary could not run: {message}")
        self.refresh()


def fact_said(fact: Fact) -> str:
    """The "Said" cell: the day, and who said it."""
    try:
        day = date.fromisoformat(fact.said_on).strftime("%d %b %Y").lstrip("0")
    except ValueError:
        day = fact.said_on
    return f"{day}\n{'you' if fact.role == 'user' else 'assistant'}"


def changed_heading(records: list[PassRecord]) -> str:
    """The section's title: by the newest write of the summary, a pass or the user's edit."""
    last = next((r for r in reversed(records) if r.kind in ("pass", "edit")), None)
    if last is not None and last.kind == "edit":
        return "Changed by your last edit"
    return "Changed in the last pass"


def diff_rows(diff: SummaryDiff) -> list[tuple[str, str, str]]:
    """(change, what, message id) per change: "+ topic", "− decision", "~ fact (was …)"."""
    rows: list[tuple[str, str, str]] = []
    rows += [("+ topic", f"{p.topic}: {p.description}", "") for p in diff.topics_added]
    for change in diff.topics_changed:
        before, after = change.before, change.after
        title = f"{after.topic} (was {before.topic})" if change.renamed else after.topic
        gist = f": {after.description} (was: {before.description})" if change.rewritten else ""
        rows.append(("~ topic", title + gist, ""))
    rows += [(f"{REMOVED} topic", p.topic, "") for p in diff.topics_removed]
    rows += [("+ decision", d.decision, d.source or "") for d in diff.decisions_added]
    rows += [(f"{REMOVED} decision", d.decision, d.source or "") for d in diff.decisions_removed]
    rows += [("+ fact", f.text, f.source) for f in diff.facts_added]
    rows += [
        ("~ fact", f"{c.after.text} (was: {c.before})", c.after.source) for c in diff.facts_changed
    ]
    rows += [(f"{REMOVED} fact", f.text, f.source) for f in diff.facts_removed]
    return rows


def let_go_rows(records: list[PassRecord]) -> list[tuple[str, str, str]]:
    """(sentence, why, message id) of what the newest pass changed, dropped or left out."""
    last = next((r for r in reversed(records) if r.kind == "pass"), None)
    if last is None:
        return []
    rows: list[tuple[str, str, str]] = []
    for key in ("facts_dropped", "facts_left_out"):
        items = last.extra.get(key, [])
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                rows.append(
                    (
                        str(item.get("text", "")),
                        str(item.get("reason", "")),
                        str(item.get("source", "")),
                    )
                )
    return rows


def _history_cells(record: PassRecord) -> list[tuple[str, str]]:
    """(text, tooltip) of each pass-history column: what kind and when, and the details."""
    cursor = cursor_text(record.cursor_after)
    if record.kind == "pass":
        cursor = f"{cursor_text(record.cursor_before)} → {cursor}"
    details = [f"messages {range_text(record)}", f"summarized up to {cursor}"]
    if record.model:
        details.append(record.model)
    if record.kind != "edit":
        details.append(f"{record.duration_s:.1f} s")
    if record.prompt_tokens:
        details.append(f"{record.prompt_tokens:,} → {record.completion_tokens:,} tokens")
    note = record.error or ("You changed the key decisions" if record.kind == "edit" else "")
    tips = [
        range_tooltip(record),
        "Summarized up to: the archive position (#) of the newest message this pass folded in",
        "Tokens: prompt tokens → answer tokens" if record.prompt_tokens else "",
        record.error or "",
    ]
    when = local_time(record.time_ns, seconds=True).replace(" ", "\n", 1)
    return [
        (f"{KIND_LABELS.get(record.kind, record.kind)}\n{when}", ""),
        (
            "\n".join(part for part in (note, " · ".join(details)) if part),
            "\n".join(t for t in tips if t),
        ),
    ]


def describe_run(result: Any) -> str:
    """A SummaryRunResult in one sentence."""
    stopped = getattr(result, "stopped", None)
    folded = int(getattr(result, "folded", 0))
    passes = int(getattr(result, "passes", 0))
    remaining = int(getattr(result, "remaining", 0))
    error = getattr(result, "error", None) or "unknown error"
    texts = {
        "done": f"Folded {plural(folded, 'message')} into the summary "
        f"in {plural(passes, 'pass', 'passes')}.",
        "up_to_date": "Nothing to summarize: every message older than the context window "
        "is already in the summary.",
        "mtime_gate": "Nothing new since the last summary.",
        "busy": "A summary pass is already running for this session; "
        "it will pick up these messages.",
        "cancelled": f"Stopped. {plural(folded, 'message')} folded in, "
        f"{plural(remaining, 'message')} still waiting.",
        "failed": f"The summary pass failed: {error}. {plural(folded, 'message')} were folded "
        "in before it; the next run resumes there.",
    }
    return texts.get(str(stopped), f"Summary run ended: {stopped}")


TEXT_SHARE = 0.5
"""The share of a narrow table that its text column keeps; the short columns share the rest."""
FIRST_COLUMN_SHARE = 0.35
"""The share of the discussions table a topic may take (its text column keeps the rest):
sized to its contents, a long topic took the whole width and pushed "What was said" away."""


class _ShareColumns(QObject):
    """Columns that always add up to the table's width, the text column wrapping.

    Sized to their contents, the short columns (a date, "Show", "Your edit")
    left the text column a sliver at 13 pt and up in a narrow side panel and
    then pushed the table past its edge: it scrolled sideways.  Here the
    text column keeps half the table (*text_share*; at least its header's width); each
    short column gets its content's width if that fits in the rest, else a
    share of it, never less than its header (whose label would be cut).
    Where even the headers do not fit, the *optional* columns are hidden
    (what they say is in the text's tooltip).  Rows grow to their wrapped
    text.  *fit_height*: the table is as tall as its rows (a section of the
    page), not a scroller of its own.
    """

    def __init__(
        self,
        table: QTableWidget,
        text_column: int,
        *,
        optional: tuple[int, ...] = (),
        fit_height: bool = True,
        text_share: float = TEXT_SHARE,
    ) -> None:
        super().__init__(table)
        self.table = table
        self.text_column = text_column
        self.text_share = text_share
        self.optional = optional
        self.fit_height = fit_height
        header = table.horizontalHeader()
        header.setStretchLastSection(False)
        for col in range(table.columnCount()):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
        table.setWordWrap(True)
        if not fit_height:
            # A scroll bar that came and went with the rows' height changed the width,
            # which changed the rows' height: the table resized itself without end.
            table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self._applying = False
        table.viewport().installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and not self._applying:
            self._applying = True  # sizing the columns and rows resizes the viewport too
            try:
                self.apply()
            finally:
                self._applying = False
        return False

    def apply(self) -> None:
        """Size the columns for the current width, then the rows to their text."""
        table, header = self.table, self.table.horizontalHeader()
        width = table.viewport().width()
        shown = list(range(table.columnCount()))
        floor = {c: _header_width(table, c) for c in shown}
        for col in self.optional:
            hide = sum(floor[c] for c in shown) > width
            header.setSectionHidden(col, hide)
            if hide:
                shown.remove(col)
        others = [c for c in shown if c != self.text_column]
        budget = width - max(int(width * self.text_share), floor[self.text_column])
        wanted = {c: max(table.sizeHintForColumn(c), floor[c]) for c in others}
        if sum(wanted.values()) > budget:
            scale = max(budget, 0) / max(sum(wanted.values()), 1)
            wanted = {c: max(int(w * scale), floor[c]) for c, w in wanted.items()}
        for col, size in wanted.items():
            header.resizeSection(col, size)
        rest = width - sum(wanted.values())
        header.resizeSection(self.text_column, max(rest, header.minimumSectionSize()))
        table.resizeRowsToContents()
        if self.fit_height:
            _fit_height(table, placeholder_rows=1)


def _header_width(table: QTableWidget, column: int) -> int:
    """The width column *column*'s title needs in the header's font as it is now.

    The header's own size hint can lag a font change (Settings › Appearance).
    """
    header = table.horizontalHeader()
    item = table.horizontalHeaderItem(column)
    text = item.text() if item is not None else ""
    margin = header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    widest = max(
        (header.fontMetrics().horizontalAdvance(line) for line in text.splitlines()), default=0
    )
    return max(header.sectionSizeHint(column), widest + 4 * margin)


def _fit_height(table: QTableWidget, placeholder_rows: int = 0) -> None:
    """Size a table to its rows so the sections read like a page, not nested scrollers."""
    rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
    if table.rowCount() == 0:
        rows = placeholder_rows * table.verticalHeader().defaultSectionSize()
    height = rows + table.horizontalHeader().height() + 2 * table.frameWidth() + 2
    table.setFixedHeight(height)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
