"""The chat model picker above the message box: local models and endpoints, switched live.

Choosing a model asks :meth:`AppServices.switch_chat_model` to open and load
it in the background (an :class:`AsyncRunner` job); the chat stays usable on
the old model meanwhile, a turn already running finishes on it, and the combo
says "Loading <model>…" until the new one answers.  A failure is one line
next to the combo and the previous model stays selected.  "Sampling…" opens
the current model's :class:`SamplingDialog`.  The model list is read off the
UI thread (reading GGUF headers takes a moment) and again whenever something
broadcasts a models change.

Endpoints (chat models on an OpenAI-compatible server) follow the local
models after a separator, as "name · model · ctx · endpoint", and switch the
same way (``endpoint:<name>``).  While the running model is on another
machine a marker beside the combo says so — conversation text leaves this
computer — and it goes away when a local model is chosen again.

"More models" beside the combo says that a better model can be had and
where: it finds GGUF files other apps downloaded, adds a file, or connects
to a server.  The switcher only asks (its signals); the window has the
Models tab do it, so there is one way each is done.  The combo shrinks with
a narrow chat (or a large font) and elides its text at the end; the open
list and the tooltip show the whole row.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QToolButton,
    QVBoxLayout,
    QWidget,
    QWidgetAction,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import is_known
from agenvoy_desktop.llm.catalogue import CatalogueEntry, ModelCatalogue
from agenvoy_desktop.llm.endpoints import Endpoint, EndpointRegistry
from agenvoy_desktop.llm.llama_model import effective_context
from agenvoy_desktop.operations.changes import MODELS_CHANGED, MemoryChanges
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.endpoint_dialog import context_text, host_of, registry_of
from agenvoy_desktop.ui.sampling_dialog import SamplingDialog
from agenvoy_desktop.ui.theme import apply_sheet, colors

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
BIGGER_MODEL_HINT = (
    "A bigger model (3B to 8B parameters) follows questions better and uses what it "
    "remembers more reliably; it needs more memory (about 2 to 6 GB) and answers more slowly."
)
"""What a bigger model changes, in one line (the More models menu and its tooltip)."""
MORE_MODELS = (
    ("find", "Find models on this computer…", "GGUF files LM Studio, GPT4All, Jan or Ollama got"),
    ("add_file", "Add a GGUF file…", "Choose a .gguf file; it is used where it is, not copied"),
    (
        "connect",
        "Connect to a server…",
        "Ollama, LM Studio, llama.cpp server or any OpenAI-compatible API",
    ),
)
"""The More models entries: (name, text, tooltip); the name is what :attr:`more_requested` says."""
HINT_WIDTH_CHARS = 48
"""The hint under the More models entries wraps at about this many characters."""
COMBO_MIN_CHARS = 18
"""The combo keeps at least this many characters of the model's row; the rest is elided."""


def entry_choice(entry: CatalogueEntry) -> str:
    """The ``models.chat_model`` value for *entry*: the starter is saved as the default ''."""
    return "" if entry.default else entry.name


def file_size(size: int) -> str:
    """``469 MiB``, ``4.1 GiB`` (``<1 MiB`` for the tiny test models)."""
    if size >= 1024 * _MIB:
        return f"{size / (1024 * _MIB):.1f} GiB"
    return f"{size / _MIB:,.0f} MiB" if size >= _MIB else "<1 MiB"


def entry_facts(entry: CatalogueEntry, context_setting: int | None = None) -> str:
    """``469 MiB · Q4_K_M · 8k of 32k context`` ('' when the header is unreadable).

    The header's trained context alone ("32k context") read as what the app
    uses; with *context_setting* the label says what a chat gets of it.
    """
    info = entry.info
    if info is None:
        return ""
    parts = [file_size(info.size_bytes)]
    if info.quantisation:
        parts.append(info.quantisation)
    if info.context_length:
        trained = info.context_length
        used = effective_context(context_setting, trained) if context_setting else trained
        if used < trained:
            parts.append(f"{used // 1024}k of {trained // 1024}k context")
        else:
            parts.append(f"{trained // 1024}k context")
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


