"""The Summary tab's "Changed in the last pass": the summary against the one before it."""

from __future__ import annotations

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from agenvoy_desktop.core.summary import PREVIOUS_FILE, KeyDecision, Summary, save_summary
from agenvoy_desktop.settings import AppearanceSettings
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.theme import apply_appearance
from tests.ui.conftest import Wait
from tests.ui.inspector_profile import Profile
from tests.ui.test_text_fits import sideways

MINUS = "\N{MINUS SIGN}"


def open_summary(panel: InspectorPanel, profile: Profile) -> None:
    panel.set_session(profile.main)
    panel.show_tab("summary")


def test_the_last_pass_is_listed_against_the_summary_before_it(
    panel: InspectorPanel, inspected: Profile, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    open_summary(panel, inspected)
    wait_for(lambda: tab.changed.rowCount() > 0)
    assert tab.changed_heading.isVisible()
    assert tab.changed_heading.text() == "Changed in the last pass"
    rows = tab.changed_rows()
    changes = [change for change, _ in rows]
    assert ("+ topic", "Food: Vegetarian options near Gion: Shigetsu at Tenryu-ji.") in rows
    assert (
        "~ topic",
        "Temples: Which temples open early: Kiyomizu-dera at 6:00. "
        "(was: Which temples open early.)",
    ) in rows
    assert (f"{MINUS} topic", "Lodging") in rows
    assert ("+ decision", "Visit Fushimi Inari at sunrise on day one") in rows
    assert "+ fact" in changes  # the facts of messages 6-9
    assert not tab.unchanged_label.isVisible()
    decision_row = changes.index("+ decision")
    with qtbot.waitSignal(panel.message_activated) as signal:
        tab._changed_activated(decision_row, 1)
    assert signal.args == [inspected.messages[inspected.main][8].id]


def test_an_edit_is_listed_as_yours(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    open_summary(panel, inspected)
    wait_for(lambda: tab.decisions.rowCount() == 3)
    tab.decisions.selectRow(0)
    tab.delete_button.click()
    wait_for(lambda: tab.changed_heading.text() == "Changed by your last edit")
    assert tab.changed_rows() == [
        (f"{MINUS} decision", "Stay two nights in a ryokan, then a hotel near Kyoto station")
    ]


def test_nothing_changed_and_nothing_before(
    panel: InspectorPanel, inspected: Profile, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    folder = inspected.folder(inspected.main)
    summary = Summary(key_decisions=(KeyDecision("Pack a light jacket", by_user=True),))
    save_summary(folder, summary)
    save_summary(folder, summary)
    open_summary(panel, inspected)
    wait_for(tab.unchanged_label.isVisible)
    assert tab.unchanged_label.text() == "Nothing changed in the last pass."
    assert not tab.changed.isVisible()
    (folder / PREVIOUS_FILE).unlink()
    tab.refresh()
    wait_for(lambda: not tab.changed_heading.isVisible())
    assert not tab.unchanged_label.isVisible()
    assert not tab.changed.isVisible()


def test_the_changes_wrap_in_a_narrow_panel_at_a_large_font(
    panel: InspectorPanel, inspected: Profile, qapp: QApplication, qtbot: QtBot, wait_for: Wait
) -> None:
    tab = panel.summary_tab
    font = QFont(qapp.font())
    apply_appearance(qapp, AppearanceSettings(font_size=16))
    try:
        panel.resize(330, 800)
        open_summary(panel, inspected)
        wait_for(lambda: tab.changed.rowCount() > 0)
        qtbot.waitUntil(lambda: not sideways(tab), timeout=5_000)
        header = tab.changed.horizontalHeader()
        width = tab.changed.viewport().width()
        assert header.sectionSize(0) + header.sectionSize(1) <= width
    finally:
        apply_appearance(qapp, AppearanceSettings())
        qapp.setFont(font)
