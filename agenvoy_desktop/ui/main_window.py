"""The main window: sessions | chat | timeline and memory inspector.

The window lays the panels out, wires them together and keeps the window
state: the current session, new and rename, settings.  Reset, remove, export
and import (with their undo window and toasts) live in
:class:`~agenvoy_desktop.ui.session_actions.SessionActions`, which the window
owns and points its toolbar and menus at; each panel loads its own data
through the :class:`AsyncRunner`.

Window geometry, splitter sizes, which panes are shown, the side tab and the
last open session are kept in ``window.ini`` in the profile's config folder (a ``QSettings`` INI
file, never the platform registry, so a test profile stays self-contained).
"""

from __future__ import annotations

import asyncio
import functools
import html
import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QSettings, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QMainWindow,
    QMessageBox,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop import __version__
from agenvoy_desktop.agent.services import AppServices, note_missing
from agenvoy_desktop.core.search import Withheld
from agenvoy_desktop.core.summarizer import PassProgress
from agenvoy_desktop.llm.build_info import about_lines
from agenvoy_desktop.operations import sessions as session_ops
from agenvoy_desktop.operations.changes import (
    MODELS_CHANGED,
    VECTORS_CHANGED,
    MemoryChanges,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, ErrorStrip, Operation, ProgressStrip
from agenvoy_desktop.ui.chat_panel import ChatPanel
from agenvoy_desktop.ui.document_watch import DocumentWatch
from agenvoy_desktop.ui.inspector.panel import InspectorPanel
from agenvoy_desktop.ui.model_switcher import ModelSwitcher
from agenvoy_desktop.ui.pending_ops import UNDO_WINDOW_MS, PendingOp
from agenvoy_desktop.ui.session_actions import PathChooser, SessionActions
from agenvoy_desktop.ui.sessions_panel import SessionsPanel
from agenvoy_desktop.ui.sessions_watch import SessionsWatch
from agenvoy_desktop.ui.settings_dialog import SettingsDialog
from agenvoy_desktop.ui.theme import apply_appearance
from agenvoy_desktop.ui.timeline_panel import TimelinePanel
from agenvoy_desktop.ui.toast import ToastArea
from agenvoy_desktop.ui.window_layout import (
    SESSIONS,
    SIDE,
    FocusReturn,
    PanelSplitter,
    place_first_window,
)

log = logging.getLogger(__name__)

STATE_FILE = "window.ini"
SUMMARY_NOTE_MS = 15_000
"""A summary's progress note stays this long without news (a pass reports every topic)."""


class MainWindow(QMainWindow):
    """See the module docstring."""

    closed = Signal()
    document_watch: DocumentWatch | None = None
    """Follows watched document folders once the window has started."""
    sessions_watch: SessionsWatch | None = None
    """Shows sessions other processes add or remove, once the window has started."""

    def __init__(
        self,
        services: AppServices,
        runner: AsyncRunner,
        *,
        undo_ms: int = UNDO_WINDOW_MS,
        state: QSettings | None = None,
    ) -> None:
        super().__init__()
        self.services = services
        self.runner = runner
        self.state = state or QSettings(
            str(services.paths.config_dir / STATE_FILE), QSettings.Format.IniFormat
        )
        self._sid: str | None = None
        self.setWindowTitle("Agenvoy Desktop")
        self._build_panels()
        self.session_actions = SessionActions(self, self, undo_ms=undo_ms)
        self.pending = self.session_actions.pending
        self._build_actions()
        self._connect()
        self.progress = ProgressStrip()
        self.statusBar().addPermanentWidget(self.progress)
        runner.progress_host = self.progress
        runner.error_reported.connect(self.errors.show_error)
        self.focus_return = FocusReturn(self, self.chat.focus_input)
        self._follow_summary_passes()
        self._restore_layout()

    # -- construction -------------------------------------------------------------------
    def _build_panels(self) -> None:
        services, runner = self.services, self.runner
        self.errors = ErrorStrip()
        self.sessions = SessionsPanel(services, runner)
        self.chat = ChatPanel(services, runner)
        switcher = ModelSwitcher(services, runner)
        switcher.more_requested.connect(self.open_model_source)
        self.chat.set_input_header(switcher)
        self.chat.session_provider = self._session_for_message
        self.chat.show_session = self.select_session
        self.timeline = TimelinePanel(services, runner)
        self.inspector = InspectorPanel(services, runner)
        self.side = QTabWidget()
        self.side.addTab(self.timeline, "Timeline")
        self.side.addTab(self.inspector, "Memory")
        self.splitter = PanelSplitter(self.sessions, self.chat, self.side)
        self.splitter.setSizes([250, 700, 410])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 4, 6, 0)
        layout.addWidget(self.errors)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.toasts = ToastArea(central)

    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None,
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(lambda _=False: slot())
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        a, acts = self._action, self.session_actions
        self.new_action = a("New", self.new_session, QKeySequence.StandardKey.New)
        self.new_action.setToolTip("New session (Ctrl+N)")
        self.search_action = a("Find Sessions", self.sessions.focus_search, "Ctrl+F")
        self.focus_action = a("Focus Message Box", self.chat.focus_input, "Ctrl+K")
        self.stop_action = a("Stop Generating", self.chat.stop, "Esc")
        self.stop_action.setEnabled(False)
        self.rename_action = a("Rename", self.sessions.rename_current, "F2")
        self.reset_action = a("Reset", lambda: acts.reset_session(self._sid))
        self.reset_action.setToolTip(
            "Clear this session's messages; its summary is kept (undo 10 s)"
        )
        self.reset_all_action = a(
            "Reset, Summary Too", lambda: acts.reset_session(self._sid, clear_summary=True)
        )
        self.reset_all_action.setToolTip(
            "Clear this session's messages and its summary; nothing of them is kept (undo 10 s)"
        )
        self.remove_action = a("Remove", lambda: acts.remove_session(self._sid))
        self.remove_action.setToolTip("Delete this session and all its memory (undo 10 s)")
        self.export_remove_action = a(
            "Export First, Then Remove…", lambda: acts.export_then_remove(self._sid)
        )
        self.export_md_action = a(
            "Export as Markdown…", lambda: acts.export_session(self._sid, "markdown")
        )
        self.export_json_action = a(
            "Export as JSON…", lambda: acts.export_session(self._sid, "json")
        )
        self.import_action = a("Import Chat History…", acts.import_file, "Ctrl+I")
        self.import_action.setToolTip(
            "A ChatGPT, Claude, Open WebUI, LM Studio or Jan export, or our own; previewed first"
        )
        self.import_folder_action = a("Import Chat History Folder…", acts.import_folder)
        self.find_histories_action = a("Find Chat Histories on This Computer…", acts.find_histories)
        self.settings_action = a(
            "Settings…", self.open_settings, QKeySequence.StandardKey.Preferences
        )
        self.folder_action = a("Open Data Folder", self.open_data_folder)
        self.quit_action = a("Quit", self.close, QKeySequence.StandardKey.Quit)
        self._build_menus()
        self._build_toolbar()

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addActions(
            [
                self.new_action,
                self.import_action,
                self.import_folder_action,
                self.find_histories_action,
            ]
        )
        export = file_menu.addMenu("Export")
        export.addActions([self.export_md_action, self.export_json_action])
        file_menu.addSeparator()
        file_menu.addActions([self.folder_action, self.settings_action])
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        edit = bar.addMenu("&Edit")
        edit.addActions([self.search_action, self.focus_action, self.stop_action])
        session = bar.addMenu("&Session")
        session.addActions(
            [self.rename_action, self.reset_action, self.reset_all_action, self.remove_action]
        )
        session.addAction(self.export_remove_action)
        view = bar.addMenu("&View")
        self.sessions_toggle = self._pane_toggle("Sessions List", SESSIONS, "Ctrl+Shift+S")
        self.side_toggle = self._pane_toggle("Memory && Timeline Panel", SIDE, "Ctrl+Shift+M")
        view.addActions([self.sessions_toggle, self.side_toggle])
        view.addSeparator()
        for index, name in enumerate(("Timeline", "Memory")):
            view.addAction(
                self._action(
                    f"Show {name}",
                    functools.partial(self.side.setCurrentIndex, index),
                    f"Ctrl+{index + 1}",
                )
            )
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._action("About Agenvoy Desktop", self._about))

    def _pane_toggle(self, name: str, pane: int, shortcut: str) -> QAction:
        """A checkable View entry that hides and shows one side pane."""
        action = self._action(f"Show {name}", lambda: None, shortcut)
        action.setCheckable(True)
        action.setChecked(True)
        action.toggled.connect(lambda shown: self.set_pane_shown(pane, shown))
        return action

    def set_pane_shown(self, pane: int, shown: bool) -> None:
        """Collapse or restore the sessions list or the side panel (View menu)."""
        widget = self.splitter.pane(pane)
        focused = QApplication.focusWidget()
        if not shown and focused is not None and widget.isAncestorOf(focused):
            self.chat.focus_input()  # the keyboard must not stay in a hidden pane
        self.splitter.set_pane_shown(pane, shown)
        toggle = self.sessions_toggle if pane == SESSIONS else self.side_toggle
        if toggle.isChecked() != shown:
            toggle.setChecked(shown)

    def _build_toolbar(self) -> None:
        tools = self.addToolBar("Main")
        tools.setObjectName("MainToolbar")
        tools.setMovable(False)
        tools.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tools.addActions([self.new_action, self.reset_action, self.remove_action])
        export = QToolButton()
        export.setText("Export")
        export.setToolTip("Export this session as Markdown or JSON")
        export.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        export.addActions([self.export_md_action, self.export_json_action])
        self.export_button = export
        tools.addWidget(export)
        tools.addSeparator()
        tools.addAction(self.settings_action)

    def _connect(self) -> None:
        self.sessions.session_selected.connect(self.select_session)
        self.sessions.new_requested.connect(self.new_session)
        self.sessions.rename_requested.connect(self.rename_session)
        self.sessions.action_requested.connect(self.session_actions.run_named)
        self.sessions.follow(self.pending)
        # A message deleted in the chat leaves every view at once, and comes back on Undo.
        self.inspector.follow_deletes(self.chat.pending)
        self.timeline.follow_deletes(self.chat.pending)
        # ...and reaches no answer: recall and the search tool search every session
        self.services.withheld = self.withheld
        self.pending.changed.connect(self._withheld_sessions_changed)
        self.chat.pending_kind = self._pending_kind  # a recall chip hides their lines
        self.pending.executed.connect(lambda _op: self.chat.hide_withheld_recall())
        # the delete took the session's lines out of every recall record: reload them
        self.pending.executed.connect(lambda _op: self.timeline.refresh_soon())
        self.sessions.rename_finished.connect(self.chat.focus_input)
        self.chat.turn_started.connect(lambda _sid: self.stop_action.setEnabled(True))
        self.chat.turn_finished.connect(self._on_turn_finished)
        self.chat.settings_requested.connect(lambda: self.open_settings("Models"))
        self.chat.starter_requested.connect(self.use_starter_model)
        self.timeline.message_activated.connect(self.chat.reveal_message)
        self.inspector.message_activated.connect(self.chat.reveal_message)
        self._update_actions()

    # -- start and the current session -----------------------------------------------------
    def start(self) -> Operation:
        """Load the session list's first page and reopen the last session."""
        last = self.state.value("last_session")
        self._start_repairs()
        return self.sessions.load_first(str(last) if last else None, self.select_session)

    def _start_repairs(self) -> None:
        """Say what opening repaired; embed the messages it found without a vector.

        The embedding runs in small storage-thread batches, so chatting goes
        on meanwhile; its progress sits in the status bar, cancellable (the
        rest is embedded at the next start).
        """
        for notice in self.services.notices:
            self.errors.show_message(notice, "info")
        self.document_watch = DocumentWatch(
            self.services, self.runner, self.inspector.documents_tab, parent=self
        )
        self.document_watch.start()
        self.sessions_watch = SessionsWatch(
            self.services.paths.sessions_dir, self.runner, parent=self
        )
        if self.services.settings.documents.enabled:
            self.inspector.documents_tab.resume_interrupted()
            self.inspector.documents_tab.reindex_other_models()
        count = self.services.missing_vectors()
        if count:
            self._embed_in_background(f"Indexing {count:,} messages for recall…", None)

    def index_for_recall(self, session_ids: list[str]) -> Operation:
        """Embed what an import stored without vectors, as background work.

        Keyword search finds the messages at once; recall by meaning follows
        as the embedding goes on (status bar, cancellable; the rest is
        embedded at the next start).
        """
        return self._embed_in_background("Indexing imported messages for recall…", session_ids)

    def _embed_in_background(self, progress: str, sessions: list[str] | None) -> Operation:
        """Embed the messages without a vector (only *sessions*' when given; counted first)."""
        services = self.services

        async def embed(op: Operation) -> MemoryChanges:
            if sessions is not None:
                await services.storage.run(note_missing, services.store, sessions)
            await services.embed_missing(op.report_counts, op.is_cancelled, sessions=sessions)
            return VECTORS_CHANGED

        return self.runner.run_change(embed, what="index messages for recall", progress=progress)

    @property
    def session_id(self) -> str | None:
        return self._sid

    def withheld(self) -> Withheld:
        """Sessions removed or reset and messages deleted whose undo window is open: the
        view no longer shows them, so no turn may recall them (``services.withheld``)."""
        return self.pending.withheld() | self.chat.pending.withheld()

    def _withheld_sessions_changed(self) -> None:
        """A session entered or left its undo window: the Context tab of another session
        may quote its messages in the last recall block, and the chat's recall chips may
        quote them: both show them only while the session stands."""
        self.inspector.memory_changed(MemoryChanges(messages=True, session_id=self._sid))
        self.chat.hide_withheld_recall()
        self.timeline.refresh_soon()

    def _pending_kind(self, session_id: str) -> str | None:
        """The kind ("reset", "remove") of *session_id*'s operation in its undo window."""
        op = self.pending.pending_for(session_id)
        return None if op is None else op.kind

    def select_session(self, session_id: str | None, *, empty: bool = False) -> None:
        """Show *session_id* in every panel (``empty``: just created, nothing to load).

        The chat comes first; the timeline loads once the chat page is on
        screen, so a long session's timeline (storage-thread Python) does not
        compete with the chat's rendering for the GIL.
        """
        self._sid = session_id
        self.sessions.select(session_id)
        loading = self.chat.set_session(session_id, empty=empty)
        self.timeline.show_cleared()
        self.inspector.set_session(session_id)

        def then() -> None:
            if self._sid == session_id:
                self.timeline.set_session(session_id)

        if loading is None:
            then()
        else:
            loading.finished.connect(then)
        if session_id is not None:
            self.state.setValue("last_session", session_id)
        self._update_actions()

    def show_cleared(self) -> None:
        """The current session shown empty in every panel (a reset in its undo window)."""
        self.chat.show_cleared()
        self.timeline.show_cleared()
        self.inspector.set_session(None)

    def show_status(self, text: str, ms: int) -> None:
        self.statusBar().showMessage(text, ms)

    def _update_actions(self) -> None:
        has = self._sid is not None
        for action in (
            self.reset_action,
            self.reset_all_action,
            self.remove_action,
            self.export_remove_action,
            self.export_md_action,
            self.export_json_action,
            self.rename_action,
        ):
            action.setEnabled(has)
        self.export_button.setEnabled(has)

    def new_session(self) -> Operation:
        """Create an empty session and show it (Ctrl+N)."""

        def done(sid: str | None) -> None:
            if sid is not None:
                self.select_session(sid, empty=True)
                self.chat.focus_input()

        return self.runner.run_change(
            self.services.storage.run(session_ops.create_session, self.services.store),
            what="create a session",
            on_success=done,
        )

    async def _session_for_message(self) -> str:
        """The session a new message goes to: the current one, else a new one."""
        sid = self._sid
        if sid is not None and self.pending.pending_for(sid) is not None:
            await self.pending.flush(sid)  # typing into a reset session ends its undo window
        if sid is None or sid in self.pending.hidden_sessions():
            created = await self.services.storage.run(
                session_ops.create_session, self.services.store
            )
            self.runner.broadcast(created.changes)
            sid = created.value
            self.select_session(sid, empty=True)
        return sid

    def rename_session(self, session_id: str, title: str) -> Operation:
        return self.runner.run_change(
            self.services.storage.run(
                session_ops.rename_session, self.services.store, session_id, title
            ),
            what="rename the session",
        )

    # -- session actions (kept here for callers of the window) ----------------------------
    @property
    def choose_export_path(self) -> PathChooser:
        """Asks where to export (tests replace it; the default opens a file dialog)."""
        return self.session_actions.choose_export_path

    @choose_export_path.setter
    def choose_export_path(self, chooser: PathChooser) -> None:
        self.session_actions.choose_export_path = chooser

    def reset_session(self, session_id: str | None) -> PendingOp | None:
        """See :meth:`SessionActions.reset_session`."""
        return self.session_actions.reset_session(session_id)

    def remove_session(self, session_id: str | None) -> PendingOp | None:
        """See :meth:`SessionActions.remove_session`."""
        return self.session_actions.remove_session(session_id)

    def undo(self, op: PendingOp) -> bool:
        """See :meth:`SessionActions.undo`."""
        return self.session_actions.undo(op)

    def import_file(self, path: Path | None = None) -> Operation | None:
        """See :meth:`SessionActions.import_file`."""
        return self.session_actions.import_file(path)

    # -- models and settings -------------------------------------------------------------------
    def open_settings(self, page: str | None = None) -> SettingsDialog:
        """The settings dialog (non-blocking: opened, not exec'd)."""
        dialog = SettingsDialog(self.services, self)
        if page is not None:
            for index in range(dialog.tabs.count()):
                if dialog.tabs.tabText(index) == page:
                    dialog.tabs.setCurrentIndex(index)
        dialog.accepted.connect(self._settings_saved)
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def _follow_summary_passes(self) -> None:
        """The status bar says when a summary pass works ("Summarizing 16 messages… 40 %").

        Passes run in the background after turns; the chat never waits for
        them, but a person should see why the fan is loud.  Stop is in the
        Summary tab.
        """
        summarizer = getattr(self.services, "summarizer", None)
        if summarizer is None or not hasattr(summarizer, "on_progress"):
            return
        bar = self.statusBar()

        def progressed(_sid: str, progress: PassProgress) -> None:
            bar.showMessage(progress.text, SUMMARY_NOTE_MS)

        def passed(_sid: str, _record: object) -> None:
            if bar.currentMessage().startswith("Summarizing"):
                bar.clearMessage()

        def ran(sid: str, folding: bool) -> None:  # a stop between two chunks writes no record
            if not folding:
                passed(sid, None)

        stops = [summarizer.on_progress(progressed), summarizer.on_pass(passed)]
        if hasattr(summarizer, "on_run"):
            stops.append(summarizer.on_run(ran))
        self.destroyed.connect(lambda *_: [stop() for stop in stops])

    def open_model_source(self, name: str) -> None:
        """The switcher's More models entries (``find``, ``add_file``, ``connect``): the
        Models tab, brought to the front, does what its own buttons do."""
        self.set_pane_shown(SIDE, True)
        self.side.setCurrentWidget(self.inspector)
        self.inspector.show_tab("models")
        tab = self.inspector.models_tab
        if name == "find":
            tab.look_for_models()
        elif name == "add_file":
            tab.add_model_file()
        elif name == "connect":
            tab.endpoints_box.add_endpoint()

    def _settings_saved(self) -> None:
        self.runner.broadcast(MODELS_CHANGED)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_appearance(app, self.services.settings.appearance)

    def use_starter_model(self) -> Operation:
        """Assemble the starter model (progress) and make it the chat model."""
        from agenvoy_desktop.llm.starter import prepare_starter_model

        async def work(op: Operation) -> bool:
            await asyncio.to_thread(
                prepare_starter_model,
                self.services.paths.models_dir,
                progress=op.report,
                cancelled=op.is_cancelled,
            )
            self.services.settings.models.chat_model = ""
            self.services.save_settings()
            await self.services.reload_chat_model()
            self.services.start_background()
            return self.services.chat_model is not None

        def done(loaded: bool) -> None:
            self.runner.broadcast(MODELS_CHANGED)
            if not loaded and self.services.chat_problem is not None:
                self.errors.show_error(self.services.chat_problem.message)

        return self.runner.run(
            work,
            what="prepare the starter model",
            on_success=done,
            progress="Preparing the starter model (one time, about 0.5 GB)…",
        )

    def open_data_folder(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.services.paths.config_dir)))

    def _about(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("About Agenvoy Desktop")
        facts = "<br>".join(html.escape(line) for line in about_lines(self.services.paths)[1:])
        box.setText(
            f"<b>Agenvoy Desktop {__version__}</b><br>An offline assistant that remembers."
            f"<br><br><small>{facts}</small>"
        )
        box.open()

    # -- after a turn ----------------------------------------------------------------------------
    def _on_turn_finished(self, session_id: str) -> None:
        """The panels reload from the turn's broadcast; an untitled session gets its title."""
        self.stop_action.setEnabled(False)
        self.runner.run_change(
            self.services.storage.run(session_ops.auto_title, self.services.store, session_id),
            what="name the session",
        )

    # -- layout state ----------------------------------------------------------------------------
    def _restore_layout(self) -> None:
        geometry = self.state.value("geometry")
        if geometry is None or not self.restoreGeometry(geometry):
            place_first_window(self)
        for key, widget in (("window_state", self), ("splitter", self.splitter)):
            value = self.state.value(key)
            if value is not None:
                widget.restoreState(value)
        tab = self.state.value("side_tab")
        if tab is not None:
            self.side.setCurrentIndex(int(tab))
        for key, pane in (("sessions_shown", SESSIONS), ("side_shown", SIDE)):
            self.set_pane_shown(pane, str(self.state.value(key, "true")).lower() != "false")
        if self.state.value("splitter") is not None:  # else: the defaults
            self.splitter.restore_widths(self.state.value("pane_widths"))

    def save_layout(self) -> None:
        self.state.setValue("geometry", self.saveGeometry())
        self.state.setValue("window_state", self.saveState())
        self.state.setValue("splitter", self.splitter.saveState())
        self.state.setValue("side_tab", self.side.currentIndex())
        self.state.setValue("sessions_shown", self.splitter.pane_shown(SESSIONS))
        self.state.setValue("side_shown", self.splitter.pane_shown(SIDE))
        self.state.setValue("pane_widths", self.splitter.saved_widths())
        if self._sid is not None:
            self.state.setValue("last_session", self._sid)
        self.state.sync()

    def changeEvent(self, event: QEvent) -> None:
        """A light/dark switch or a new font size: widgets with style sheets are not told.

        A style sheet pins the font its widget had when it was set, so the chat
        stayed at the old size when only the font size changed in Settings.
        """
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange):
            self.chat.restyle()
            self.toasts.restyle()
            self.errors.restyle()
            for switcher in self.chat.findChildren(ModelSwitcher):
                switcher.restyle()  # the remote marker's colours

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.document_watch is not None:
            self.document_watch.stop()
        if self.sessions_watch is not None:
            self.sessions_watch.stop()
        self.save_layout()
        super().closeEvent(event)
        self.closed.emit()
