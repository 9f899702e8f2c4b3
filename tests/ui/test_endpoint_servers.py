"""The Models tab against real HTTP: stand-in Ollama / llama.cpp servers on 127.0.0.1.

The window's probe and "Look for running servers" go through the real
``llm.endpoints`` code and httpx; only the servers are stand-ins
(``tests.loopback``).  Nothing leaves this machine (the conftest's network
audit fails a test that tries).
"""

from __future__ import annotations

from functools import partial

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm.endpoints import EndpointRegistry, look_for_servers
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.endpoint_dialog import AddEndpointDialog
from agenvoy_desktop.ui.inspector.models_tab import ModelsTab
from tests.loopback import (
    allow_loopback,
    fake_server,
    free_port,
    llamacpp_routes,
    ollama_routes,
)
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, wait_op

__all__ = ["allow_loopback", "fake_server"]  # fixtures, used by name


@pytest.fixture
def services(make_services: ServicesFactory) -> AppServices:
    return make_services(ScriptedChatModel([]))


@pytest.fixture
def tab(qtbot: QtBot, services: AppServices, runner: AsyncRunner) -> ModelsTab:
    widget = ModelsTab(services, runner, discover=list)
    widget.endpoints_box.make_dialog = partial(AddEndpointDialog, keyring_check=lambda: None)
    runner.memory_changed.connect(lambda c: widget.refresh() if widget.wants_reload(c) else None)
    qtbot.addWidget(widget)
    widget.resize(900, 900)
    widget.show()
    widget.refresh()
    qtbot.waitUntil(lambda: widget.view is not None)
    return widget


def test_a_running_ollama_is_found_and_added_with_its_context(
    qtbot: QtBot, services: AppServices, tab: ModelsTab, fake_server: object
) -> None:
    server = fake_server(ollama_routes("llama3.2:1b", 131072))  # type: ignore[operator]
    box = tab.endpoints_box
    box.look = partial(look_for_servers, presets={"ollama": server.port})
    wait_op(qtbot, box.look_for_servers())
    assert [(f.preset, f.base_url) for f in box.found] == [("ollama", server.base_url)]
    row = box.found_rows.itemAt(0).widget()  # type: ignore[union-attr]
    add = next(b for b in row.findChildren(QPushButton) if b.text() == "Add…")  # type: ignore[union-attr]
    qtbot.mouseClick(add, Qt.MouseButton.LeftButton)  # type: ignore[no-untyped-call]
    dialog = box.dialog
    assert dialog is not None
    assert dialog.model_list.item(0).text() == "llama3.2:1b  ·  128k ctx"  # type: ignore[union-attr]
    wait_op(qtbot, dialog.start_add())
    qtbot.waitUntil(lambda: box.table.rowCount() == 1)
    (endpoint,) = EndpointRegistry(services.paths.models_dir).entries()
    assert (endpoint.preset, endpoint.model, endpoint.context_size) == (
        "ollama",
        "llama3.2:1b",
        131072,
    )
    assert not endpoint.remote


def test_the_dialog_probes_a_llamacpp_server_and_says_when_nothing_listens(
    qtbot: QtBot, tab: ModelsTab, fake_server: object
) -> None:
    server = fake_server(llamacpp_routes("tiny.gguf", 4096))  # type: ignore[operator]
    dialog = tab.endpoints_box.add_endpoint()
    dialog.url_edit.setText(f"127.0.0.1:{server.port}")
    wait_op(qtbot, dialog.start_probe())
    assert dialog.model_list.item(0).text() == "tiny.gguf  ·  4k ctx"  # type: ignore[union-attr]
    assert dialog.add_button.isEnabled()

    dialog.url_edit.setText(f"127.0.0.1:{free_port()}")  # another address: the list is cleared
    assert dialog.model_list.count() == 0
    op = dialog.start_probe()
    assert op is not None
    qtbot.waitUntil(lambda: op.done, timeout=15_000)
    line = dialog.error_label.text()
    assert "connect" in line.lower()
    assert "\n" not in line
    assert not dialog.add_button.isEnabled()
    dialog.reject()
