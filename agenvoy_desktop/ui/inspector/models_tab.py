"""The Models tab: what runs now, what else is available, and which one to use.

Top: the chat and embedding models in use — name, file, state, context —
with Load (warm the chat model up now instead of at the first message) and
Unload where the services can do it, and how llama.cpp runs here (kernel
path, threads, GPU offload, measured prompt batches: :class:`LlamaSection`,
folded to one line in a narrow tab).  Middle: the catalogue
(``llm/catalogue``) with each model's header facts (``llm/gguf_info``), "Use
for chat" / "Use for embeddings" (saved to the settings) and "Add file…".
Then the endpoints: chat models on an OpenAI-compatible server
(:class:`EndpointsBox`).  Bottom: GGUF files other apps downloaded
(``llm/discovery``), offered with "Add" — referenced in place, never copied.

Catalogue reads and discovery touch the disk (headers, folder walks), so
they run in a worker thread; a new model choice takes effect the next time
the model is loaded, and the tab says so rather than pretending otherwise.

The side panel can be narrow (a 900 px window leaves it about 250 px), so
the tab scrolls as a whole instead of squeezing its tables, stacks the
details under the catalogue below :data:`WIDE_PX`, hides the table columns
the details repeat, and wraps long values (paths, hashes) anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QBoxLayout,
    QFileDialog,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm.build_info import LlamaBuild
from agenvoy_desktop.llm.catalogue import CatalogueEntry
from agenvoy_desktop.llm.cpu_features import extra_buffers_choice
from agenvoy_desktop.llm.discovery import DiscoveredModel, discover_gguf_files
from agenvoy_desktop.llm.endpoints import Endpoint, FoundServer, look_for_servers
from agenvoy_desktop.llm.gguf_info import GgufInfo
from agenvoy_desktop.llm.model_profile import profile_from_info
from agenvoy_desktop.operations.changes import MODELS_CHANGED
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.endpoint_dialog import host_of, registry_of
from agenvoy_desktop.ui.flow_layout import flow_row
from agenvoy_desktop.ui.inspector.common import (
    InspectorTab,
    StatusLine,
    catalogue_of,
    esc,
    human_bytes,
)
from agenvoy_desktop.ui.inspector.endpoints_section import EndpointsBox
from agenvoy_desktop.ui.inspector.llama_section import LlamaSection, read_llama_build
from agenvoy_desktop.ui.inspector.wrapping import DetailView, WrappingButton
from agenvoy_desktop.ui.theme import colors

CATALOGUE_COLUMNS = (
    "Name",
    "Role",
    "Architecture",
    "Parameters",
    "Quant.",
    "Context",
    "Size",
    "State",
)
FOUND_COLUMNS = ("App", "Model", "Architecture", "Size", "File")
HIDDEN_COLUMNS = {
    ("catalogue", True): ("Parameters", "Quant.", "Context"),
    ("catalogue", False): ("Architecture", "Parameters", "Quant.", "Context", "Size"),
    ("found", True): ("File",),
    ("found", False): ("Architecture", "File"),
}
"""Columns hidden in a wide (True) or narrow tab: the details (or the tooltip) say the same."""
WIDE_PX = 620
"""From this width on, the details sit beside the catalogue and more columns show."""
NARROW_TABLE_PX = 150
"""A table's height in a narrow tab: a few rows, the rest of the room for the details."""
WIDGET_MAX = 16_777_215
RESTART_NOTE = (
    "The new choice is used the next time the model loads (restart the app to switch now)."
)
Discover = Callable[[], list[DiscoveredModel]]
LookForServers = Callable[[], list[FoundServer]]


