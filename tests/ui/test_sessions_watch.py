"""Sessions another process adds or removes show up in the window's list (ui/sessions_watch.py)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from agenvoy_desktop.operations import sessions as session_ops
from tests.conftest import T0, msg
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory


def test_a_session_written_by_another_writer_comes_and_goes(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """What ``agenvoy-desktop import`` / ``remove`` in a terminal do, by a second store."""
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    assert window.sessions_watch is not None
    assert window.sessions_watch.watching
    other = make_services(ScriptedChatModel([]))  # its own store on the same profile
    store = other.store
    sid = other.storage.run_sync(store.create_session, "Imported in a terminal")
    other.storage.run_sync(store.append, sid, [msg("user", "My bike lock code is 4417.", T0)])
    qtbot.waitUntil(lambda: window.sessions.model.known(sid) is not None, timeout=5_000)
    assert window.sessions.title_of(sid) == "Imported in a terminal"
    other.storage.run_sync(session_ops.remove_session, store, sid)
    qtbot.waitUntil(lambda: window.sessions.model.known(sid) is None, timeout=5_000)
