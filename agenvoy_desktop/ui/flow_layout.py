"""A row of controls that wraps onto more lines when its pane is narrow.

The side panel is about 310 pixels wide on a 1280-pixel laptop screen (the
chat keeps half the window) and 400 or more on a large one.  A row of filters
and buttons laid out by a QHBoxLayout either squeezes its widgets into
slivers there or forces the whole tab to scroll sideways.  :class:`FlowLayout`
places its widgets left to right and starts a new line when the next one
does not fit; on each line, widgets that want to grow (a horizontal size
policy with the expand flag, such as a QLineEdit) share the space left over.
"""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QStyle, QWidget


class FlowLayout(QLayout):
    """Left-to-right lines of widgets, wrapped at the layout's width."""

    def __init__(self, parent: QWidget | None = None, spacing: int = -1) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        if parent is None:
            self.setContentsMargins(QMargins(0, 0, 0, 0))

    # -- QLayout's item list -------------------------------------------------------------
    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    # -- sizes ---------------------------------------------------------------------------
    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), place=False)

    def sizeHint(self) -> QSize:
        """Everything on one line."""
        visible = self._visible()
        width = sum(item.sizeHint().width() for item in visible)
        width += self.spacing() * max(len(visible) - 1, 0)
        height = max((item.sizeHint().height() for item in visible), default=0)
        margins = self.contentsMargins()
        return QSize(
            width + margins.left() + margins.right(), height + margins.top() + margins.bottom()
        )

    def minimumSize(self) -> QSize:
        """The widest single widget: anything narrower would clip it."""
        size = QSize()
        for item in self._visible():
            size = size.expandedTo(item.minimumSize())
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def spacing(self) -> int:
        if self._spacing >= 0:
            return self._spacing
        parent = self.parent()
        if isinstance(parent, QWidget):
            return parent.style().pixelMetric(QStyle.PixelMetric.PM_LayoutHorizontalSpacing)
        if isinstance(parent, QLayout):
            return parent.spacing()
        return 6

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, place=True)

    # -- placing -------------------------------------------------------------------------
    def _visible(self) -> list[QLayoutItem]:
        return [item for item in self._items if not item.isEmpty()]

    def _arrange(self, rect: QRect, *, place: bool) -> int:
        """Lay the widgets out in *rect* (or only measure); returns the height used."""
        margins = self.contentsMargins()
        area = rect.marginsRemoved(margins)
        gap = self.spacing()
        lines: list[list[QLayoutItem]] = [[]]
        used = 0
        for item in self._visible():
            width = min(item.sizeHint().width(), area.width())
            if lines[-1] and used + gap + width > area.width():
                lines.append([])
                used = 0
            used += (gap if lines[-1] else 0) + width
            lines[-1].append(item)
        y = area.y()
        for line in lines:
            if not line:
                continue
            height = max(item.sizeHint().height() for item in line)
            if place:
                self._place_line(line, QPoint(area.x(), y), area.width(), height)
            y += height + gap
        return max(y - gap - area.y(), 0) + margins.top() + margins.bottom()

    def _place_line(self, line: list[QLayoutItem], at: QPoint, width: int, height: int) -> None:
        gap = self.spacing()
        widths = [min(item.sizeHint().width(), width) for item in line]
        growing = [i for i, item in enumerate(line) if _grows(item)]
        spare = width - sum(widths) - gap * (len(line) - 1)
        if growing and spare > 0:
            share, rest = divmod(spare, len(growing))
            for n, i in enumerate(growing):
                widths[i] += share + (1 if n < rest else 0)
        x = at.x()
        for item, item_width in zip(line, widths, strict=True):
            item_height = min(height, max(item.sizeHint().height(), item.minimumSize().height()))
            top = at.y() + (height - item_height) // 2
            item.setGeometry(QRect(x, top, item_width, item_height))
            x += item_width + gap


def flow_row(*widgets: QWidget) -> FlowLayout:
    """A :class:`FlowLayout` holding *widgets* in this order."""
    row = FlowLayout()
    for widget in widgets:
        row.addWidget(widget)
    return row


def _grows(item: QLayoutItem) -> bool:
    widget = item.widget()
    if widget is None:
        return False
    policy = widget.sizePolicy().horizontalPolicy()
    return bool(policy.value & QSizePolicy.PolicyFlag.ExpandFlag.value)
