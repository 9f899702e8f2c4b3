"""The memory inspector: one tab per thing the assistant remembers or runs on.

Summary, Context, Recall, Error memory, Models and Documents.  Tabs load lazily: a
session switch, or a change the runner broadcasts that touches what a tab
shows (:attr:`InspectorTab.reload_on`), reloads the tab on screen and marks
the others stale, so the hidden ones cost nothing until the user looks at
them (the Context tab counts tokens with the chat model, which would
otherwise queue behind a streaming answer).

The panel can be narrow (the chat keeps half of a small window: about 310
pixels on a 1280-pixel screen).  The rows of filters and buttons wrap
(:class:`~agenvoy_desktop.ui.flow_layout.FlowLayout`) and tables scroll
inside themselves, so the Summary, Context, Recall and Error memory tabs fit
down to :data:`MIN_TAB_WIDTH`; below that each sits in a scroll area and
scrolls sideways instead of squeezing into slivers.  The Models and
Documents tabs reflow themselves.

The tab names are buttons in a row that wraps (:class:`TabStrip`) rather
than a :class:`~PySide6.QtWidgets.QTabBar`: six names do not fit one line
of a 240-pixel panel at a large font, and a tab bar then hides the last
ones behind scroll arrows.  The row breaks onto a second line instead, so
every tab is always one click away.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFrame,
    QScrollArea,
    QSizePolicy,
    QSpacerItem,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations.changes import MemoryChanges, summary_changes
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.flow_layout import FlowLayout
from agenvoy_desktop.ui.inspector.common import InspectorTab
from agenvoy_desktop.ui.inspector.context_tab import ContextTab
from agenvoy_desktop.ui.inspector.documents_tab import DocumentsTab
from agenvoy_desktop.ui.inspector.errors_tab import ErrorsTab
from agenvoy_desktop.ui.inspector.models_tab import ModelsTab
from agenvoy_desktop.ui.inspector.recall_tab import RecallTab
from agenvoy_desktop.ui.inspector.summary_tab import SummaryTab
from agenvoy_desktop.ui.pending_ops import PendingOps

MIN_TAB_WIDTH = 250
"""Below this width the Summary, Context, Recall and Error memory tabs scroll sideways
(340 before their rows wrapped: the side panel of a 1280-pixel screen scrolled)."""
REFLOWING = ("models", "documents")
"""Tabs that lay themselves out for any width."""


def _page(tab: QWidget, name: str) -> QWidget:
    """What the tab widget shows for *tab*: itself, or a scroll area around it."""
    if name in REFLOWING:
        return tab
    # The floor is a spacer, not a minimum width on the tab: a fixed minimum
    # would also cap it, and at a large font a control wider than the floor
    # (a check box's text) was cut instead of scrolling.
    holder = QWidget()
    column = QVBoxLayout(holder)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(0)
    column.addSpacerItem(QSpacerItem(MIN_TAB_WIDTH, 0, QSizePolicy.Policy.Fixed))
    column.addWidget(tab, 1)
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setWidget(holder)
    return scroll


class TabStrip(QWidget):
    """A wrapping row of exclusive buttons, one per page: tabs that never scroll."""

    clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("InspectorTabs")
        self.row = FlowLayout(self, spacing=2)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.group.idClicked.connect(self.clicked)

    def add(self, text: str, tip: str) -> None:
        button = QToolButton()
        button.setObjectName("InspectorTabButton")
        button.setText(text)
        button.setToolTip(tip)
        button.setCheckable(True)
        button.setAutoRaise(True)
        self.group.addButton(button, len(self.group.buttons()))
        self.row.addWidget(button)

    def button(self, index: int) -> QToolButton:
        button = self.group.button(index)
        assert isinstance(button, QToolButton)
        return button

    def select(self, index: int) -> None:
        self.button(index).setChecked(True)


TABS = (
    ("summary", "Summary", "The rolling summary of older messages"),
    ("context", "Context", "Exactly what the model receives next turn"),
    ("recall", "Recall", "Search the memory as the assistant does"),
    ("errors", "Errors", "Error memory: what the assistant learned from failed tool calls"),
    ("models", "Models", "The models in use and available"),
    ("documents", "Documents", "Your document collections: files, chunks and search"),
)
"""Each tab's name, label and tooltip, in order."""


