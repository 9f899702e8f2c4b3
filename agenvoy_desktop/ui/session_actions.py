"""Reset, remove, export and import of sessions, for the main window.

The window owns one :class:`SessionActions` and points its toolbar, menus and
the session list's context menu at it; this object does the work and keeps
what the work needs between clicks: the :class:`PendingOps` queue, the toast
of each pending operation, and the question "where to export?".

Reset and remove change the view at once and run in the store only after
the undo window, with a toast that offers Undo (and, for a remove, "Export
first").  Export and import run on the storage thread through the runner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.export import ExportFormat, suggested_filename
from agenvoy_desktop.core.import_formats.discover import FoundHistory
from agenvoy_desktop.core.import_formats.discover import find_histories as discover_histories
from agenvoy_desktop.core.importers import ImportFormatError
from agenvoy_desktop.core.messages import message_limit
from agenvoy_desktop.core.set_aside_copies import delete_copies
from agenvoy_desktop.core.store import ImportCount
from agenvoy_desktop.operations.bulk_import import (
    ImportPlan,
    ImportReport,
    describe,
    plan_import,
    report_changes,
    store_conversation,
)
from agenvoy_desktop.operations.changes import Changed
from agenvoy_desktop.operations.sessions import export_session
from agenvoy_desktop.ui.async_runner import AsyncRunner, ErrorStrip, Operation
from agenvoy_desktop.ui.chat_panel import ChatPanel
from agenvoy_desktop.ui.import_preview import FoundHistories, ImportPreview
from agenvoy_desktop.ui.pending_ops import UNDO_WINDOW_MS, OpKind, PendingOp, PendingOps
from agenvoy_desktop.ui.session_settings_dialog import SessionSettingsDialog
from agenvoy_desktop.ui.sessions_panel import SessionsPanel
from agenvoy_desktop.ui.toast import Toast, ToastArea

PathChooser = Callable[[str, ExportFormat, Callable[[Path | None], None]], None]


COPIES_TOAST_MS = 30_000
"""How long the toast naming unreadable archive copies stays: it asks for a decision
about the person's privacy (two sentences and two buttons), not a glance as an Undo does."""


class SessionHost(Protocol):
    """What the actions need from the window that owns them (and nothing more)."""

    services: AppServices
    runner: AsyncRunner
    chat: ChatPanel
    sessions: SessionsPanel
    toasts: ToastArea
    errors: ErrorStrip

    @property
    def session_id(self) -> str | None: ...

    def select_session(self, session_id: str | None, *, empty: bool = False) -> None: ...

    def show_cleared(self) -> None:
        """Show the current session empty (a reset waiting for its undo window)."""

    def show_status(self, text: str, ms: int) -> None:
        """A passing note in the status bar."""

    def index_for_recall(self, session_ids: list[str]) -> Operation:
        """Embed what an import stored, in the background."""

    def open_data_folder(self) -> None:
        """Show the profile's folder in the file manager."""


