"""The first start's welcome: shown on an empty profile, examples fill the box, gone for good."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.welcome import EXAMPLES, profile_has_messages, welcome_lines
from tests.conftest import conversation
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed


def welcome_settled(window: MainWindow) -> bool:
    """The panel has its answer to "does the profile hold messages?"."""
    return window.chat._welcome_wanted is not None


def test_an_empty_profile_is_welcomed_and_an_example_only_fills_the_box(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    model = ScriptedChatModel([["Noted."]])
    services = make_services(model)
    window = make_window(services)
    qtbot.waitUntil(lambda: window.chat.welcome_shown)
    chat = window.chat
    assert not chat.view.isVisibleTo(chat)
    text = " ".join(label.text() for label in chat.welcome.findChildren(type(chat.status)))
    assert str(services.paths.config_dir) in text
    assert "Memory" in text
    assert "Remove" in text
    assert 3 <= len(chat.welcome.example_buttons) <= 4
    chat.welcome.example_buttons[0].click()
    assert chat.composer.toPlainText() == EXAMPLES[0]
    assert not chat.busy  # filled, not sent
    assert model.seen == []
    chat.send()
    assert not chat.welcome_shown
    assert chat.view.isVisibleTo(chat)
    qtbot.waitUntil(lambda: not chat.busy)
    assert [b.text() for b in chat.bubbles()] == [EXAMPLES[0], "Noted."]
    window.new_session()
    qtbot.waitUntil(lambda: window.session_id is not None and not chat.bubbles())
    assert not chat.welcome_shown  # never again once there is history


def test_a_profile_with_history_is_not_welcomed(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    seed(services, "old", conversation(["I live in Oslo.", "Noted."]))
    empty = services.storage.run_sync(services.store.create_session, "new")
    window = make_window(services)
    qtbot.waitUntil(lambda: welcome_settled(window))
    window.select_session(empty, empty=True)
    assert not window.chat.welcome_shown
    assert window.chat.view.isVisibleTo(window.chat)


def test_profile_has_messages_counts_archived_and_folder_only_sessions(
    make_services: ServicesFactory,
) -> None:
    services: AppServices = make_services(None)
    store = services.store
    assert not services.storage.run_sync(profile_has_messages, store)
    services.storage.run_sync(store.create_session, "empty")
    assert not services.storage.run_sync(profile_has_messages, store)
    seed(services, "talk", conversation(["hello"]))
    assert services.storage.run_sync(profile_has_messages, store)


def test_the_welcome_names_the_profile_folder_escaped(tmp_path: object) -> None:
    from pathlib import Path

    lines = welcome_lines(Path("/tmp/a<b>"))
    assert any("/tmp/a&lt;b&gt;" in line for line in lines)