class InspectorPanel(QWidget):
    """The tabs, the current session, and which tabs need a reload."""

    currentChanged = Signal(int)

    message_activated = Signal(str)
    """A message id the chat should scroll to (a recall hit, a summary pass)."""

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.session_id: str | None = None
        self.summary_tab = SummaryTab(services, runner)
        self.context_tab = ContextTab(services, runner)
        self.recall_tab = RecallTab(services, runner)
        self.errors_tab = ErrorsTab(services, runner)
        self.models_tab = ModelsTab(services, runner)
        self.documents_tab = DocumentsTab(services, runner)
        self._tabs: dict[str, InspectorTab] = {
            "summary": self.summary_tab,
            "context": self.context_tab,
            "recall": self.recall_tab,
            "errors": self.errors_tab,
            "models": self.models_tab,
            "documents": self.documents_tab,
        }
        self._pages = {name: _page(tab, name) for name, tab in self._tabs.items()}
        self.strip = TabStrip()
        self.stack = QStackedWidget()
        for name, label, tip in TABS:
            self.strip.add(label, tip)
            self.stack.addWidget(self._pages[name])
        self.strip.select(0)
        self.strip.clicked.connect(self.setCurrentIndex)
        self.stack.currentChanged.connect(self.strip.select)
        self.stack.currentChanged.connect(self.currentChanged)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.strip)
        layout.addWidget(self.stack, 1)
        self.summary_tab.message_activated.connect(self.message_activated)
        self.recall_tab.message_activated.connect(self.message_activated)
        self._stale: set[str] = set(self._tabs)
        self.currentChanged.connect(lambda _index: self._refresh_current())
        runner.memory_changed.connect(self.memory_changed)
        self._follow_summaries(runner)

    def _follow_summaries(self, runner: AsyncRunner) -> None:
        """Broadcast what a summary pass or edit wrote, like any other write.

        Passes run in the background (after turns, when idle) and call their
        listeners on the loop, i.e. on this thread.
        """
        summarizer = getattr(self.services, "summarizer", None)
        if summarizer is None or not hasattr(summarizer, "on_pass"):
            return

        def listener(session_id: str, _record: object) -> None:
            runner.broadcast(summary_changes(session_id))

        unsubscribe = summarizer.on_pass(listener)
        self.destroyed.connect(lambda *_: unsubscribe())

    def follow_deletes(self, pending: PendingOps) -> None:
        """Leave out the messages *pending* is deleting, as the chat does, until it is undone.

        The chat hides a deleted message at once and the store deletes it ten
        seconds later; without this the Context and Recall tabs showed it from
        the store all that time.
        """
        for tab in self._tabs.values():
            tab.hidden_messages = pending.deleted_messages
        pending.changed.connect(self._deletes_changed)

    def _deletes_changed(self) -> None:
        self._stale.update(name for name, tab in self._tabs.items() if tab.deletes_changed())
        self._refresh_current()

    def set_session(self, session_id: str | None) -> None:
        """Show *session_id*'s memory (None: no session selected)."""
        if session_id == self.session_id:
            return
        self.session_id = session_id
        for name, tab in self._tabs.items():
            tab.set_session(session_id)
            if not tab.session_free:
                self._stale.add(name)
        self._refresh_current()

    def memory_changed(self, changes: MemoryChanges) -> None:
        """Mark the tabs that show a changed part stale; reload the one on screen."""
        self._stale.update(name for name, tab in self._tabs.items() if tab.wants_reload(changes))
        self._refresh_current()

    def refresh(self) -> None:
        """Reload every tab (the one on screen now, the others when shown)."""
        self._stale = set(self._tabs)
        self._refresh_current()

    # -- the QTabWidget calls the window and the tests make --------------------------------
    def count(self) -> int:
        return self.stack.count()

    def currentIndex(self) -> int:
        return self.stack.currentIndex()

    def setCurrentIndex(self, index: int) -> None:
        self.stack.setCurrentIndex(index)

    def currentWidget(self) -> QWidget | None:
        return self.stack.currentWidget()

    def setCurrentWidget(self, page: QWidget) -> None:
        self.stack.setCurrentWidget(page)

    def tabText(self, index: int) -> str:
        return self.strip.button(index).text()

    def show_tab(self, name: str) -> None:
        """Bring a tab to the front by its name (see :meth:`tab_names`)."""
        self.setCurrentWidget(self._pages[name])

    def current_tab(self) -> InspectorTab | None:
        """The tab on screen (inside its scroll area, if it has one)."""
        page = self.currentWidget()
        return next((self._tabs[n] for n, p in self._pages.items() if p is page), None)

    def tab_names(self) -> list[str]:
        return list(self._tabs)

    def _refresh_current(self) -> None:
        current = self.current_tab()
        for name, tab in self._tabs.items():
            if tab is current and name in self._stale:
                self._stale.discard(name)
                tab.refresh()
