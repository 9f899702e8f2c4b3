"""The settings dialog: memory knobs, models, folders, the theme and the font size.

The form is read into a plain :class:`SettingsForm`; :func:`validate_form`
checks it without Qt and answers with sentences a person can act on.  OK
writes the values into ``services.settings`` and calls
``services.save_settings()`` (which applies what can change at once); values
that only a fresh model load can use are named in a note, not silently kept.
The theme and font size are applied by the window as soon as OK is pressed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.settings import THEMES, Settings
from agenvoy_desktop.ui.elided import ElidedLabel
from agenvoy_desktop.ui.inspector.common import catalogue_of
from agenvoy_desktop.ui.theme import colors

MIB = 1024 * 1024
WINDOW_RANGE = (2, 256)
HISTORY_MIB_RANGE = (0.25, 1024.0)
IDLE_RANGE = (30, 86_400)
FONT_RANGE = (9, 16)
"""Point sizes offered besides "system default" (0)."""
THEME_LABELS = {"system": "Same as the system", "light": "Light", "dark": "Dark"}
CONTEXT_RANGE = (512, 262_144)
ANSWER_RANGE = (16, 32_768)
PROMPT_ROOM = 256
"""Tokens the prompt needs at least besides the answer limit."""
STARTER_LABEL = "Starter model (Qwen2.5-Coder 0.5B)"
EMBEDDING_LABEL = "Prepared all-MiniLM-L6-v2"
RESTART_NOTE = (
    "The chat model, embedding model, threads, context size and layers on the GPU are used "
    "the next time a model is loaded: restart the app to use them now."
)
GPU_HELP = (
    "How much of the chat model runs on the graphics card (faster) instead of the "
    "processor. Automatic: as many layers as fit in its free memory; 0: none."
)
CPU_ONLY_HELP = (
    "This build runs on the CPU only: its llama.cpp has no GPU support, so there are no "
    "layers to move to a graphics card."
)


def gpu_offload_available() -> bool:
    """Whether this llama.cpp can put model layers on a GPU (False where it cannot be asked)."""
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except (ImportError, OSError, AttributeError):
        return False


@dataclass(slots=True)
class SettingsForm:
    """What the dialog's widgets say, before it is accepted."""

    window_messages: int
    max_history_bytes: int
    summary_idle_seconds: int
    chat_model: str
    embedding_model: str
    threads: int
    context_size: int
    temperature: float
    max_answer_tokens: int
    gpu_layers: int
    allowed_folders: list[str] = field(default_factory=list)
    proactive_recall: bool = True
    documents_enabled: bool = False
    load_at_start: bool = True
    read_ahead: bool = True
    theme: str = "system"
    font_size: int = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> SettingsForm:
        models, memory = settings.models, settings.memory
        return cls(
            window_messages=memory.window_messages,
            max_history_bytes=memory.max_history_bytes,
            summary_idle_seconds=memory.summary_idle_seconds,
            chat_model=models.chat_model,
            embedding_model=models.embedding_model,
            threads=models.threads,
            context_size=models.context_size,
            temperature=models.temperature,
            max_answer_tokens=models.max_answer_tokens,
            gpu_layers=models.gpu_layers,
            allowed_folders=list(settings.allowed_folders),
            proactive_recall=memory.proactive_recall,
            documents_enabled=settings.documents.enabled,
            load_at_start=models.load_at_start,
            read_ahead=models.read_ahead,
            theme=settings.appearance.theme,
            font_size=settings.appearance.font_size,
        )

    def apply_to(self, settings: Settings) -> None:
        models, memory = settings.models, settings.memory
        memory.window_messages = self.window_messages
        memory.max_history_bytes = self.max_history_bytes
        memory.summary_idle_seconds = self.summary_idle_seconds
        memory.proactive_recall = self.proactive_recall
        settings.documents.enabled = self.documents_enabled
        models.chat_model = self.chat_model
        models.embedding_model = self.embedding_model
        models.threads = self.threads
        models.context_size = self.context_size
        models.temperature = self.temperature
        models.max_answer_tokens = self.max_answer_tokens
        models.gpu_layers = self.gpu_layers
        models.load_at_start = self.load_at_start
        models.read_ahead = self.read_ahead
        settings.allowed_folders = list(self.allowed_folders)
        settings.appearance.theme = self.theme
        settings.appearance.font_size = self.font_size


