"""The Recall tab: ``search_chat_history`` live, as the assistant's tool runs it.

A query box (searched as you type), the mode (semantic / keyword / hybrid),
the scope (this session / all sessions) and a time range.  Results are the
tool's excerpts — two messages before each hit, one after, merged, in time
order — with every hit's score and the query's words highlighted.  Clicking
a hit's time shows that message in the chat.  Below: what the indexes hold
(vectors, archive rows, and where history.json starts after compaction).
A message deleted in the chat is left out of the results while its undo
window is open (:func:`without`), and shows again on Undo.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, datetime, time, timedelta

from PySide6.QtCore import QDate, QTimer, QUrl, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDateEdit,
    QLabel,
    QLineEdit,
    QSpinBox,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.search import (
    MODES,
    Mode,
    SearchQuery,
)
from agenvoy_desktop.operations.search import IndexStats, RecallAnswer, index_stats, run_search
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.flow_layout import FlowLayout, flow_row
from agenvoy_desktop.ui.inspector.common import (
    InspectorTab,
    StatusLine,
    esc,
    local_time,
    plural,
)
from agenvoy_desktop.ui.inspector.wrapping import CheckRow
from agenvoy_desktop.ui.theme import colors

DEBOUNCE_MS = 300
HIT_CHARS = 900
CONTEXT_CHARS = 280
NS = 1_000_000_000
MODE_LABELS: dict[Mode, str] = {
    "semantic": "Semantic (meaning)",
    "keyword": "Keyword (exact words)",
    "hybrid": "Hybrid (both)",
}
SCORE_NAMES: dict[Mode, str] = {"semantic": "similarity", "keyword": "relevance", "hybrid": "fused"}
RANGES = ("Any time", "Last 24 hours", "Last 7 days", "Last 30 days", "Between dates…")
_WORD = re.compile(r"\w+")
_MARK = "background-color: #ffe082; color: black; font-weight: 600;"


# -- text helpers (pure) -----------------------------------------------------------------
def query_terms(text: str) -> list[str]:
    """Words of the query worth highlighting (longest first, so overlaps mark whole words)."""
    terms = {t for t in _WORD.findall(text) if len(t) > 1 or not t.isascii()}
    return sorted(terms, key=lambda t: (-len(t), t))


def clip_around(text: str, terms: list[str], width: int) -> str:
    """At most *width* characters of *text*, centred on the first term found."""
    if len(text) <= width:
        return text
    lowered = text.lower()
    hits = [i for t in terms if (i := lowered.find(t.lower())) >= 0]
    start = max(0, min(hits) - width // 3) if hits else 0
    end = min(len(text), start + width)
    start = max(0, end - width)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def highlight(text: str, terms: list[str]) -> str:
    """HTML-escaped *text* with every term (case-insensitive) marked."""
    if not terms:
        return esc(text)
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(esc(text[last : match.start()]))
        out.append(f"<span style='{_MARK}'>{esc(match.group(0))}</span>")
        last = match.end()
    out.append(esc(text[last:]))
    return "".join(out)


def no_hits_text(query: SearchQuery) -> str:
    """Why a search found nothing, and what to try."""
    if query.mode == "keyword" and not _WORD.search(query.text):
        return (
            f"Keyword search looks for words, and “{query.text}” has none "
            "(punctuation and search operators are ignored). Try some words from the message."
        )
    scope = "this session" if query.session_id else "any session"
    when = " in that time range" if query.time_from_ns or query.time_to_ns else ""
    return f"Nothing in {scope}{when} matches “{query.text}” ({query.mode} search)."


def without(answer: RecallAnswer, hidden: set[str]) -> RecallAnswer:
    """*answer* less the messages in *hidden* (deleted in the chat, undo window open).

    An excerpt goes when none of its hits is left: the messages around a
    hit are there only to show it in its place.
    """
    if not hidden:
        return answer
    result = answer.result
    excerpts = [
        replace(
            excerpt,
            messages=[row for row in excerpt.messages if row.message.id not in hidden],
            hit_ids=excerpt.hit_ids - hidden,
        )
        for excerpt in result.excerpts
        if excerpt.hit_ids - hidden
    ]
    hits = [hit for hit in result.hits if hit.item.message.id not in hidden]
    return replace(answer, result=replace(result, hits=hits, excerpts=excerpts))


def render_results(answer: RecallAnswer, *, show_titles: bool) -> str:
    """The excerpts as HTML: hits marked with their score and rank."""
    query, result = answer.query, answer.result
    terms = query_terms(query.text)
    rank = {h.item.message.id: (n, h.score) for n, h in enumerate(result.hits, start=1)}
    label = SCORE_NAMES.get(query.mode, "score")
    blocks: list[str] = []
    for excerpt in result.excerpts:
        first = excerpt.messages[0].message
        title = (
            f"{esc(answer.titles.get(excerpt.session_id, excerpt.session_id))} · "
            if show_titles
            else ""
        )
        lines = [
            f"<p style='margin: 14px 0 4px 0; color: gray;'>{title}"
            f"{esc(local_time(first.time_ns))}</p>"
        ]
        for row in excerpt.messages:
            msg = row.message
            hit = rank.get(msg.id)
            width = HIT_CHARS if hit else CONTEXT_CHARS
            body = highlight(clip_around(msg.content, terms, width), terms)
            stamp = f"<a href='msg:{esc(msg.id)}'>{esc(local_time(msg.time_ns))}</a>"
            if hit:
                badge = (
                    f"<span style='background:#1565c0; color:white;'>&nbsp;#{hit[0]} · "
                    f"{label} {hit[1]:.3f}&nbsp;</span> "
                )
                style = "border-left: 3px solid #1565c0; background: rgba(21,101,192,0.08);"
            else:
                badge, style = "", "color: gray;"
            lines.append(
                f"<table width='100%' cellspacing='0' cellpadding='4' style='{style}'><tr><td>"
                f"{badge}<b>{esc(msg.role)}</b> · {stamp}<br>"
                f"<span style='white-space: pre-wrap;'>{body}</span></td></tr></table>"
            )
        blocks.append("".join(lines))
    return "".join(blocks)


def stats_text(stats: IndexStats, scoped: bool) -> str:
    where = "This session" if scoped else f"All {plural(stats.sessions, 'session')}"
    parts = [
        f"{where}: {plural(stats.archived, 'message')} in the archive",
        f"{plural(stats.vectors, 'vector')} in the semantic index",
        f"{plural(stats.history, 'message')} in history.json",
    ]
    if scoped:
        parts.append(
            f"history.json starts {local_time(stats.start_at_ns)} (older messages were "
            "compacted: keyword search still finds them)"
            if stats.start_at_ns
            else "nothing compacted yet"
        )
    return " · ".join(parts)


def _to_date(value: QDate) -> date:
    return date(value.year(), value.month(), value.day())


class RecallTab(InspectorTab):
    """See the module docstring."""

    reload_on = ("messages", "vectors")

    message_activated = Signal(str)

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(services, runner, parent)
        self.answer: RecallAnswer | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.search)
        self._build()

    def _build(self) -> None:
        first, second = self._controls()
        self.summary_label = QLabel()
        self.status = StatusLine()
        self.results = QTextBrowser()
        self.results.setOpenLinks(False)
        self.results.anchorClicked.connect(self._anchor)
        self.stats_label = QLabel()
        self.stats_label.setWordWrap(True)
        self.stats_label.setStyleSheet(f"color: {colors(self.palette()).muted};")
        layout = QVBoxLayout(self)
        layout.addLayout(first)
        layout.addLayout(second)
        layout.addWidget(self.window_row)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.status)
        layout.addWidget(self.results, 1)
        layout.addWidget(self.stats_label)
        self._sync_dates()
        self._show_hint()

    def _controls(self) -> tuple[FlowLayout, FlowLayout]:
        self.query_edit = QLineEdit()
        self.query_edit.setPlaceholderText("Search what was said…")
        self.query_edit.setClearButtonEnabled(True)
        self.query_edit.textChanged.connect(lambda _t: self._timer.start())
        self.query_edit.returnPressed.connect(self.search)
        self.mode_combo = QComboBox()
        for mode in MODES:
            self.mode_combo.addItem(MODE_LABELS[mode], mode)
        # What the assistant's search_chat_history does unless told otherwise.
        self.mode_combo.setCurrentIndex(self.mode_combo.findData("hybrid"))
        self.scope_combo = QComboBox()
        self.scope_combo.addItem("This session", "current")
        self.scope_combo.addItem("All sessions", "all")
        self.limit_spin = QSpinBox()
        self.limit_spin.setRange(1, 50)
        self.limit_spin.setValue(10)
        self.limit_spin.setPrefix("top ")
        self.range_combo = QComboBox()
        self.range_combo.addItems(list(RANGES))
        self.from_date = QDateEdit(QDate.currentDate().addDays(-30))
        self.to_date = QDateEdit(QDate.currentDate())
        for edit in (self.from_date, self.to_date):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd")
            edit.dateChanged.connect(lambda _d: self._changed())
        # Its text wraps on a line of its own: beside the range it was wider than the
        # side panel at 16 pt, and the whole tab scrolled sideways.
        self.window_row = CheckRow("Skip the context window")
        self.window_row.setToolTip(
            "Leave out the last N messages, as the assistant's search does (it already sees them)."
        )
        self.window_check = self.window_row.box
        for combo in (self.mode_combo, self.scope_combo, self.range_combo):
            combo.currentIndexChanged.connect(lambda _i: self._changed())
        self.limit_spin.valueChanged.connect(lambda _v: self._changed())
        self.window_check.toggled.connect(lambda _c: self._changed())

        # Rows that wrap in a narrow side panel; the search box takes what is left of its line.
        first = flow_row(self.query_edit, self.mode_combo, self.scope_combo)
        self.dash = QLabel("–")
        second = flow_row(
            QLabel("When:"),
            self.range_combo,
            self.from_date,
            self.dash,
            self.to_date,
            self.limit_spin,
        )
        return first, second

    # -- public ------------------------------------------------------------------------------
    def refresh(self) -> None:
        self.load_stats()
        if self.query_edit.text().strip():
            self.search()
        else:
            self._show_hint()

    def build_query(self) -> SearchQuery:
        scoped = self.scope_combo.currentData() == "current" and self.session_id is not None
        time_from, time_to = self.time_range()
        return SearchQuery(
            text=self.query_edit.text().strip(),
            mode=self.mode_combo.currentData(),
            limit=self.limit_spin.value(),
            session_id=self.session_id if scoped else None,
            time_from_ns=time_from,
            time_to_ns=time_to,
            exclude_window=(
                self.services.settings.memory.window_messages
                if self.window_check.isChecked()
                else 0
            ),
            current_session=self.session_id,
            withheld=self.services.withheld(),  # a session removed or reset, still undoable
        )

    def time_range(self) -> tuple[int | None, int | None]:
        choice = self.range_combo.currentIndex()
        now = self.services.clock()
        if choice == 0:
            return None, None
        if choice in (1, 2, 3):
            days = {1: 1, 2: 7, 3: 30}[choice]
            return now - days * 86_400 * NS, None
        start = datetime.combine(_to_date(self.from_date.date()), time.min).astimezone()
        end = datetime.combine(_to_date(self.to_date.date()), time.min).astimezone()
        end += timedelta(days=1)
        return int(start.timestamp()) * NS, int(end.timestamp()) * NS - 1

    def search(self) -> None:
        self._timer.stop()
        query = self.build_query()
        if not query.text:
            self.jobs.cancel("search")
            self._show_hint()
            return
        if query.time_from_ns and query.time_to_ns and query.time_from_ns > query.time_to_ns:
            self._show_message("The start date is after the end date.", error=True)
            return
        store = self.services.store

        async def work(_op: Operation) -> RecallAnswer:
            return await self.services.storage.run(run_search, store, query)

        self.summary_label.setText("Searching…")
        self.jobs.start(
            "search", work, self._show_answer, self._search_failed, what="search the memory"
        )

    def load_stats(self) -> None:
        scoped = self.scope_combo.currentData() == "current" and self.session_id is not None
        sid = self.session_id if scoped else None
        store = self.services.store

        async def work(_op: Operation) -> IndexStats:
            return await self.services.storage.run(index_stats, store, sid)

        self.jobs.start(
            "stats",
            work,
            lambda stats: self.stats_label.setText(stats_text(stats, scoped)),
            lambda message: self.stats_label.setText(f"Index statistics unavailable: {message}"),
            what="count the index",
        )

    # -- showing -------------------------------------------------------------------------------
    def _changed(self) -> None:
        self._sync_dates()
        self.load_stats()
        if self.query_edit.text().strip():
            self.search()

    def _sync_dates(self) -> None:
        custom = self.range_combo.currentIndex() == len(RANGES) - 1
        for widget in (self.from_date, self.dash, self.to_date):
            widget.setVisible(custom)

    def _show_hint(self) -> None:
        self.answer = None
        self.status.clear_message()
        self.summary_label.setText("")
        semantic = (
            "Semantic search finds messages by meaning"
            if self.services.store.embedder is not None
            else "Semantic search needs the embedding model, which is not loaded"
        )
        self.results.setHtml(
            "<p style='color: gray;'>Type to search this session's memory the way the "
            f"assistant's <i>search_chat_history</i> tool does. {semantic}; keyword search "
            "finds exact words, also in messages compacted out of history.json; hybrid "
            "combines both.</p>"
        )

    def _show_message(self, text: str, *, error: bool) -> None:
        self.answer = None
        self.summary_label.setText("")
        if error:
            self.status.error(text)
        else:
            self.status.info(text)
        self.results.clear()

    def _search_failed(self, message: str) -> None:
        self._show_message(f"The search could not run: {message}", error=True)

    def deletes_changed(self) -> bool:
        """Show the last answer again without (or with, after Undo) the pending deletes."""
        if self.answer is not None:
            self._show_answer(self.answer)
        return False

    def _show_answer(self, found: RecallAnswer) -> None:
        self.status.clear_message()
        answer = without(found, self.hidden_messages())
        hits = answer.result.hits
        if not hits:
            self._show_message(no_hits_text(answer.query), error=False)
            self.answer = found
            return
        self.answer = found
        self.summary_label.setText(
            f"{plural(len(hits), 'hit')} in {plural(len(answer.result.excerpts), 'excerpt')}, "
            "in time order"
        )
        show_titles = answer.query.session_id is None
        self.results.setHtml(render_results(answer, show_titles=show_titles))

    def _anchor(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith("msg:"):
            self.message_activated.emit(text.removeprefix("msg:"))
