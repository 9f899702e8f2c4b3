"""The sessions list loads a page at a time and keeps what it loaded through reloads."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QScrollBar
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.operations.sessions import PAGE_SIZE
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.sessions_panel import SessionsPanel
from tests.conftest import conversation
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op

COUNT = 120


def make_sessions(services: AppServices, count: int, prefix: str = "Session") -> list[str]:
    """*count* empty sessions titled "<prefix> 000".., the newest activity last."""
    store = services.store

    def create() -> list[str]:
        return [store.create_session(f"{prefix} {n:03d}") for n in range(count)]

    return services.storage.run_sync(create)


@pytest.fixture
def services(make_services: ServicesFactory) -> AppServices:
    return make_services()


@pytest.fixture
def panel(qtbot: QtBot, services: AppServices, runner: AsyncRunner) -> SessionsPanel:
    """The sidebar alone, shown with room for a few rows; nothing loaded yet."""
    widget = SessionsPanel(services, runner)
    qtbot.addWidget(widget)
    widget.resize(280, 420)
    widget.show()
    return widget


def scroll_to_end(qtbot: QtBot, panel: SessionsPanel, past: int = 0) -> int:
    """Scroll as a person would, once the view has laid out the rows it has.

    *past*: the end scrolled to before; the bar must reach beyond it (rows
    just added may not be laid out yet, and scrolling to the old end again
    moves nothing, so nothing asks for the next page).  Returns the new end.
    """
    panel.list.doItemsLayout()
    bar = panel.list.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > past)
    bar.setValue(bar.maximum())
    return bar.maximum()


def settle(qtbot: QtBot, runner: AsyncRunner) -> None:
    """Wait until the panel's reads (and any page they asked for) are done."""
    qtbot.waitUntil(lambda: all(op.done for op in runner.operations()))


def loaded_two_pages(qtbot: QtBot, panel: SessionsPanel) -> QScrollBar:
    wait_op(qtbot, panel.load_first())
    scroll_to_end(qtbot, panel)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2 * PAGE_SIZE)
    bar = panel.list.verticalScrollBar()
    bar.setValue(30)
    return bar


def test_the_first_page_shows_at_once_with_the_total(
    qtbot: QtBot, panel: SessionsPanel, services: AppServices
) -> None:
    sids = make_sessions(services, COUNT)
    wait_op(qtbot, panel.load_first())
    assert panel.model.session_ids() == sids[::-1][:PAGE_SIZE]
    assert panel.count_label.text() == f"{PAGE_SIZE} of {COUNT} sessions"


def test_scrolling_near_the_end_loads_the_next_page(
    qtbot: QtBot, panel: SessionsPanel, services: AppServices, runner: AsyncRunner
) -> None:
    sids = make_sessions(services, COUNT)
    wait_op(qtbot, panel.load_first())
    end = scroll_to_end(qtbot, panel)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2 * PAGE_SIZE)
    scroll_to_end(qtbot, panel, past=end)
    qtbot.waitUntil(lambda: panel.model.rowCount() == COUNT)
    settle(qtbot, runner)
    assert panel.model.session_ids() == sids[::-1]
    assert panel.count_label.text() == f"{COUNT} sessions"
    assert panel.fetch_more() is None  # nothing more to load


def test_a_new_session_shows_on_top_and_the_view_stays_where_it_was(
    qtbot: QtBot, panel: SessionsPanel, services: AppServices, runner: AsyncRunner
) -> None:
    sids = make_sessions(services, COUNT)
    bar = loaded_two_pages(qtbot, panel)
    panel.select(sids[-40])
    bar.setValue(30)
    new = services.storage.run_sync(services.store.create_session, "Just made")
    runner.broadcast(MemoryChanges(sessions=True, session_id=new))
    qtbot.waitUntil(lambda: panel.model.session_ids()[:1] == [new])
    assert panel.model.rowCount() == 2 * PAGE_SIZE + 1
    assert panel.count_label.text() == f"{2 * PAGE_SIZE + 1} of {COUNT + 1} sessions"
    assert bar.value() == 30
    current = panel.list.currentIndex()
    assert current.data(panel.model.SessionIdRole) == sids[-40]


