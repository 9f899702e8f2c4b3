"""The Summary tab's progress and Stop for every pass of the shown session.

Passes start three ways: "Summarize now", the scheduler after a turn and the
idle timer.  The tab learns of the last two only from the summarizer
(``on_run``, ``on_progress``), and Stop is ``Summarizer.stop`` whoever
started the pass.  The scripted summary model is held mid-answer on a gate
that a stopped pass never opens: a Stop that waited for the answer would hang
the test instead of passing it.  Every wait is on an event or a condition.
"""

from __future__ import annotations

import asyncio

from pytestqt.qtbot import QtBot

from agenvoy_desktop.core.summarizer import Summarizer, SummaryScheduler
from agenvoy_desktop.core.summary import SUMMARY_FILE, read_records
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.inspector.summary_tab import SummaryTab
from tests.ui.conftest import Wait, run
from tests.ui.inspector_profile import Profile


def summarizer_of(inspected: Profile) -> Summarizer:
    summarizer = inspected.services.summarizer
    assert isinstance(summarizer, Summarizer)
    return summarizer


def scheduler_for(inspected: Profile) -> SummaryScheduler:
    """The app's triggers over the profile: any pending message is enough after a turn,
    and every session is quiet at once for the idle timer."""
    return SummaryScheduler(
        summarizer_of(inspected), idle_seconds=0, clock=inspected.clock, after_turn_min_pending=1
    )


def hold_answers(inspected: Profile) -> asyncio.Event:
    """The gate every summary answer waits on from now (opened only where a test says)."""
    gate = asyncio.Event()
    inspected.json_model.hold = gate
    return gate


def show(panel: InspectorPanel, session_id: str, wait_for: Wait) -> SummaryTab:
    panel.set_session(session_id)
    panel.show_tab("summary")
    tab = panel.summary_tab
    wait_for(lambda: tab.snapshot is not None)
    return tab


def pass_shown(tab: SummaryTab) -> bool:
    return tab.cancel_button.isVisible() and tab.progress.isVisible()


def nothing_shown(tab: SummaryTab) -> bool:
    return tab.cancel_button.isHidden() and tab.progress.isHidden()


def test_stop_ends_a_pass_started_after_a_turn(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    folder = inspected.folder(inspected.main)
    raw = (folder / SUMMARY_FILE).read_bytes()
    records = len(read_records(folder))
    gate = hold_answers(inspected)
    tab = show(panel, inspected.main, wait_for)
    assert nothing_shown(tab)
    scheduler = scheduler_for(inspected)
    scheduler.after_turn(inspected.main)
    wait_for(lambda: pass_shown(tab))
    wait_for(lambda: tab.progress.format() == "Summarizing 2 messages… 0 %")
    wait_for(inspected.json_model.waiting.is_set)  # the model is writing its answer
    # the pass will save what it read at its start: an edit now would be overwritten
    assert not tab.add_button.isEnabled()
    tab.cancel_button.click()
    wait_for(lambda: len(read_records(folder)) == records + 1)
    assert read_records(folder)[-1].kind == "stopped"
    run(qtbot, scheduler.idle())
    wait_for(lambda: nothing_shown(tab))
    assert not gate.is_set()  # the answer was never let out: Stop did not wait for it
    assert "Stopped" in tab.status.text()
    assert (folder / SUMMARY_FILE).read_bytes() == raw
    assert not summarizer_of(inspected).is_folding(inspected.main)
    wait_for(tab.add_button.isEnabled)


def test_a_pass_of_another_session_shows_no_stop_here(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    gate = hold_answers(inspected)
    heard: list[str] = []
    unsubscribe = summarizer_of(inspected).on_progress(lambda sid, _p: heard.append(sid))
    tab = show(panel, inspected.other, wait_for)
    scheduler = scheduler_for(inspected)
    scheduler.after_turn(inspected.main)
    wait_for(lambda: inspected.main in heard)  # the tab has been told too
    assert nothing_shown(tab)
    panel.set_session(inspected.main)  # switched to mid-pass: shown at once
    assert pass_shown(tab)
    panel.set_session(inspected.other)
    assert nothing_shown(tab)
    panel.set_session(inspected.main)
    gate.set()
    run(qtbot, scheduler.idle())
    wait_for(lambda: nothing_shown(tab))  # done: gone
    assert read_records(inspected.folder(inspected.main))[-1].kind == "pass"
    unsubscribe()


def test_an_idle_pass_shows_stop_until_it_is_done(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    """Only a run that folds something is told: the idle scan of a session with nothing
    pending would flash Stop."""
    gate = hold_answers(inspected)
    told: list[tuple[str, bool]] = []
    unsubscribe = summarizer_of(inspected).on_run(lambda sid, on: told.append((sid, on)))
    tab = show(panel, inspected.main, wait_for)
    scan = asyncio.ensure_future(scheduler_for(inspected).tick())
    wait_for(lambda: pass_shown(tab))
    gate.set()
    wait_for(scan.done)
    assert [result.stopped for result in scan.result()] == ["done"]
    wait_for(lambda: nothing_shown(tab))
    assert told == [(inspected.main, True), (inspected.main, False)]
    unsubscribe()


def test_stop_stays_for_summarize_now_after_a_session_switch(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    """The tab's own pass goes on when the person looks at another session and back."""
    folder = inspected.folder(inspected.main)
    records = len(read_records(folder))
    hold_answers(inspected)
    tab = show(panel, inspected.main, wait_for)
    tab.summarize_button.click()
    wait_for(inspected.json_model.waiting.is_set)
    panel.set_session(inspected.other)
    assert nothing_shown(tab)
    panel.set_session(inspected.main)
    assert pass_shown(tab)
    tab.cancel_button.click()
    wait_for(lambda: len(read_records(folder)) == records + 1)
    assert read_records(folder)[-1].kind == "stopped"
    wait_for(lambda: nothing_shown(tab))
