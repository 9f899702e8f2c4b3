"""The first start's welcome in the chat area: what is remembered, where, and a few examples.

A person who comes from GPT4All, Jan or LM Studio sees an empty chat and
does not know that this assistant keeps what they say, where it keeps it,
or how to see and delete it.  So while the profile holds no message at all,
the empty chat shows a few lines saying so and some example prompts; an
example fills the message box (it is not sent: the person reads it first).
The welcome goes away with the first message and does not come back once
the profile has history (:func:`profile_has_messages` decides; the chat
panel asks it off the UI thread).
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.ui.theme import apply_sheet, colors

TITLE = "Welcome to Agenvoy"
EXAMPLES = (
    "I'm allergic to peanuts. Please remember that.",
    "What do you remember about me?",
    "What did we talk about last time?",
    "Help me plan a week of vegetarian dinners.",
)
"""Example prompts: one that tells it something, two that use memory, one plain request."""
MAX_WIDTH = 640
"""The text column's width: long lines are hard to read in a wide window."""


def profile_has_messages(store: MemoryStore) -> bool:
    """Whether any session of the profile holds a message (storage thread).

    The archive holds every message ever written (also those compaction
    trimmed from a history file); a session that exists only as a folder
    (written by an older version) is counted from its history file.
    """
    if store.archive.count() > 0:
        return True
    return any(
        store.info(sid, vectors=False).history_messages > 0
        for sid in store.session_ids()
        if store.archive.session(sid) is None
    )


def welcome_lines(profile_folder: Path) -> list[str]:
    """The welcome's paragraphs (HTML): what it remembers, where, how to see and delete it."""
    folder = html.escape(str(profile_folder))
    return [
        "This assistant runs on this computer and <b>remembers</b>: what you tell it in one "
        "conversation it can recall in another, and it keeps a running summary of long ones.",
        f"Everything stays on this computer, in <code>{folder}</code>. "
        "Nothing is sent anywhere unless you connect it to a server yourself.",
        "The <b>Memory</b> panel on the right shows what it remembers and exactly what the "
        "model is sent. Any conversation can be reset or removed with one click "
        "(<b>Reset</b> and <b>Remove</b> in the toolbar, undo for 10 seconds).",
        "Try one of these, or type your own below:",
    ]


class WelcomePanel(QScrollArea):
    """The welcome text and example buttons; :attr:`example_chosen` carries the prompt."""

    example_chosen = Signal(str)

    def __init__(self, profile_folder: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Welcome")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.example_buttons: list[QPushButton] = []
        self.setWidget(self._content(profile_folder))
        self.restyle()

    def _content(self, profile_folder: Path) -> QWidget:
        column = QWidget()
        column.setMaximumWidth(MAX_WIDTH)
        layout = QVBoxLayout(column)
        layout.setContentsMargins(16, 24, 16, 16)
        layout.setSpacing(10)
        title = QLabel(TITLE)
        title.setObjectName("WelcomeTitle")
        title.setAccessibleName(TITLE)
        layout.addWidget(title)
        for line in welcome_lines(profile_folder):
            label = QLabel(line)
            label.setObjectName("WelcomeText")
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
            layout.addWidget(label)
        for text in EXAMPLES:
            layout.addWidget(self._example(text))
        layout.addStretch(1)
        column.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        outer = QWidget()
        centred = QHBoxLayout(outer)
        centred.setContentsMargins(0, 0, 0, 0)
        centred.addStretch(0)
        centred.addWidget(column, 1)
        centred.addStretch(0)
        return outer

    def _example(self, text: str) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName("WelcomeExample")
        button.setToolTip("Put this into the message box (it is not sent yet)")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setMinimumWidth(0)  # a narrow chat clips a long example rather than widening
        button.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        button.clicked.connect(lambda _=False, t=text: self.example_chosen.emit(t))
        self.example_buttons.append(button)
        return button

    def restyle(self) -> None:
        """Colours from the application palette (again after a light/dark switch)."""
        apply_sheet(
            self,
            lambda p: (
                "#WelcomeTitle { font-size: 16pt; font-weight: 600; }"
                f" #WelcomeText {{ color: {colors(p).text}; }}"
                f" #WelcomeExample {{ text-align: left; padding: 6px 10px;"
                f" border: 1px solid {colors(p).border}; border-radius: 6px;"
                f" background: {colors(p).assistant_bubble}; color: {colors(p).text}; }}"
                f" #WelcomeExample:hover {{ border-color: {colors(p).accent}; }}"
            ),
        )