@dataclass(slots=True)
class InUse:
    """The models the running services hold, described for people."""

    chat_name: str | None = None
    chat_path: str | None = None
    chat_loaded: bool | None = None
    chat_context: int | None = None
    chat_threads: int | None = None
    embedding_name: str | None = None
    embedding_path: str | None = None
    embedding_dim: int | None = None
    chat_setting: str = ""
    embedding_setting: str = ""
    kernels: str = ""
    """llama.cpp's kernel path here: extra buffers (AMX / repacked) on or off, and why."""
    llama: LlamaBuild | None = None
    """Build, threads, GPU offload and measured batches (``--version``); None if unreadable."""
    llama_problem: str | None = None
    chat_endpoint: str | None = None
    """The server address when the chat model is an endpoint."""
    chat_remote: bool = False
    """That server is on another machine: conversation text leaves this one."""


@dataclass(slots=True)
class ModelsView:
    in_use: InUse
    entries: list[CatalogueEntry] = field(default_factory=list)
    problem: str | None = None
    endpoints: list[Endpoint] = field(default_factory=list)


def describe_in_use(services: AppServices) -> InUse:
    """Facts about the loaded models (worker thread: a context size may read a header,
    and the llama.cpp facts import the library and read the machine cache)."""
    model: Any = services.chat_model
    embedder: Any = services.store.embedder
    enabled, why = extra_buffers_choice()
    facts = InUse(
        chat_setting=services.settings.models.chat_model,
        embedding_setting=services.settings.models.embedding_model,
        kernels=f"extra buffers (AMX / repacked) {'on' if enabled else 'off'} — {why}",
    )
    facts.llama, facts.llama_problem = read_llama_build(services.settings.models.threads)
    if model is not None:
        facts.chat_name = str(model.name)
        path = getattr(model, "model_path", None)
        facts.chat_path = str(path) if path is not None else None
        loaded = getattr(model, "loaded", None)
        facts.chat_loaded = bool(loaded) if loaded is not None else None
        facts.chat_context = int(model.context_size)
        threads = getattr(model, "threads", None)
        facts.chat_threads = int(threads) if threads is not None else None
        if getattr(model, "backend", None) == "endpoint":
            facts.chat_endpoint = str(getattr(model, "base_url", "")) or None
            facts.chat_remote = bool(getattr(model, "remote", False))
    if embedder is not None:
        path = getattr(embedder, "model_path", None)
        facts.embedding_name = Path(path).name if path is not None else type(embedder).__name__
        facts.embedding_path = str(path) if path is not None else None
        facts.embedding_dim = int(embedder.dim)
    return facts


def parameters_text(count: int | None) -> str:
    if not count:
        return "—"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return str(count)


def info_html(entry: CatalogueEntry) -> str:
    """A catalogue entry's metadata as a small labelled table."""
    info: GgufInfo | None = entry.info
    rows: list[tuple[str, str]] = [
        ("Name", esc(entry.name)),
        ("File", esc(str(entry.path))),
        ("Role", esc(entry.role)),
        (
            "Source",
            {"starter": "starter model (built in)", "prepared": "prepared (built in)"}.get(
                entry.source, esc(entry.source)
            ),
        ),
        ("State", esc(entry.status) + (f" — {esc(entry.problem)}" if entry.problem else "")),
        ("SHA-256", esc(entry.sha256 or "not hashed yet")),
    ]
    if info is not None:
        rows += [
            ("Architecture", esc(info.architecture or "?")),
            ("Model name", esc(info.name or "—")),
            (
                "Parameters",
                parameters_text(info.parameters)
                + (f" ({esc(info.size_label)})" if info.size_label else ""),
            ),
            ("Quantisation", esc(info.quantisation or "?")),
            ("Trained context", f"{info.context_length:,} tokens" if info.context_length else "?"),
            ("Embedding width", str(info.embedding_length or "?")),
            ("Layers", str(info.block_count or "?")),
            ("Tokenizer", esc(info.tokenizer_model or "?")),
            ("Chat template", "yes" if info.has_chat_template else "no"),
        ]
        if entry.role == "chat":
            rows.append(("Turn shape", esc(profile_from_info(info).describe())))
        rows += [
            ("File size", human_bytes(info.size_bytes)),
            ("GGUF version", str(info.gguf_version)),
        ]
    # One line per fact, not a two-column table: in a narrow panel a table's value
    # column was a sliver; a line wraps under its label and long values break anywhere.
    return "".join(
        f"<p style='margin: 0 0 3px 0;'><b>{label}:</b> {value}</p>" for label, value in rows
    )


