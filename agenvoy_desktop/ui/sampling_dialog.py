"""The running chat model's sampling settings: temperature, truncation, repetition guards.

The form starts from the model's resolved
:class:`~agenvoy_desktop.settings.SamplingSettings` (the user's changes over
the model's catalogue defaults over the global ones).  OK stores only what
differs from the model's defaults (``store_sampling``), so a later change of
the defaults still reaches every value the user never touched, and calls
``services.save_settings()``, which hands the new values to the engine: the
next answer uses them, no reload needed.  "Model defaults" fills the form
with the defaults again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.settings import (
    RANGES,
    SamplingSettings,
    resolve_sampling,
    store_sampling,
)


@dataclass(frozen=True, slots=True)
class Knob:
    """One row of the form: the field, its label, what it does, and its step."""

    field: str
    label: str
    help: str
    step: float = 0.05
    decimals: int = 2


KNOBS = (
    Knob("temperature", "Temperature", "Higher: more varied answers; 0: always the likeliest."),
    Knob("top_k", "Top-k", "Draw among the k likeliest tokens (0: no limit).", 1, 0),
    Knob("top_p", "Top-p", "Draw among the likeliest tokens that make up this share."),
    Knob("min_p", "Min-p", "Drop tokens less likely than this share of the likeliest."),
    Knob("repeat_penalty", "Repeat penalty", "Above 1: any token used recently is less likely."),
    Knob("repeat_last_n", "Penalty window", "Recent tokens the repeat penalty looks at.", 16, 0),
    Knob(
        "dry_multiplier",
        "Repeated-passage penalty",
        "Stops a sentence or paragraph from being written again (0: off). "
        "llama.cpp calls it DRY (“don’t repeat yourself”) strength.",
    ),
    Knob(
        "dry_base",
        "Repeated-passage penalty growth",
        "How fast the repeated-passage penalty grows with each further repeated word (DRY base).",
    ),
    Knob(
        "dry_allowed_length",
        "Repeats allowed",
        "How many words may repeat an earlier passage before the penalty starts "
        "(DRY allowed length).",
        1,
        0,
    ),
    Knob("seed", "Seed", "-1: a fresh random draw each answer; else repeatable answers.", 1, 0),
)


class SamplingDialog(QDialog):
    """Edit the running chat model's sampling (non-blocking: use ``open()``)."""

    def __init__(self, services: AppServices, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.model = services.chat_model_name()
        self.defaults = services.sampling_defaults()
        self.setWindowTitle(f"Sampling — {self.model}")
        self.spins: dict[str, QSpinBox | QDoubleSpinBox] = {}
        form = QFormLayout()
        for knob in KNOBS:
            spin = self._spin(knob)
            self.spins[knob.field] = spin
            label = QLabel(knob.label)
            label.setToolTip(knob.help)  # the label explains itself, not only the box
            label.setBuddy(spin)
            form.addRow(label, spin)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        restore = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.setText("Model defaults")
        restore.clicked.connect(self.restore_defaults)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"How <b>{self.model}</b> picks the words of a chat answer."))
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.show_values(services.chat_sampling())

    @staticmethod
    def _spin(knob: Knob) -> QSpinBox | QDoubleSpinBox:
        low, high = RANGES[knob.field]
        spin: QSpinBox | QDoubleSpinBox
        if knob.decimals:
            spin = QDoubleSpinBox()
            spin.setDecimals(knob.decimals)
            spin.setSingleStep(knob.step)
            spin.setRange(low, high)
        else:
            spin = QSpinBox()
            spin.setSingleStep(int(knob.step))
            spin.setRange(int(low), int(min(high, 2**31 - 1)))
        spin.setToolTip(knob.help)
        spin.setAccessibleName(knob.label)
        return spin

    def show_values(self, sampling: SamplingSettings) -> None:
        for name, spin in self.spins.items():
            spin.setValue(getattr(sampling, name))

    def values(self) -> SamplingSettings:
        """What the form says now."""
        found: dict[str, float | int] = {}
        for knob in KNOBS:
            value = self.spins[knob.field].value()
            found[knob.field] = round(value, knob.decimals) if knob.decimals else int(value)
        return SamplingSettings(**found)  # type: ignore[arg-type]

    def restore_defaults(self) -> None:
        """Fill the form with the model's defaults (saved only on OK)."""
        settings = dataclasses.replace(self.services.settings, sampling={})
        self.show_values(resolve_sampling(settings, self.model, self.defaults))

    def accept(self) -> None:
        """Store the changes from the model's defaults and apply them to the next answer."""
        settings = self.services.settings
        before = dict(settings.sampling)
        store_sampling(settings, self.model, self.values(), self.defaults)
        try:
            self.services.save_settings()
        except OSError as exc:
            settings.sampling = before
            self.problem.setText(f"The settings could not be saved: {exc.strerror or exc}")
            return
        super().accept()
