"""Where a citation in an answer leads: the cited file, read-only, with the cited lines marked.

An answer built on ``search_rag`` cites its chunks (``notes/a.md:12-30``,
``report.pdf p. 3``).  :class:`CitationOpener` tells the chat which of
those name a file in a collection (from a cached list of the collections'
roots, so rendering a streaming answer never touches the disk) and opens
:class:`DocumentViewer` on a click.  The file is read on a worker thread
and only through :func:`~agenvoy_desktop.operations.documents.read_cited`,
which refuses anything outside the collections' roots.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QColor, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.operations.documents import (
    Citation,
    CitedText,
    citation_roots,
    parse_citation,
    read_cited,
)
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.theme import mono_font

MARK = QColor(255, 224, 130, 150)
CONTEXT_LINES = 3


class DocumentViewer(QDialog):
    """A cited file's text, read-only, the cited lines marked and scrolled into view."""

    def __init__(self, citation: Citation, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.citation = citation
        self.setWindowTitle(f"{citation.text} — cited document")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.resize(820, 620)
        self.where = QLabel("Loading…")
        self.where.setWordWrap(True)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(mono_font())
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.where)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.marked: tuple[int, int] | None = None
        """The 1-based line range marked (None: nothing to mark)."""

    def show_text(self, cited: CitedText) -> None:
        self.text.setPlainText(cited.text)
        note = f" · {cited.note}" if cited.note else ""
        if cited.first_line is None:
            self.where.setText(f"{cited.file}{note}")
            return
        count = self.text.document().blockCount()
        first = max(1, min(cited.first_line, count))
        last = max(first, min(cited.last_line or first, count))
        place = f"line {first}" if first == last else f"lines {first}–{last}"
        self.where.setText(f"{cited.file} · {place}{note}")
        self.marked = (first, last)
        self._mark(first, last)

    def show_problem(self, message: str) -> None:
        self.where.setText(message)
        self.where.setStyleSheet("color: #c62828; font-weight: 600;")

    def _mark(self, first: int, last: int) -> None:
        doc = self.text.document()
        start = QTextCursor(doc.findBlockByNumber(first - 1))
        end_block = doc.findBlockByNumber(last - 1)
        end = end_block.position() + end_block.length() - 1
        start.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = start
        selection.format.setBackground(MARK)
        selection.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
        self.text.setExtraSelections([selection])
        self.text.setTextCursor(QTextCursor(doc.findBlockByNumber(first - 1)))
        bar = self.text.verticalScrollBar()  # a few lines of what comes before stay in view
        bar.setValue(min(bar.maximum(), max(0, first - 1 - CONTEXT_LINES)))


ROOTS_RETRY_MS = 200
"""How soon the opener looks again for the event loop it reads the collections on."""


class CitationOpener(QObject):
    """Which citations are links, and opening one (see the module docstring).

    The chat hands one to every message's Markdown view; it re-reads the
    collections' roots whenever the runner broadcasts a documents change.
    """

    def __init__(self, paths: AppPaths, runner: AsyncRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.paths = paths
        self.runner = runner
        self.roots: dict[str, Path] = {}
        self.viewers: list[DocumentViewer] = []
        runner.memory_changed.connect(self._memory_changed)
        QTimer.singleShot(0, self, self.reload_roots)

    def _memory_changed(self, changes: MemoryChanges) -> None:
        if changes.documents:
            self.reload_roots()

    def reload_roots(self) -> Operation | None:
        """Re-read which folders the collections cover (on a worker thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the window is built before the loop runs: try again then
            QTimer.singleShot(ROOTS_RETRY_MS, self, self.reload_roots)
            return None
        paths = self.paths

        async def read(_op: Operation) -> dict[str, Path]:
            return await asyncio.to_thread(citation_roots, paths)

        return self.runner.run(read, what="read the document collections", on_success=self._set)

    def _set(self, roots: dict[str, Path]) -> None:
        self.roots = roots

    def known(self, path: str) -> bool:
        """Whether *path* starts with a collection root's label (the file is checked on open)."""
        return path.partition("/")[0] in self.roots

    def open(self, text: str, parent: QWidget | None) -> DocumentViewer | None:
        """Show the cited place of *text* (``path:12-30`` / ``path p. 3``) in a viewer."""
        citation = parse_citation(text)
        if citation is None:
            return None
        viewer = DocumentViewer(citation, parent.window() if parent is not None else None)
        self.viewers = [v for v in self.viewers if _alive(v)] + [viewer]
        roots = dict(self.roots)

        async def read(_op: Operation) -> CitedText:
            return await asyncio.to_thread(read_cited, roots, citation)

        def failed(exc: BaseException) -> None:
            if _alive(viewer):
                viewer.show_problem(f"Cannot show {citation.text}: {self.runner.readable(exc)}")

        self.runner.run(
            read,
            what="open the cited document",
            on_success=lambda cited: viewer.show_text(cited) if _alive(viewer) else None,
            on_failure=failed,
        )
        viewer.show()
        return viewer


def _alive(widget: QWidget) -> bool:
    import shiboken6

    return shiboken6.isValid(widget)
