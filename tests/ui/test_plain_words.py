"""Settings say what they do in plain words; a setting that cannot apply here says why."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from agenvoy_desktop.ui import settings_dialog
from agenvoy_desktop.ui.sampling_dialog import KNOBS, SamplingDialog
from agenvoy_desktop.ui.settings_dialog import CPU_ONLY_HELP, GPU_HELP, SettingsDialog
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory


def texts(widget: object) -> list[str]:
    return [label.text() for label in widget.findChildren(QLabel)]  # type: ignore[attr-defined]


def test_sampling_labels_use_no_jargon_and_explain_themselves(
    qtbot: QtBot, make_services: ServicesFactory
) -> None:
    dialog = SamplingDialog(make_services(ScriptedChatModel([])))
    qtbot.addWidget(dialog)
    shown = texts(dialog)
    assert not any("DRY" in text for text in shown)
    assert "Repeated-passage penalty growth" in shown
    for knob in KNOBS:
        label = next(lb for lb in dialog.findChildren(QLabel) if lb.text() == knob.label)
        assert label.toolTip() == knob.help
        assert label.buddy() is dialog.spins[knob.field]


@pytest.mark.parametrize("offload", [False, True])
def test_gpu_layers_say_why_they_are_off_on_a_cpu_only_build(
    qtbot: QtBot, make_services: ServicesFactory, monkeypatch: pytest.MonkeyPatch, offload: bool
) -> None:
    monkeypatch.setattr(settings_dialog, "gpu_offload_available", lambda: offload)
    dialog = SettingsDialog(make_services(ScriptedChatModel([])))
    qtbot.addWidget(dialog)
    shown = texts(dialog)
    assert dialog.gpu_spin.isEnabled() is offload
    assert (CPU_ONLY_HELP in shown) is not offload
    assert (GPU_HELP in shown) is offload
    assert not any(text.startswith("GPU layers") for text in shown)
    dialog.gpu_spin.setValue(-1)
    assert dialog.gpu_spin.text() == "Automatic"
