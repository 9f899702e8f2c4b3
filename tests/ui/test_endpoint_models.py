"""Endpoints in the window: the Models tab's section, the add dialog, the switcher, the marker.

No server runs here: probing and looking for servers are injected fakes, and
``EndpointChatModel.load`` is replaced by a stub that says yes (or fails like
a refused connection), so what is tested is the window's handling — the
registry file, the settings and the services are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm.endpoints import EndpointRegistry, FoundServer, RemoteModel
from agenvoy_desktop.llm.openai_chat import EndpointChatModel, EndpointError
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import load_settings
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.endpoint_dialog import KEY_ENV, KEY_KEYRING, AddEndpointDialog
from agenvoy_desktop.ui.inspector.models_tab import ModelsTab
from agenvoy_desktop.ui.model_switcher import ModelSwitcher
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, wait_op

MODELS = [RemoteModel("qwen2.5-7b-instruct", 32768), RemoteModel("llama3.2:1b", None)]
OLLAMA = FoundServer("ollama", "http://127.0.0.1:11434/v1", [RemoteModel("llama3.2:1b", 131072)])


class FakeServers:
    """What the fakes were asked, and what they answer."""

    def __init__(self) -> None:
        self.probed: list[tuple[str, str | None]] = []
        self.keys: dict[str, str] = {}
        self.fail: Exception | None = None

    def probe(self, url: str, key: str | None) -> list[RemoteModel]:
        self.probed.append((url, key))
        if self.fail is not None:
            raise self.fail
        return MODELS

    def store_key(self, name: str, key: str) -> None:
        self.keys[name] = key


@pytest.fixture
def servers() -> FakeServers:
    return FakeServers()


@pytest.fixture
def services(make_services: ServicesFactory) -> AppServices:
    return make_services(ScriptedChatModel([]))


@pytest.fixture
def tab(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, servers: FakeServers
) -> ModelsTab:
    widget = ModelsTab(services, runner, discover=list, look=lambda: [OLLAMA])
    widget.endpoints_box.make_dialog = partial(
        AddEndpointDialog,
        probe_fn=servers.probe,
        store_key=servers.store_key,
        keyring_check=lambda: None,
    )
    runner.memory_changed.connect(lambda c: widget.refresh() if widget.wants_reload(c) else None)
    qtbot.addWidget(widget)
    widget.resize(900, 900)
    widget.show()
    widget.refresh()
    qtbot.waitUntil(lambda: widget.view is not None)
    return widget


def registry(services: AppServices) -> EndpointRegistry:
    return EndpointRegistry(services.paths.models_dir)


def table_rows(tab: ModelsTab) -> list[list[str]]:
    table = tab.endpoints_box.table
    return [
        [table.item(row, col).text() for col in range(table.columnCount())]
        for row in range(table.rowCount())
    ]


def add_through_dialog(
    qtbot: QtBot, tab: ModelsTab, fill: Callable[[AddEndpointDialog], None]
) -> None:
    """Fill the open dialog, press Add, wait until it closed."""
    dialog = tab.endpoints_box.dialog
    assert dialog is not None
    fill(dialog)
    op = dialog.start_add()
    wait_op(qtbot, op)
    qtbot.waitUntil(lambda: tab.endpoints_box.dialog is None)


def test_the_section_lists_endpoints_with_where_they_are_and_where_the_key_is(
    qtbot: QtBot, services: AppServices, tab: ModelsTab
) -> None:
    reg = registry(services)
    reg.add("localhost:8080", "qwen", name="near", context_size=8192)
    reg.add(
        "https://api.example.com/v1",
        "big-model",
        name="far",
        api_key_env="EXAMPLE_KEY",
        remote_confirmed=True,
    )
    tab.refresh()
    qtbot.waitUntil(lambda: tab.endpoints_box.table.rowCount() == 2)
    assert table_rows(tab) == [
        ["near", "http://localhost:8080/v1", "qwen", "8k ctx", "this computer", "none"],
        [
            "far",
            "https://api.example.com/v1",
            "big-model",
            "ctx ?",
            "⇅ remote (api.example.com)",
            "$EXAMPLE_KEY",
        ],
    ]
    tip = tab.endpoints_box.table.item(1, 0).toolTip()
    assert "Conversation text is sent to this server" in tip


def test_adding_a_local_server_needs_a_probe_and_no_confirmation(
    qtbot: QtBot, services: AppServices, tab: ModelsTab, servers: FakeServers
) -> None:
    dialog = tab.endpoints_box.add_endpoint()
    dialog.url_edit.setText("localhost:8080")
    assert not dialog.remote_box.isVisibleTo(dialog)
    assert not dialog.add_button.isEnabled()
    assert dialog.add_button.toolTip() == "Probe the server and pick a model."
    wait_op(qtbot, dialog.start_probe())
    assert servers.probed == [("http://localhost:8080/v1", None)]
    assert [dialog.model_list.item(i).text() for i in range(2)] == [
        "qwen2.5-7b-instruct  ·  32k ctx",
        "llama3.2:1b  ·  ctx ?",
    ]
    dialog.model_list.setCurrentRow(1)
    assert dialog.add_button.isEnabled()

    add_through_dialog(qtbot, tab, lambda d: d.name_edit.setText("small"))
    (endpoint,) = registry(services).entries()
    assert (endpoint.name, endpoint.model, endpoint.remote) == ("small", "llama3.2:1b", False)
    qtbot.waitUntil(lambda: tab.endpoints_box.table.rowCount() == 1)
    assert tab.endpoints_box.selected() == endpoint
    assert tab.status.text().startswith("Added small.")


def test_a_remote_server_needs_the_confirmation_and_the_key_goes_to_the_keyring_only(
    qtbot: QtBot, services: AppServices, tab: ModelsTab, servers: FakeServers
) -> None:
    dialog = tab.endpoints_box.add_endpoint()
    qtbot.waitUntil(lambda: dialog.checking is None)
    dialog.url_edit.setText("https://api.example.com")
    dialog.key_keyring.setChecked(True)
    dialog.key_edit.setText("sk-secret-123")
    assert dialog.remote_box.isVisibleTo(dialog)
    assert dialog.remote_check.text() == "Conversation text will be sent to api.example.com"
    wait_op(qtbot, dialog.start_probe())
    assert servers.probed == [("https://api.example.com/v1", "sk-secret-123")]
    assert not dialog.add_button.isEnabled()
    assert "Confirm" in dialog.add_button.toolTip()
    assert dialog.start_add() is None  # refused without the tick

    add_through_dialog(qtbot, tab, lambda d: d.remote_check.setChecked(True))
    (endpoint,) = registry(services).entries()
    assert endpoint.remote
    assert endpoint.remote_confirmed
    assert endpoint.keyring
    assert servers.keys == {endpoint.name: "sk-secret-123"}
    for file in (services.paths.settings_file, registry(services).file):
        assert "sk-secret" not in (file.read_text() if file.exists() else "")


def test_an_environment_variable_names_the_key_and_a_failed_probe_is_one_line(
    qtbot: QtBot, tab: ModelsTab, servers: FakeServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TEST_KEY", "from-the-env")
    dialog = tab.endpoints_box.add_endpoint()
    dialog.url_edit.setText("127.0.0.1:1234")
    dialog.key_env.setChecked(True)
    assert dialog.key_mode() == KEY_ENV
    dialog.env_edit.setText("MY_TEST_KEY")
    servers.fail = EndpointError(
        "cannot connect to http://127.0.0.1:1234/v1/models: is the server running?", "refused"
    )
    op = dialog.start_probe()
    assert op is not None
    qtbot.waitUntil(lambda: op.done)
    assert servers.probed == [("http://127.0.0.1:1234/v1", "from-the-env")]
    assert dialog.error_label.text() == (
        "cannot connect to http://127.0.0.1:1234/v1/models: is the server running?"
    )
    assert dialog.probe_status.text() == "No models listed."
    dialog.reject()


def test_without_a_keyring_only_the_environment_variable_is_offered(
    qtbot: QtBot, runner: AsyncRunner, services: AppServices
) -> None:
    dialog = AddEndpointDialog(
        registry(services), runner, keyring_check=lambda: "no usable OS keyring here"
    )
    qtbot.addWidget(dialog)
    dialog.key_keyring.setChecked(True)
    qtbot.waitUntil(lambda: dialog.checking is None)
    assert not dialog.key_keyring.isEnabled()
    assert dialog.key_mode() != KEY_KEYRING
    assert dialog.key_keyring.toolTip() == "no usable OS keyring here"


def test_look_for_running_servers_offers_each_with_an_add_button(
    qtbot: QtBot, services: AppServices, tab: ModelsTab
) -> None:
    box = tab.endpoints_box
    wait_op(qtbot, box.look_for_servers())
    assert box.found == [OLLAMA]
    assert box.found_label.text() == "Running on this computer (1):"
    row = box.found_rows.itemAt(0).widget()
    add = next(b for b in row.findChildren(type(box.add_button)) if b.text() == "Add…")
    qtbot.mouseClick(add, Qt.MouseButton.LeftButton)
    dialog = box.dialog
    assert dialog is not None
    assert dialog.url_edit.text() == "http://127.0.0.1:11434/v1"
    assert dialog.model_list.count() == 1
    add_through_dialog(qtbot, tab, lambda _d: None)
    (endpoint,) = registry(services).entries()
    assert (endpoint.preset, endpoint.model, endpoint.context_size) == (
        "ollama",
        "llama3.2:1b",
        131072,
    )


def test_nothing_running_says_so(qtbot: QtBot, services: AppServices, tab: ModelsTab) -> None:
    tab.endpoints_box.look = list
    wait_op(qtbot, tab.endpoints_box.look_for_servers())
    assert tab.endpoints_box.found_label.text().startswith("No Ollama, LM Studio or llama.cpp")


# -- using one -------------------------------------------------------------------------------
@pytest.fixture
def fake_load(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """EndpointChatModel.load says yes without a server; the loaded names are listed."""
    loaded: list[str] = []

    async def load(self: EndpointChatModel) -> None:
        loaded.append(self.name)

    monkeypatch.setattr(EndpointChatModel, "load", load)
    monkeypatch.setenv("EXAMPLE_KEY", "sk-test")
    return loaded


def two_endpoints(paths: AppPaths) -> None:
    reg = EndpointRegistry(paths.models_dir)
    reg.add("localhost:8080", "qwen", name="near", context_size=8192)
    reg.add(
        "https://api.example.com/v1",
        "big-model",
        name="far",
        context_size=131072,
        api_key_env="EXAMPLE_KEY",
        remote_confirmed=True,
    )


def switcher_for(qtbot: QtBot, services: AppServices, runner: AsyncRunner) -> ModelSwitcher:
    switcher = ModelSwitcher(services, runner)
    qtbot.addWidget(switcher)
    switcher.show()
    qtbot.waitUntil(lambda: len(switcher.endpoints) == 2)
    return switcher


def test_the_switcher_lists_endpoints_and_marks_a_remote_one_while_in_use(
    qtbot: QtBot,
    services: AppServices,
    runner: AsyncRunner,
    profile: AppPaths,
    fake_load: list[str],
) -> None:
    two_endpoints(profile)
    switcher = switcher_for(qtbot, services, runner)
    assert [switcher.combo.itemText(i) for i in range(switcher.combo.count())] == [
        "scripted-chat  ·  not in the catalogue",  # the running model, named even so
        "near  ·  qwen  ·  8k ctx  ·  endpoint",
        "far  ·  big-model  ·  128k ctx  ·  ⇅ endpoint",
    ]
    assert switcher.combo.currentIndex() == 0
    assert switcher.current_name() == "scripted-chat"
    assert not switcher.remote_marker.isVisibleTo(switcher)

    far = switcher.endpoints[1]
    wait_op(qtbot, switcher.choose_endpoint(far))
    assert fake_load == ["far"]
    assert services.chat_choice == "endpoint:far"
    assert load_settings(profile.settings_file).models.chat_model == "endpoint:far"
    assert switcher.current_name() == "far"
    assert switcher.remote_marker.isVisibleTo(switcher)
    assert switcher.remote_marker.text() == "⇅ Remote: text is sent to api.example.com"
    assert "sent there with every turn" in switcher.remote_marker.toolTip()
    saved = json.loads(profile.settings_file.read_text())
    assert "sk-test" not in json.dumps(saved)

    wait_op(qtbot, switcher.choose_endpoint(switcher.endpoints[0]))
    assert services.chat_choice == "endpoint:near"
    assert not switcher.remote_marker.isVisibleTo(switcher)


def test_a_failed_switch_to_an_endpoint_keeps_the_old_model_with_one_line(
    qtbot: QtBot,
    services: AppServices,
    runner: AsyncRunner,
    profile: AppPaths,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refuse(self: EndpointChatModel) -> None:
        raise EndpointError(f"cannot connect to {self.base_url}: is the server running?", "refused")

    monkeypatch.setattr(EndpointChatModel, "load", refuse)
    two_endpoints(profile)
    old = services.chat_model
    switcher = switcher_for(qtbot, services, runner)
    op = switcher.choose_endpoint(switcher.endpoints[0])
    assert op is not None
    qtbot.waitUntil(lambda: op.done)
    assert services.chat_model is old
    assert switcher.status.text() == (
        "near could not be loaded: cannot connect to http://localhost:8080/v1: "
        "is the server running?"
    )
    assert not switcher.remote_marker.isVisibleTo(switcher)
    assert switcher.combo.isEnabled()


def test_use_as_chat_model_and_remove_from_the_tab(
    qtbot: QtBot, services: AppServices, tab: ModelsTab, profile: AppPaths, fake_load: list[str]
) -> None:
    two_endpoints(profile)
    tab.refresh()
    box = tab.endpoints_box
    qtbot.waitUntil(lambda: box.table.rowCount() == 2)
    box.select("far")
    box.use_selected()
    qtbot.waitUntil(lambda: services.chat_choice == "endpoint:far")
    qtbot.waitUntil(lambda: box.table.item(1, 0).text() == "★ far")
    qtbot.waitUntil(
        lambda: "conversation text is sent to api.example.com" in tab.in_use_label.text()
    )
    box.select("far")
    assert not box.use_button.isEnabled()
    assert box.remove_selected() is None  # the model in use is not removed
    assert "is the chat model now" in tab.status.text()

    box.select("near")
    wait_op(qtbot, box.remove_selected())
    qtbot.waitUntil(lambda: box.table.rowCount() == 1)
    assert [e.name for e in registry(services).entries()] == ["far"]
