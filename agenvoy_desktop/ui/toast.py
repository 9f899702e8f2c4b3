"""Toasts: a short message with an action (Undo) that disappears by itself.

A toast replaces a "Are you sure?" dialog for reversible actions: the action
happens, the toast offers to take it back for its duration (10 s for reset
and remove), and a thin bar shows how much of that time is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.ui.theme import apply_sheet, colors

DEFAULT_DURATION_MS = 10_000
BOTTOM_MARGIN = 110
"""Above the message box, which stays usable while a toast is up."""
TICK_MS = 100

Action = tuple[str, Callable[[], object]]


def toast_style(palette: QPalette) -> str:
    c = colors(palette)
    return (
        f"#Toast {{ background: {c.chip}; border: 1px solid {c.border}; border-radius: 6px; }}"
        f" #Toast QProgressBar {{ border: none; background: transparent; }}"
        f" #Toast QProgressBar::chunk {{ background: {c.accent}; }}"
    )


class Toast(QFrame):
    """One message with buttons; closes after *duration_ms* or on any button."""

    closed = Signal()
    acted = Signal()
    """The user pressed a button (an action or ✕), not the clock: the owner may move
    the focus back where the user was typing."""

    def __init__(
        self,
        text: str,
        actions: Sequence[Action] = (),
        *,
        duration_ms: int = DEFAULT_DURATION_MS,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("Toast")
        self.duration_ms = duration_ms
        self._started = time.monotonic()
        self._closed = False
        self.label = QLabel(text)
        self.label.setWordWrap(True)
        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        row.setContentsMargins(12, 8, 6, 4)
        row.addWidget(self.label, 1)
        for caption, callback in actions:
            button = QPushButton(caption)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, cb=callback: self._trigger(cb))
            self.buttons[caption] = button
            row.addWidget(button)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self._dismiss_by_user)
        row.addWidget(close)
        self.bar = QProgressBar()
        self.bar.setRange(0, max(1, duration_ms))
        self.bar.setValue(duration_ms)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(3)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addLayout(row)
        outer.addWidget(self.bar)
        self.restyle()
        self._tick = QTimer(self)
        self._tick.timeout.connect(self._on_tick)
        self._tick.start(TICK_MS)
        QTimer.singleShot(duration_ms, self, self.dismiss)

    def text(self) -> str:
        return self.label.text()

    def set_text(self, text: str) -> None:
        self.label.setText(text)

    def dismiss(self) -> None:
        """Close without running an action (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._tick.stop()
        self.hide()
        self.closed.emit()
        self.deleteLater()

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _trigger(self, callback: Callable[[], object]) -> None:
        if self._closed:
            return
        self.dismiss()
        callback()
        self.acted.emit()

    def _dismiss_by_user(self) -> None:
        if not self._closed:
            self.dismiss()
            self.acted.emit()

    def _on_tick(self) -> None:
        left = self.duration_ms - (time.monotonic() - self._started) * 1000
        self.bar.setValue(max(0, round(left)))

    def restyle(self) -> None:
        apply_sheet(self, toast_style)


class ToastArea(QWidget):
    """Stacks toasts at the bottom centre of *host*, above its other children."""

    def __init__(self, host: QWidget) -> None:
        super().__init__(host)
        self.host = host
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        host.installEventFilter(self)
        self.hide()

    def show_toast(
        self,
        text: str,
        actions: Sequence[Action] = (),
        *,
        duration_ms: int = DEFAULT_DURATION_MS,
    ) -> Toast:
        toast = Toast(text, actions, duration_ms=duration_ms, parent=self)
        toast.closed.connect(lambda: self._remove(toast))
        self._layout.addWidget(toast)
        self.show()
        self._place()
        return toast

    def restyle(self) -> None:
        for toast in self.toasts():
            toast.restyle()

    def toasts(self) -> list[Toast]:
        out: list[Toast] = []
        for index in range(self._layout.count()):
            item = self._layout.itemAt(index)
            widget = item.widget() if item is not None else None
            if isinstance(widget, Toast) and not widget.is_closed:
                out.append(widget)
        return out

    def _remove(self, toast: Toast) -> None:
        self._layout.removeWidget(toast)
        if not self.toasts():
            self.hide()
        else:
            self._place()

    def _place(self) -> None:
        width = min(560, max(320, self.host.width() - 40))
        self.setFixedWidth(width)
        self.adjustSize()
        x = (self.host.width() - width) // 2
        y = self.host.height() - self.height() - BOTTOM_MARGIN
        self.move(max(0, x), max(0, y))
        self.raise_()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.host and event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False
