"""Markdown for chat messages: rich text, plus code blocks that can be copied.

A message is split into prose and fenced code (:func:`split_markdown`).  Prose
goes through Qt's own Markdown reader (GitHub dialect, raw HTML off, so a
model writing ``<div>`` shows the text instead of swallowing it) into a
selectable label; each code block becomes a :class:`CodeBlock` with a
monospace body and a Copy button.  :meth:`MarkdownView.set_markdown` reuses
its child widgets, so re-rendering a streaming answer twenty times a second
only updates text; an unclosed fence (the model is still writing the block)
renders as code so far.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote, unquote

import shiboken6
from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QTextDocument
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.operations.documents import find_citations
from agenvoy_desktop.ui.theme import mono_font

HEIGHT_CACHE = 8
CITE_SCHEME = "cite:"
BREAK_RUN = 24
"""A run of this many characters without a space gets break opportunities (U+200B)."""
BREAK_EVERY = 12
ZWSP = "\u200b"
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of prose (``language`` None) or one fenced code block."""

    text: str
    language: str | None = None

    @property
    def is_code(self) -> bool:
        return self.language is not None


def split_markdown(text: str) -> list[Segment]:
    """Prose and fenced code blocks, in order; an unclosed fence runs to the end."""
    segments: list[Segment] = []
    prose: list[str] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            prose.append(lines[index])
            index += 1
            continue
        if any(p.strip() for p in prose):
            segments.append(Segment("\n".join(prose).strip("\n")))
        prose = []
        fence = match["fence"]
        body: list[str] = []
        index += 1
        while index < len(lines):
            stripped = lines[index].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                index += 1
                break
            body.append(lines[index])
            index += 1
        segments.append(Segment("\n".join(body), match["info"].strip() or ""))
    if any(p.strip() for p in prose):
        segments.append(Segment("\n".join(prose).strip("\n")))
    return segments


_BLOCK_BREAK = re.compile(r"\n[ \t]*\n(?=\S)")
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,9}[.)])[ \t]")
CHUNK_LINES = 12
"""A long list is rendered in pieces of about this many lines."""


def prose_blocks(text: str) -> list[str]:
    """Prose cut where Markdown starts a new block anyway.

    Cuts at blank lines followed by an unindented line, and inside long
    blocks before top-level list items (an ordered item keeps its number:
    a list piece may start at 13).  Rendering the pieces separately looks
    the same, and while an answer streams only its last piece changes: a
    60-item list no longer re-lays out as a whole twenty times a second.
    Indented lines stay with their item: they may continue it.
    """
    out: list[str] = []
    for block in _BLOCK_BREAK.split(text):
        if block.strip():
            out += _list_pieces(block)
    return out


def _list_pieces(block: str) -> list[str]:
    lines = block.split("\n")
    if len(lines) <= CHUNK_LINES:
        return [block]
    pieces: list[list[str]] = [[]]
    for line in lines:
        if len(pieces[-1]) >= CHUNK_LINES and _LIST_ITEM.match(line):
            pieces.append([])
        pieces[-1].append(line)
    return ["\n".join(piece) for piece in pieces]


LINE_SEPARATOR = "\u2028"
"""Qt keeps U+2028 as a line break inside its paragraph (``<br />`` in the HTML)."""
_STARTS_BLOCK = re.compile(
    r"^(?:[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|#{1,6}(?:[ \t]|$)|>"
    r"|(?:[-*_][ \t]*){3,}$|[-=]+[ \t]*$)"
)
"""A line that starts a block of its own (list item, heading, quote, rule, heading underline)."""
_ONE_LINE_BLOCK = re.compile(r"^(?:#{1,6}(?:[ \t]|$)|(?:[-*_][ \t]*){3,}$)")
"""A line that is a whole block: an ATX heading or a rule."""
_CODE_INDENT = re.compile(r"^(?: {4}|\t)")


def hard_breaks(text: str) -> str:
    """*text* with each newline that Markdown would fold into a space kept as a line break.

    Markdown joins the lines of a paragraph into one, but a chat message
    means its newlines: a model listing "Sintra: 15 May" and "Fado: 13 May"
    on two lines, or a user pasting an address, expects two lines in the
    bubble.  Such a newline becomes U+2028, which Qt shows as a line break
    inside the paragraph (Markdown's own hard break would start a new
    paragraph with its margins).  A newline where Markdown starts a block
    anyway (a list item, heading, quote, rule, a heading's underline, a
    blank line) stays, and so does every newline around a table row, after
    a heading or an explicit break, and inside an indented code block.
    """
    lines = text.split("\n")
    out = [lines[0]]
    for following in lines[1:]:
        line = out[-1]
        ahead = following.lstrip()
        code = _CODE_INDENT.match(line) and _CODE_INDENT.match(following)  # an indented block
        if not code and _joins(line, ahead) and "|" not in line and "|" not in following:
            out[-1] = line.rstrip() + LINE_SEPARATOR + ahead
        else:
            out.append(following)
    return "\n".join(out)