def _cell(text: str, data: Any = None, tooltip: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if data is not None:
        item.setData(Qt.ItemDataRole.UserRole, data)
    if tooltip:
        item.setToolTip(tooltip)
    return item


def _table(columns: tuple[str, ...]) -> QTableWidget:
    """A read-only table whose second column (the name) takes the room and elides."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setMinimumHeight(110)
    table.verticalHeader().hide()
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(_name_column(columns), QHeaderView.ResizeMode.Stretch)
    return table


def _name_column(columns: tuple[str, ...]) -> int:
    return columns.index("Model") if "Model" in columns else columns.index("Name")


def _fit_columns(table: QTableWidget, columns: tuple[str, ...], hidden: tuple[str, ...]) -> None:
    for index, name in enumerate(columns):
        table.setColumnHidden(index, name in hidden)


class ModelsTab(InspectorTab):
    """See the module docstring."""

    reload_on = ("models",)
    session_free = True

    def __init__(
        self,
        services: AppServices,
        runner: AsyncRunner,
        parent: QWidget | None = None,
        *,
        discover: Discover = discover_gguf_files,
        look: LookForServers = look_for_servers,
    ) -> None:
        super().__init__(services, runner, parent)
        self.discover = discover
        self.look = look
        self.view: ModelsView | None = None
        self.found: list[DiscoveredModel] = []
        self._pending_select: str | None = None
        self._build()

    # -- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        self.status = StatusLine()
        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self._in_use_box())
        column.addWidget(self.status)
        column.addWidget(self._catalogue_box(), 3)
        self.endpoints_box = EndpointsBox(
            self.services, self.jobs, self.status, self._switch_chat, look=self.look
        )
        column.addWidget(self.endpoints_box)
        column.addWidget(self._found_box(), 2)
        self.scroll_area = scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(content)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)
        self._wide: bool | None = None
        self._reflow(wide=False)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._reflow(event.size().width() >= WIDE_PX)

    def _reflow(self, wide: bool) -> None:
        """Side by side and every column when wide; stacked, fewer columns when narrow."""
        if wide == self._wide:
            return
        self._wide = wide
        horizontal, vertical = QBoxLayout.Direction.LeftToRight, QBoxLayout.Direction.TopToBottom
        self._catalogue_split.setDirection(horizontal if wide else vertical)
        self._catalogue_buttons.setDirection(horizontal if wide else vertical)
        self._use_buttons.setDirection(horizontal if wide else vertical)
        self.entry_detail.setMinimumHeight(150 if wide else 260)
        self._in_use_row.setDirection(horizontal if wide else vertical)
        self.llama_section.set_wide(wide)
        self.endpoints_box.set_wide(wide)
        for table, columns, key in (
            (self.catalogue_table, CATALOGUE_COLUMNS, "catalogue"),
            (self.found_table, FOUND_COLUMNS, "found"),
        ):
            _fit_columns(table, columns, HIDDEN_COLUMNS[key, wide])
            table.setMaximumHeight(WIDGET_MAX if wide else NARROW_TABLE_PX)

    def _in_use_box(self) -> QWidget:
        box = QGroupBox("In use")
        self.in_use_label = QLabel()
        self.in_use_label.setWordWrap(True)
        self.in_use_label.setTextFormat(Qt.TextFormat.RichText)
        self.in_use_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.load_button = QPushButton("Load now")
        self.load_button.setToolTip("Load the chat model now instead of at the first message")
        self.load_button.clicked.connect(self.load_chat_model)
        self.unload_button = QPushButton("Unload")
        self.unload_button.clicked.connect(self.unload_chat_model)
        buttons = QHBoxLayout()
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.unload_button)
        buttons.addStretch(1)
        self._in_use_row = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        self._in_use_row.addWidget(self.in_use_label, 1)
        self._in_use_row.addLayout(buttons)
        self.llama_section = LlamaSection()
        column = QVBoxLayout(box)
        column.addLayout(self._in_use_row)
        column.addWidget(self.llama_section)
        return box

    def _catalogue_box(self) -> QWidget:
        box = QGroupBox("Catalogue")
        self.catalogue_table = _table(CATALOGUE_COLUMNS)
        self.catalogue_table.itemSelectionChanged.connect(self._entry_selected)
        self.entry_detail = DetailView()
        # their text wraps: "Use for embeddings" was wider than a narrow tab at 16 pt
        self.use_chat_button = WrappingButton("Use for chat")
        self.use_chat_button.clicked.connect(lambda: self.choose_selected("chat"))
        self.use_embedding_button = WrappingButton("Use for embeddings")
        self.use_embedding_button.clicked.connect(lambda: self.choose_selected("embedding"))
        add_button = QPushButton("Add file…")
        add_button.setToolTip("Add a GGUF model file (it stays where it is)")
        add_button.clicked.connect(self.add_model_file)
        self._use_buttons = use = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        use.addWidget(self.use_chat_button)
        use.addWidget(self.use_embedding_button)
        use.addStretch(1)
        add = QHBoxLayout()
        add.addStretch(1)
        add.addWidget(add_button)
        self._catalogue_buttons = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        self._catalogue_buttons.addLayout(use, 1)
        self._catalogue_buttons.addLayout(add)
        self._catalogue_split = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        self._catalogue_split.addWidget(self.catalogue_table, 3)
        self._catalogue_split.addWidget(self.entry_detail, 2)
        column = QVBoxLayout(box)
        column.addLayout(self._catalogue_split, 1)
        column.addLayout(self._catalogue_buttons)
        return box

    def _found_box(self) -> QWidget:
        box = QGroupBox("On this computer")  # a longer title was wider than the tab at 16 pt
        self.found_label = QLabel(
            "GGUF files that LM Studio, GPT4All, Jan, Ollama or a Hugging Face cache downloaded."
        )
        self.found_label.setWordWrap(True)
        self.found_table = _table(FOUND_COLUMNS)
        self.found_table.itemSelectionChanged.connect(self._update_buttons)
        self.search_button = QPushButton("Look for models")
        self.search_button.clicked.connect(self.look_for_models)
        self.add_found_button = QPushButton("Add")
        self.add_found_button.setToolTip(
            "Add the selected file to the catalogue (it is not copied)"
        )
        self.add_found_button.clicked.connect(self.add_selected_found)
        buttons = flow_row(self.search_button, self.add_found_button)  # wraps when narrow
        column = QVBoxLayout(box)
        column.addWidget(self.found_label)
        column.addLayout(buttons)
        column.addWidget(self.found_table, 1)
        return box

    # -- loading ------------------------------------------------------------------------------
    def refresh(self) -> None:
        services = self.services

        def read() -> ModelsView:
            catalogue = catalogue_of(services)
            registry = registry_of(services)
            view = ModelsView(describe_in_use(services), catalogue.entries())
            view.endpoints = registry.entries()
            view.problem = catalogue.last_problem or registry.last_problem
            return view

        async def work(_op: Operation) -> ModelsView:
            return await asyncio.to_thread(read)

        self.jobs.start(
            "load", work, self._show, self.status.error, what="read the model catalogue"
        )

    def set_session(self, _session_id: str | None) -> None:
        """Models do not depend on the session."""

    def _show(self, view: ModelsView) -> None:
        self.view = view
        if view.problem:
            self.status.error(view.problem)
        self.in_use_label.setText(self._in_use_html(view.in_use))
        self._show_llama(view.in_use)
        self._fill_catalogue(view.entries)
        self.endpoints_box.show_entries(view.endpoints)
        self._update_buttons()

    def _in_use_html(self, facts: InUse) -> str:
        muted = colors(self.palette()).muted
        if facts.chat_name is None:
            problem = self.services.chat_problem
            chat = "<b>Chat:</b> <span style='color:#c62828;'>none</span>"
            if problem is not None:
                chat += f" — {esc(problem.message)} {esc(problem.fix)}"
        else:
            state = {
                True: "loaded",
                False: "not loaded yet (loads at the first message)",
                None: "ready",
            }[facts.chat_loaded]
            chat = f"<b>Chat:</b> {esc(facts.chat_name)} — {state}"
            if facts.chat_context:
                chat += f" · context {facts.chat_context:,} tokens"
            if facts.chat_threads:
                chat += f" · {facts.chat_threads} threads"
            if facts.chat_path:
                chat += f"<br><span style='color:{muted};'>{esc(facts.chat_path)}</span>"
            if facts.chat_endpoint:
                where = (
                    f"remote — conversation text is sent to {esc(host_of(facts.chat_endpoint))}"
                    if facts.chat_remote
                    else "on this computer"
                )
                chat += (
                    f"<br><span style='color:{muted};'>endpoint {esc(facts.chat_endpoint)}"
                    f" · {where}</span>"
                )
        if facts.embedding_name is None:
            embed = "<b>Embeddings:</b> none — semantic search is off"
        else:
            dim = f" · {facts.embedding_dim} dimensions" if facts.embedding_dim else ""
            embed = f"<b>Embeddings:</b> {esc(facts.embedding_name)}{dim}"
            if facts.embedding_path:
                embed += f"<br><span style='color:{muted};'>{esc(facts.embedding_path)}</span>"
        chosen = (
            f"<b>Chosen in settings:</b> chat {esc(facts.chat_setting or 'starter model')}, "
            f"embeddings {esc(facts.embedding_setting or 'prepared MiniLM')}"
        )
        return f"{chat}<br>{embed}<br><span style='color:{muted};'>{chosen}</span>"

    def _show_llama(self, facts: InUse) -> None:
        names = {facts.chat_name or ""}
        if facts.chat_path:
            names.add(Path(facts.chat_path).name)
        self.llama_section.show_facts(
            facts.llama, kernels=facts.kernels, problem=facts.llama_problem, chat_names=names
        )

    def _fill_catalogue(self, entries: list[CatalogueEntry]) -> None:
        settings = self.services.settings.models
        chosen = {settings.chat_model or "__starter__", settings.embedding_model or "__prepared__"}
        keep = self._pending_select or getattr(self.selected_entry(), "name", None)
        self._pending_select = None
        self.catalogue_table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            info = entry.info
            mark = (
                {"starter": "__starter__", "prepared": "__prepared__"}.get(entry.source) in chosen
                if entry.default
                else entry.name in chosen
            )
            values = (
                ("★ " if mark else "") + entry.name,
                entry.role,
                (info.architecture if info else None) or "?",
                parameters_text(info.parameters if info else None),
                (info.quantisation if info else None) or "?",
                f"{info.context_length:,}" if info and info.context_length else "?",
                human_bytes(info.size_bytes) if info else "?",
                entry.status,
            )
            for col, value in enumerate(values):
                tooltip = f"{entry.name}\n{entry.path}" if col == 0 else entry.problem
                self.catalogue_table.setItem(
                    row, col, _cell(value, entry if col == 0 else None, tooltip)
                )
        if keep is not None:
            self.select_entry(keep)
        self._entry_selected()

    # -- selection ------------------------------------------------------------------------------
    def selected_entry(self) -> CatalogueEntry | None:
        row = self.catalogue_table.currentRow()
        item = self.catalogue_table.item(row, 0) if row >= 0 else None
        entry = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return entry if isinstance(entry, CatalogueEntry) else None

    def select_entry(self, name: str) -> bool:
        for row in range(self.catalogue_table.rowCount()):
            item = self.catalogue_table.item(row, 0)
            entry = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
            if isinstance(entry, CatalogueEntry) and entry.name == name:
                self.catalogue_table.selectRow(row)
                return True
        return False

    def _entry_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            muted = colors(self.palette()).muted
            self.entry_detail.setText(
                f"<p style='color:{muted};'>Select a model to see its details.</p>"
            )
        else:
            self.entry_detail.setText(info_html(entry))
        self._update_buttons()

    def _update_buttons(self) -> None:
        entry = self.selected_entry()
        usable = entry is not None and entry.status in ("ok", "changed")
        self.use_chat_button.setEnabled(usable and entry is not None and entry.serves("chat"))
        self.use_embedding_button.setEnabled(
            usable and entry is not None and entry.serves("embedding")
        )
        row = self.found_table.currentRow()
        readable = 0 <= row < len(self.found) and self.found[row].error is None
        self.add_found_button.setEnabled(readable)
        model: Any = self.services.chat_model
        facts = self.view.in_use if self.view else None
        self.load_button.setEnabled(
            model is not None
            and hasattr(model, "load")
            and facts is not None
            and facts.chat_loaded is False
        )
        unload = getattr(self.services, "unload_chat_model", None)
        self.unload_button.setVisible(unload is not None)
        self.unload_button.setEnabled(
            unload is not None and facts is not None and bool(facts.chat_loaded)
        )

    # -- actions --------------------------------------------------------------------------------
    def choose_selected(self, role: str) -> None:
        entry = self.selected_entry()
        if entry is not None:
            self.choose(entry, role)

    def choose(self, entry: CatalogueEntry, role: str) -> None:
        """Save *entry* as the chat or embedding model (the defaults are saved as '')."""
        models = self.services.settings.models
        value = "" if entry.default else entry.name
        if role == "chat" and hasattr(self.services, "switch_chat_model"):
            self._switch_chat(entry.name, value)
            return
        before = (models.chat_model, models.embedding_model)
        if role == "chat":
            models.chat_model = value
        else:
            models.embedding_model = value
        try:
            self.services.save_settings()
        except OSError as exc:
            models.chat_model, models.embedding_model = before
            self.status.error(f"The choice could not be saved: {exc.strerror or exc}")
            return
        what = "chat" if role == "chat" else "embedding"
        self.status.info(f"{entry.name} is now the {what} model. {RESTART_NOTE}")
        self.jobs.runner.broadcast(MODELS_CHANGED)

    def _switch_chat(self, name: str, value: str) -> None:
        """Load *name* in the background and use it from the next message (no restart)."""

        async def work(_op: Operation) -> None:
            await self.services.switch_chat_model(value)

        def done(_none: None) -> None:
            self.status.info(f"{name} is now the chat model.")
            self.jobs.runner.broadcast(MODELS_CHANGED)

        def failed(message: str) -> None:
            self.status.error(f"Could not switch to {name}: {message}")
            self.refresh()

        self.status.info(f"Loading {name}…")
        self.jobs.start(
            "model",
            work,
            done,
            failed,
            what="switch the chat model",
            progress=f"Loading {name}…",
        )

    def load_chat_model(self) -> None:
        model: Any = self.services.chat_model
        if model is None or not hasattr(model, "load"):
            return

        async def work(_op: Operation) -> None:
            await model.load()

        def done(_none: None) -> None:
            self.status.info(f"{model.name} is loaded.")
            self.jobs.runner.broadcast(MODELS_CHANGED)

        def failed(message: str) -> None:
            self.status.error(f"Could not load {model.name}: {message}")
            self.refresh()

        self.load_button.setEnabled(False)
        self.status.info(f"Loading {model.name}…")
        self.jobs.start(
            "model",
            work,
            done,
            failed,
            what="load the chat model",
            progress="Loading the chat model…",
        )

    def unload_chat_model(self) -> None:
        unload = getattr(self.services, "unload_chat_model", None)
        if unload is None:
            return

        async def work(_op: Operation) -> None:
            await unload()

        def done(_none: None) -> None:
            self.status.info("The chat model was unloaded; it loads again at the next message.")
            self.jobs.runner.broadcast(MODELS_CHANGED)

        self.jobs.start(
            "model",
            work,
            done,
            lambda message: self.status.error(f"Could not unload: {message}"),
            what="unload the chat model",
        )

    def add_model_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Add a GGUF model", "", "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.add_file(Path(path))

    def add_file(self, path: Path, *, source: str = "user") -> None:
        """Catalogue *path* (embedding models get that role); it is not copied."""
        services = self.services

        def add() -> CatalogueEntry:
            from agenvoy_desktop.llm.gguf_info import read_gguf_info

            role = "embedding" if read_gguf_info(path).likely_embedding else "chat"
            return catalogue_of(services).add(path, role=role, source=source)

        async def work(_op: Operation) -> CatalogueEntry:
            return await asyncio.to_thread(add)

        def done(entry: CatalogueEntry) -> None:
            use = "embeddings" if entry.role == "embedding" else "chat"
            self.status.info(f"Added {entry.name}. Choose “Use for {use}” to run it.")
            self._pending_select = entry.name
            self.jobs.runner.broadcast(MODELS_CHANGED)

        self.jobs.start(
            "add", work, done, lambda m: self.status.error(f"Not added: {m}"), what="add the model"
        )

    def look_for_models(self) -> None:
        discover = self.discover

        async def work(_op: Operation) -> list[DiscoveredModel]:
            return await asyncio.to_thread(discover)

        self.search_button.setEnabled(False)
        self.found_label.setText(
            "Looking in the folders of LM Studio, GPT4All, Jan, Ollama and the Hugging Face cache…"
        )
        self.jobs.start(
            "discover", work, self._show_found, self._discover_failed, what="look for models"
        )

    def _discover_failed(self, message: str) -> None:
        self.search_button.setEnabled(True)
        self.status.error(f"Could not look for models: {message}")

    def _show_found(self, found: list[DiscoveredModel]) -> None:
        self.search_button.setEnabled(True)
        known = {str(e.path) for e in (self.view.entries if self.view else [])}
        self.found = [m for m in found if str(m.path) not in known]
        hidden = len(found) - len(self.found)
        already = f" ({hidden} already in the catalogue)" if hidden else ""
        self.found_label.setText(
            f"Found {len(self.found)} model file{'s' if len(self.found) != 1 else ''}{already}."
            if found
            else "No GGUF files from LM Studio, GPT4All, Jan, Ollama or a Hugging Face cache "
            "were found."
        )
        self.found_table.setRowCount(len(self.found))
        for row, model in enumerate(self.found):
            arch = model.info.architecture if model.info else None
            values = (
                model.app,
                model.display_name,
                arch or ("unreadable" if model.error else "?"),
                human_bytes(model.size_bytes),
                str(model.path),
            )
            tooltip = f"{model.display_name}\n{model.path}"
            if model.error:
                tooltip += f"\n{model.error}"
            for col, value in enumerate(values):
                item = _cell(value, model if col == 0 else None, tooltip)
                self.found_table.setItem(row, col, item)
        self._update_buttons()

    def add_selected_found(self) -> None:
        row = self.found_table.currentRow()
        if 0 <= row < len(self.found):
            self.add_file(self.found[row].path, source="discovered")
