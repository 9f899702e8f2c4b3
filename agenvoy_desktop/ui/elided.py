"""One-line labels and buttons elided to their width ("…").

A long title, header or path never widens the column it sits in (the chat, a
chip's header, a settings row): the widget shows what fits and keeps the
whole text for ``text()``; the button also shows it as its tooltip when it
is cut (a label's owner sets the tooltip it wants).
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QToolButton, QWidget


class ElidedLabel(QLabel):
    """A one-line label elided to its width ("…"): a narrow column never widens for it.

    *mode* says where the "…" goes: at the end for a title, in the middle for a
    path (its start and its last folder are what tell one path from another).
    """

    def __init__(
        self,
        text: str = "",
        parent: QWidget | None = None,
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight,
    ) -> None:
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setText(text)

    def text(self) -> str:
        return self._full

    def setText(self, text: str) -> None:
        self._full = text
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def minimumSizeHint(self) -> QSize:
        return QSize(20, super().minimumSizeHint().height())

    def _elide(self) -> None:
        room = max(20, self.contentsRect().width())
        shown = self.fontMetrics().elidedText(self._full, self._mode, room)
        if shown != super().text():
            super().setText(shown)


class ElidedButton(QToolButton):
    """A tool button whose one line is elided to its width (never widens the chat)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""

    def text(self) -> str:
        """The whole line, elided or not."""
        return self._full

    def setText(self, text: str) -> None:
        self._full = text
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def minimumSizeHint(self) -> QSize:
        return QSize(80, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(min(hint.width(), 240), hint.height())

    def _elide(self) -> None:
        room = max(40, self.width() - 28)  # the arrow and the padding
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, room)
        if shown != super().text():
            super().setText(shown)
        if shown != self._full:
            self.setToolTip(self._full)