def _in_range(errors: list[str], label: str, value: float, bounds: tuple[float, float]) -> None:
    low, high = bounds
    if not low <= value <= high:
        errors.append(f"{label} must be between {low:g} and {high:g} (it is {value:g}).")


def _model_problem(label: str, value: str, known: set[str]) -> str | None:
    """A model is empty (the default), a catalogue name, or an existing GGUF file."""
    if not value or value in known:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        return f"{label}: “{value}” is neither a model in the catalogue nor a file path."
    if not path.is_file():
        return f"{label}: the file {path} does not exist."
    if path.suffix.lower() != ".gguf":
        return f"{label}: {path.name} is not a .gguf file."
    return None


def _folder_problem(folder: str) -> str | None:
    path = Path(folder).expanduser()
    if not path.is_absolute():
        return f"Allowed folder “{folder}” is not a full path."
    if not path.exists():
        return f"Allowed folder {path} does not exist any more — remove it from the list."
    if not path.is_dir():
        return f"Allowed folder {path} is a file, not a folder."
    return None


def validate_form(
    form: SettingsForm, known_models: set[str] | frozenset[str] = frozenset()
) -> list[str]:
    """Every problem with *form*, one sentence each (empty = it can be saved)."""
    errors: list[str] = []
    _in_range(errors, "The window size", form.window_messages, WINDOW_RANGE)
    _in_range(errors, "The history limit (MiB)", form.max_history_bytes / MIB, HISTORY_MIB_RANGE)
    _in_range(errors, "The summary timer (seconds)", form.summary_idle_seconds, IDLE_RANGE)
    _in_range(errors, "The context size", form.context_size, CONTEXT_RANGE)
    _in_range(errors, "The answer limit", form.max_answer_tokens, ANSWER_RANGE)
    _in_range(errors, "Threads", form.threads, (1, 256))
    _in_range(errors, "The temperature", form.temperature, (0.0, 2.0))
    if form.max_answer_tokens > form.context_size - PROMPT_ROOM:
        errors.append(
            f"The answer limit ({form.max_answer_tokens:,} tokens) leaves no room for the prompt "
            f"in a context of {form.context_size:,} tokens: make it at most "
            f"{max(0, form.context_size - PROMPT_ROOM):,} or raise the context size."
        )
    known = set(known_models)
    for label, value in (
        ("Chat model", form.chat_model),
        ("Embedding model", form.embedding_model),
    ):
        if problem := _model_problem(label, value, known):
            errors.append(problem)
    errors += [p for f in form.allowed_folders if (p := _folder_problem(f)) is not None]
    if form.theme not in THEMES:
        errors.append(f"The theme “{form.theme}” is unknown: choose Light, Dark or System.")
    if form.font_size:
        _in_range(errors, "The font size (pt)", form.font_size, FONT_RANGE)
    return errors


def catalogue_models(services: AppServices) -> list[tuple[str, str, bool]]:
    """(name, role, is the default) of the catalogue's models (a small JSON file, cached
    headers); the defaults are the pickers' first item, not listed by name."""
    try:
        entries = catalogue_of(services).entries()
    except OSError:
        return []
    return [(e.name, e.role, e.default) for e in entries]


class ModelPicker(QWidget):
    """An editable model choice: default, catalogue names, or a GGUF file path."""

    changed = Signal()

    def __init__(self, default_label: str, names: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        self.combo.setEditable(True)
        self.combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.combo.addItem(default_label, "")
        for name in names:
            self.combo.addItem(name, name)
        self.combo.setMinimumContentsLength(28)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.combo, 1)
        row.addWidget(browse)

    def value(self) -> str:
        text = self.combo.currentText().strip()
        index = self.combo.findText(text)
        if index >= 0:
            return str(self.combo.itemData(index) or "")
        return text

    def set_value(self, value: str) -> None:
        index = self.combo.findData(value)
        if index >= 0:
            self.combo.setCurrentIndex(index)
        else:
            self.combo.setEditText(value)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a GGUF model", "", "GGUF models (*.gguf)"
        )
        if path:
            self.set_value(path)


CHARS_WIDE = 92
"""The dialog's minimum width in average characters of its font."""


