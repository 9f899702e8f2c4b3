"""The small row of actions on a chat bubble: Copy, Edit, Regenerate, versions, Delete, Fork.

The row only says which action was asked for (:attr:`ActionRow.triggered`);
the chat's :mod:`message_actions` does it.  The same actions are in the
bubble's context menu (right click, the Menu key or Shift+F10 on a focused
bubble), so none of them needs the mouse or a hover.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QToolButton, QWidget


@dataclass(frozen=True, slots=True)
class BubbleAction:
    """One action: its name (what the handler sees), caption and tooltip."""

    name: str
    caption: str
    tip: str


COPY = BubbleAction("copy", "Copy", "Copy this message")
EDIT = BubbleAction("edit", "Edit", "Edit and send again (the answers after it are replaced)")
REGENERATE = BubbleAction("regenerate", "Regenerate", "Write this answer again")
DELETE = BubbleAction("delete", "Delete", "Delete this message (Undo for 10 s)")
FORK = BubbleAction("fork", "Fork", "Start a new session with the conversation up to here")
OLDER = BubbleAction("older", "‹", "The previous version of this answer")
NEWER = BubbleAction("newer", "›", "The next version of this answer")

ROLE_ACTIONS = {
    "user": (COPY, EDIT, DELETE, FORK),
    "assistant": (COPY, REGENERATE, DELETE, FORK),
}
ALWAYS = {COPY.name}
"""Actions that stay available while a turn runs in the session (they change nothing)."""


class ActionRow(QWidget):
    """The buttons of one bubble, plus the ‹ n/m › pager of an answer with versions."""

    triggered = Signal(str)

    def __init__(self, role: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("BubbleActions")
        self.actions_for_role = ROLE_ACTIONS.get(role, (COPY,))
        self.buttons: dict[str, QToolButton] = {}
        self.version_label = QLabel()
        self.version_label.setObjectName("BubbleHeader")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        for action in (OLDER,):
            layout.addWidget(self._button(action))
        layout.addWidget(self.version_label)
        layout.addWidget(self._button(NEWER))
        for action in self.actions_for_role:
            layout.addWidget(self._button(action))
        self.setMinimumWidth(1)  # a narrow column clips the row (the context menu has it all)
        self._enabled = True
        self._saved = False
        self._hover = False
        self.set_versions(0, 0)
        self._apply()

    def _button(self, action: BubbleAction) -> QToolButton:
        button = QToolButton()
        button.setText(action.caption)
        button.setToolTip(action.tip)
        button.setAccessibleName(action.tip)
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda _=False, name=action.name: self.triggered.emit(name))
        self.buttons[action.name] = button
        return button

    def set_versions(self, current: int, count: int) -> None:
        """Show ‹ current/count › (1-based) when the answer has more than one version.

        The pager stays visible without a hover: it tells that there are versions.
        """
        paged = count > 1
        self.version_label.setText(f"{current}/{count}" if paged else "")
        for widget in (self.buttons[OLDER.name], self.version_label, self.buttons[NEWER.name]):
            widget.setVisible(paged)
        self.buttons[OLDER.name].setEnabled(paged and current > 1)
        self.buttons[NEWER.name].setEnabled(paged and current < count)

    def set_hover(self, hover: bool) -> None:
        """Show the action buttons (pointer over the bubble, or focus in it)."""
        self._hover = hover
        for action in self.actions_for_role:
            self.buttons[action.name].setVisible(hover)

    @property
    def hovered(self) -> bool:
        return self._hover

    def set_state(self, *, enabled: bool, saved: bool) -> None:
        """``enabled``: no turn runs in the session; ``saved``: the message is stored."""
        self._enabled, self._saved = enabled, saved
        self._apply()

    def available(self, name: str) -> bool:
        """Whether *name* can run now (a stored message, no turn running; Copy always)."""
        return name in ALWAYS or (self._enabled and self._saved)

    def _apply(self) -> None:
        for action in self.actions_for_role:
            self.buttons[action.name].setEnabled(self.available(action.name))

    def menu(self, parent: QWidget) -> QMenu:
        """The same actions as a context menu."""
        menu = QMenu(parent)
        for action in self.actions_for_role:
            item = menu.addAction(action.caption)
            item.setToolTip(action.tip)
            item.setEnabled(self.available(action.name))
            item.triggered.connect(lambda _=False, name=action.name: self.triggered.emit(name))
        if self.version_label.text():
            menu.addSeparator()
            for action, caption in ((OLDER, "Previous version"), (NEWER, "Next version")):
                item = menu.addAction(caption)
                item.setEnabled(self.buttons[action.name].isEnabled())
                item.triggered.connect(lambda _=False, name=action.name: self.triggered.emit(name))
        return menu
