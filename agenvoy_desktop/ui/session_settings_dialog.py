"""The settings of one session: its system prompt (persona) and the tools switch.

The prompt editor starts empty for a session on the default prompt, which
shows as the placeholder; an empty editor (or the default text itself) saves
as "the default", so a later change of the app's default reaches the session.
Presets fill the editor with a starting point to edit.  Reading and saving
run on the storage thread; a save is broadcast, so the Context tab shows the
new prompt at once.  Open the dialog with ``open()``, never ``exec()``.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.session_settings import (
    MAX_PROMPT_CHARS,
    SessionSettings,
    SettingsReading,
)
from agenvoy_desktop.operations.session_settings import (
    read_session_settings,
    save_session_settings,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.theme import colors

PRESETS: tuple[tuple[str, str], ...] = (
    (
        "Concise",
        "You are Agenvoy, a personal assistant running on the user's own computer. Answer in "
        "the user's language with as few words as the answer needs: no preamble, no summary "
        "of the question, no closing offers.",
    ),
    (
        "Teacher",
        "You are a patient teacher. Explain in the user's language, step by step, with one "
        "small concrete example, and end with a short question that checks the user "
        "understood.",
    ),
    (
        "Code reviewer",
        "You are a careful senior software engineer. Point out bugs first, then risks, then "
        "style; quote the lines you mean and suggest the corrected code.",
    ),
    (
        "Translator",
        "You are a translator. Translate each message of the user into English, or into "
        "the language the user names, keeping the tone; add nothing else.",
    ),
)
"""(name, prompt): starting points to edit, not modes of their own."""
TOOLS_NOTE = (
    "Off: plain chat. No tools are offered, and nothing from other conversations or your "
    "documents is added to the prompt."
)
PROMPT_NOTE = (
    "Replaces the default prompt for this session only; the rolling summary, the time and "
    "what memory search finds are still added after it."
)


class SessionSettingsDialog(QDialog):
    """See the module docstring."""

    saved = Signal(object)
    """The :class:`SessionSettings` as stored, after a successful save."""

    def __init__(
        self,
        services: AppServices,
        runner: AsyncRunner,
        session_id: str,
        title: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.session_id = session_id
        self.loaded: SessionSettings | None = None
        """What the session had when the dialog opened (None until read)."""
        self._reading: Operation | None = None
        self._saving = False
        self.setWindowTitle(f"Session settings — {title or session_id}")
        self.resize(620, 480)
        self._build()
        self.finished.connect(self._stop_reading)
        self._load()

    @property
    def default_prompt(self) -> str:
        """The prompt a session without its own uses (the agent's, when one is loaded)."""
        agent = self.services.agent
        return agent.config.system_prompt if agent is not None else DEFAULT_SYSTEM_PROMPT

    # -- building ----------------------------------------------------------------------------
    def _build(self) -> None:
        self.preset_combo = QComboBox()
        self.preset_combo.addItem("Start from a preset…", "")
        for name, prompt in PRESETS:
            self.preset_combo.addItem(name, prompt)
        self.preset_combo.activated.connect(self._apply_preset)
        self.reset_button = QPushButton("Reset to default")
        self.reset_button.setToolTip("Use the app's default system prompt for this session")
        self.reset_button.clicked.connect(self.reset_to_default)
        top = QHBoxLayout()
        top.addWidget(QLabel("<b>System prompt</b>"), 1)
        top.addWidget(self.preset_combo)
        top.addWidget(self.reset_button)
        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setPlaceholderText(self.default_prompt)
        self.prompt_edit.setTabChangesFocus(True)
        self.prompt_edit.textChanged.connect(self._update_state)
        self.state_label = _note("")
        self.tools_box = QCheckBox("Use tools and memory search")
        self.tools_box.setChecked(True)
        self.status = _note("Loading…")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        self._save_button().setEnabled(False)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.prompt_edit, 1)
        layout.addWidget(self.state_label)
        layout.addWidget(_note(PROMPT_NOTE))
        layout.addSpacing(8)
        layout.addWidget(self.tools_box)
        layout.addWidget(_note(TOOLS_NOTE))
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)

    def _save_button(self) -> QPushButton:
        return self.buttons.button(QDialogButtonBox.StandardButton.Save)

    # -- the form ----------------------------------------------------------------------------
    def form(self) -> SessionSettings:
        """The settings as the dialog shows them; the default text counts as the default."""
        text = self.prompt_edit.toPlainText().strip()
        custom = text if text and text != self.default_prompt.strip() else None
        return SessionSettings(system_prompt=custom, tools=self.tools_box.isChecked())

    def show_settings(self, settings: SessionSettings) -> None:
        """Fill the form with *settings*."""
        self.prompt_edit.setPlainText(settings.system_prompt or "")
        self.tools_box.setChecked(settings.tools)
        self._update_state()

    def reset_to_default(self) -> None:
        """Empty the editor: the session goes back to the default prompt when saved."""
        self.prompt_edit.clear()
        self.preset_combo.setCurrentIndex(0)

    def _apply_preset(self, index: int) -> None:
        prompt = str(self.preset_combo.itemData(index) or "")
        if prompt:
            self.prompt_edit.setPlainText(prompt)
        self.preset_combo.setCurrentIndex(
            0
        )  # a starting point, not a mode: the text is what counts

    def _update_state(self) -> None:
        size = len(self.prompt_edit.toPlainText().strip())
        if self.form().system_prompt is None:
            self.state_label.setText("Default system prompt (shown greyed above).")
        elif size > MAX_PROMPT_CHARS:
            self.state_label.setText(
                f"Custom system prompt: {size:,} characters, "
                f"over the limit of {MAX_PROMPT_CHARS:,}."
            )
        else:
            self.state_label.setText(f"Custom system prompt: {size:,} characters.")
        self.reset_button.setEnabled(size > 0)

    # -- storage -----------------------------------------------------------------------------
    def _load(self) -> None:
        services = self.services
        self._reading = self.runner.run(
            services.storage.run(read_session_settings, services.store, self.session_id),
            what="read the session's settings",
            on_success=self._loaded,
            on_failure=lambda exc: self._show_error(self.runner.readable(exc)),
        )

    def _stop_reading(self) -> None:
        """A dialog closed before its settings arrived drops the answer."""
        if self._reading is not None and not self._reading.done:
            self._reading.cancel()

    def _loaded(self, reading: SettingsReading) -> None:
        self.loaded = reading.settings
        self.show_settings(reading.settings)
        if reading.problem:
            self._show_error(f"{reading.problem}. Saving writes a fresh file.")
        else:
            self.status.setText("")
        self._save_button().setEnabled(True)

    def save(self) -> None:
        """Store the form; the dialog closes once the settings are saved."""
        services = self.services
        settings = self.form()
        self._saving = True  # the dialog stays until the store has answered
        self.buttons.setEnabled(False)
        self.status.setText("Saving…")

        def done(stored: SessionSettings | None) -> None:
            self._saving = False
            self.saved.emit(stored)
            self.accept()

        def failed(exc: BaseException) -> None:
            self._saving = False
            self._show_error(self.runner.readable(exc))
            self.buttons.setEnabled(True)

        self.runner.run_change(
            services.storage.run(save_session_settings, services.store, self.session_id, settings),
            what="save the session's settings",
            on_success=done,
            on_failure=failed,
        )

    def reject(self) -> None:
        """Cancel or Esc; ignored while a save is on its way (its answer closes the dialog)."""
        if not self._saving:
            super().reject()

    def _show_error(self, text: str) -> None:
        colour = colors(self.palette()).error_fg
        self.status.setText(f"<span style='color:{colour};'>{html.escape(text)}</span>")


def _note(text: str) -> QLabel:
    """A wrapped line of small grey help text."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setStyleSheet("color: gray;")
    return label