class SessionActions(QObject):
    """See the module docstring."""

    def __init__(
        self, host: SessionHost, parent: QWidget, *, undo_ms: int = UNDO_WINDOW_MS
    ) -> None:
        super().__init__(parent)
        self.window = host
        """The window the actions work for."""
        self._dialog_parent = parent
        self.pending = PendingOps(host.services, host.runner, delay_ms=undo_ms, parent=self)
        self.choose_export_path: PathChooser = self._ask_export_path
        """Asks where to export (tests replace it; the default opens a file dialog)."""
        self._toast_for: dict[PendingOp, Toast] = {}
        self._last_plan: ImportPlan | None = None
        self.last_preview: ImportPreview | None = None
        """The import preview shown last (tests press its buttons)."""
        self.last_question: QMessageBox | None = None
        self.last_found: FoundHistories | None = None
        self.indexing: Operation | None = None
        """The last import's embedding, running in the background after it (tests wait on it)."""
        """What the running import read (its summary names the apps and what was skipped)."""
        self.pending.executed.connect(self._on_op_executed)
        self.pending.failed.connect(self._on_op_failed)
        self.pending.undone.connect(self._close_toast)
        self.pending.executed.connect(self._close_toast)
        self.pending.failed.connect(lambda op, _message: self._close_toast(op))

    def run_named(self, action: str, session_id: str) -> None:
        """An action the session list's context menu asks for, by name."""
        if action == "reset":
            self.reset_session(session_id)
        elif action == "remove":
            self.remove_session(session_id)
        elif action == "export-remove":
            self.export_then_remove(session_id)
        elif action in ("export-markdown", "export-json"):
            self.export_session(session_id, "markdown" if action == "export-markdown" else "json")
        elif action == "settings":
            self.open_settings(session_id)

    def open_settings(self, session_id: str | None) -> SessionSettingsDialog | None:
        """The session's settings dialog (system prompt, tools switch), opened without exec()."""
        if session_id is None:
            return None
        w = self.window
        title = w.sessions.title_of(session_id)
        dialog = SessionSettingsDialog(
            w.services, w.runner, session_id, title, parent=self._dialog_parent
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    # -- reset and remove -----------------------------------------------------------------
    def reset_session(
        self, session_id: str | None, *, clear_summary: bool = False
    ) -> PendingOp | None:
        """Clear the session's messages (and, if asked, its summary) now in the view; the
        store follows after the undo window."""
        op = self._schedule("reset", session_id, clear_summary=clear_summary)
        if op is None:
            return None
        w = self.window
        if op.session_id == w.session_id:
            w.show_cleared()
        kept = "messages and summary cleared" if clear_summary else "messages cleared, summary kept"
        self._toast_for[op] = w.toasts.show_toast(
            f"Reset “{op.title}”: {kept}.",
            [("Undo", lambda: self.undo(op))],
            duration_ms=self.pending.delay_ms,
        )
        return op

    def remove_session(self, session_id: str | None) -> PendingOp | None:
        """Hide the session now; the store deletes it after the undo window."""
        op = self._schedule("remove", session_id)
        if op is not None:
            self._show_removed(op, f"Removed “{op.title}”.")
        return op

    def _schedule(
        self, kind: OpKind, session_id: str | None, *, clear_summary: bool = False
    ) -> PendingOp | None:
        """Start the undo window of *kind*; an answer still streaming there stops first."""
        if session_id is None:
            return None
        chat = self.window.chat
        if chat.busy and session_id == chat.session_id:
            chat.stop()
        title = self.window.sessions.title_of(session_id)
        return self.pending.schedule(kind, session_id, title, clear_summary=clear_summary)

    def _show_removed(self, op: PendingOp, text: str) -> None:
        w = self.window
        w.sessions.set_hidden(self.pending.hidden_sessions())
        if op.session_id == w.session_id:
            ids = w.sessions.model.session_ids()
            w.select_session(ids[0] if ids else None)
        self._close_toast(op)
        self._toast_for[op] = w.toasts.show_toast(
            text,
            [("Undo", lambda: self.undo(op)), ("Export first", lambda: self._export_pending(op))],
            duration_ms=self.pending.delay_ms,
        )

    def _close_toast(self, op: PendingOp) -> None:
        """The toast of an operation that was undone or ran goes away with it."""
        toast = self._toast_for.pop(op, None)
        if toast is not None and not toast.is_closed:
            toast.dismiss()

    def undo(self, op: PendingOp) -> bool:
        """Take back a pending reset/remove; the session is shown as it was."""
        if not self.pending.undo(op):
            return False
        w = self.window
        w.sessions.set_hidden(self.pending.hidden_sessions())
        if op.kind == "remove" or op.session_id == w.session_id:
            w.select_session(op.session_id)
        w.show_status(f"Undone: {op.kind} of “{op.title}”.", 4000)
        return True

    def _on_op_executed(self, op: PendingOp) -> None:
        w = self.window  # the list and the other panels reload from the broadcast
        if op.kind == "reset" and op.session_id == w.session_id:
            w.select_session(op.session_id)
        if op.not_cleaned:
            self._tell_copies_not_cleaned(op)

    def _tell_copies_not_cleaned(self, op: PendingOp) -> None:
        """Say so when archive copies the app set aside earlier could not be read, so *op*
        could not take the session out of them (:mod:`~agenvoy_desktop.core.set_aside_copies`;
        the copies it cleaned are not worth a word): they may still hold what it said.
        Deleting them is one click and a confirmation away; the folder, one click."""
        w = self.window
        copies = op.not_cleaned
        one = len(copies) == 1
        w.toasts.show_toast(
            f"{len(copies)} older cop{'y' if one else 'ies'} of the archive the app set aside "
            f"could not be read, so what “{op.title}” said may still be in "
            f"{'it' if one else 'them'}.",
            [
                (f"Delete {'it' if one else 'them'}", lambda: self.ask_delete_copies(copies)),
                ("Show folder", w.open_data_folder),
            ],
            duration_ms=COPIES_TOAST_MS,
        )

    def ask_delete_copies(self, copies: tuple[Path, ...]) -> QMessageBox:
        """Ask before deleting *copies*, naming each file (a delete cannot be undone)."""
        one = len(copies) == 1
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Delete the copies?",
            f"Delete {'this copy' if one else f'these {len(copies)} copies'} of the archive "
            "the app set aside earlier?\n\n" + "\n".join(str(path) for path in copies),
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self._dialog_parent,
        )
        box.setInformativeText(
            f"{'It' if one else 'They'} could not be read, so the words could not be taken "
            f"out. Deleting {'it' if one else 'them'} cannot be undone."
        )
        box.button(QMessageBox.StandardButton.Yes).setText("Delete")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.accepted.connect(lambda: self._delete_copies(copies))
        self.last_question = box
        box.open()
        return box

    def _delete_copies(self, copies: tuple[Path, ...]) -> Operation:
        """Delete on the storage thread, behind any reset still cleaning the same copies."""
        w = self.window

        def done(deleted: list[Path]) -> None:
            count = f"{len(deleted)} cop{'y' if len(deleted) == 1 else 'ies'}"
            w.show_status(f"Deleted {count} the app set aside earlier.", 8000)

        return w.runner.run(
            w.services.storage.run(delete_copies, w.services.paths, copies),
            what="delete the copies",
            on_success=done,
        )

    def _on_op_failed(self, op: PendingOp, message: str) -> None:
        w = self.window
        w.errors.show_error(f"Could not {op.kind} “{op.title}”: {message}")
        w.sessions.set_hidden(self.pending.hidden_sessions())
        w.sessions.refresh()
        if op.session_id == w.session_id or op.kind == "remove":
            w.select_session(op.session_id)

    # -- export and import ------------------------------------------------------------------
    def export_session(
        self,
        session_id: str | None,
        fmt: ExportFormat,
        then: Callable[[bool], object] | None = None,
    ) -> None:
        """Ask where, then write the export on the storage thread."""
        if session_id is None:
            return
        w = self.window

        def chosen(path: Path | None) -> None:
            if path is None:
                if then is not None:
                    then(False)
                return

            def done(written: Path) -> None:
                w.show_status(f"Exported to {written}", 8000)
                if then is not None:
                    then(True)

            def failed(exc: BaseException) -> None:
                w.runner.report_error("export the session", exc)
                if then is not None:
                    then(False)

            w.runner.run(
                w.services.storage.run(
                    export_session, w.services.store, session_id, path, fmt, w.services.clock()
                ),
                what="export the session",
                on_success=done,
                on_failure=failed,
            )

        self.choose_export_path(session_id, fmt, chosen)

    def export_then_remove(self, session_id: str | None) -> None:
        """Markdown export first; the remove starts only once the file is written."""
        if session_id is not None:
            self.export_session(
                session_id, "markdown", lambda ok: self.remove_session(session_id) if ok else None
            )

    def _export_pending(self, op: PendingOp) -> None:
        """ "Export first" in a remove toast: hold the removal, export, then resume it."""
        self.pending.hold(op)

        def after(ok: bool) -> None:
            if op.state != "pending":
                return
            self.pending.resume(op)
            note = "Exported; removal continues." if ok else "Not exported; removal continues."
            self._show_removed(op, f"Removed “{op.title}”. {note}")

        self.export_session(op.session_id, "markdown", after)

    def _ask_export_path(
        self, session_id: str, fmt: ExportFormat, then: Callable[[Path | None], None]
    ) -> None:
        name = suggested_filename(self.window.sessions.title_of(session_id), session_id, fmt)
        dialog = QFileDialog(self._dialog_parent, "Export session", str(Path.home() / name))
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter("Markdown (*.md)" if fmt == "markdown" else "JSON (*.json)")
        dialog.fileSelected.connect(lambda path: then(Path(path)))
        dialog.rejected.connect(lambda: then(None))
        dialog.open()

    def import_file(self, path: Path | None = None) -> Operation | None:
        """Import a chat history (another app's export, or ours), with progress.

        Without a *path*, a file dialog asks for one and the import is previewed
        first (:meth:`preview_import`); with one, it is imported at once.  Each
        conversation goes into a session of its own; what is already there is not
        added again, so importing the same export twice is harmless.
        """
        if path is None:
            self._ask_import_path(folder=False)
            return None
        return self.import_plan(path, None)

    def import_folder(self) -> None:
        """Ask for a folder (Jan's data folder, LM Studio's conversations, an unzipped
        export) and preview its import."""
        self._ask_import_path(folder=True)

    def find_histories(self) -> None:
        """Ask first, then look where other apps keep chat histories (only reading), and
        offer what was found; the one chosen is previewed (:meth:`preview_import`)."""
        ask = QMessageBox(
            QMessageBox.Icon.Question,
            "Find chat histories",
            "Look for chat histories other apps keep on this computer?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            self._dialog_parent,
        )
        ask.setInformativeText(
            "LM Studio's and Jan's conversation folders, and ChatGPT or Claude data exports "
            "in Downloads. Their files are only read: nothing is changed, copied or imported "
            "until you choose to."
        )
        ask.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        ask.accepted.connect(self._look_for_histories)
        self.last_question = ask
        ask.open()

    def _look_for_histories(self) -> Operation:
        def show(found: list[FoundHistory]) -> None:
            dialog = FoundHistories(found, self._dialog_parent)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.accepted.connect(lambda: self._preview_found(dialog.chosen()))
            self.last_found = dialog
            dialog.open()

        return self.window.runner.run(
            asyncio.to_thread(discover_histories),
            what="look for chat histories",
            on_success=show,
            progress="Looking for chat histories…",
        )

    def _preview_found(self, place: FoundHistory | None) -> None:
        if place is not None:
            self.preview_import(place.path)

    def _ask_import_path(self, *, folder: bool) -> None:
        dialog = QFileDialog(self._dialog_parent, "Import chat history")
        if folder:
            dialog.setFileMode(QFileDialog.FileMode.Directory)
        else:
            dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
            dialog.setNameFilter(
                "Chat histories — ChatGPT, Claude, Open WebUI, LM Studio, Jan, Agenvoy "
                "(*.json *.jsonl *.zip);;All files (*)"
            )
        dialog.fileSelected.connect(lambda chosen: self.preview_import(Path(chosen)))
        dialog.open()

    def preview_import(self, path: Path) -> Operation:
        """Read *path* on a worker thread, then show what it holds; Import imports the
        ticked conversations (``ui/import_preview.py``)."""
        w = self.window
        services = w.services
        limit = message_limit(services.settings.memory.max_history_bytes)

        async def work() -> tuple[ImportPlan, set[str]]:
            plan = await asyncio.to_thread(
                plan_import, [path], services.clock(), max_message_bytes=limit
            )
            if not plan.conversations:
                raise ImportFormatError(
                    plan.failed[0] if plan.failed else f"{path}: nothing to import"
                )
            existing = await services.storage.run(services.store.session_ids)
            return plan, set(existing)

        def show(found: tuple[ImportPlan, set[str]]) -> None:
            plan, existing = found
            preview = ImportPreview(plan, existing, self._dialog_parent)
            preview.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            preview.accepted.connect(lambda: self.import_plan(path, preview.chosen()))
            self.last_preview = preview
            preview.open()

        return w.runner.run(
            work(), what=f"read {path.name}", on_success=show, progress=f"Reading {path.name}…"
        )

    def import_plan(self, path: Path, plan: ImportPlan | None) -> Operation:
        """Import *plan* (read from *path* first when None), with progress; cancellable."""
        w = self.window
        services = w.services
        limit = message_limit(services.settings.memory.max_history_bytes)

        async def work(op: Operation) -> Changed[ImportReport]:
            chosen = plan
            if chosen is None:
                chosen = await asyncio.to_thread(
                    plan_import, [path], services.clock(), max_message_bytes=limit
                )
            if not chosen.conversations:
                raise ImportFormatError(
                    chosen.failed[0] if chosen.failed else f"{path}: nothing to import"
                )
            self._last_plan = chosen
            op.report(0.0, f"{chosen.message_count:,} messages read; importing…")
            return report_changes(await self._store_each(chosen, op))

        def done(report: ImportReport | None) -> None:
            if report is None or not report.counts:
                return
            w.select_session(report.counts[0].session_id)
            if self._last_plan is not None:
                w.show_status(f"Imported {describe(self._last_plan, report)}.", 15_000)
            self.indexing = w.index_for_recall([c.session_id for c in report.counts])

        return w.runner.run_change(
            work, what=f"import {path.name}", on_success=done, progress=f"Importing {path.name}…"
        )

    async def _store_each(self, plan: ImportPlan, op: Operation) -> ImportReport:
        """Store the plan's conversations, one storage job each, without vectors.

        One short job per conversation lets a turn or a search run between
        them; the embedding follows as background work (:meth:`MainWindow.index_for_recall`),
        so everything imported is found by keyword at once.  A cancel stops
        between conversations: what was stored stays.
        """
        services = self.window.services
        counts: list[ImportCount] = []
        stored, total = 0, plan.message_count
        for conv in plan.conversations:
            if op.is_cancelled():
                return ImportReport(counts, cancelled=True)
            counts.append(await services.storage.run(store_conversation, services.store, conv))
            stored += len(conv.messages)
            op.report_counts(stored, total)
        return ImportReport(counts)
