"""A push button, a check box and a text view whose text wraps instead of widening the panel.

A button or check box is as wide as its text on one line: at 16 pt "Look for
running servers" or "Skip the context window" is wider than the 250-pixel
side panel of a 900-pixel window, and the tab then scrolls sideways.  Here
the text is a word-wrapping :class:`QLabel` inside (beside, for the check
box); the widget needs only its longest word's width and grows in height
instead.  The widget keeps the text as its accessible name, so screen
readers, keyboard focus and tests still find it by what it says.
:class:`DetailView` shows labelled facts whose long values (paths, hashes,
tool names) break anywhere rather than set the view's width.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QMouseEvent, QTextOption
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QStyle,
    QStyleOptionButton,
    QTextBrowser,
    QWidget,
)


class WrappingButton(QPushButton):
    """A push button whose label wraps onto more lines when the button is narrow."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel(text, self)
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAccessibleName(text)
        policy = self.sizePolicy()
        # Preferred, not a push button's Minimum: layouts may shrink it below one line
        policy.setHorizontalPolicy(QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def label_text(self) -> str:
        """What the button says (its own ``text()`` is empty: the label shows it)."""
        return self.label.text()

    def _padding(self) -> QSize:
        """The room the style puts around a push button's contents."""
        option = QStyleOptionButton()
        self.initStyleOption(option)
        inner = QSize(0, self.fontMetrics().height())
        outer = self.style().sizeFromContents(
            QStyle.ContentsType.CT_PushButton, option, inner, self
        )
        return outer - inner

    def sizeHint(self) -> QSize:
        """The text on one line, as a plain button would be.

        Not the label's own size hint: a word-wrapping label proposes a
        "balanced" width that would break the text even where a line fits.
        """
        metrics = self.label.fontMetrics()
        line = QSize(metrics.horizontalAdvance(self.label.text()) + 2, metrics.height())
        return (line + self._padding()).expandedTo(super().sizeHint())

    def minimumSizeHint(self) -> QSize:
        """The longest word's width: narrower than that the text would be cut."""
        metrics = self.label.fontMetrics()
        widest = max((metrics.horizontalAdvance(w) for w in self.label.text().split()), default=0)
        width = widest + self._padding().width() + 2
        return QSize(width, self.heightForWidth(width))

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        padding = self._padding()
        inner = self.label.heightForWidth(max(width - padding.width(), 1))
        return max(inner, self.label.fontMetrics().height()) + padding.height()

    def resizeEvent(self, event: object) -> None:
        super().resizeEvent(event)  # type: ignore[arg-type]
        padding = self._padding()
        left, top = padding.width() // 2, padding.height() // 2
        self.label.setGeometry(
            left, top, self.width() - padding.width(), self.height() - padding.height()
        )


class _ClickableLabel(QLabel):
    """A check box's wrapping text: a click on it toggles the box, as on a box's own text."""

    def __init__(self, text: str, box: QCheckBox) -> None:
        super().__init__(text)
        self.box = box

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        inside = self.rect().contains(event.position().toPoint())
        if event.button() == Qt.MouseButton.LeftButton and inside and self.box.isEnabled():
            self.box.toggle()
            self.box.setFocus(Qt.FocusReason.MouseFocusReason)


class CheckRow(QWidget):
    """A text-less check box and its text beside it, word-wrapped.

    :attr:`box` is the check box to read and connect; it carries the text as
    its accessible name, and the label names it as its buddy.
    """

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.box = QCheckBox()
        self.box.setAccessibleName(text)
        self.label = _ClickableLabel(text, self.box)
        self.label.setWordWrap(True)
        self.label.setBuddy(self.box)
        self.label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.box, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.label, 1)
        self._line_up()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._line_up()

    def _line_up(self) -> None:
        """The box as tall as a line of its text: its mark sits level with the first line."""
        self.box.setMinimumHeight(self.label.fontMetrics().height())

    def setToolTip(self, text: str) -> None:
        """The tip on the box and its text alike."""
        super().setToolTip(text)
        self.box.setToolTip(text)
        self.label.setToolTip(text)


class DetailView(QTextBrowser):
    """Read-only rich text that wraps long values anywhere (it never scrolls sideways)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setOpenLinks(False)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMinimumHeight(150)
        self.viewport().setAutoFillBackground(False)

    def text(self) -> str:
        return self.toPlainText()
