"""The model switcher above the message box, and the sampling dialog it opens.

Two tiny real GGUF models are catalogued as ``tiny-a`` (running) and
``tiny-b``; switching opens and loads ``tiny-b`` on its worker for real.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent import services as services_module
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.model_api import ChatModel
from agenvoy_desktop.llm.catalogue import ModelCatalogue
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import SamplingSettings, Settings, load_settings, save_settings
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.model_switcher import ModelSwitcher, entry_facts
from agenvoy_desktop.ui.sampling_dialog import SamplingDialog
from tests.scripted_chat import WAIT, ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama
from tests.ui.conftest import ServicesFactory, WindowFactory, wait_op


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tiny-models")
    return write_tiny_llama(folder / "a.gguf"), write_tiny_llama(folder / "b.gguf")


@pytest.fixture
def two_models(
    profile: AppPaths, tiny_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> AppPaths:
    """The profile with tiny-a (chosen) and tiny-b catalogued."""
    monkeypatch.setenv("AGENVOY_LLAMA_EXTRA_BUFFERS", "0")  # no once-per-machine probe
    catalogue = ModelCatalogue(profile.models_dir)
    catalogue.add(tiny_files[0], name="tiny-a")
    catalogue.add(tiny_files[1], name="tiny-b")
    settings = Settings()
    settings.models.chat_model = "tiny-a"
    settings.models.context_size = 512
    settings.models.threads = 1
    save_settings(profile.settings_file, settings)
    return profile


def engine_a(paths: AppPaths) -> ChatEngine:
    settings = load_settings(paths.settings_file)
    path = ModelCatalogue(paths.models_dir).resolve("tiny-a", "chat")
    return ChatEngine.from_settings(path, settings.models)


def switcher_for(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, models: int = 2
) -> ModelSwitcher:
    switcher = ModelSwitcher(services, runner)
    qtbot.addWidget(switcher)
    qtbot.waitUntil(lambda: switcher.combo.count() == models)
    return switcher


def entry(switcher: ModelSwitcher, name: str) -> Any:
    return next(e for e in switcher.entries if e.name == name)


def test_lists_the_catalogues_chat_models_with_their_facts(
    qtbot: QtBot, two_models: AppPaths, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(engine_a(two_models))
    switcher = switcher_for(qtbot, services, runner)
    texts = [switcher.combo.itemText(i) for i in range(2)]
    assert [t.split()[0] for t in texts] == ["tiny-a", "tiny-b"]
    assert all("<1 MiB" in t and "2k context" in t for t in texts)
    assert "F32" in texts[0] or "F16" in texts[0]  # the quantisation
    assert switcher.current_name() == "tiny-a"
    tip = switcher.combo.itemData(1, 3)
    assert "parameters" in tip
    assert "b.gguf" in tip


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        (8192, "8k of 32k context"),
        (32768, "32k context"),
        (65536, "32k context"),
        (None, "32k context"),
    ],
)
def test_the_context_shown_is_what_a_chat_gets(setting: int | None, shown: str) -> None:
    info = SimpleNamespace(size_bytes=469 << 20, quantisation="Q4_K_M", context_length=32768)
    facts = entry_facts(SimpleNamespace(info=info), setting)  # type: ignore[arg-type]
    assert facts.endswith(shown)
    assert facts.startswith("469 MiB · Q4_K_M · ")


def test_switching_loads_the_new_model_off_the_ui_thread(
    qtbot: QtBot,
    two_models: AppPaths,
    make_services: ServicesFactory,
    runner: AsyncRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = engine_a(two_models)
    services = make_services(old)
    switcher = switcher_for(qtbot, services, runner)
    opened_on: list[int] = []
    real_open = services_module._open_chat_model

    def spy(*args: Any) -> Any:
        opened_on.append(threading.get_ident())  # current_thread() would leave a dummy
        return real_open(*args)

    monkeypatch.setattr(services_module, "_open_chat_model", spy)
    switched: list[str] = []
    switcher.switched.connect(switched.append)

    op = switcher.choose(entry(switcher, "tiny-b"))
    assert switcher.status.text() == "Loading tiny-b…"
    assert not switcher.combo.isEnabled()
    wait_op(qtbot, op)

    assert opened_on
    assert opened_on[0] != threading.main_thread().ident
    new = services.chat_model
    assert isinstance(new, ChatEngine)
    assert new is not old
    assert new.model_path.name == "b.gguf"
    assert new.loaded
    assert old._worker.closed
    assert switcher.current_name() == "tiny-b"
    assert switcher.combo.isEnabled()
    assert switcher.status.text() == ""
    assert switched == ["tiny-b"]
    assert load_settings(two_models.settings_file).models.chat_model == "tiny-b"
    assert services.agent is not None
    assert services.agent.model is new


def test_a_failed_switch_keeps_the_previous_model(
    qtbot: QtBot,
    two_models: AppPaths,
    make_services: ServicesFactory,
    runner: AsyncRunner,
    tiny_files: tuple[Path, Path],
) -> None:
    old = engine_a(two_models)
    services = make_services(old)
    doomed = Path(shutil.copy(tiny_files[1], two_models.models_dir / "c.gguf"))
    services.catalogue.add(doomed, name="tiny-c")
    switcher = switcher_for(qtbot, services, runner, models=3)
    doomed.unlink()  # the file vanished after the list was read

    op = switcher.choose(entry(switcher, "tiny-c"))
    assert op is not None
    qtbot.waitUntil(lambda: op.done)
    assert services.chat_model is old
    assert not old._worker.closed
    assert switcher.current_name() == "tiny-a"
    assert switcher.status.text().startswith("tiny-c could not be loaded: ")
    assert "\n" not in switcher.status.text()
    assert switcher.combo.isEnabled()
    assert load_settings(two_models.settings_file).models.chat_model == "tiny-a"
    assert runner.property("test_errors") == []


class ClosingScript(ScriptedChatModel):
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_running_turn_finishes_on_the_old_model(
    qtbot: QtBot, two_models: AppPaths, make_services: ServicesFactory
) -> None:
    old = ClosingScript([["Once upon ", WAIT, "a time."]])
    services = make_services(old)
    sid = services.storage.run_sync(services.store.create_session, "story")
    agent = services.agent
    assert agent is not None
    turn = asyncio.ensure_future(agent.run_turn(sid, "Tell me a story."))
    qtbot.waitUntil(old.waiting.is_set)

    switch = asyncio.ensure_future(services.switch_chat_model("tiny-b"))
    qtbot.waitUntil(lambda: services.chat_model is not old, timeout=20_000)
    assert services.agent is not agent  # new turns go to the new model at once
    assert not switch.done()
    assert not old.closed  # the running turn still needs it

    old.gate.set()
    qtbot.waitUntil(lambda: turn.done() and switch.done())
    assert turn.result().answer == "Once upon a time."
    assert switch.exception() is None
    assert old.closed


def test_sampling_dialog_changes_the_next_answer(
    qtbot: QtBot, two_models: AppPaths, make_services: ServicesFactory, runner: AsyncRunner
) -> None:
    services = make_services(engine_a(two_models))
    switcher = switcher_for(qtbot, services, runner)
    dialog = switcher.open_sampling()
    assert isinstance(dialog, SamplingDialog)
    assert dialog.windowTitle() == "Sampling — tiny-a"
    assert dialog.values() == SamplingSettings()  # a user model: the global defaults
    for name, value in (("temperature", 0.3), ("dry_multiplier", 0.8)):
        spin = dialog.spins[name]
        assert isinstance(spin, QDoubleSpinBox)
        spin.setValue(value)
    dialog.accept()

    assert services.settings.sampling == {"tiny-a": {"temperature": 0.3, "dry_multiplier": 0.8}}
    saved = load_settings(two_models.settings_file)
    assert saved.sampling == services.settings.sampling
    model = services.chat_model
    assert isinstance(model, ChatEngine)
    assert model.sampling == SamplingSettings(temperature=0.3, dry_multiplier=0.8)
    assert services.agent is not None
    assert services.agent.config.temperature == 0.3

    again = SamplingDialog(services)
    qtbot.addWidget(again)
    assert again.values() == model.sampling
    again.restore_defaults()
    assert again.values() == SamplingSettings()


def test_the_window_puts_the_switcher_above_the_message_box(
    qtbot: QtBot, two_models: AppPaths, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    chat: ChatModel = engine_a(two_models)
    window: MainWindow = make_window(make_services(chat))
    switcher = window.chat.findChild(ModelSwitcher)
    assert switcher is not None
    qtbot.waitUntil(lambda: switcher.current_name() == "tiny-a")


def test_a_model_chosen_as_a_file_is_still_named_in_the_bar(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))  # nothing in the catalogue
    services.chat_choice = str(tmp_path / "mine.gguf")  # Settings → Models → Browse…
    switcher = ModelSwitcher(services, runner)
    qtbot.addWidget(switcher)
    qtbot.waitUntil(lambda: switcher.combo.count() == 1)
    assert switcher.combo.currentText() == "scripted-chat  ·  not in the catalogue"
    assert "mine.gguf" in str(switcher.combo.itemData(0, Qt.ItemDataRole.ToolTipRole))
    assert switcher.current_name() == "scripted-chat"
    switcher.combo.activated.emit(0)  # choosing it changes nothing
    assert switcher.pending is None
    assert services.chat_choice == str(tmp_path / "mine.gguf")
