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
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QScrollArea, QTabWidget, QWidget

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations.changes import MemoryChanges, summary_changes
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector.common import InspectorTab
from agenvoy_desktop.ui.inspector.context_tab import ContextTab
from agenvoy_desktop.ui.inspector.documents_tab import DocumentsTab
from agenvoy_desktop.ui.inspector.errors_tab import ErrorsTab
from agenvoy_desktop.ui.inspector.models_tab import ModelsTab
from agenvoy_desktop.ui.inspector.recall_tab import RecallTab
from agenvoy_desktop.ui.inspector.summary_tab import SummaryTab

MIN_TAB_WIDTH = 260
"""Below this width the Summary, Context, Recall and Error memory tabs scroll sideways
(340 before their rows wrapped: the side panel of a 1280-pixel screen scrolled)."""
REFLOWING = ("models", "documents")
"""Tabs that lay themselves out for any width."""


def _page(tab: QWidget, name: str) -> QWidget:
    """What the tab widget shows for *tab*: itself, or a scroll area around it."""
    if name in REFLOWING:
        return tab
    tab.setMinimumWidth(MIN_TAB_WIDTH)
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setWidget(tab)
    return scroll


class InspectorPanel(QTabWidget):
    """The tabs, the current session, and which tabs need a reload."""

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
        labels = ("Summary", "Context", "Recall", "Error memory", "Models", "Documents")
        for name, label in zip(self._tabs, labels, strict=True):
            self.addTab(self._pages[name], label)
        self.setTabToolTip(0, "The rolling summary of older messages")
        self.setTabToolTip(1, "Exactly what the model receives next turn")
        self.setTabToolTip(2, "Search the memory as the assistant does")
        self.setTabToolTip(3, "What the assistant learned from failed tool calls")
        self.setTabToolTip(4, "The models in use and available")
        self.setTabToolTip(5, "Your document collections: files, chunks and search")
        self.setDocumentMode(True)
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