class SettingsDialog(QDialog):
    """Edit ``services.settings``; OK validates, saves and applies."""

    def __init__(self, services: AppServices, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.setWindowTitle("Settings")
        # 620 px at 10 pt, wider with the text: check boxes do not wrap (13-16 pt cut them)
        self.setMinimumWidth(max(620, self.fontMetrics().averageCharWidth() * CHARS_WIDE))
        models = catalogue_models(services)
        self._known = {name for name, _, _ in models}
        offered = [(name, role) for name, role, default in models if not default]
        chat_names = [n for n, role in offered if role in ("chat", "any")]
        embed_names = [n for n, role in offered if role in ("embedding", "any")]
        self.tabs = QTabWidget()
        self.tabs.addTab(self._memory_page(), "Memory")
        self.tabs.addTab(self._models_page(chat_names, embed_names), "Models")
        self.tabs.addTab(self._files_page(), "Folders")
        self.tabs.addTab(self._appearance_page(), "Appearance")
        self.errors = QLabel()
        self.errors.setWordWrap(True)
        self.errors.setStyleSheet("color: #c62828; font-weight: 600;")
        self.errors.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.errors)
        layout.addWidget(self.buttons)
        self.load(SettingsForm.from_settings(services.settings))

    # -- pages ---------------------------------------------------------------------
    def _memory_page(self) -> QWidget:
        self.window_spin = QSpinBox()
        self.window_spin.setRange(*WINDOW_RANGE)
        self.window_spin.setSuffix(" messages")
        self.history_spin = QDoubleSpinBox()
        self.history_spin.setRange(*HISTORY_MIB_RANGE)
        self.history_spin.setDecimals(2)
        self.history_spin.setSingleStep(0.5)
        self.history_spin.setSuffix(" MiB")
        self.idle_spin = QSpinBox()
        self.idle_spin.setRange(*IDLE_RANGE)
        self.idle_spin.setSingleStep(30)
        self.idle_spin.setSuffix(" s")
        self.recall_check = QCheckBox("Bring up what I said before when it is relevant")
        self.documents_check = QCheckBox("Let the assistant search my document collections")
        form = QFormLayout()
        _add_row(
            form,
            "Context window (N):",
            self.window_spin,
            "The last N messages go to the model word for word; older ones live in the "
            "rolling summary and in search.",
        )
        _add_row(
            form,
            "History file limit:",
            self.history_spin,
            "history.json is trimmed to 80 % when it grows past this. The archive keeps "
            "every message.",
        )
        _add_row(
            form,
            "Summarize after idle:",
            self.idle_spin,
            "A summary pass runs when a session has been quiet this long.",
        )
        _add_row(
            form,
            "Proactive recall:",
            self.recall_check,
            "Before each answer, your earlier messages that match what you asked are searched "
            "and the relevant ones are given to the model (shown above the answer and in the "
            "Context tab). Off: the model only searches when it decides to.",
        )
        _add_row(
            form,
            "Document collections:",
            self.documents_check,
            "Folders of notes, documents, mail or code you add in the Documents tab, indexed "
            "on this computer; the assistant searches them when it needs to and cites what it "
            "used. Off: nothing is indexed or searched.",
        )
        return _page(form)

    def _models_page(self, chat_names: list[str], embed_names: list[str]) -> QWidget:
        self.chat_picker = ModelPicker(STARTER_LABEL, chat_names)
        self.embed_picker = ModelPicker(EMBEDDING_LABEL, embed_names)
        self.threads_spin = QSpinBox()
        self.threads_spin.setRange(1, max(256, os.cpu_count() or 1))
        self.context_spin = QSpinBox()
        self.context_spin.setRange(*CONTEXT_RANGE)
        self.context_spin.setSingleStep(512)
        self.context_spin.setSuffix(" tokens")
        self.answer_spin = QSpinBox()
        self.answer_spin.setRange(*ANSWER_RANGE)
        self.answer_spin.setSingleStep(128)
        self.answer_spin.setSuffix(" tokens")
        self.temperature_spin = QDoubleSpinBox()
        self.temperature_spin.setRange(0.0, 2.0)
        self.temperature_spin.setSingleStep(0.05)
        self.gpu_spin = QSpinBox()
        self.gpu_spin.setRange(-1, 999)
        self.gpu_spin.setSpecialValueText("Automatic")
        form = QFormLayout()
        form.addRow("Chat model:", self.chat_picker)
        _add_row(
            form,
            "Embedding model:",
            self.embed_picker,
            "multilingual-e5-small, where it is offered, reads about 100 languages and finds "
            "more of what you said, but indexes at half the speed. After a change, your "
            "messages are indexed again in the background.",
        )
        _add_row(
            form, "Threads:", self.threads_spin, f"This computer has {os.cpu_count() or 1} cores."
        )
        _add_row(
            form, "Context size:", self.context_spin, "Tokens the model holds: prompt and answer."
        )
        _add_row(form, "Answer limit:", self.answer_spin, "The longest answer the model may write.")
        _add_row(
            form,
            "Temperature:",
            self.temperature_spin,
            "Lower answers are more focused, higher ones more varied.",
        )
        offload = gpu_offload_available()
        self.gpu_spin.setEnabled(offload)  # the value is kept either way
        _add_row(form, "Layers on the GPU:", self.gpu_spin, GPU_HELP if offload else CPU_ONLY_HELP)
        self.load_at_start_check = QCheckBox("Load the chat model when the app starts")
        _add_row(
            form,
            "At start:",
            self.load_at_start_check,
            "The first answer then does not wait for the model to load (the first start also "
            "measures this computer's speed then). Off: it loads with the first message.",
        )
        self.read_ahead_check = QCheckBox("Read ahead while you type and read")
        _add_row(
            form,
            "Between messages:",
            self.read_ahead_check,
            "The model reads the conversation and your message as you type it, so the answer "
            "starts sooner. Off: the computer rests between messages. Applies at once.",
        )
        form.addRow(_note(RESTART_NOTE))
        return _page(form)

    def _files_page(self) -> QWidget:
        paths = self.services.paths
        form = QFormLayout()
        form.addRow("Memory and settings:", _folder_row(paths.config_dir, self.open_folder))
        form.addRow("Model files:", _folder_row(paths.data_dir, self.open_folder))
        self.folder_list = QListWidget()
        self.folder_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.folder_list.setMinimumHeight(120)
        add = QPushButton("Add folder…")
        add.clicked.connect(self._choose_folder)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected_folders)
        self.remove_button.setEnabled(False)
        self.folder_list.itemSelectionChanged.connect(
            lambda: self.remove_button.setEnabled(bool(self.folder_list.selectedItems()))
        )
        buttons = QVBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        box = QHBoxLayout()
        box.addWidget(self.folder_list, 1)
        box.addLayout(buttons)
        layout = QVBoxLayout()
        layout.addLayout(form)
        layout.addSpacing(8)
        layout.addWidget(QLabel("<b>Folders the file tools may read</b>"))
        layout.addWidget(
            _note("The assistant can list and read text files inside these folders, nothing else.")
        )
        layout.addLayout(box, 1)
        page = QWidget()
        page.setLayout(layout)
        return page

    def _appearance_page(self) -> QWidget:
        self.theme_combo = QComboBox()
        for theme in THEMES:
            self.theme_combo.addItem(THEME_LABELS[theme], theme)
        self.font_spin = QSpinBox()
        self.font_spin.setRange(FONT_RANGE[0] - 1, FONT_RANGE[1])
        self.font_spin.setSpecialValueText("System default")
        self.font_spin.setSuffix(" pt")
        form = QFormLayout()
        _add_row(
            form,
            "Theme:",
            self.theme_combo,
            "Light or Dark whatever the system says, or follow the system's choice "
            "(and its changes while the app runs).",
        )
        _add_row(form, "Font size:", self.font_spin, "The size of the text in every panel.")
        form.addRow(_note("Both apply as soon as you press OK; no restart needed."))
        return _page(form)

    # -- values ----------------------------------------------------------------------
    def load(self, form: SettingsForm) -> None:
        self.window_spin.setValue(form.window_messages)
        self.history_spin.setValue(form.max_history_bytes / MIB)
        self.idle_spin.setValue(form.summary_idle_seconds)
        self.recall_check.setChecked(form.proactive_recall)
        self.documents_check.setChecked(form.documents_enabled)
        self.chat_picker.set_value(form.chat_model)
        self.embed_picker.set_value(form.embedding_model)
        self.threads_spin.setValue(form.threads)
        self.context_spin.setValue(form.context_size)
        self.answer_spin.setValue(form.max_answer_tokens)
        self.temperature_spin.setValue(form.temperature)
        self.gpu_spin.setValue(form.gpu_layers)
        self.load_at_start_check.setChecked(form.load_at_start)
        self.read_ahead_check.setChecked(form.read_ahead)
        self.folder_list.clear()
        self.folder_list.addItems(form.allowed_folders)
        index = self.theme_combo.findData(form.theme)
        self.theme_combo.setCurrentIndex(max(0, index))
        self.font_spin.setValue(form.font_size if form.font_size else self.font_spin.minimum())

    def form(self) -> SettingsForm:
        return SettingsForm(
            window_messages=self.window_spin.value(),
            max_history_bytes=round(self.history_spin.value() * MIB),
            summary_idle_seconds=self.idle_spin.value(),
            chat_model=self.chat_picker.value(),
            embedding_model=self.embed_picker.value(),
            threads=self.threads_spin.value(),
            context_size=self.context_spin.value(),
            temperature=round(self.temperature_spin.value(), 2),
            max_answer_tokens=self.answer_spin.value(),
            gpu_layers=self.gpu_spin.value(),
            allowed_folders=self.allowed_folders(),
            proactive_recall=self.recall_check.isChecked(),
            documents_enabled=self.documents_check.isChecked(),
            load_at_start=self.load_at_start_check.isChecked(),
            read_ahead=self.read_ahead_check.isChecked(),
            theme=str(self.theme_combo.currentData()),
            font_size=_font_size(self.font_spin),
        )

    def allowed_folders(self) -> list[str]:
        return [self.folder_list.item(i).text() for i in range(self.folder_list.count())]

    def add_folder(self, folder: str) -> bool:
        """Add *folder* (resolved) unless it is listed already; True when added."""
        path = str(Path(folder).expanduser().resolve())
        if path in self.allowed_folders():
            return False
        self.folder_list.addItem(path)
        return True

    def remove_selected_folders(self) -> None:
        for item in self.folder_list.selectedItems():
            self.folder_list.takeItem(self.folder_list.row(item))

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Allow the assistant to read a folder")
        if folder:
            self.add_folder(folder)

    def open_folder(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))

    # -- accept ------------------------------------------------------------------------
    def show_errors(self, errors: list[str]) -> None:
        if not errors:
            self.errors.hide()
            return
        self.errors.setText("\n".join(f"• {e}" for e in errors))
        self.errors.show()

    def accept(self) -> None:
        """Validate; on success save and close, otherwise say what is wrong."""
        form = self.form()
        errors = validate_form(form, self._known)
        if not errors:
            previous = SettingsForm.from_settings(self.services.settings)
            form.apply_to(self.services.settings)
            try:
                self.services.save_settings()
            except OSError as exc:
                previous.apply_to(self.services.settings)
                where = self.services.paths.settings_file
                errors = [f"The settings could not be saved to {where}: {exc.strerror or exc}"]
        self.show_errors(errors)
        if not errors:
            super().accept()


