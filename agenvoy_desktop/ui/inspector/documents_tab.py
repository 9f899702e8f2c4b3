"""The Documents tab: the collections the assistant may search, their files, chunks and search.

Top: the collections with their counts (and "watching" for those whose
folders the window follows), and Add… / Edit… / Re-index / Cancel /
Remove.  Below, for the chosen collection: its files (indexed, changed on
disk, new, failed and why) with the chunks of the file chosen, and a search
box that runs ``search_rag`` as the assistant does (scores, citations, the
query's words marked; a click on a citation opens the file at that place).

Indexing runs in a child process (:func:`run_index_job` on a worker
thread), with progress in the status bar and a Cancel; if the child
crashes or is killed, the tab says so and everything else keeps working.
One run at a time: :meth:`DocumentsTab.queue_index` (a watched folder's
change, an edit that changed what a collection covers) runs one now or
once the run in progress ends.
Collections are opt-in: while they are off in Settings the tab says so and
offers to turn them on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.doc_embedder import FACTORY
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations import documents as ops
from agenvoy_desktop.operations.changes import DOCUMENTS_CHANGED, Changed, MemoryChanges
from agenvoy_desktop.rag.search import DOC_MODES, DocumentHit
from agenvoy_desktop.rag.worker import IndexJob, JobOutcome
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.document_viewer import CitationOpener
from agenvoy_desktop.ui.flow_layout import flow_row
from agenvoy_desktop.ui.inspector.collection_dialog import CollectionDialog, CollectionValues
from agenvoy_desktop.ui.inspector.common import (
    InspectorTab,
    StatusLine,
    heading,
    local_time,
    plural,
)
from agenvoy_desktop.ui.inspector.document_render import (
    collection_line,
    collection_tip,
    render_chunks,
    render_hits,
)
from agenvoy_desktop.ui.markdown_view import CITE_SCHEME
from agenvoy_desktop.ui.theme import colors

RESULTS = 10
MODE_LABELS = {
    "hybrid": "Hybrid (both)",
    "keyword": "Keyword (exact words)",
    "semantic": "Semantic (meaning)",
}
STATUS_LABELS = {
    "indexed": "indexed",
    "failed": "failed",
    "changed": "changed on disk",
    "new": "not indexed yet",
    "deleted": "deleted on disk",
}
NAME_ROLE = Qt.ItemDataRole.UserRole
OFF_TEXT = (
    "<b>Document collections are off.</b><br><br>When they are on, you can add folders of "
    "notes, documents, mail or code here; they are indexed on this computer, and the "
    "assistant can search them and cite what it used. Nothing is read until you add a "
    "collection."
)


@dataclass(frozen=True, slots=True)
class Overview:
    """What the collections list shows, read on a worker thread."""

    collections: list[ops.CollectionView]
    notices: list[str]
    problem: str | None


def _scrolling(page: QWidget) -> QScrollArea:
    """*page* in a scroll area, so that it is never squeezed below its minimum.

    A short side panel at a large font (900 × 600, 16 pt) squeezed the
    page's wrapped explanations to a few lines with the rest cut off; now
    the page keeps its height and scrolls.
    """
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(page)
    scroll.viewport().setAutoFillBackground(False)  # the tab's own background, as before
    return scroll


class DocumentsTab(InspectorTab):
    """See the module docstring."""

    session_free = True
    reload_on = ("documents",)
    embedder_factory: str | None = FACTORY
    """The indexer child's embedder (``module:function``); tests use an instant one."""

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(services, runner, parent)
        self.runner = runner
        self.citations = CitationOpener(services.paths, runner, self)
        self.collections: list[ops.CollectionView] = []
        self.index_op: Operation | None = None
        self.index_job: IndexJob | None = None
        self.indexing: str | None = None
        self.confirm_box: QMessageBox | None = None
        self.add_dialog: CollectionDialog | None = None
        self.edit_dialog: CollectionDialog | None = None
        self.watching: frozenset[str] = frozenset()
        """The collections whose folders are being followed now (set by the window's watcher)."""
        self._queued: list[str] = []
        """Collections to index once the run in progress ends, in order."""
        self._select_after: str | None = None
        self._shown: str | None = None
        """The collection whose files, chunks and results are on screen."""
        self._build()
        jobs = self.jobs
        self.destroyed.connect(lambda *_: jobs.invalidate())  # no answer paints a dead tab

    # -- layout ----------------------------------------------------------------------------
    def _build(self) -> None:
        self.stack = QStackedWidget()
        self.stack.addWidget(self._off_page())
        self.stack.addWidget(self._on_page())
        self.status = StatusLine()
        layout = QVBoxLayout(self)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.status)

    def _off_page(self) -> QWidget:
        page = QWidget()
        text = QLabel(OFF_TEXT)
        text.setWordWrap(True)
        self.enable_button = QPushButton("Turn on")  # the text above says what
        self.enable_button.setToolTip("Turn on document collections")
        self.enable_button.clicked.connect(self.enable)
        layout = QVBoxLayout(page)
        layout.addWidget(text)
        layout.addWidget(self.enable_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addStretch(1)
        return _scrolling(page)

    def _on_page(self) -> QWidget:
        page = QWidget()
        self.collection_list = QListWidget()
        self.collection_list.setSizeAdjustPolicy(QListWidget.SizeAdjustPolicy.AdjustIgnored)
        self.collection_list.currentItemChanged.connect(lambda *_: self._collection_chosen())
        self.add_button = QPushButton("Add…")
        self.add_button.setToolTip("Add folders or files as a new collection")
        self.add_button.clicked.connect(self.open_add_dialog)
        self.edit_button = QPushButton("Edit…")
        self.edit_button.setToolTip("Change the collection's folders, file patterns or watching")
        self.edit_button.clicked.connect(self.open_edit_dialog)
        self.index_button = QPushButton("Re-index")
        self.index_button.setToolTip(
            "Read what changed in the collection's files (in the background)"
        )
        self.index_button.clicked.connect(self._reindex_chosen)
        self.cancel_button = QPushButton("Cancel indexing")
        self.cancel_button.clicked.connect(self.cancel_index)
        self.cancel_button.hide()
        self.remove_button = QPushButton("Remove…")
        self.remove_button.setToolTip("Forget the collection and its index (your files stay)")
        self.remove_button.clicked.connect(self.ask_remove)
        # wraps in a narrow panel or at a large font instead of cutting "Re-index"
        buttons = flow_row(
            self.add_button,
            self.edit_button,
            self.index_button,
            self.cancel_button,
            self.remove_button,
        )
        self.empty_label = QLabel(
            "No collections yet. Choose Add… to pick folders of notes, documents or code."
        )
        self.empty_label.setWordWrap(True)
        self.empty_label.hide()
        self.problem_label = QLabel()
        self.problem_label.setWordWrap(True)
        self.problem_label.hide()
        self.details = QTabWidget()
        self.details.setDocumentMode(True)
        self.details.addTab(self._files_page(), "Files")
        self.details.addTab(self._search_page(), "Search")
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(heading("Collections"))
        layout.addWidget(self.collection_list)
        layout.addLayout(buttons)
        layout.addWidget(self.problem_label)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.details, 1)
        # Takes the height the hidden details leave (no collection yet) so the rows above
        # stay together at the top; with the details shown their stretch wins.
        layout.addStretch(0)
        return _scrolling(page)

    def _files_page(self) -> QWidget:
        self.files = QTreeWidget()
        self.files.setHeaderLabels(["File", "Status", "Chunks"])
        self.files.setRootIsDecorated(False)
        self.files.setUniformRowHeights(True)
        self.files.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.files.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.files.currentItemChanged.connect(lambda *_: self._file_chosen())
        self.files_label = QLabel()
        self.files_label.setWordWrap(True)
        self.chunks = QTextBrowser()
        self.chunks.setOpenLinks(False)
        self.chunks.setPlaceholderText("Choose a file to see the chunks it was cut into.")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.files)
        split.addWidget(self.chunks)
        split.setSizes([220, 320])
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.files_label)
        layout.addWidget(split, 1)
        return page

    def _search_page(self) -> QWidget:
        self.query_edit = QLineEdit()
        self.query_edit.setPlaceholderText("Search this collection as the assistant does…")
        self.query_edit.setClearButtonEnabled(True)
        self.query_edit.returnPressed.connect(self.search)
        self.mode_combo = QComboBox()
        for mode in DOC_MODES:
            self.mode_combo.addItem(MODE_LABELS[mode], mode)
        self.mode_combo.setCurrentIndex(DOC_MODES.index("hybrid"))
        self.mode_combo.currentIndexChanged.connect(lambda _i: self._research())
        go = QPushButton("Search")
        go.clicked.connect(self.search)
        row = flow_row(self.query_edit, self.mode_combo, go)  # wraps in a narrow panel
        self.search_label = QLabel()
        self.search_label.setWordWrap(True)
        self.results = QTextBrowser()
        self.results.setOpenLinks(False)
        self.results.anchorClicked.connect(self._anchor)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.search_label)
        layout.addWidget(self.results, 1)
        return page

    # -- state -----------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return bool(self.services.settings.documents.enabled)

    def wants_reload(self, changes: MemoryChanges) -> bool:
        """A change to the collections, or Settings turned them on or off."""
        switched = changes.models and self.enabled != (self.stack.currentIndex() == 1)
        return switched or super().wants_reload(changes)

    def current_name(self) -> str | None:
        item = self.collection_list.currentItem()
        return None if item is None else str(item.data(NAME_ROLE))

    def refresh(self) -> None:
        if not self.enabled:
            self.stack.setCurrentIndex(0)
            return
        self.stack.setCurrentIndex(1)
        paths = self.services.paths
        status = getattr(self.services, "documents_status", None)

        async def load(_op: Operation) -> Overview:
            def read() -> Overview:
                problem = status() if callable(status) else None
                return Overview(
                    ops.list_collections(paths),
                    ops.registry_notices(paths),
                    problem if isinstance(problem, str) else None,
                )

            return await asyncio.to_thread(read)

        self.jobs.start(
            "load", load, self._show_overview, self.status.error, what="read the collections"
        )

    def _show_overview(self, overview: Overview) -> None:
        chosen, self._select_after = self._select_after or self.current_name(), None
        self.collections = overview.collections
        self.collection_list.blockSignals(True)
        self.collection_list.clear()
        for view in overview.collections:
            item = QListWidgetItem(collection_line(view, watching=view.name in self.watching))
            item.setData(NAME_ROLE, view.name)
            item.setToolTip(collection_tip(view))
            self.collection_list.addItem(item)
            if view.name == chosen:
                self.collection_list.setCurrentItem(item)
        if self.collection_list.currentItem() is None and self.collection_list.count():
            self.collection_list.setCurrentRow(0)
        self.collection_list.blockSignals(False)
        self._fit_list()
        empty = not overview.collections
        self.empty_label.setVisible(empty)
        self.details.setHidden(empty)
        self._sync_buttons()
        self._show_problems(overview)
        self._collection_chosen()

    def _show_problems(self, overview: Overview) -> None:
        """Why the assistant cannot search documents now, and what went wrong reading the list."""
        running = self.index_op is not None and not self.index_op.done
        shown = overview.problem if overview.problem and not running else None
        lines = [f"The assistant cannot search your documents now: {shown}."] * bool(shown)
        lines += [f"{notice[:1].upper()}{notice[1:]}." for notice in overview.notices]
        c = colors(self.palette())
        self.problem_label.setStyleSheet(
            f"background: {c.warning_bg}; color: {c.warning_fg}; padding: 6px; border-radius: 4px;"
        )
        self.problem_label.setText("\n".join(lines))
        self.problem_label.setVisible(bool(lines))

    def _fit_list(self) -> None:
        """As tall as its collections (two to five rows): the files below get the room."""
        rows = min(max(self.collection_list.count(), 2), 5)
        row = self.collection_list.sizeHintForRow(0) if self.collection_list.count() else 0
        row = max(row, self.collection_list.fontMetrics().height() + 4)
        frame = 2 * self.collection_list.frameWidth() + 4
        self.collection_list.setFixedHeight(rows * row + frame)

    def _sync_buttons(self) -> None:
        chosen = self.current_name() is not None
        running = self.index_op is not None and not self.index_op.done
        self.index_button.setEnabled(chosen and not running)
        self.edit_button.setEnabled(chosen)
        self.remove_button.setEnabled(chosen and not running)
        self.cancel_button.setVisible(running)

    # -- files and chunks ------------------------------------------------------------------
    def _collection_chosen(self) -> None:
        self._sync_buttons()
        name = self.current_name()
        if name != self._shown:  # another collection: nothing of the last one stays
            self._shown = name
            self.files.clear()
            self.chunks.clear()
            self.results.clear()
            self.search_label.clear()
            self.files_label.setText("Reading the files…")
        if name is None:
            self.files_label.clear()
            return
        paths = self.services.paths

        async def load(_op: Operation) -> list[ops.FileView]:
            return await asyncio.to_thread(ops.collection_files, paths, name)

        self.jobs.start(
            "files", load, self._show_files, self.files_label.setText, what="list the files"
        )

    def _show_files(self, files: list[ops.FileView]) -> None:
        current = self.files.currentItem()
        keep = None if current is None else str(current.data(0, NAME_ROLE))
        self.files.clear()
        palette = colors(self.palette())
        counts: dict[str, int] = {}
        for view in files:
            counts[view.status] = counts.get(view.status, 0) + 1
            status = STATUS_LABELS[view.status]
            if view.status == "failed" and view.reason:
                status = f"failed: {view.reason}"
            item = QTreeWidgetItem([view.path, status, str(view.chunks) if view.chunks else ""])
            item.setData(0, NAME_ROLE, view.path)
            tip = view.reason or (
                f"indexed {local_time(view.indexed_ns)}" if view.indexed_ns else ""
            )
            for column in range(3):
                item.setToolTip(column, f"{view.path}\n{tip}" if tip else view.path)
            if view.status == "failed":
                item.setForeground(1, QColor(palette.error_fg))
            elif view.status != "indexed":
                item.setForeground(1, QColor(palette.warning_fg))
            self.files.addTopLevelItem(item)
            if view.path == keep:
                self.files.setCurrentItem(item)
        if not files:
            self.files_label.setText("No files yet: choose Re-index to read the collection.")
            return
        parts = [f"{counts[s]:,} {STATUS_LABELS[s]}" for s in STATUS_LABELS if counts.get(s)]
        stale = any(counts.get(s) for s in ("changed", "new", "deleted"))
        hint = " — Re-index to bring it up to date." if stale else ""
        self.files_label.setText(f"{plural(len(files), 'file')}: {', '.join(parts)}{hint}")

    def _file_chosen(self) -> None:
        item = self.files.currentItem()
        name = self.current_name()
        if item is None or name is None:
            self.chunks.clear()
            return
        path = str(item.data(0, NAME_ROLE))
        paths = self.services.paths

        async def load(_op: Operation) -> list[ops.ChunkView]:
            return await asyncio.to_thread(ops.collection_chunks, paths, name, path)

        def show(chunks: list[ops.ChunkView]) -> None:
            if chunks:
                self.chunks.setHtml(render_chunks(chunks))
            else:
                why = item.toolTip(1).partition("\n")[2] if shiboken_ok(item) else ""
                self.chunks.setPlainText(f"{path} has no chunks. {why}".strip())

        self.jobs.start("chunks", load, show, self.chunks.setPlainText, what="read the chunks")

    # -- search ----------------------------------------------------------------------------
    def _research(self) -> None:
        if self.query_edit.text().strip():
            self.search()

    def search(self) -> None:
        name = self.current_name()
        query = self.query_edit.text().strip()
        if name is None or not query:
            self.jobs.cancel("search")
            self.results.clear()
            self.search_label.setText("Type some words, then press Enter.")
            return
        mode = str(self.mode_combo.currentData())
        paths, embedder = self.services.paths, self.services.embedder

        async def work(_op: Operation) -> list[DocumentHit]:
            return await asyncio.to_thread(
                ops.search, paths, name, query, mode=mode, limit=RESULTS, embedder=embedder
            )

        def show(hits: list[DocumentHit]) -> None:
            if not hits:
                self.results.clear()
                self.search_label.setText(f"Nothing in {name!r} matches “{query}” ({mode}).")
                return
            how = mode if embedder is not None or mode == "keyword" else "keyword (no model)"
            self.search_label.setText(f"{plural(len(hits), 'chunk')} found ({how} search).")
            self.results.setHtml(render_hits(hits, query, mode))

        def failed(message: str) -> None:
            self.results.clear()
            self.search_label.setText(message)

        self.search_label.setText("Searching…")
        self.jobs.start("search", work, show, failed, what="search the collection")

    def _anchor(self, url: QUrl) -> None:
        link = url.toString()
        if link.startswith(CITE_SCHEME):
            self.citations.open(link[len(CITE_SCHEME) :], self)

    # -- writes ----------------------------------------------------------------------------
    def enable(self) -> None:
        """Turn collections on (saved in the settings) and show them."""
        self.services.settings.documents.enabled = True
        try:
            self.services.save_settings()
        except OSError as exc:
            self.services.settings.documents.enabled = False
            self.status.error(f"Could not save the settings: {exc.strerror or exc}")
            return
        self.runner.broadcast(DOCUMENTS_CHANGED)

    def set_watching(self, names: frozenset[str]) -> None:
        """Which collections are followed now: their lines say "watching"."""
        if names == self.watching:
            return
        self.watching = names
        for row in range(self.collection_list.count()):
            item = self.collection_list.item(row)
            view = next((v for v in self.collections if v.name == item.data(NAME_ROLE)), None)
            if view is not None and not item.text().endswith("indexing…"):
                item.setText(collection_line(view, watching=view.name in names))

    def open_add_dialog(self) -> CollectionDialog:
        dialog = CollectionDialog(self.window())
        dialog.accepted.connect(lambda: self._add_from(dialog.values()))
        dialog.finished.connect(dialog.deleteLater)
        self.add_dialog = dialog
        dialog.open()
        return dialog

    def _add_from(self, values: CollectionValues) -> None:
        self.add_collection(
            values.name, values.roots, values.include, values.exclude, watch=values.watch
        )

    def add_collection(
        self,
        name: str,
        roots: list[str],
        include: list[str],
        exclude: list[str],
        *,
        watch: bool = False,
    ) -> Operation:
        paths = self.services.paths

        async def work(_op: Operation) -> Changed[Any]:
            return await asyncio.to_thread(
                ops.add_collection, paths, name, roots, include, exclude, watch=watch
            )

        def done(_collection: object) -> None:
            then = "It is indexed in a moment." if watch else "Choose Re-index to read its files."
            self.status.info(f"Added {name!r}. {then}")
            self._select_after = name

        return self.jobs.start_change(
            "add", work, done, lambda m: self.status.error(f"Could not add: {m}"), what="add"
        )

    def open_edit_dialog(self) -> CollectionDialog | None:
        """The add dialog, filled in with the chosen collection; Save changes it."""
        name = self.current_name()
        view = next((v for v in self.collections if v.name == name), None)
        if view is None:
            return None
        dialog = CollectionDialog(self.window(), editing=view)
        dialog.accepted.connect(lambda: self.update_collection(view.name, dialog.values()))
        dialog.finished.connect(dialog.deleteLater)
        self.edit_dialog = dialog
        dialog.open()
        return dialog

    def update_collection(self, name: str, values: CollectionValues) -> Operation:
        """Change the collection; when what it covers changed, index it again to match."""
        paths = self.services.paths

        async def work(_op: Operation) -> Changed[Any]:
            return await asyncio.to_thread(
                ops.update_collection,
                paths,
                name,
                roots=values.roots,
                include=values.include,
                exclude=values.exclude,
                watch=values.watch,
            )

        def done(update: ops.CollectionUpdate) -> None:
            if not update.changed:
                self.status.info(f"{name!r} is unchanged.")
            elif not update.reindex:
                self.status.info(f"Saved {name!r}.")
            elif self.queue_index(name) is None and self.indexing is not None:
                self.status.info(f"Saved {name!r}: it is indexed again after the current run.")

        return self.jobs.start_change(
            "edit",
            work,
            done,
            lambda m: self.status.error(f"Could not change {name!r}: {m}"),
            what="change the collection",
        )

    def ask_remove(self) -> QMessageBox | None:
        name = self.current_name()
        if name is None:
            return None
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Remove the collection?",
            f"Remove the collection {name!r} and delete its index?\n\n"
            "Your files are not touched; the assistant can no longer search them.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self.window(),
        )
        box.button(QMessageBox.StandardButton.Yes).setText("Remove")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.accepted.connect(lambda: self.remove(name))
        box.finished.connect(box.deleteLater)
        self.confirm_box = box
        box.open()
        return box

    def remove(self, name: str) -> Operation:
        paths = self.services.paths

        async def work(_op: Operation) -> Changed[Any]:
            return await asyncio.to_thread(ops.remove_collection, paths, name)

        def done(_collection: object) -> None:
            self._queued = [queued for queued in self._queued if queued != name]
            self.status.info(f"Removed {name!r} and its index.")

        return self.jobs.start_change(
            "remove",
            work,
            done,
            lambda m: self.status.error(f"Could not remove: {m}"),
            what="remove the collection",
        )

    def resume_interrupted(self) -> Operation:
        """At start: index again a collection whose last run died with its process.

        That run kept what it finished; this one picks up the rest (one
        collection at a time: another interrupted one resumes at the next
        start, or with Re-index).
        """
        paths = self.services.paths

        async def find(_op: Operation) -> list[str]:
            return await asyncio.to_thread(ops.interrupted_collections, paths)

        def resume(names: list[str]) -> None:
            if names and shiboken_ok(self) and self.queue_index(names[0]) is not None:
                self.status.info(f"Resuming the index of {names[0]!r}, which was interrupted…")

        return self.jobs.start(
            "resume", find, resume, self.status.error, what="look for interrupted indexing"
        )

    def reindex_other_models(self) -> Operation:
        """At start: index again the collections another embedding model indexed (the model
        was switched in Settings), one after another, as the messages are embedded again."""
        paths, embedder = self.services.paths, self.services.embedder

        async def find(_op: Operation) -> list[str]:
            return await asyncio.to_thread(ops.indexed_by_another_model, paths, embedder)

        def queue(names: list[str]) -> None:
            if not names or not shiboken_ok(self):
                return
            for name in names:
                self.queue_index(name)
            self.status.info(
                f"The embedding model changed: indexing {', '.join(map(repr, names))} again…"
            )

        return self.jobs.start(
            "models", find, queue, self.status.error, what="look for collections to index again"
        )

    def reindex(self, name: str | None = None) -> Operation | None:
        """Index *name* (default: the chosen collection) in the background, with progress."""
        name = name or self.current_name()
        if name is None or (self.index_op is not None and not self.index_op.done):
            return None
        paths, factory = self.services.paths, self.embedder_factory

        def started(job: IndexJob) -> None:
            self.index_job = job

        async def work(op: Operation) -> Changed[JobOutcome]:
            def progress(stage: str, done: int, total: int) -> None:
                verb = "Looking at files" if stage == "scan" else "Indexing"
                op.report(done / total if total else -1.0, f"{verb}: {done:,} of {total:,}")

            return await asyncio.to_thread(
                ops.run_index_job, paths, name, factory, progress, op.is_cancelled, started=started
            )

        self.indexing = name
        if name in self._queued:
            self._queued.remove(name)
        self.status.info(f"Indexing {name!r} in the background…")
        self.problem_label.hide()  # it said why nothing is searchable: this run is the answer
        for row in range(self.collection_list.count()):
            item = self.collection_list.item(row)
            if item.data(NAME_ROLE) == name:
                item.setText(f"{name} — indexing…")
        self.index_op = self.runner.run_change(
            work,
            what=f"index {name!r}",
            on_success=self._indexed,
            on_failure=self._index_failed,
            progress=f"Indexing {name}…",
            interrupt=False,
        )
        self.index_op.finished.connect(self._index_ended)
        self._sync_buttons()
        return self.index_op

    def queue_index(self, name: str) -> Operation | None:
        """Index *name* now, or once the run in progress ends: one run at a time, none lost.

        A request while *name* itself is being indexed asks for one more
        pass after it (the run may have looked at the files before the
        change); requests that pile up meanwhile make that one pass.
        """
        if self.index_op is None or self.index_op.done:
            return self.reindex(name)
        if name not in self._queued:
            self._queued.append(name)
        return None

    def _reindex_chosen(self) -> None:
        """The Re-index button (its ``checked`` argument must not become a name)."""
        self.reindex()

    def cancel_index(self) -> None:
        if self.index_op is not None and not self.index_op.done:
            self.index_op.cancel()
            self.status.info("Cancelling… what was indexed so far is kept.")

    def _indexed(self, outcome: JobOutcome | None) -> None:
        if outcome is not None and shiboken_ok(self):
            self.status.info(ops.outcome_text(outcome))

    def _index_failed(self, exc: BaseException) -> None:
        if not shiboken_ok(self):  # the window closed while the indexer ran
            return
        self.status.error(f"{self.runner.readable(exc)}")
        self.refresh()

    def _index_ended(self) -> None:
        if not shiboken_ok(self):
            return
        cancelled = self.index_op is not None and self.index_op.is_cancelled()
        self.index_job = None
        self.indexing = None
        if cancelled:  # the person (or the closing app) asked to stop: nothing follows
            self._queued.clear()
        self._sync_buttons()
        if self._queued:
            self.reindex(self._queued[0])


def shiboken_ok(item: object) -> bool:
    import shiboken6

    return bool(shiboken6.isValid(item))
