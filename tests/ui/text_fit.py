"""Does every visible piece of text fit the widget that shows it?

:func:`clipped_texts` walks the visible widgets under a root (a window, a
dialog) and measures each text with the widget's own font metrics against
the room its geometry leaves: labels, buttons, check and radio boxes, tab
bar tabs, header sections and a combo box's current text.  It reports what
does not fit as readable lines (class, objectName or text, needed and
available pixels) so a failing test says what to fix.

What is *not* a clip:

- a word-wrapping label: it is judged by height (its wrapped text must fit
  its height, or its scroll area scrolls);
- text elided on purpose with the full text in the tooltip (a tab, a
  header, a button or label whose tooltip holds the full text);
- a widget inside a scroll area, past the area's visible part, that the
  user reaches by scrolling (only the widget's own size is judged);
- a tab bar with scroll buttons is a clip (the issue's "Mo…"): every tab
  must be on screen.

The measurements are approximate on purpose (a few pixels of slack): the
style's exact margins differ per platform, and the test is about text that
is visibly cut, not about a pixel.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from PySide6 import QtGui
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QCheckBox,
    QComboBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QRadioButton,
    QStyle,
    QStyleOptionButton,
    QStyleOptionComboBox,
    QTabBar,
    QToolButton,
    QWidget,
)

SLACK = 2
"""Pixels a text may overrun its room before it counts as clipped (anti-aliasing, rounding)."""


@dataclass(frozen=True)
class Clip:
    """One text that does not fit."""

    kind: str
    name: str
    text: str
    need: int
    have: int

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}: {self.text!r} needs {self.need} px, has {self.have}"


def _name(widget: QWidget) -> str:
    return widget.objectName() or type(widget.parentWidget()).__name__


def _shown(widget: QWidget) -> bool:
    """Visible and with an area: a collapsed or zero-sized widget shows nothing."""
    return widget.isVisible() and widget.width() > 0 and widget.height() > 0


def _plain(text: str) -> str:
    """The text a label shows (rich text is judged by its own layout, not here)."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def _widest_line(metrics: QFontMetrics, text: str) -> int:
    return max((metrics.horizontalAdvance(line) for line in text.split("\n")), default=0)


def _label_clip(label: QLabel) -> Clip | None:
    text = label.text()
    if not text or label.textFormat() == Qt.TextFormat.RichText or QtGui.Qt.mightBeRichText(text):
        return _rich_label_clip(label)
    rect = label.contentsRect()
    margin = label.margin() * 2 + label.indent() if label.indent() > 0 else label.margin() * 2
    metrics = label.fontMetrics()
    if label.wordWrap():
        need_h = metrics.boundingRect(
            QRect(0, 0, max(1, rect.width() - margin), 100_000),
            int(Qt.TextFlag.TextWordWrap),
            text,
        ).height()
        if need_h > rect.height() + SLACK + metrics.descent():
            return Clip("QLabel(wrap)", _name(label), text[:60], need_h, rect.height())
        return None
    need = _widest_line(metrics, text)
    if need > rect.width() - margin + SLACK and not _explained(label, text):
        return Clip("QLabel", _name(label), text[:60], need, rect.width() - margin)
    return None


def _rich_label_clip(label: QLabel) -> Clip | None:
    """A rich-text label: its preferred height for its width must fit its height."""
    if not label.text():
        return None
    want = label.heightForWidth(label.width()) if label.wordWrap() else label.sizeHint().height()
    if want > label.height() + SLACK:
        return Clip("QLabel(rich)", _name(label), label.text()[:60], want, label.height())
    wide = label.sizeHint().width()
    if not label.wordWrap() and wide > label.width() + SLACK and not label.toolTip():
        return Clip("QLabel(rich)", _name(label), label.text()[:60], wide, label.width())
    return None


def _explained(widget: QWidget, text: str) -> bool:
    """Shortened on purpose: the full text is in the tooltip and what shows ends in an ellipsis."""
    tip = widget.toolTip()
    return bool(tip) and ("…" in text or text in tip) and len(tip) >= len(text)


def _button_clip(button: QAbstractButton) -> Clip | None:
    text = _plain(button.text())
    if not text:
        return None
    option = QStyleOptionButton()
    option.initFrom(button)
    option.text = button.text()
    option.icon = button.icon()
    option.iconSize = button.iconSize()
    style = button.style()
    metrics = button.fontMetrics()
    need = metrics.horizontalAdvance(text)
    if isinstance(button, QCheckBox | QRadioButton):
        indicator = style.pixelMetric(
            QStyle.PixelMetric.PM_IndicatorWidth
            if isinstance(button, QCheckBox)
            else QStyle.PixelMetric.PM_ExclusiveIndicatorWidth,
            option,
            button,
        )
        spacing = style.pixelMetric(QStyle.PixelMetric.PM_CheckBoxLabelSpacing, option, button)
        have = button.width() - indicator - spacing
    elif isinstance(button, QPushButton):
        margin = style.pixelMetric(QStyle.PixelMetric.PM_ButtonMargin, option, button)
        frame = style.pixelMetric(QStyle.PixelMetric.PM_DefaultFrameWidth, option, button)
        icon = button.iconSize().width() + 4 if not button.icon().isNull() else 0
        menu = 12 if button.menu() is not None else 0
        have = button.width() - margin - 2 * frame - icon - menu
    else:
        assert isinstance(button, QToolButton)
        have = button.width() - 6
        if button.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly:
            return None
        if button.popupMode() == QToolButton.ToolButtonPopupMode.MenuButtonPopup:
            have -= style.pixelMetric(QStyle.PixelMetric.PM_MenuButtonIndicator, option, button)
    if need > have + SLACK and not _explained(button, text):
        return Clip(type(button).__name__, _name(button), text, need, have)
    return None


