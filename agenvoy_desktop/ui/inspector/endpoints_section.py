"""The Models tab's "Endpoints" box: chat models served over HTTP, added by the user.

Lists the endpoints of :class:`~agenvoy_desktop.llm.endpoints.EndpointRegistry`
(name, address, model, context, this computer or remote, where the API key
comes from — never the key) with "Add endpoint…" (:class:`AddEndpointDialog`),
Remove and "Use as chat model".  "Look for running servers" asks the known
local servers (Ollama, LM Studio, llama.cpp server) on this computer only,
and only when pressed; each one found gets an "Add…" button that opens the
dialog with its models listed.

Everything that touches the file or the network runs through the tab's
:class:`Jobs`; the box only paints answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QBoxLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm.endpoints import (
    Endpoint,
    EndpointRegistry,
    FoundServer,
    look_for_servers,
)
from agenvoy_desktop.operations.changes import MODELS_CHANGED
from agenvoy_desktop.ui.async_runner import Operation
from agenvoy_desktop.ui.endpoint_dialog import (
    AddEndpointDialog,
    context_text,
    host_of,
    key_source,
    registry_of,
    remote_notice,
    where_text,
)
from agenvoy_desktop.ui.inspector.common import Jobs, StatusLine, esc
from agenvoy_desktop.ui.inspector.wrapping import WrappingButton

ENDPOINT_COLUMNS = ("Name", "Address", "Model", "Context", "Where", "Key")
NARROW_HIDDEN = ("Address", "Context", "Key")
"""Columns a narrow tab hides: the row's tooltip says the same."""
Look = Callable[[], list[FoundServer]]
Use = Callable[[str, str], None]
"""``use(name, choice)``: switch the chat model to *choice*, naming it *name*."""
DialogFactory = Callable[..., AddEndpointDialog]
T = TypeVar("T")


