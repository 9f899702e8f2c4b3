"""Panels reload from what operations say they changed, and only then.

The runner broadcasts a :class:`MemoryChanges` after every write; each tab
and panel decides from it whether what it shows is affected.  These tests
count the reloads a broadcast causes rather than waiting for a timer.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from agenvoy_desktop.operations.changes import (
    ERRORS_CHANGED,
    MODELS_CHANGED,
    MemoryChanges,
    summary_changes,
    turn_changes,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector import InspectorPanel
from tests.conftest import conversation
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op
from tests.ui.inspector_profile import Profile


@pytest.fixture
def shown(panel: InspectorPanel, inspected: Profile) -> InspectorPanel:
    """The inspector showing the profile's main session."""
    panel.set_session(inspected.main)
    return panel


def count_reloads(panel: InspectorPanel, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Replace every tab's refresh with a counter (no storage work runs)."""
    counts = dict.fromkeys(panel.tab_names(), 0)
    for name in counts:
        tab = panel._tabs[name]

        def counted(name: str = name) -> None:
            counts[name] += 1

        monkeypatch.setattr(tab, "refresh", counted)
    return counts


Changes = Callable[[str, str], MemoryChanges]
"""The changes, given the ids of the session on screen and of another one."""


@pytest.mark.parametrize(
    ("changes", "reloaded"),
    [
        (lambda main, _other: turn_changes(main), {"summary", "context", "recall", "errors"}),
        (lambda main, _other: summary_changes(main), {"summary", "context"}),
        (lambda _main, _other: ERRORS_CHANGED, {"errors"}),
        (lambda _main, _other: MODELS_CHANGED, {"context", "models"}),
        (lambda _main, _other: MemoryChanges(vectors=True), {"recall"}),
        (lambda _main, other: turn_changes(other), {"errors"}),  # only the shared tab
    ],
)
def test_each_tab_reloads_only_for_what_it_shows(
    shown: InspectorPanel,
    inspected: Profile,
    monkeypatch: pytest.MonkeyPatch,
    changes: Changes,
    reloaded: set[str],
) -> None:
    counts = count_reloads(shown, monkeypatch)
    for name in shown.tab_names():  # show each tab once so nothing is stale from before
        shown.show_tab(name)
    before = dict(counts)
    shown.summary_tab.jobs.runner.broadcast(changes(inspected.main, inspected.other))
    for name in shown.tab_names():  # a stale tab reloads when it comes on screen
        shown.show_tab(name)
    assert {name for name in counts if counts[name] > before[name]} == reloaded


def test_nothing_is_broadcast_for_no_change(qtbot: QtBot, runner: AsyncRunner) -> None:
    seen: list[MemoryChanges] = []
    runner.memory_changed.connect(seen.append)
    runner.broadcast(MemoryChanges())
    assert seen == []


def test_a_rename_reloads_the_list_through_the_broadcast(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    services = make_services()
    sid = seed(services, "old title", conversation(["hello", "hi"]))
    window = make_window(services)
    seen: list[MemoryChanges] = []
    window.runner.memory_changed.connect(seen.append)
    wait_op(qtbot, window.rename_session(sid, "new title"))
    assert seen == [MemoryChanges(sessions=True, session_id=sid)]
    qtbot.waitUntil(lambda: window.sessions.title_of(sid) == "new title")


def test_a_new_session_shows_in_the_list_at_once(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    window = make_window(make_services())
    wait_op(qtbot, window.new_session())
    sid = window.session_id
    assert sid is not None
    qtbot.waitUntil(lambda: sid in window.sessions.model.session_ids())
