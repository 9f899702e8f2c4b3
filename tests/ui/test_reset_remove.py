"""One-click reset and remove: at once in the view, Undo for the window, then final."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core import lifecycle
from agenvoy_desktop.core.export import ExportFormat
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import KeyDecision, Summary, load_summary, save_summary
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.toast import Toast
from tests.conftest import conversation
from tests.scripted_chat import ScriptedChatModel
from tests.set_aside import garbage_copy, session_rows, upgrade_backup
from tests.ui.conftest import ServicesFactory, WindowFactory, run, seed

TEXTS = ["remember the blue notebook", "noted", "and the red pen", "noted too"]


def archived(services: AppServices, sid: str) -> int:
    return services.storage.run_sync(services.store.archive.count, sid)


def history_len(services: AppServices, sid: str) -> int:
    return services.storage.run_sync(lambda: len(services.store.history(sid).messages))


def toast(window: MainWindow) -> Toast:
    (only,) = window.toasts.toasts()
    return only


def click(qtbot: QtBot, t: Toast, caption: str) -> None:
    qtbot.mouseClick(t.buttons[caption], Qt.MouseButton.LeftButton)


def setup(
    make_services: ServicesFactory, make_window: WindowFactory, undo_ms: int
) -> tuple[AppServices, MainWindow, str, str]:
    services = make_services(ScriptedChatModel([["fresh answer"]]))
    other = seed(services, "other", conversation(["x", "y"]))
    sid = seed(services, "notes", conversation(TEXTS))
    save_summary(services.store.folder(sid), Summary(key_decisions=(KeyDecision("blue"),)))
    window = make_window(services, undo_ms=undo_ms)
    assert window.session_id == sid
    return services, window, sid, other


def test_reset_clears_the_view_at_once_and_undo_brings_it_back(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, _ = setup(make_services, make_window, undo_ms=60_000)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 4)
    window.reset_action.trigger()
    assert window.chat.bubbles() == []
    assert window.timeline.model.rowCount() == 0
    assert "Reset" in toast(window).text()
    assert (history_len(services, sid), archived(services, sid)) == (4, 4)  # nothing deleted yet
    click(qtbot, toast(window), "Undo")
    assert window.pending.pending() == []
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 4)
    assert window.toasts.toasts() == []
    assert (history_len(services, sid), archived(services, sid)) == (4, 4)


def test_reset_is_final_after_the_undo_window(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, _ = setup(make_services, make_window, undo_ms=50)
    with qtbot.waitSignal(window.pending.executed, timeout=5000):
        window.reset_action.trigger()
    assert (history_len(services, sid), archived(services, sid)) == (0, 0)
    assert load_summary(services.store.folder(sid)) == Summary(key_decisions=(KeyDecision("blue"),))
    qtbot.waitUntil(lambda: window.sessions.model.row_of(sid) is not None)
    assert window.session_id == sid
    assert window.chat.bubbles() == []


def test_reset_with_the_summary_clears_it_too_after_the_undo_window(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, other = setup(make_services, make_window, undo_ms=50)
    with qtbot.waitSignal(window.pending.executed, timeout=5000):
        window.reset_all_action.trigger()
        assert "messages and summary cleared" in toast(window).text()
    assert (history_len(services, sid), archived(services, sid)) == (0, 0)
    assert load_summary(services.store.folder(sid)) is None  # no summary file left
    assert history_len(services, other) == 2  # another session is left as it was


def test_remove_hides_the_session_and_undo_restores_it(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, other = setup(make_services, make_window, undo_ms=60_000)
    window.remove_action.trigger()
    assert window.sessions.model.session_ids() == [other]
    assert window.session_id == other
    assert services.store.folder(sid).is_dir()
    t = toast(window)
    assert "Removed" in t.text()
    assert "Export first" in t.buttons
    click(qtbot, t, "Undo")
    assert sorted(window.sessions.model.session_ids()) == sorted([sid, other])
    assert window.session_id == sid

    def shown() -> None:
        assert [b.text() for b in window.chat.bubbles()] == TEXTS

    qtbot.waitUntil(shown)


def test_remove_is_final_after_the_undo_window(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, other = setup(make_services, make_window, undo_ms=50)
    menu = window.sessions.menu_for(sid)
    remove = next(a for a in menu.actions() if a.data() == "remove")
    with qtbot.waitSignal(window.pending.executed, timeout=5000):
        remove.trigger()
    assert not services.store.folder(sid).exists()
    assert not services.storage.run_sync(services.store.exists, sid)
    qtbot.waitUntil(lambda: window.sessions.model.session_ids() == [other])
    assert archived(services, other) == 2


def test_a_copy_set_aside_that_could_not_be_cleaned_is_named_and_can_be_deleted(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    """An upgrade backup loses the reset session without a word; a damaged archive SQLite
    cannot read is named once a remove ran, and "Delete it" asks, naming it, then
    deletes it."""
    services, window, sid, other = setup(make_services, make_window, undo_ms=50)
    backup = upgrade_backup(services.paths)
    assert session_rows(backup, sid) == len(TEXTS)
    with qtbot.waitSignal(window.pending.executed, timeout=5000):
        window.reset_action.trigger()
    qtbot.waitUntil(lambda: window.toasts.toasts() == [])  # the reset's toast went; no other
    assert session_rows(backup, sid) == 0  # cleaned, so not worth a word
    garbage = garbage_copy(services.paths)
    menu = window.sessions.menu_for(other)
    remove = next(a for a in menu.actions() if a.data() == "remove")
    with qtbot.waitSignal(window.pending.executed, timeout=5000):
        remove.trigger()
    qtbot.waitUntil(lambda: len(window.toasts.toasts()) == 1)
    told = toast(window)
    assert "1 older copy of the archive the app set aside could not be read" in told.text()
    assert "Show folder" in told.buttons
    assert garbage.exists()  # named; deleted only when the person confirms
    click(qtbot, told, "Delete it")
    box = window.session_actions.last_question
    assert box is not None
    assert str(garbage) in box.text()
    assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
    qtbot.mouseClick(box.button(QMessageBox.StandardButton.Yes), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not garbage.exists())
    assert backup.exists()
    assert sid in services.storage.run_sync(services.store.session_ids)


def test_export_first_from_the_remove_toast(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory, tmp_path: Path
) -> None:
    services, window, sid, _ = setup(make_services, make_window, undo_ms=60_000)
    target = tmp_path / "notes.md"
    asked: list[ExportFormat] = []

    def choose(_sid: str, fmt: ExportFormat, then: Callable[[Path | None], None]) -> None:
        asked.append(fmt)
        then(target)

    window.choose_export_path = choose
    op = window.remove_session(sid)
    assert op is not None
    click(qtbot, toast(window), "Export first")
    qtbot.waitUntil(target.exists)
    assert asked == ["markdown"]
    assert "remember the blue notebook" in target.read_text("utf-8")
    qtbot.waitUntil(lambda: len(window.toasts.toasts()) == 1)
    assert "Exported; removal continues" in toast(window).text()
    assert op.state == "pending"
    assert op.timer.isActive()
    run(qtbot, window.pending.flush())
    assert not services.store.folder(sid).exists()


def test_export_then_remove_from_the_menu_removes_only_after_writing(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory, tmp_path: Path
) -> None:
    _, window, sid, _ = setup(make_services, make_window, undo_ms=60_000)
    window.choose_export_path = lambda _s, _f, then: then(None)  # the user cancels
    window.export_remove_action.trigger()
    assert window.pending.pending() == []
    target = tmp_path / "kept.md"
    window.choose_export_path = lambda _s, _f, then: then(target)
    window.export_remove_action.trigger()
    qtbot.waitUntil(lambda: bool(window.pending.pending()))
    assert target.exists()
    assert sid not in window.sessions.model.session_ids()


def test_quitting_finalises_pending_operations(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, other = setup(make_services, make_window, undo_ms=60_000)
    window.reset_session(sid)
    window.remove_session(other)
    window.close()
    run(qtbot, window.pending.flush())  # what the app does after the window closed
    assert history_len(services, sid) == 0
    assert not services.store.folder(other).exists()


def test_a_crash_inside_the_undo_window_keeps_the_data(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, _ = setup(make_services, make_window, undo_ms=60_000)
    window.remove_session(sid)
    window.pending.pending()[0].timer.stop()  # the process "dies": nothing else runs
    services.storage.run_sync(services.store.close)
    with open_memory(services.paths) as reopened:
        assert len(reopened.history(sid).messages) == 4


def test_sending_into_a_reset_session_ends_its_undo_window_first(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services, window, sid, _ = setup(make_services, make_window, undo_ms=60_000)
    window.reset_action.trigger()
    window.chat.send("start again")
    qtbot.waitUntil(lambda: not window.chat.busy and window.pending.pending() == [])
    stored = services.storage.run_sync(lambda: list(services.store.history(sid).messages))
    assert [m.content for m in stored] == ["start again", "fresh answer"]
    assert [b.text() for b in window.chat.bubbles()] == ["start again", "fresh answer"]


def test_a_failed_operation_is_reported_and_the_session_comes_back(
    qtbot: QtBot,
    make_services: ServicesFactory,
    make_window: WindowFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _services, window, sid, _ = setup(make_services, make_window, undo_ms=50)

    def broken(store: MemoryStore, _sid: str) -> None:
        raise OSError(13, "Permission denied", str(store.folder(sid)))

    monkeypatch.setattr(lifecycle, "remove_session", broken)
    with qtbot.waitSignal(window.pending.failed, timeout=5000):
        window.remove_action.trigger()
    assert "Could not remove “notes”: Permission denied" in window.errors.current()
    qtbot.waitUntil(lambda: sid in window.sessions.model.session_ids())
    assert window.session_id == sid