def _joins(line: str, ahead: str) -> bool:
    """Whether Markdown would fold the newline between *line* and the next line (*ahead*)."""
    last = line.rsplit(LINE_SEPARATOR, 1)[-1].lstrip()
    if not last or not ahead or line.endswith(("  ", "\\")):
        return False
    return not _STARTS_BLOCK.match(ahead) and not _ONE_LINE_BLOCK.match(last)


class CitationLinks(Protocol):
    """What makes a citation in an answer a link (see ``ui.document_viewer``)."""

    def known(self, path: str) -> bool: ...

    def open(self, text: str, parent: QWidget | None) -> object: ...


def link_citations(text: str, known: Callable[[str], bool]) -> str:
    """*text* with each citation of a known collection file made a Markdown ``cite:`` link.

    A citation in backticks keeps them inside the link; one already inside a
    link — a URL's ``(…)``, a path's ``/…``, a link label's ``[…](`` — is
    left alone, while one merely in brackets (``[notes/a.md:3-5]``) is linked.
    """
    out: list[str] = []
    last = 0
    for start, end, citation in find_citations(text):
        if start < last or not known(citation.path):
            continue
        if start and text[start - 1] in "(/":
            continue
        if start and text[start - 1] == "[" and text[end : end + 2] == "](":
            continue
        ticked = start > 0 and text[start - 1] == "`" and text[end : end + 1] == "`"
        left, right = (start - 1, end + 1) if ticked else (start, end)
        if left < last:
            continue
        label = text[left:right]
        out.append(text[last:left])
        out.append(f"[{label}]({CITE_SCHEME}{quote(text[start:end], safe='/')})")
        last = right
    out.append(text[last:])
    return "".join(out)


def open_link(link: str, parent: QWidget | None, links: CitationLinks | None = None) -> None:
    """A link in a message: a citation opens its document (through *links*), anything
    else the browser."""
    if link.startswith(CITE_SCHEME):
        if links is not None and shiboken6.isValid(links):
            links.open(unquote(link[len(CITE_SCHEME) :]), parent)
        return
    QDesktopServices.openUrl(QUrl(link))


_LONG_RUN = re.compile(rf"[^\s\u200b]{{{BREAK_RUN},}}")
_HTML_TEXT = re.compile(r">([^<]+)<")
_ENTITY_OR_CHAR = re.compile(r"&#?\w+;|.", re.DOTALL)


def _break_run(match: re.Match[str]) -> str:
    units = _ENTITY_OR_CHAR.findall(match.group())
    return ZWSP.join("".join(units[i : i + BREAK_EVERY]) for i in range(0, len(units), BREAK_EVERY))


def soft_breaks(text: str) -> str:
    """*text* with invisible break opportunities inside long unbroken runs.

    A word-wrapping label cannot be narrower than its longest word, so one
    long URL or hash widened the whole chat column.  Zero-width spaces let
    the line wrap anywhere in such a run; shorter words wrap as before.
    Works on plain text and on HTML entities alike (an entity is one unit).
    """
    return _LONG_RUN.sub(_break_run, text)


def soft_breaks_html(html: str) -> str:
    """:func:`soft_breaks` on the text of an HTML body, never inside a tag or attribute."""
    head, found, body = html.partition("<body")
    if not found:
        return html
    return head + found + _HTML_TEXT.sub(lambda m: ">" + soft_breaks(m.group(1)) + "<", body)


def markdown_to_html(text: str) -> str:
    """Qt's Markdown reader (GitHub dialect, no raw HTML) as label-ready HTML."""
    doc = QTextDocument()
    features = (
        QTextDocument.MarkdownFeature.MarkdownDialectGitHub
        | QTextDocument.MarkdownFeature.MarkdownNoHTML
    )
    doc.setMarkdown(text, features)
    return _BODY_STYLE.sub("<body>", doc.toHtml(), count=1)


_BODY_STYLE = re.compile(r"<body style=\"[^\"]*\">")
"""``toHtml`` writes the font of the moment into the body (family, size in pt); without it the
label's own font applies, so a font-size change in Settings reaches messages already shown."""


