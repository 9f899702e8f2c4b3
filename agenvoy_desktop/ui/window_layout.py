"""How the main window shares its width, and where focus goes after a dialog.

:class:`PanelSplitter` holds sessions | chat | side panel.  The chat is what
the window is for, so when the window is resized it keeps at least
:data:`CHAT_SHARE` of the width: the side panel gives way first, then the
sessions list, each down to its minimum.  A pane can be hidden (collapsed)
and shown again at the width it had.  A layout saved by an older version
(a pane narrower than its minimum, the chat squeezed) is corrected when it
is restored.

:class:`FocusReturn` gives the keyboard back to the chat composer when a
dialog of the window closes.  Without it the main window is left without an
active window or focus widget on some platforms (and offscreen), and no
shortcut works until the window is clicked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QApplication, QDialog, QMainWindow, QSplitter, QWidget

FIRST_SIZE = (1360, 860)
"""The window's size on a first start, where the screen has room for it."""
SCREEN_SHARE = 0.92
"""The most of the screen's free area a first window takes (a 1280 × 800 laptop)."""
CHAT_SHARE = 0.5
"""The part of the window's width the chat keeps when the window is resized."""
MIN_SESSIONS = 160
MIN_CHAT = 320
MIN_SIDE = 264
"""Room for the memory inspector's tabs at 10 pt without a sideways scroll bar (they need
about 257 pixels there); the sessions list gives way to 160 at 900 × 600 for it."""
SESSIONS, CHAT, SIDE = 0, 1, 2


class PanelSplitter(QSplitter):
    """Three panes; the middle one (the chat) keeps its share; the others fold away.

    The sessions list and the side panel each have a preferred width: the
    width the person last dragged them to (or the restored one).  On every
    resize they take that width back where the room allows, the chat gets the
    rest, and when the chat would fall below its share the side panel and
    then the sessions list give way, never below their minimums.
    """

    def __init__(self, sessions: QWidget, chat: QWidget, side: QWidget) -> None:
        super().__init__(Qt.Orientation.Horizontal)
        self.setChildrenCollapsible(False)
        for panel, minimum, stretch in (
            (sessions, MIN_SESSIONS, 0),
            (chat, MIN_CHAT, 1),
            (side, MIN_SIDE, 0),
        ):
            panel.setMinimumWidth(minimum)
            self.addWidget(panel)
            self.setStretchFactor(self.count() - 1, stretch)
        self.preferred: dict[int, int] = {SESSIONS: 250, SIDE: 410}
        """The width each side pane returns to when there is room."""
        self._learn_on_show = False
        self.splitterMoved.connect(lambda _pos, _index: self._learn(self.sizes()))

    def setSizes(self, sizes: Sequence[int]) -> None:
        """Sizes from a caller: they become the preferred widths too."""
        self._learn(list(sizes))
        super().setSizes(list(sizes))

    def _learn(self, sizes: list[int]) -> None:
        for index in (SESSIONS, SIDE):
            if sizes[index] > 0 and self.pane_shown(index):
                self.preferred[index] = max(sizes[index], self.pane(index).minimumWidth())

    # -- showing and hiding ----------------------------------------------------------
    def pane(self, index: int) -> QWidget:
        """The widget of pane *index* (:data:`SESSIONS`, :data:`CHAT` or :data:`SIDE`)."""
        widget = self.widget(index)
        assert widget is not None
        return widget

    def pane_shown(self, index: int) -> bool:
        return not self.pane(index).isHidden()

    def set_pane_shown(self, index: int, shown: bool) -> None:
        """Hide *index* (its width goes to the chat) or show it at its preferred width."""
        if shown == self.pane_shown(index):
            return
        self.pane(index).setVisible(shown)
        self.balance()
        QTimer.singleShot(0, self, self.balance)  # after the splitter's own relayout

    # -- the chat's share ----------------------------------------------------------------
    def chat_target(self) -> int:
        """The width the chat should have at least (never more than the others can give)."""
        window = self.window().width() if self.window() is not None else self.width()
        others = sum(self.pane(i).minimumWidth() for i in (SESSIONS, SIDE) if self.pane_shown(i))
        handles = self.handleWidth() * (self.count() - 1)
        room = self.width() - others - handles
        return max(MIN_CHAT, min(math.ceil(CHAT_SHARE * window), room))

    def balance(self) -> None:
        """Side panes at their preferred widths, less what the chat's share needs."""
        total = sum(self.sizes())
        if total <= 0:
            return  # not laid out yet: the first resize balances
        sizes = [0, 0, 0]
        for index in (SESSIONS, SIDE):
            if self.pane_shown(index):
                sizes[index] = self.preferred[index]
        sizes[CHAT] = total - sizes[SESSIONS] - sizes[SIDE]
        need = self.chat_target() - sizes[CHAT]
        for index in (SIDE, SESSIONS):
            if need <= 0:
                break
            give = max(0, min(need, sizes[index] - self.pane(index).minimumWidth()))
            sizes[index] -= give
            sizes[CHAT] += give
            need -= give
        if sizes != self.sizes():
            super().setSizes(sizes)

    def restore_widths(self, widths: Sequence[object] | None) -> None:
        """Preferred widths saved by :meth:`saved_widths`; None: learn them from the first layout.

        An older version saved only the splitter's state, whose sizes mean
        something only once the window has its size: they are read then, and
        a pane narrower than its minimum or a squeezed chat is corrected.
        """
        try:
            values = [int(str(w)) for w in widths or ()]
        except ValueError:
            values = []
        if len(values) != 2:
            self._learn_on_show = True
            return
        for index, width in zip((SESSIONS, SIDE), values, strict=True):
            self.preferred[index] = max(width, self.pane(index).minimumWidth())

    def saved_widths(self) -> list[int]:
        return [self.preferred[SESSIONS], self.preferred[SIDE]]

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._learn_on_show and self.isVisible():
            self._learn_on_show = False
            self._learn(self.sizes())
        self.balance()


