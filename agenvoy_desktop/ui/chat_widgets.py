"""The pieces the chat panel is built from: bubbles, tool chips, the scrolling view.

Kept apart from :mod:`chat_panel` (which owns turns and loading) so each
stays small: these widgets only know how to show one message or one tool
call, and how to keep the view pinned to the newest message while the user
has not scrolled away.
"""

from __future__ import annotations

import html
import json
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QContextMenuEvent, QEnterEvent, QFocusEvent, QResizeEvent
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.turn import ToolCallFinished, ToolCallStarted
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.recall_record import without_lines
from agenvoy_desktop.core.timeutil import format_local
from agenvoy_desktop.ui.bubble_actions import ActionRow
from agenvoy_desktop.ui.elided import ElidedButton, ElidedLabel
from agenvoy_desktop.ui.markdown_view import (
    CitationLinks,
    MarkdownView,
    ProseLabel,
    WrappingLabel,
    soft_breaks,
)
from agenvoy_desktop.ui.theme import mono_font, set_flag

W = TypeVar("W", bound=QWidget)
RESULT_CHARS = 4000
ARGS_SUMMARY_CHARS = 60
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}
FLASH_MS = 1600
NO_TEXT = "The model returned no text."
INTERRUPTED_MARK = "Answer interrupted — what was written so far is kept."
STOPPED_EMPTY_MARK = "Stopped before the answer's first word — Regenerate asks again."


def flash(widget: QWidget) -> None:
    """Outline *widget* for a moment (the target of a timeline or recall click)."""
    set_flag(widget, "flash", "true")
    QTimer.singleShot(FLASH_MS, widget, lambda: set_flag(widget, "flash", "false"))


