"""The chat model picker above the message box: the catalogue's chat models, switched live.

Choosing a model asks :meth:`AppServices.switch_chat_model` to open and load
it in the background (an :class:`AsyncRunner` job); the chat stays usable on
the old model meanwhile, a turn already running finishes on it, and the combo
says "Loading <model>…" until the new one answers.  A failure is one line
next to the combo and the previous model stays selected.  "Sampling…" opens
the current model's :class:`SamplingDialog`.  The model list is read off the
UI thread (reading GGUF headers takes a moment) and again whenever something
broadcasts a models change.
"""

from __future__ import annotations

import asyncio
import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import is_known
from agenvoy_desktop.llm.catalogue import CatalogueEntry, ModelCatalogue
from agenvoy_desktop.operations.changes import MODELS_CHANGED, MemoryChanges
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.sampling_dialog import SamplingDialog
from agenvoy_desktop.ui.theme import apply_sheet, colors

log = logging.getLogger(__name__)

_MIB = 1024 * 1024


def entry_choice(entry: CatalogueEntry) -> str:
    """The ``models.chat_model`` value for *entry*: built-ins are saved as the default ''."""
    return "" if entry.builtin else entry.name


def file_size(size: int) -> str:
    """``469 MiB``, ``4.1 GiB`` (``<1 MiB`` for the tiny test models)."""
    if size >= 1024 * _MIB:
        return f"{size / (1024 * _MIB):.1f} GiB"
    return f"{size / _MIB:,.0f} MiB" if size >= _MIB else "<1 MiB"


def entry_facts(entry: CatalogueEntry) -> str:
    """``469 MiB · Q4_K_M · 32k context`` (what the header says; '' when unreadable)."""
    info = entry.info
    if info is None:
        return ""
    parts = [file_size(info.size_bytes)]
    if info.quantisation:
        parts.append(info.quantisation)
    if info.context_length:
        parts.append(f"{info.context_length // 1024}k context")
    return " · ".join(parts)


def entry_tooltip(entry: CatalogueEntry) -> str:
    info = entry.info
    lines = [entry.name, str(entry.path)]
    if info is not None and info.parameters:
        lines.insert(1, f"{info.parameters / 1e9:.2f}B parameters, {entry_facts(entry)}")
    return "\n".join(lines)


def chat_entries(catalogue: ModelCatalogue) -> list[CatalogueEntry]:
    """The catalogue's usable chat models (worker thread: may read GGUF headers)."""
    return [e for e in catalogue.entries() if e.serves("chat") and e.status in ("ok", "changed")]


class ModelSwitcher(QWidget):
    """A compact combo of the installed chat models plus a Sampling… button."""

    switched = Signal(str)
    """The choice (``models.chat_model`` value) once its model is in use."""

    def __init__(self, services: AppServices, runner: AsyncRunner) -> None:
        super().__init__()
        self.services = services
        self.runner = runner
        self.entries: list[CatalogueEntry] = []
        self.pending: Operation | None = None
        """The switch in flight (None: none)."""
        self.combo = QComboBox()
        self.combo.setObjectName("ModelCombo")
        self.combo.setAccessibleName("Chat model")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.combo.activated.connect(self._activated)
        self.sampling_button = QToolButton()
        self.sampling_button.setText("Sampling…")
        self.sampling_button.setToolTip("Temperature, top-p, repetition guards of this model")
        self.sampling_button.clicked.connect(self.open_sampling)
        self.status = QLabel()
        self.status.setObjectName("ModelStatus")
        self.status.setWordWrap(True)
        self.status.hide()
        row = QHBoxLayout()
        row.addWidget(self.combo)
        row.addWidget(self.sampling_button)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(2)
        layout.addLayout(row)
        layout.addWidget(self.status)
        apply_sheet(
            self, lambda p: f"#ModelStatus[problem='true'] {{ color: {colors(p).error_fg}; }}"
        )
        runner.memory_changed.connect(self._memory_changed)
        self.refresh()

    # -- the list ---------------------------------------------------------------------------
    def refresh(self) -> Operation:
        """Re-read the catalogue (off the UI thread) and show the running model."""
        catalogue = self.services.catalogue
        return self.runner.run(
            asyncio.to_thread(chat_entries, catalogue),
            what="list the chat models",
            on_success=self._fill,
        )

    def _memory_changed(self, changes: MemoryChanges) -> None:
        if changes.models and self.pending is None:
            self.refresh()

    def _fill(self, entries: list[CatalogueEntry]) -> None:
        self.entries = entries
        self.combo.blockSignals(True)
        try:
            self.combo.clear()
            for entry in entries:
                facts = entry_facts(entry)
                self.combo.addItem(f"{entry.name}  ·  {facts}" if facts else entry.name)
                self.combo.setItemData(
                    self.combo.count() - 1, entry_tooltip(entry), Qt.ItemDataRole.ToolTipRole
                )
            self._select_running()
        finally:
            self.combo.blockSignals(False)
        self.combo.setEnabled(self.pending is None and bool(entries))
        self.sampling_button.setEnabled(self.services.chat_model is not None)

    def _select_running(self) -> None:
        """Select the entry the running model was opened for (none: a file not catalogued)."""
        choice = self.services.chat_choice
        index = next(
            (i for i, e in enumerate(self.entries) if choice in (entry_choice(e), e.name)), -1
        )
        self.combo.setCurrentIndex(index)

    def current_name(self) -> str | None:
        index = self.combo.currentIndex()
        return self.entries[index].name if 0 <= index < len(self.entries) else None

    # -- switching --------------------------------------------------------------------------
    def _activated(self, index: int) -> None:
        if 0 <= index < len(self.entries):
            self.choose(self.entries[index])

    def choose(self, entry: CatalogueEntry) -> Operation | None:
        """Switch to *entry* in the background (None: it is already the running model)."""
        choice = entry_choice(entry)
        if self.pending is not None or (
            choice == self.services.chat_choice and self.services.chat_model is not None
        ):
            self._select_running()
            return None
        self._show_status(f"Loading {entry.name}…")
        self.combo.setEnabled(False)
        self.sampling_button.setEnabled(False)
        self.pending = self.runner.run(
            self.services.switch_chat_model(choice),
            what=f"switch to {entry.name}",
            on_success=lambda _none: self._switched(entry, choice),
            on_failure=lambda exc: self._failed(entry, exc),
        )
        return self.pending

    def _switched(self, entry: CatalogueEntry, choice: str) -> None:
        self.pending = None
        self._show_status("")
        self.combo.setEnabled(True)
        self.sampling_button.setEnabled(True)
        self._select_running()
        self.switched.emit(choice)
        self.runner.broadcast(MODELS_CHANGED)

    def _failed(self, entry: CatalogueEntry, exc: BaseException) -> None:
        self.pending = None
        self.combo.setEnabled(True)
        self.sampling_button.setEnabled(self.services.chat_model is not None)
        self._select_running()
        if not is_known(exc):
            log.error("switching to %s failed", entry.name, exc_info=exc)
        message = self.runner.readable(exc)
        self._show_status(f"{entry.name} could not be loaded: {message}", problem=True)

    def _show_status(self, text: str, *, problem: bool = False) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))
        self.status.setProperty("problem", problem)
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)

    # -- sampling ---------------------------------------------------------------------------
    def open_sampling(self) -> SamplingDialog:
        """The running model's sampling settings (non-blocking: opened, not exec'd)."""
        dialog = SamplingDialog(self.services, self)
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog
