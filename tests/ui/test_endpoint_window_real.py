"""The window against a real llama_cpp.server on 127.0.0.1 with the tiny test GGUF.

Added through the Models tab's dialog (a real probe), chosen in the switcher
(a real load), asked a question — and the server is killed at the first word
of its answer.  The window must keep the question and the partial answer
(marked interrupted, in the bubble and in the store) with one line that says
what happened, and no second copy of that line in the error strip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.turn import AnswerDelta, TurnEvent
from agenvoy_desktop.llm.openai_chat import EndpointChatModel
from agenvoy_desktop.ui.model_switcher import ModelSwitcher
from tests.endpoint_server import EndpointServer, loopback_only, start_server
from tests.llm.test_openai_chat import ASCII_NO_EOS
from tests.scripted_chat import ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama
from tests.ui.conftest import ServicesFactory, WindowFactory, wait_op


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    yield from loopback_only()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EndpointServer]:
    tiny = write_tiny_llama(tmp_path / "tiny-chat.gguf")
    # the window's prompt (system prompt, tool specs) in the tiny model's tokens needs room
    running = start_server(tiny, tmp_path, n_ctx=16384)
    yield running
    running.stop()


def test_a_server_killed_mid_answer_in_the_window(
    qtbot: QtBot,
    server: EndpointServer,
    make_services: ServicesFactory,
    make_window: WindowFactory,
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    box = window.inspector.models_tab.endpoints_box
    dialog = box.add_endpoint()
    dialog.url_edit.setText(server.base_url)
    wait_op(qtbot, dialog.start_probe())
    assert dialog.model_list.item(0).text().startswith(server.alias)  # type: ignore[union-attr]
    dialog.name_edit.setText("tiny-server")
    wait_op(qtbot, dialog.start_add())

    switcher = window.chat.findChild(ModelSwitcher)
    assert switcher is not None
    qtbot.waitUntil(lambda: [e.name for e in switcher.endpoints] == ["tiny-server"])
    wait_op(qtbot, switcher.choose_endpoint(switcher.endpoints[0]), timeout=30_000)
    model = services.chat_model
    assert isinstance(model, EndpointChatModel)
    assert not model.remote
    assert not switcher.remote_marker.isVisibleTo(switcher)
    model.extra_body = dict(ASCII_NO_EOS)  # streams at once: no bytes held back

    shown = window.chat._on_event

    def kill_at_the_first_word(event: TurnEvent) -> None:
        shown(event)
        if isinstance(event, AnswerDelta) and server.process.poll() is None:
            server.kill()  # the server dies with its socket, mid-answer

    window.chat._on_event = kill_at_the_first_word  # type: ignore[method-assign]
    window.chat.send("Write a long story.")
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=60_000)

    question, answer = window.chat.bubbles()
    assert question.text() == "Write a long story."
    assert answer.text()
    assert answer.interrupted
    line = answer.problem.text()
    assert line
    assert "\n" not in line
    assert answer.retry_button.isVisibleTo(answer)
    assert window.errors.messages() == []
    sid = window.session_id or ""
    stored: list[Any] = services.storage.run_sync(lambda: services.store.history(sid).messages)
    assert [(m.role, bool(m.extra.get("interrupted"))) for m in stored] == [
        ("user", False),
        ("assistant", True),
    ]
    assert stored[0].content == "Write a long story."
    assert stored[1].content == answer.text()