class WrappingLabel(QLabel):
    """A word-wrapping label that remembers its height for a width.

    Qt's layouts ask a wrapping label for ``heightForWidth`` several times
    per layout pass, and QLabel lays its text out anew on every call; with a
    page of messages that made each pass slower the longer the page was.
    The answers are cached until the text changes; after a font or style
    change the owner calls :meth:`forget_heights` (no per-label event
    override: every Python override costs a GIL round trip per Qt call,
    which adds up while a worker thread runs Python).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self._heights: dict[int, int] = {}

    def heightForWidth(self, width: int) -> int:
        height = self._heights.get(width)
        if height is None:
            if len(self._heights) >= HEIGHT_CACHE:
                self._heights.clear()
            height = self._heights[width] = super().heightForWidth(width)
        return height

    def setText(self, text: str) -> None:
        self._heights.clear()
        super().setText(text)

    def forget_heights(self) -> None:
        self._heights.clear()
        self.updateGeometry()


class ProseLabel(WrappingLabel):
    """Selectable rich text that wraps (CJK included) and opens links.

    With *links*, citations of the user's documents become links that open
    the cited lines (the chat passes its :class:`CitationLinks`).
    """

    def __init__(self, parent: QWidget | None = None, links: CitationLinks | None = None) -> None:
        super().__init__(parent)
        self.links = links
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setOpenExternalLinks(False)
        self.linkActivated.connect(lambda link: open_link(link, self, self.links))
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.NoContextMenu)  # the bubble's menu
        self.source = ""

    def set_source(self, text: str) -> None:
        if text != self.source:
            self.source = text
            text = hard_breaks(text)
            if self.links is not None:
                text = link_citations(text, self.links.known)
            self.setText(soft_breaks_html(markdown_to_html(text)))


class CodeBlock(QFrame):
    """A fenced code block: language, Copy button, monospace body (scrolls sideways)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CodeBlock")
        self.code = ""
        self.language_label = QLabel()
        self.language_label.setObjectName("CodeLanguage")
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy this code to the clipboard")
        self.copy_button.setAutoRaise(True)
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.copy_button.clicked.connect(self.copy)
        header = QHBoxLayout()
        header.setContentsMargins(8, 2, 2, 0)
        header.addWidget(self.language_label, 1)
        header.addWidget(self.copy_button)
        self.body = QLabel()
        self.body.setTextFormat(Qt.TextFormat.PlainText)
        self.body.setFont(mono_font())
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setContentsMargins(8, 2, 8, 6)
        self.scroller = QScrollArea()
        self.scroller.setWidget(self.body)
        self.scroller.setWidgetResizable(True)
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.scroller)

    def set_code(self, code: str, language: str) -> None:
        if code == self.code and language == self.language_label.text():
            return
        self.code = code
        self.language_label.setText(language or "code")
        self.body.setText(code)
        self._fit_height()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_button.setText("Copied ✓")
        QTimer.singleShot(1500, self, lambda: self.copy_button.setText("Copy"))

    def _fit_height(self) -> None:
        """Height from line count and font metrics (QLabel.sizeHint lays out the text)."""
        metrics = self.body.fontMetrics()
        lines = self.code.split("\n")
        margins = self.body.contentsMargins()
        body = len(lines) * metrics.lineSpacing() + margins.top() + margins.bottom() + 2
        longest = max(lines, key=len)
        wide = metrics.horizontalAdvance(longest) + 16 > max(self.scroller.viewport().width(), 200)
        bar = self.scroller.horizontalScrollBar().sizeHint().height() if wide else 0
        self.scroller.setFixedHeight(body + bar)


class MarkdownView(QWidget):
    """A whole message: prose labels and code blocks, reused between renders."""

    def __init__(self, parent: QWidget | None = None, links: CitationLinks | None = None) -> None:
        super().__init__(parent)
        self.links = links
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._parts: list[QWidget] = []
        self._source = ""

    def markdown(self) -> str:
        """The Markdown source last rendered."""
        return self._source

    def code_blocks(self) -> list[CodeBlock]:
        return [p for p in self._parts if isinstance(p, CodeBlock)]

    def set_markdown(self, text: str) -> None:
        if text == self._source and self._parts:
            return
        self._source = text
        segments = [
            piece
            for segment in split_markdown(text)
            for piece in (
                [segment] if segment.is_code else [Segment(b) for b in prose_blocks(segment.text)]
            )
        ] or [Segment("")]
        for index, segment in enumerate(segments):
            self._put(index, segment)
        for extra in self._parts[len(segments) :]:
            self._layout.removeWidget(extra)
            extra.deleteLater()
        del self._parts[len(segments) :]

    def _put(self, index: int, segment: Segment) -> None:
        current = self._parts[index] if index < len(self._parts) else None
        wanted = CodeBlock if segment.is_code else ProseLabel
        if not isinstance(current, wanted):
            widget: QWidget = CodeBlock(self) if segment.is_code else ProseLabel(self, self.links)
            if current is None:
                self._parts.append(widget)
                self._layout.addWidget(widget)
            else:
                self._layout.replaceWidget(current, widget)
                current.deleteLater()
                self._parts[index] = widget
            current = widget
        if isinstance(current, CodeBlock):
            current.set_code(segment.text, segment.language or "")
        elif isinstance(current, ProseLabel):
            current.set_source(segment.text)