@cache
def row_height() -> int:
    """The height of a bubble's action row (the header keeps it while the row is hidden)."""
    probe = QToolButton()
    probe.setText("Copy")
    probe.setAutoRaise(True)
    height = probe.sizeHint().height()
    probe.deleteLater()
    return height


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ChatBubble(QFrame):
    """One user or assistant message, rendered as Markdown, with its actions.

    The action row shows while the pointer is over the bubble or the focus is
    in it (Tab reaches a bubble); the context menu offers the same actions.
    An answer that failed or came back empty says so, with a Retry button.
    Both are made when first needed: a page of forty bubbles would otherwise
    build some three hundred buttons nobody looks at.
    """

    action_requested = Signal(str)
    """An action's name (see :mod:`bubble_actions`), or ``retry``."""

    def __init__(
        self,
        role: str,
        time_ns: int,
        parent: QWidget | None = None,
        links: CitationLinks | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ChatBubble")
        self.setProperty("role", role)
        self.role = role
        self.message_id: str | None = None
        self.reply_to: str | None = None
        """The user message an answer replies to (its versions are that message's answers)."""
        self.interrupted = False
        self.problem_text = ""
        self.resend: str | None = None
        """The question to send again on Retry when it never reached the store."""
        self._actions_enabled = True
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self._row: ActionRow | None = None
        self._problem: tuple[WrappingLabel, QPushButton] | None = None
        self.header = ElidedLabel(f"{ROLE_NAMES.get(role, role)} · {format_local(time_ns)}")
        self.header.setObjectName("BubbleHeader")
        self.header.setMinimumHeight(row_height())  # the row appearing on hover: no jump
        self.view = MarkdownView(links=links)
        self.mark = WrappingLabel()
        self.mark.setText(INTERRUPTED_MARK)
        self.mark.setObjectName("InterruptedMark")
        self.mark.hide()
        self._top = QHBoxLayout()
        self._top.setContentsMargins(0, 0, 0, 0)
        self._top.addWidget(self.header, 1)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(12, 6, 8, 10)
        self._layout.setSpacing(4)
        self._layout.addLayout(self._top)
        self._layout.addWidget(self.view)
        self._layout.addWidget(self.mark)

    @property
    def action_row(self) -> ActionRow:
        """The bubble's actions (made on first use)."""
        if self._row is None:
            self._row = ActionRow(self.role)
            self._row.triggered.connect(self.action_requested)
            self._row.set_hover(False)
            self._row.set_state(enabled=self._actions_enabled, saved=self.message_id is not None)
            self._top.addWidget(self._row)
        return self._row

    @property
    def problem(self) -> WrappingLabel:
        """Why there is no answer (made on first use)."""
        return self._problem_parts()[0]

    @property
    def retry_button(self) -> QPushButton:
        return self._problem_parts()[1]

    def _problem_parts(self) -> tuple[WrappingLabel, QPushButton]:
        if self._problem is None:
            label = WrappingLabel()
            label.setObjectName("BubbleProblem")
            label.setTextFormat(Qt.TextFormat.PlainText)
            retry = QPushButton("Retry")
            retry.setToolTip("Ask the model again")
            retry.clicked.connect(lambda: self.action_requested.emit("retry"))
            retry.setEnabled(self._actions_enabled)
            row = QHBoxLayout()
            row.addWidget(label, 1)
            row.addWidget(retry, 0, Qt.AlignmentFlag.AlignTop)
            self._layout.addLayout(row)
            self._problem = label, retry
        return self._problem

    def text(self) -> str:
        return self.view.markdown()

    def set_text(self, text: str) -> None:
        self.view.set_markdown(text)

    def bind(self, message: Message) -> None:
        """Become the view of a stored message."""
        self.message_id = message.id
        self.header.setText(
            f"{ROLE_NAMES.get(self.role, self.role)} · {format_local(message.time_ns)}"
        )
        self.set_text(message.content)
        empty = not message.content.strip() and not message.extra.get("tool_calls")
        self.set_interrupted(bool(message.extra.get("interrupted")), empty=empty)
        if self.role == "assistant" and empty and not self.interrupted:
            self.show_problem(NO_TEXT)
        else:
            self.show_problem("")
        if self._row is not None:
            self._row.set_state(enabled=self._actions_enabled, saved=True)

    def set_interrupted(self, interrupted: bool, *, empty: bool = False) -> None:
        """Mark a stopped answer; one stopped before its first word says so (it is kept,
        empty, so the question shows as unanswered and Regenerate can ask again)."""
        self.interrupted = interrupted
        self.mark.setText(STOPPED_EMPTY_MARK if empty else INTERRUPTED_MARK)
        self.mark.setVisible(interrupted)

    def show_problem(self, text: str) -> None:
        """Say why there is no answer ("" hides it), with a Retry button."""
        if not text and self._problem is None:
            return
        self.problem_text = text
        self.problem.setText(text)
        self.problem.setVisible(bool(text))
        self.retry_button.setVisible(bool(text))
        self.view.setVisible(not text or bool(self.text().strip()))

    def set_actions_enabled(self, enabled: bool) -> None:
        """Off while a turn runs in this session (Copy stays)."""
        self._actions_enabled = enabled
        if self._row is not None:
            self._row.set_state(enabled=enabled, saved=self.message_id is not None)
        if self._problem is not None:
            self._problem[1].setEnabled(enabled)

    def selected_text(self) -> str:
        """The text selected in this bubble's prose, if any, with plain newlines.

        Qt reports a line break as U+2028 and a paragraph end as U+2029;
        pasted elsewhere those show as odd characters or nothing.
        """
        selected = next(
            (p.selectedText() for p in self.findChildren(ProseLabel) if p.hasSelectedText()), ""
        )
        return selected.replace("\u2028", "\n").replace("\u2029", "\n")

    # -- showing the actions ------------------------------------------------------------
    def enterEvent(self, event: QEnterEvent) -> None:
        super().enterEvent(event)
        self.action_row.set_hover(True)

    def leaveEvent(self, event: QEvent) -> None:
        super().leaveEvent(event)
        if self._row is not None:
            self._sync_actions()

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        self.action_row.set_hover(True)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        QTimer.singleShot(0, self, self._sync_actions)

    def _sync_actions(self) -> None:
        if self._row is None:
            return
        focus = QApplication.focusWidget()
        inside = focus is not None and (focus is self or self.isAncestorOf(focus))
        self._row.set_hover(self.underMouse() or inside)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = self.action_row.menu(self)
        selected = self.selected_text()
        if selected:
            copy = menu.addAction("Copy selected text")
            copy.triggered.connect(lambda: QApplication.clipboard().setText(selected))
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.popup(event.globalPos())

    def flash(self) -> None:
        """Highlight briefly (the target of a timeline click)."""
        flash(self)


class ExpandableChip(QFrame):
    """A one-line header that folds out a details area (tool calls, recalled memories)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ToolChip")
        self.header = ElidedButton()
        self.header.setCheckable(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setArrowType(Qt.ArrowType.RightArrow)
        self.header.setAutoRaise(True)
        self.header.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.header.toggled.connect(self.set_expanded)
        self.details = QWidget()
        self.details_box = QVBoxLayout(self.details)
        self.details_box.setContentsMargins(22, 0, 8, 8)
        self.details.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addWidget(self.details)

    @property
    def expanded(self) -> bool:
        return self.details.isVisibleTo(self)

    def set_expanded(self, expanded: bool) -> None:
        self.header.setChecked(expanded)
        self.header.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.details.setVisible(expanded)


class ToolChip(ExpandableChip):
    """A tool call, compact: name, arguments and outcome; click for the details."""

    def __init__(
        self, call_id: str, name: str, arguments: Mapping[str, Any], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.call_id = call_id
        self.name = name
        self.arguments = dict(arguments)
        self.message_id: str | None = None
        self.result: str | None = None
        self.is_error = False
        self.empty = False
        self.hint = ""
        self.running = False
        self.args_label = self._mono()
        self.result_label = self._mono()
        self.hint_label = WrappingLabel()
        self.hint_label.setObjectName("ToolHint")
        self.hint_label.setTextFormat(Qt.TextFormat.RichText)
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for caption, label in (("Arguments", self.args_label), ("Result", self.result_label)):
            section = QLabel(caption)
            section.setObjectName("ToolSection")
            self.details_box.addWidget(section)
            self.details_box.addWidget(label)
        self.details_box.addWidget(self.hint_label)
        self._refresh()

    @classmethod
    def from_call(cls, call: Mapping[str, Any]) -> ToolChip:
        """A chip for one ``tool_calls`` entry of an assistant message."""
        function = call.get("function", {})
        arguments = function.get("arguments", {}) if isinstance(function, Mapping) else {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {"raw": arguments}
        name = function.get("name", "tool") if isinstance(function, Mapping) else "tool"
        chip = cls(
            str(call.get("id", "")), str(name), arguments if isinstance(arguments, dict) else {}
        )
        chip.running = True
        chip._refresh()
        return chip

    @staticmethod
    def _mono() -> QLabel:
        label = WrappingLabel()
        label.setFont(mono_font())
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    def apply_event(self, event: ToolCallStarted | ToolCallFinished) -> None:
        if isinstance(event, ToolCallStarted):
            self.arguments = dict(event.arguments)
            self.running = True
        else:
            outcome = event.outcome
            self.running = False
            self.result, self.is_error, self.empty = (
                outcome.content,
                outcome.is_error,
                outcome.empty,
            )
            self.hint = event.hint
        self._refresh()

    def set_result_message(self, message: Message) -> None:
        """Fill in from the stored tool result (its extra holds arguments and the hint)."""
        extra = message.extra
        self.message_id = message.id
        self.running = False
        self.result = message.content
        self.is_error = bool(extra.get("is_error"))
        self.empty = bool(extra.get("empty"))
        self.hint = str(extra.get("error_hint") or "")
        if not self.arguments and isinstance(extra.get("arguments"), dict):
            self.arguments = dict(extra["arguments"])
        self._refresh()

    def status(self) -> str:
        if self.running:
            return "running…"
        if self.result is None:
            return "not run"
        if self.is_error:
            return "failed"
        return "no result" if self.empty else "done"

    def flash(self) -> None:
        flash(self)

    def _refresh(self) -> None:
        args = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in self.arguments.items()
        )
        text = f"{self.name}({_clip(args, ARGS_SUMMARY_CHARS)})  ·  {self.status()}"
        if self.hint:
            text += "  ·  ⚠ error-memory hint"
        self.header.setText(text)
        self.args_label.setText(
            soft_breaks(json.dumps(self.arguments, ensure_ascii=False, indent=2))
        )
        self.result_label.setText(
            soft_breaks(_clip(self.result or "", RESULT_CHARS)) or "(nothing yet)"
        )
        self.hint_label.setText(
            "<i>Error-memory hint, sent to the model with this result:</i><br>"
            + html.escape(self.hint).replace("\n", "<br>")
            if self.hint
            else ""
        )
        self.hint_label.setVisible(bool(self.hint))
        set_flag(self, "failed", self.is_error)


def recall_summary(remembered: int, passages: int) -> str:
    """The chip's one line: what was remembered and what was found in the documents."""
    parts = []
    if remembered or not passages:
        things = "1 thing" if remembered == 1 else f"{remembered} things"
        parts.append(f"Remembered {things} you said before")
    if passages:
        found = "1 passage" if passages == 1 else f"{passages} passages"
        parts.append(f"{'found' if parts else 'Found'} {found} in your documents")
    return " · ".join(parts)


HIDDEN_WORDS = {
    "removed": ("from a session being removed", True),
    "reset": ("from a session being reset", True),
    "deleted": ("of a message being deleted", True),
    "gone": ("of what you deleted since", False),
}
"""Why a recalled line is not shown, in words, and whether Undo can still bring it back."""


def hidden_note(reasons: Mapping[str, int]) -> str:
    """What a recall chip does not show, and why: "1 line from a session being removed is
    hidden" while Undo can bring it back, "... is left out" once it is gone for good."""
    parts = []
    for reason, (words, undoable) in HIDDEN_WORDS.items():
        count = reasons.get(reason, 0)
        if count:
            lines = "1 line" if count == 1 else f"{count} lines"
            verb = ("is" if count == 1 else "are") + (" hidden" if undoable else " left out")
            parts.append(f"{lines} {words} {verb}")
    return "; ".join(parts)


class RecallChip(ExpandableChip):
    """What proactive recall put in front of the model for this turn; click for the lines.

    The user sees when an answer leans on memory, and on which of their own
    words (the same block the Context tab shows as sent).  A line quoting a
    message being deleted, or a session being removed or reset, is hidden
    while its undo window is open (:meth:`hide_lines`); Undo shows it again.
    """

    def __init__(
        self,
        text: str,
        ids: Sequence[str],
        passages: int = 0,
        withdrawn: int = 0,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setProperty("kind", "recall")
        self.text = text
        self.ids = tuple(ids)
        """The remembered messages, one per line of *text*."""
        self.passages = passages
        self.withdrawn = withdrawn
        """Lines the stored record lost since: their messages were deleted."""
        self.hidden: dict[str, str] = {}
        """Message id → why its line is not shown (a key of :data:`HIDDEN_WORDS`)."""
        self.header.setToolTip("Found in your memory and documents, and given to the model")
        self.lines = WrappingLabel()
        self.lines.setTextFormat(Qt.TextFormat.PlainText)
        self.lines.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details_box.addWidget(self.lines)
        self._refresh()

    def hide_lines(self, hidden: Mapping[str, str]) -> None:
        """Show every line but those of *hidden* (message id → why: :data:`HIDDEN_WORDS`)."""
        hidden = {i: why for i, why in hidden.items() if i in self.ids}
        if hidden != self.hidden:
            self.hidden = hidden
            self._refresh()

    def _refresh(self) -> None:
        reasons = dict.fromkeys(HIDDEN_WORDS, 0)
        for why in self.hidden.values():
            reasons[why] += 1
        reasons["gone"] += self.withdrawn
        note = hidden_note(reasons)
        remembered = len(self.ids) - len(self.hidden)
        shown = remembered or self.passages or not note
        summary = recall_summary(remembered, self.passages) if shown else ""
        self.header.setText(" · ".join(part for part in (summary, note) if part))
        self.lines.setText(soft_breaks(_shown_lines(self.text, self.ids, set(self.hidden))))


def _shown_lines(text: str, ids: Sequence[str], hidden: Collection[str]) -> str:
    """A recall block's lines under its header, less those of the *hidden* messages."""
    lines = text.splitlines()
    if not hidden:
        return "\n".join(lines[1:])
    kept = without_lines(text, ids, hidden).splitlines()
    if kept and lines and kept[0] == lines[0]:
        kept = kept[1:]  # the header: the chip's own line says it
    return "\n".join(kept)


class ModelBanner(QFrame):
    """ "No chat model" — in words, with the buttons that fix it."""

    settings_clicked = Signal()
    starter_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelBanner")
        self.fix = ""
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.starter_button = QPushButton("Use the starter model")
        self.starter_button.setToolTip("Qwen2.5-Coder 0.5B, installed with the app (about 0.5 GB)")
        self.starter_button.clicked.connect(self.starter_clicked)
        self.settings_button = QPushButton("Open Settings…")
        self.settings_button.clicked.connect(self.settings_clicked)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.starter_button)
        layout.addWidget(self.settings_button)

    def set_problem(self, message: str, fix: str) -> None:
        self.fix = fix
        self.label.setText(f"<b>{html.escape(message)}</b><br>{html.escape(fix)}")


READING_CHARS = 80
"""The widest a line of chat text gets, in average characters of the chat font.

Lines of 150 characters (a 1920-pixel window) are hard to follow back to
the next line's start; chat apps cap the column and centre it.
"""
COLUMN_MARGIN = 12
"""The column's least margin on each side (a narrow window)."""
BUBBLE_CHROME = 40
"""What a bubble adds around its text: frame, padding, the view's own margin."""


_LINE_SAMPLE = "the quick brown fox jumps over the lazy dog"
"""Ordinary text to measure a character by: a font's own average width is the wrong
ruler where the default font is a CJK one (its "average" is a full-width glyph)."""


def reading_width(widget: QWidget) -> int:
    """The widest the chat column gets for *widget*'s font (text plus bubble chrome)."""
    per_char = widget.fontMetrics().horizontalAdvance(_LINE_SAMPLE) / len(_LINE_SAMPLE)
    return round(READING_CHARS * per_char) + BUBBLE_CHROME


class ChatView(QScrollArea):
    """A column of bubbles and chips that follows the newest unless scrolled away.

    The column is at most :func:`reading_width` wide and centred: the side
    margins grow with the window instead of the lines.
    """

    earlier_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._content = QWidget()
        self._column = QVBoxLayout(self._content)
        self._column.setContentsMargins(COLUMN_MARGIN, 8, COLUMN_MARGIN, 8)
        self._column.setSpacing(8)
        self.earlier_button = QPushButton("Show earlier messages")
        self.earlier_button.setFlat(True)
        self.earlier_button.clicked.connect(self.earlier_requested)
        self.earlier_button.hide()
        self.empty_label = QLabel("No messages yet — type below and press Enter to start.")
        self.empty_label.setObjectName("BubbleHeader")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setContentsMargins(0, 40, 0, 0)
        self.footer = QWidget()
        """Stays below the newest item (the turn's status line goes here)."""
        self.footer_box = QVBoxLayout(self.footer)
        self.footer_box.setContentsMargins(0, 0, 0, 0)
        self._column.addWidget(self.earlier_button)
        self._column.addWidget(self.empty_label)
        self._column.addWidget(self.footer)
        self._column.addStretch(1)
        self._fixed = (self.earlier_button, self.empty_label, self.footer)
        self.setWidget(self._content)
        self._by_id: dict[str, QWidget] = {}
        self.actions_enabled = True
        self._stick = True
        self._keep_from_bottom: int | None = None
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    # -- content --------------------------------------------------------------------
    def _widgets(self) -> list[QWidget]:
        out: list[QWidget] = []
        for index in range(self._column.count()):
            item = self._column.itemAt(index)
            widget = item.widget() if item is not None else None
            if widget is not None:
                out.append(widget)
        return out

    def items(self, kind: type[W]) -> list[W]:
        return [w for w in self._widgets() if isinstance(w, kind)]

    def append(self, widget: QWidget) -> None:
        self._column.insertWidget(self._column.indexOf(self.footer), widget)
        self.empty_label.hide()
        if isinstance(widget, ChatBubble):
            widget.set_actions_enabled(self.actions_enabled)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Message actions on or off for every bubble (off while a turn runs here)."""
        self.actions_enabled = enabled
        for bubble in self.items(ChatBubble):
            bubble.set_actions_enabled(enabled)

    def items_after(self, widget: QWidget) -> list[QWidget]:
        """The items below *widget* (what an edit or a regenerate replaces)."""
        items = self._content_items()
        return items[items.index(widget) + 1 :] if widget in items else []

    def insert_top(self, position: int, widgets: list[QWidget]) -> None:
        """Insert older items at *position* (0 = first) keeping the viewport where it was."""
        bar = self.verticalScrollBar()
        self._keep_from_bottom = bar.maximum() - bar.value()
        for offset, widget in enumerate(widgets):
            self._column.insertWidget(2 + position + offset, widget)  # below the two fixed
            if isinstance(widget, ChatBubble):
                widget.set_actions_enabled(self.actions_enabled)
        if widgets:
            self.empty_label.hide()

    def remove(self, widget: QWidget) -> None:
        self._column.removeWidget(widget)
        self._by_id = {k: w for k, w in self._by_id.items() if w is not widget}
        widget.deleteLater()
        self.empty_label.setVisible(not self._content_items())

    def clear(self) -> None:
        for widget in self._content_items():
            self._column.removeWidget(widget)
            widget.deleteLater()
        self._by_id.clear()
        self.earlier_button.hide()
        self.empty_label.show()
        self._stick = True

    def _content_items(self) -> list[QWidget]:
        return [w for w in self._widgets() if w not in self._fixed]

    def set_has_earlier(self, has: bool) -> None:
        self.earlier_button.setVisible(has)

    def register(self, message_id: str, widget: QWidget) -> None:
        self._by_id[message_id] = widget

    def widget_for(self, message_id: str) -> QWidget | None:
        return self._by_id.get(message_id)

    def chip(self, call_id: str) -> ToolChip | None:
        for chip in reversed(self.items(ToolChip)):
            if chip.call_id == call_id:
                return chip
        return None

    # -- the reading width ------------------------------------------------------------
    def _fit_column(self) -> None:
        """Side margins that keep the column within :func:`reading_width`, centred."""
        spare = self.viewport().width() - reading_width(self)
        side = max(COLUMN_MARGIN, (spare + 1) // 2)  # rounded up: never past the width
        margins = self._column.contentsMargins()
        if margins.left() != side or margins.right() != side:
            self._column.setContentsMargins(side, margins.top(), side, margins.bottom())

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._fit_column()
        super().resizeEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit_column()

    # -- scrolling ------------------------------------------------------------------
    def scroll_to_bottom(self) -> None:
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def follow_bottom(self) -> None:
        """Keep showing the newest text if the user was already at the bottom."""
        if self._stick:
            self.scroll_to_bottom()

    def reveal(self, message_id: str) -> bool:
        widget = self._by_id.get(message_id)
        if widget is None:
            return False
        self.show_widget(widget)
        if isinstance(widget, ChatBubble | ToolChip):
            widget.flash()
        return True

    def show_widget(self, widget: QWidget) -> None:
        """Scroll *widget* into view (after pending layouts) and stop following the bottom."""
        self._stick = False
        QTimer.singleShot(0, self, lambda: self.ensureWidgetVisible(widget, 0, 40))

    def _on_scrolled(self, value: int) -> None:
        if self._keep_from_bottom is None:
            self._stick = value >= self.verticalScrollBar().maximum() - 30

    def _on_range(self, _minimum: int, maximum: int) -> None:
        bar = self.verticalScrollBar()
        if self._keep_from_bottom is not None:
            bar.setValue(maximum - self._keep_from_bottom)
            self._keep_from_bottom = None
        elif self._stick:
            bar.setValue(maximum)