def endpoint_label(endpoint: Endpoint) -> str:
    """``big · qwen2.5:32b · 32k ctx · endpoint`` (the combo row of an endpoint; ⇅ when remote)."""
    kind = "⇅ endpoint" if endpoint.remote else "endpoint"
    return "  ·  ".join((endpoint.name, endpoint.model, context_text(endpoint.context_size), kind))


def endpoint_tip(endpoint: Endpoint) -> str:
    lines = [endpoint.name, f"{endpoint.model} on {endpoint.base_url}"]
    if endpoint.remote:
        lines.append(f"Conversation text is sent to {host_of(endpoint.base_url)}.")
    return "\n".join(lines)


def remote_tip(name: str, base_url: str) -> str:
    """What the remote marker's tooltip explains."""
    return (
        f"The chat model {name} runs on {base_url}. Your messages, the memories recalled "
        "for them and document passages are sent there with every turn. "
        "Choose a local model to keep everything on this computer."
    )


@dataclass(slots=True)
class ChatChoices:
    """What the combo offers: the local chat models, then the endpoints."""

    entries: list[CatalogueEntry] = field(default_factory=list)
    endpoints: list[Endpoint] = field(default_factory=list)


def chat_choices(catalogue: ModelCatalogue, registry: EndpointRegistry) -> ChatChoices:
    """Both lists (worker thread: headers and the endpoints file are read)."""
    return ChatChoices(chat_entries(catalogue), registry.entries())