async def on_python_thread(work: Callable[[], T], name: str) -> T:
    """*work* on a thread of its own that Python started.

    The loop's default executor may run work on threads Python did not start;
    work that starts threads of its own there (the parallel server look-up)
    leaves a stray "dummy" thread record behind.  The thread ends with the work.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, work)
    finally:
        pool.shutdown(wait=False)


def endpoint_tooltip(endpoint: Endpoint) -> str:
    lines = [
        endpoint.name,
        f"Address: {endpoint.base_url}",
        f"Model: {endpoint.model}",
        f"Context: {context_text(endpoint.context_size)}",
        f"Where: {where_text(endpoint)}",
        f"API key: {key_source(endpoint)}",
    ]
    if endpoint.remote:
        lines.append("Conversation text is sent to this server while it is the chat model.")
    return "\n".join(lines)


def _item(text: str, tooltip: str) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setToolTip(tooltip)
    return item


class EndpointsBox(QGroupBox):
    """See the module docstring."""

    def __init__(
        self,
        services: AppServices,
        jobs: Jobs,
        status: StatusLine,
        use: Use,
        *,
        look: Look = look_for_servers,
        make_dialog: DialogFactory = AddEndpointDialog,
    ) -> None:
        # A short title: a group box is at least as wide as its title, and the longer
        # "Endpoints (models on a server)" was wider than the side panel at 16 pt; the
        # note under it says what an endpoint is.
        super().__init__("Endpoints")
        self.services = services
        self.jobs = jobs
        self.status = status
        self.use = use
        self.look = look
        self.make_dialog = make_dialog
        self.entries: list[Endpoint] = []
        self.found: list[FoundServer] = []
        self.dialog: AddEndpointDialog | None = None
        self.pending_select: str | None = None
        """The endpoint to select once the list shows it (one just added)."""
        self._build()

    @property
    def registry(self) -> EndpointRegistry:
        return registry_of(self.services)

    # -- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        note = QLabel(
            "Chat models on a server: Ollama, LM Studio, a llama.cpp server or a hosted "
            "OpenAI-compatible API. Embeddings and memory stay on this computer."
        )
        note.setWordWrap(True)
        self.table = QTableWidget(0, len(ENDPOINT_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(ENDPOINT_COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(90)
        self.table.setMaximumHeight(150)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ENDPOINT_COLUMNS.index("Model"), QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self.update_buttons)
        self.empty_label = QLabel("No endpoints yet.")
        self.add_button = QPushButton("Add endpoint…")
        self.add_button.setToolTip("Add an OpenAI-compatible server and pick one of its models")
        self.add_button.clicked.connect(self.add_endpoint)
        self.look_button = WrappingButton("Look for running servers")
        self.look_button.setToolTip(
            "Ask Ollama (port 11434), LM Studio (1234) and llama.cpp server (8080) "
            "on this computer only"
        )
        self.look_button.clicked.connect(self.look_for_servers)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.use_button = QPushButton("Use as chat model")
        self.use_button.clicked.connect(self.use_selected)
        self._buttons = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        for button in (self.use_button, self.remove_button, self.add_button, self.look_button):
            self._buttons.addWidget(button)
        self._buttons.addStretch(1)
        self.found_label = QLabel()
        self.found_label.setWordWrap(True)
        self.found_label.hide()
        self.found_rows = QVBoxLayout()
        self.found_rows.setContentsMargins(0, 0, 0, 0)
        column = QVBoxLayout(self)
        column.addWidget(note)
        column.addWidget(self.table)
        column.addWidget(self.empty_label)
        column.addLayout(self._buttons)
        column.addWidget(self.found_label)
        column.addLayout(self.found_rows)
        self.update_buttons()

    def set_wide(self, wide: bool) -> None:
        """Buttons in a row and every column when wide; stacked and fewer when narrow."""
        self._buttons.setDirection(
            QBoxLayout.Direction.LeftToRight if wide else QBoxLayout.Direction.TopToBottom
        )
        for index, name in enumerate(ENDPOINT_COLUMNS):
            self.table.setColumnHidden(index, not wide and name in NARROW_HIDDEN)

    # -- showing -----------------------------------------------------------------------------
    def show_entries(self, entries: list[Endpoint]) -> None:
        selected = self.selected()
        keep = self.pending_select or (selected.name if selected is not None else None)
        self.pending_select = None
        self.entries = entries
        chosen = self.services.settings.models.chat_model
        self.table.setRowCount(len(entries))
        for row, endpoint in enumerate(entries):
            tip = endpoint_tooltip(endpoint)
            values = (
                ("★ " if endpoint.choice == chosen else "") + endpoint.name,
                endpoint.base_url,
                endpoint.model,
                context_text(endpoint.context_size),
                ("⇅ " if endpoint.remote else "") + where_text(endpoint),
                key_source(endpoint),
            )
            for col, value in enumerate(values):
                self.table.setItem(row, col, _item(value, tip))
        self.table.setVisible(bool(entries))
        self.empty_label.setVisible(not entries)
        if keep is not None:
            self.select(keep)
        self.update_buttons()

    def selected(self) -> Endpoint | None:
        row = self.table.currentRow()
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def select(self, name: str) -> bool:
        for row, endpoint in enumerate(self.entries):
            if endpoint.name == name:
                self.table.selectRow(row)
                return True
        return False

    def update_buttons(self) -> None:
        endpoint = self.selected()
        in_use = endpoint is not None and endpoint.choice == self.services.chat_choice
        self.use_button.setEnabled(endpoint is not None and not in_use)
        self.remove_button.setEnabled(endpoint is not None)

    # -- adding ------------------------------------------------------------------------------
    def add_endpoint(self) -> AddEndpointDialog:
        """The empty add dialog ("Add endpoint…")."""
        return self.open_add_dialog()

    def open_add_dialog(self, found: FoundServer | None = None) -> AddEndpointDialog:
        """The add dialog (opened, not exec'd); a new endpoint reloads every models view."""
        if self.dialog is not None:
            self.dialog.close()
        dialog = self.make_dialog(self.registry, self.jobs.runner, self, found=found)
        dialog.added.connect(self._added)
        dialog.finished.connect(partial(self._dialog_closed, dialog))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _dialog_closed(self, dialog: AddEndpointDialog, _result: int) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    def _added(self, endpoint: Endpoint) -> None:
        remote = f" {remote_notice(host_of(endpoint.base_url))} while it is in use."
        self.status.info(
            f"Added {endpoint.name}. Choose “Use as chat model” to chat with it."
            + (remote if endpoint.remote else "")
        )
        self.pending_select = endpoint.name
        self.jobs.runner.broadcast(MODELS_CHANGED)

    # -- actions -----------------------------------------------------------------------------
    def use_selected(self) -> None:
        endpoint = self.selected()
        if endpoint is not None:
            self.use(endpoint.name, endpoint.choice)

    def remove_selected(self) -> Operation | None:
        endpoint = self.selected()
        if endpoint is None:
            return None
        if endpoint.choice == self.services.chat_choice:
            self.status.error(
                f"{endpoint.name} is the chat model now; switch to another model, then remove it."
            )
            return None
        registry = self.registry

        async def work(_op: Operation) -> Endpoint:
            return await asyncio.to_thread(registry.remove, endpoint.name)

        def done(removed: Endpoint) -> None:
            self.status.info(f"Removed {removed.name}.")
            self.jobs.runner.broadcast(MODELS_CHANGED)

        return self.jobs.start(
            "endpoint-remove",
            work,
            done,
            lambda m: self.status.error(f"Not removed: {m}"),
            what="remove the endpoint",
        )

    def look_for_servers(self) -> Operation:
        """Ask the known local servers (loopback only) which models they serve."""
        look = self.look

        async def work(_op: Operation) -> list[FoundServer]:
            return await on_python_thread(look, "look-for-servers")

        def failed(message: str) -> None:
            self.look_button.setEnabled(True)
            self.found_label.setText(f"Could not look for servers: {message}")

        self.look_button.setEnabled(False)
        self.found_label.setText("Asking Ollama, LM Studio and llama.cpp server on this computer…")
        self.found_label.show()
        return self.jobs.start(
            "endpoint-look", work, self.show_found, failed, what="look for running servers"
        )

    def show_found(self, found: list[FoundServer]) -> None:
        self.look_button.setEnabled(True)
        self.found = found
        while self.found_rows.count():
            item = self.found_rows.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.found_label.setText(
            f"Running on this computer ({len(found)}):"
            if found
            else "No Ollama, LM Studio or llama.cpp server is running on this computer."
        )
        self.found_label.show()
        for server in found:
            self.found_rows.addWidget(self._found_row(server))

    def _found_row(self, server: FoundServer) -> QWidget:
        row = QWidget()
        count = len(server.models)
        names = ", ".join(m.id for m in server.models[:3]) + (" …" if count > 3 else "")
        label = QLabel(
            f"<b>{esc(server.label)}</b> · {esc(server.base_url)} · "
            f"{count} model{'s' if count != 1 else ''}" + (f" ({esc(names)})" if names else "")
        )
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        add = QPushButton("Add…")
        add.setToolTip(f"Add one of the models {server.label} serves")
        add.setEnabled(bool(server.models))
        add.clicked.connect(lambda: self.open_add_dialog(server))
        line = QHBoxLayout(row)
        line.setContentsMargins(12, 0, 0, 0)
        line.addWidget(label, 1)
        line.addWidget(add, 0, Qt.AlignmentFlag.AlignTop)
        return row