def _font_size(spin: QSpinBox) -> int:
    """The spin box's point size; its lowest value reads "System default" (0)."""
    return 0 if spin.value() == spin.minimum() else spin.value()


def _page(form: QFormLayout) -> QWidget:
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
    page = QWidget()
    outer = QVBoxLayout(page)
    outer.addLayout(form)
    outer.addStretch(1)
    return page


class _Note(QLabel):
    """A wrapped explanation that claims the height its text needs at the width it got.

    QFormLayout sizes a row from the field's height at the width it expects, not the
    one it then gives, so a wrapped label below a control lost its last line.
    """

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        need = self.heightForWidth(self.width())
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)


def _note(text: str) -> QLabel:
    label = _Note(text)
    label.setWordWrap(True)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
    label.setStyleSheet(f"color: {colors(label.palette()).muted};")
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _add_row(form: QFormLayout, label: str, widget: QWidget, help_text: str) -> None:
    """A setting with its explanation below it, wrapping to the dialog's width."""
    widget.setMinimumWidth(160)
    row = QHBoxLayout()
    row.addWidget(widget)
    row.addStretch(1)
    box = QWidget()
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 6)
    column.setSpacing(2)
    column.addLayout(row)
    column.addWidget(_note(help_text))
    form.addRow(label, box)


def _folder_row(folder: Path, open_folder: Any) -> QWidget:
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    # Elided: a long path (a long user name, a folder moved elsewhere) would otherwise
    # widen the row and squeeze the form's labels; the tooltip holds it whole.
    label = ElidedLabel(str(folder), mode=Qt.TextElideMode.ElideMiddle)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setToolTip(str(folder))
    button = QPushButton("Open")
    button.setToolTip(f"Open {folder} in the file manager")
    button.clicked.connect(lambda: open_folder(folder))
    row.addWidget(label, 1)
    row.addWidget(button)
    return box