def test_reloads_keep_the_loaded_pages_and_the_scroll_position(
    qtbot: QtBot, panel: SessionsPanel, services: AppServices, runner: AsyncRunner
) -> None:
    sids = make_sessions(services, COUNT)
    bar = loaded_two_pages(qtbot, panel)
    deep = sids[::-1][80]
    services.storage.run_sync(services.store.archive.set_title, deep, "Renamed elsewhere")
    runner.broadcast(MemoryChanges(sessions=True))  # any session may have changed
    qtbot.waitUntil(lambda: panel.title_of(deep) == "Renamed elsewhere")
    assert panel.model.rowCount() == 2 * PAGE_SIZE
    assert bar.value() == 30
    services.storage.run_sync(services.store.append, deep, conversation(["hi", "hello"]))
    runner.broadcast(MemoryChanges(sessions=True, session_id=deep))  # one session grew
    qtbot.waitUntil(lambda: panel.model.session_ids()[:1] == [deep])
    settle(qtbot, runner)
    assert panel.model.rowCount() == 2 * PAGE_SIZE
    assert "2 messages" in panel.model.data(panel.model.index(0), panel.model.SubtitleRole)
    assert panel.count_label.text() == f"{2 * PAGE_SIZE} of {COUNT} sessions"


def test_search_finds_sessions_not_loaded_yet_by_title_and_content(
    qtbot: QtBot, panel: SessionsPanel, services: AppServices, runner: AsyncRunner
) -> None:
    oldest = seed(services, "Old notes", conversation(["a zebra crossing downtown", "ok"]))
    sids = make_sessions(services, COUNT)
    wait_op(qtbot, panel.load_first())
    model = panel.model
    assert model.row_of(oldest) is None
    panel.search.setText("zebra")
    qtbot.waitUntil(lambda: model.session_ids() == [oldest])
    found = model.data(model.index(0), model.SubtitleRole)
    assert found.startswith("1 match · ")  # one message holds the word (not "1 matches")
    assert " · 2 messages · " in found
    assert panel.count_label.text() == "1 match"
    panel.search.setText("session 0")  # Session 000..099: two pages of results
    qtbot.waitUntil(lambda: model.rowCount() == PAGE_SIZE and model.found is not None)
    assert panel.count_label.text() == f"{PAGE_SIZE} of 100 matches"
    scroll_to_end(qtbot, panel)
    qtbot.waitUntil(lambda: model.rowCount() == 100)
    assert model.session_ids() == sids[::-1][20:]
    panel.search.clear()
    assert model.session_ids() == sids[::-1][:PAGE_SIZE]
    settle(qtbot, runner)


def test_remove_and_undo_keep_the_rows_and_the_total_right(
    qtbot: QtBot, make_window: WindowFactory, services: AppServices
) -> None:
    sids = make_sessions(services, 60)[::-1]
    window = make_window(services, undo_ms=60_000)
    model, label = window.sessions.model, window.sessions.count_label
    assert model.session_ids() == sids[:PAGE_SIZE]
    assert label.text() == f"{PAGE_SIZE} of 60 sessions"
    op = window.remove_session(sids[3])
    assert op is not None
    assert model.session_ids() == sids[:3] + sids[4:PAGE_SIZE]
    assert label.text() == f"{PAGE_SIZE - 1} of 59 sessions"
    assert window.undo(op)
    assert model.session_ids() == sids[:PAGE_SIZE]
    assert label.text() == f"{PAGE_SIZE} of 60 sessions"


def test_a_removal_that_ran_leaves_the_list_and_the_total_without_it(
    qtbot: QtBot, make_window: WindowFactory, services: AppServices
) -> None:
    sids = make_sessions(services, 60)[::-1]
    window = make_window(services, undo_ms=50)
    done: list[object] = []
    window.pending.executed.connect(done.append)
    window.remove_session(sids[3])
    qtbot.waitUntil(lambda: bool(done))
    settle(qtbot, window.runner)
    expected = sids[:3] + sids[4:PAGE_SIZE]
    assert window.sessions.model.session_ids() == expected
    assert window.sessions.count_label.text() == f"{PAGE_SIZE - 1} of 59 sessions"
    wait_op(qtbot, window.sessions.refresh())
    assert window.sessions.model.session_ids() == expected


def test_a_new_session_from_the_window_is_on_top_and_selected(
    qtbot: QtBot, make_window: WindowFactory, services: AppServices
) -> None:
    make_sessions(services, 60)
    window = make_window(services)
    window.sessions.list.verticalScrollBar().setValue(20)
    wait_op(qtbot, window.new_session())
    sid = window.session_id
    qtbot.waitUntil(lambda: window.sessions.model.session_ids()[:1] == [sid])
    assert window.sessions.list.currentIndex().row() == 0
    assert window.sessions.list.verticalScrollBar().value() == 0  # scrolled to the new row
    assert window.sessions.count_label.text() == f"{PAGE_SIZE + 1} of 61 sessions"