def place_first_window(window: QWidget) -> None:
    """Size and centre a window that has no saved geometry on its screen.

    A fixed 1360 × 860 put the side panel's right edge (the Summarize button,
    the last table columns) off a 1280-pixel screen; the window now takes at
    most :data:`SCREEN_SHARE` of the screen's free area.
    """
    screen = window.screen() or QApplication.primaryScreen()
    if screen is None:
        window.resize(*FIRST_SIZE)
        return
    free = screen.availableGeometry()
    width = min(FIRST_SIZE[0], int(free.width() * SCREEN_SHARE))
    height = min(FIRST_SIZE[1], int(free.height() * SCREEN_SHARE))
    window.resize(width, height)
    window.move(free.x() + (free.width() - width) // 2, free.y() + (free.height() - height) // 2)


class FocusReturn(QObject):
    """Puts the keyboard back into the window when one of its dialogs closes.

    Watches the application's focus: when it leaves a dialog that belongs
    to *window* and lands nowhere (or in the window), the window is
    activated and *focus* runs (it focuses the chat composer) — unless
    another of the window's dialogs is still open, which then gets it.
    One place for every dialog: settings, file choosers, message boxes,
    confirmations.
    """

    def __init__(self, window: QMainWindow, focus: Callable[[], None]) -> None:
        super().__init__(window)
        self.window = window
        self.focus = focus
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        app.focusChanged.connect(self._on_focus_changed)  # dropped with this object

    def owns(self, widget: QWidget | None) -> bool:
        """Whether *widget* lies in a dialog of the window."""
        if widget is None:
            return False
        top = widget.window()
        return isinstance(top, QDialog) and self._ours(top)

    def _ours(self, dialog: QWidget) -> bool:
        """Opened over the window, or over one of its dialogs (a file chooser in Settings)."""
        parent = dialog.parentWidget()
        while parent is not None:
            top = parent.window()
            if top is self.window:
                return True
            parent = top.parentWidget() if isinstance(top, QDialog) else None
        return False

    def _on_focus_changed(self, old: QWidget | None, new: QWidget | None) -> None:
        if self.owns(old) and (new is None or new.window() is self.window):
            QTimer.singleShot(0, self, self.restore)

    def restore(self) -> None:
        """Focus the topmost open dialog of the window, else the window's composer."""
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        if not self.window.isVisible():
            return
        dialogs = [
            w
            for w in app.topLevelWidgets()
            if isinstance(w, QDialog) and w.isVisible() and self._ours(w)
        ]
        if dialogs:
            dialogs[-1].activateWindow()
            return
        if app.activeWindow() not in (None, self.window):
            return  # the person went to another window of the app on purpose
        self.window.activateWindow()
        self.focus()