def _tab_clips(bar: QTabBar) -> Iterator[Clip]:
    """Every tab on screen (no scroll arrows) and each tab's text whole or explained."""
    last = bar.tabRect(bar.count() - 1) if bar.count() else QRect()
    if bar.count() and last.right() > bar.width() + SLACK:
        yield Clip("QTabBar", _name(bar), bar.tabText(bar.count() - 1), last.right(), bar.width())
    metrics = bar.fontMetrics()
    pad = bar.style().pixelMetric(QStyle.PixelMetric.PM_TabBarTabHSpace, None, bar)
    for index in range(bar.count()):
        if not bar.isTabVisible(index):
            continue
        text = _plain(bar.tabText(index))
        need = metrics.horizontalAdvance(text)
        have = bar.tabRect(index).width() - pad // 2
        if need > have + SLACK and not bar.tabToolTip(index).startswith(text):
            yield Clip("QTabBar tab", _name(bar), text, need, have)


def _header_clips(header: QHeaderView) -> Iterator[Clip]:
    """Each visible section's title fits its section (or the column is the elided kind)."""
    model = header.model()
    if model is None or header.isHidden():
        return
    metrics = header.fontMetrics()
    pad = 2 * header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    orientation = header.orientation()
    for logical in range(header.count()):
        if header.isSectionHidden(logical):
            continue
        text = str(model.headerData(logical, orientation, Qt.ItemDataRole.DisplayRole) or "")
        if not text:
            continue
        size = header.sectionSize(logical)
        if orientation == Qt.Orientation.Horizontal:
            position = header.sectionViewportPosition(logical)
            if position + size <= 0 or position >= header.viewport().width():
                continue  # scrolled out of view: reachable, not clipped
            need = _widest_line(metrics, text)
        else:
            need = metrics.height() * (text.count("\n") + 1)
        if need + pad > size + SLACK:
            tip = model.headerData(logical, orientation, Qt.ItemDataRole.ToolTipRole)
            if not (tip and str(tip).startswith(text.rstrip("…"))):
                yield Clip("QHeaderView section", _name(header), text, need + pad, size)


def _combo_clip(combo: QComboBox) -> Clip | None:
    text = combo.currentText()
    if not text:
        return None
    option = QStyleOptionComboBox()
    option.initFrom(combo)
    option.editable = combo.isEditable()
    rect = combo.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox,
        option,
        QStyle.SubControl.SC_ComboBoxEditField,
        combo,
    )
    icon = combo.iconSize().width() + 4 if not combo.itemIcon(combo.currentIndex()).isNull() else 0
    need = combo.fontMetrics().horizontalAdvance(text)
    have = rect.width() - icon
    if need > have + SLACK and not _explained(combo, text):
        return Clip("QComboBox", _name(combo), text, need, have)
    return None


def _inside_item_view(widget: QWidget) -> bool:
    """An editor or index widget in a table: the view's own columns are judged instead."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractItemView) and not isinstance(parent, QHeaderView):
            return True
        parent = parent.parentWidget()
    return False


def _ancestors_shown(widget: QWidget, root: QWidget) -> bool:
    parent = widget.parentWidget()
    while parent is not None and parent is not root:
        if not _shown(parent):
            return False
        parent = parent.parentWidget()
    return True


def clipped_texts(root: QWidget) -> list[Clip]:
    """Every visible text under *root* (itself included) that does not fit its widget."""
    found: list[Clip] = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not _shown(widget) or not _ancestors_shown(widget, root):
            continue
        if isinstance(widget, QTabBar):
            found.extend(_tab_clips(widget))
        elif isinstance(widget, QHeaderView):
            found.extend(_header_clips(widget))
        elif _inside_item_view(widget) or isinstance(widget, QAbstractScrollArea):
            continue
        elif isinstance(widget, QLabel):
            found.extend(c for c in [_label_clip(widget)] if c)
        elif isinstance(widget, QAbstractButton):
            found.extend(c for c in [_button_clip(widget)] if c)
        elif isinstance(widget, QComboBox):
            found.extend(c for c in [_combo_clip(widget)] if c)
    return found


def report(clips: list[Clip], where: str) -> str:
    """A failure message: one line per clipped text."""
    lines = "\n".join(f"  {clip}" for clip in clips)
    return f"{len(clips)} clipped text(s) {where}:\n{lines}"