class ElidingCombo(QComboBox):
    """A combo that ends a row too long for its width with "…" instead of cutting it off.

    Its width follows the longest row while there is room, and it may shrink
    to :data:`COMBO_MIN_CHARS`; the open list is never narrower than its rows.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.currentIndexChanged.connect(lambda _index: self.tip_current())

    def tip_current(self) -> None:
        """The whole row (which may be elided) and its note, when the pointer rests on it."""
        index = self.currentIndex()
        text = self.itemText(index) if index >= 0 else ""
        note = self.itemData(index, Qt.ItemDataRole.ToolTipRole) if index >= 0 else None
        extra = f"\n{note}" if isinstance(note, str) and note and note != text else ""
        self.setToolTip(f"{text}{extra}" if text else "")

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        chars = self.fontMetrics().horizontalAdvance("x" * COMBO_MIN_CHARS)
        return QSize(min(hint.width(), chars + 40), hint.height())

    def showPopup(self) -> None:
        view = self.view()
        view.setMinimumWidth(
            view.sizeHintForColumn(0) + view.verticalScrollBar().sizeHint().width()
        )
        super().showPopup()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.updateGeometry()

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox,
            option,
            QStyle.SubControl.SC_ComboBoxEditField,
            self,
        )
        option.currentText = self.fontMetrics().elidedText(
            option.currentText, Qt.TextElideMode.ElideRight, max(0, field.width() - 2)
        )
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)


class ModelSwitcher(QWidget):
    """A compact combo of the chat models and endpoints, a Sampling… button, the remote marker."""

    switched = Signal(str)
    """The choice (``models.chat_model`` value) once its model is in use."""
    more_requested = Signal(str)
    """A More models entry was chosen: ``find``, ``add_file`` or ``connect`` (see
    :data:`MORE_MODELS`); the window has the Models tab do it."""

    def __init__(self, services: AppServices, runner: AsyncRunner) -> None:
        super().__init__()
        self.services = services
        self.runner = runner
        self.entries: list[CatalogueEntry] = []
        self.endpoints: list[Endpoint] = []
        self.rows: list[CatalogueEntry | Endpoint | _Unlisted | None] = []
        """What each combo row stands for (None: the separator)."""
        self.pending: Operation | None = None
        """The switch in flight (None: none)."""
        self.combo = ElidingCombo()
        self.combo.setObjectName("ModelCombo")
        self.combo.setAccessibleName("Chat model")
        self.combo.activated.connect(self._activated)
        self.more_button = QToolButton()
        self.more_button.setText("More models")
        self.more_button.setToolTip(BIGGER_MODEL_HINT)
        self.more_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more_menu = self._more_menu()
        self.more_button.setMenu(self.more_menu)
        self.sampling_button = QToolButton()
        self.sampling_button.setText("Sampling…")
        self.sampling_button.setToolTip("Temperature, top-p, repetition guards of this model")
        self.sampling_button.clicked.connect(self.open_sampling)
        self.remote_marker = QLabel()
        self.remote_marker.setObjectName("RemoteMarker")
        self.remote_marker.setAccessibleName("Remote model in use")
        self.remote_marker.hide()
        self.status = QLabel()
        self.status.setObjectName("ModelStatus")
        self.status.setWordWrap(True)
        self.status.hide()
        row = QHBoxLayout()
        row.addWidget(self.combo, 1)
        row.addWidget(self.more_button)
        row.addWidget(self.sampling_button)
        row.addStretch(0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(2)
        layout.addLayout(row)
        layout.addWidget(self.remote_marker, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.status)
        self.restyle()
        runner.memory_changed.connect(self._memory_changed)
        self.refresh()

    def restyle(self) -> None:
        """Colours from the application palette (again after a light/dark switch)."""
        apply_sheet(
            self,
            lambda p: (
                f"#ModelStatus[problem='true'] {{ color: {colors(p).error_fg}; }}"
                f" #RemoteMarker {{ background: {colors(p).warning_bg};"
                f" color: {colors(p).warning_fg}; border: 1px solid {colors(p).border};"
                " border-radius: 4px; padding: 1px 6px; }"
            ),
        )

    def _more_menu(self) -> QMenu:
        """Where better models come from, and one line on what a bigger one changes."""
        menu = QMenu(self.more_button)
        menu.setToolTipsVisible(True)
        for name, text, tip in MORE_MODELS:
            action = menu.addAction(text)
            action.setToolTip(tip)
            action.setObjectName(name)
            action.triggered.connect(lambda _=False, n=name: self.more_requested.emit(n))
        menu.addSeparator()
        label = QLabel(BIGGER_MODEL_HINT)
        label.setObjectName("BiggerModelHint")
        label.setWordWrap(True)
        label.setFixedWidth(HINT_WIDTH_CHARS * label.fontMetrics().averageCharWidth())
        label.setContentsMargins(8, 4, 8, 4)
        label.setEnabled(False)  # read, not chosen: drawn muted like a disabled entry
        hint = QWidgetAction(menu)
        hint.setDefaultWidget(label)
        hint.setObjectName("hint")
        menu.addAction(hint)
        return menu

    # -- the list ---------------------------------------------------------------------------
    def refresh(self) -> Operation:
        """Re-read the catalogue and the endpoints (off the UI thread); show the running model."""
        catalogue, registry = self.services.catalogue, registry_of(self.services)
        return self.runner.run(
            asyncio.to_thread(chat_choices, catalogue, registry),
            what="list the chat models",
            on_success=self._fill,
        )

    def _memory_changed(self, changes: MemoryChanges) -> None:
        if changes.models and self.pending is None:
            self.refresh()

    def _fill(self, choices: ChatChoices) -> None:
        self.entries, self.endpoints = choices.entries, choices.endpoints
        self.rows = []
        self.combo.blockSignals(True)
        try:
            self.combo.clear()
            context = self.services.settings.models.context_size
            for entry in self.entries:
                facts = entry_facts(entry, context)
                self._add_row(
                    entry,
                    f"{entry.name}  ·  {facts}" if facts else entry.name,
                    entry_tooltip(entry),
                )
            if self.entries and self.endpoints:
                self.combo.insertSeparator(self.combo.count())
                self.rows.append(None)
            for endpoint in self.endpoints:
                self._add_row(endpoint, endpoint_label(endpoint), endpoint_tip(endpoint))
            self._add_unlisted()
            self._select_running()
        finally:
            self.combo.blockSignals(False)
        self.combo.tip_current()
        self.combo.setEnabled(self.pending is None and bool(self.entries or self.endpoints))
        self.sampling_button.setEnabled(self.services.chat_model is not None)
        self._show_marker()

    def _add_row(self, item: CatalogueEntry | Endpoint, text: str, tip: str) -> None:
        self.combo.addItem(text)
        self.combo.setItemData(self.combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.rows.append(item)

    def _add_unlisted(self) -> None:
        """A first row naming a running model no other row stands for (a GGUF file chosen
        by path in Settings), so the bar always says which model answers; choosing it
        changes nothing."""
        model, choice = self.services.chat_model, self.services.chat_choice
        if model is None or any(_matches(item, choice) for item in self.rows):
            return
        self.combo.insertItem(0, f"{model.name}  ·  not in the catalogue")
        tip = f"{choice}\nChosen as a file in Settings; add it in Models to list it here."
        self.combo.setItemData(0, tip if choice else model.name, Qt.ItemDataRole.ToolTipRole)
        self.rows.insert(0, UNLISTED)

    def _select_running(self) -> None:
        """Select the row the running model was opened for (the unlisted row: a file not
        catalogued)."""
        choice = self.services.chat_choice
        index = next((i for i, item in enumerate(self.rows) if _matches(item, choice)), -1)
        if index < 0 and UNLISTED in self.rows:
            index = self.rows.index(UNLISTED)
        self.combo.setCurrentIndex(index)

    def current_name(self) -> str | None:
        index = self.combo.currentIndex()
        item = self.rows[index] if 0 <= index < len(self.rows) else None
        if isinstance(item, _Unlisted):
            model = self.services.chat_model
            return model.name if model is not None else None
        return item.name if item is not None else None

    def _show_marker(self) -> None:
        """The remote marker while the running model sends text to another machine."""
        model = self.services.chat_model
        remote = bool(getattr(model, "remote", False))
        self.remote_marker.setVisible(remote)
        if remote and model is not None:
            base_url = str(getattr(model, "base_url", ""))
            self.remote_marker.setText(f"⇅ Remote: text is sent to {host_of(base_url)}")
            self.remote_marker.setToolTip(remote_tip(model.name, base_url))

    # -- switching --------------------------------------------------------------------------
    def _activated(self, index: int) -> None:
        item = self.rows[index] if 0 <= index < len(self.rows) else None
        if isinstance(item, Endpoint):
            self.choose_endpoint(item)
        elif isinstance(item, CatalogueEntry):
            self.choose(item)

    def choose(self, entry: CatalogueEntry) -> Operation | None:
        """Switch to *entry* in the background (None: it is already the running model)."""
        return self._switch(entry.name, entry_choice(entry))

    def choose_endpoint(self, endpoint: Endpoint) -> Operation | None:
        """Switch to *endpoint* (``endpoint:<name>``) as to a local model."""
        return self._switch(endpoint.name, endpoint.choice)

    def _switch(self, name: str, choice: str) -> Operation | None:
        if self.pending is not None or (
            choice == self.services.chat_choice and self.services.chat_model is not None
        ):
            self._select_running()
            return None
        self._show_status(f"Loading {name}…")
        self.combo.setEnabled(False)
        self.sampling_button.setEnabled(False)
        self.pending = self.runner.run(
            self.services.switch_chat_model(choice),
            what=f"switch to {name}",
            on_success=lambda _none: self._switched(choice),
            on_failure=lambda exc: self._failed(name, exc),
        )
        return self.pending

    def _switched(self, choice: str) -> None:
        self.pending = None
        self._show_status("")
        self.combo.setEnabled(True)
        self.sampling_button.setEnabled(True)
        self._select_running()
        self._show_marker()
        self.switched.emit(choice)
        self.runner.broadcast(MODELS_CHANGED)

    def _failed(self, name: str, exc: BaseException) -> None:
        self.pending = None
        self.combo.setEnabled(True)
        self.sampling_button.setEnabled(self.services.chat_model is not None)
        self._select_running()
        self._show_marker()
        if not is_known(exc):
            log.error("switching to %s failed", name, exc_info=exc)
        message = self.runner.readable(exc)
        self._show_status(f"{name} could not be loaded: {message}", problem=True)

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


class _Unlisted:
    """The combo row of a running model that is not in the catalogue."""


UNLISTED = _Unlisted()


def _matches(item: CatalogueEntry | Endpoint | _Unlisted | None, choice: str) -> bool:
    """Whether the combo row *item* is the ``models.chat_model`` value *choice*."""
    if isinstance(item, Endpoint):
        return item.choice == choice
    return isinstance(item, CatalogueEntry) and choice in (entry_choice(item), item.name)
