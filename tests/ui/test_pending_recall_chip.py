"""A session's recall chip hides the lines of what is being removed, reset or deleted.

Session B's chip ("Remembered 1 thing you said before") quotes the lines its
turn recalled, from any session.  When the quoted session is removed (or
reset, or the quoted message deleted), its undo window is open and the line
must leave B's chip as it leaves every search; Undo brings it back, and once
the removal ran the stored record is scrubbed, so a reload shows it gone.
"""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from agenvoy_desktop.ui.chat_widgets import RecallChip
from agenvoy_desktop.ui.main_window import MainWindow
from tests.ui.conftest import ServicesFactory, WindowFactory, run, wait_op
from tests.ui.test_pending_session_recall import ask, opened, schedule

SHOWN = "Remembered 1 thing you said before"
HIDDEN = "1 line from a session being removed is hidden"
TAKEN_OUT = "1 line of what you deleted since is left out"


def chip_of(window: MainWindow) -> RecallChip | None:
    """The chat's one recall chip (None while there is none or several)."""
    chips = window.chat.view.findChildren(RecallChip)
    return chips[0] if len(chips) == 1 else None


def shows(window: MainWindow, header: str, secret: bool) -> bool:
    """The chip's header is *header*, and its lines quote the secret or not."""
    chip = chip_of(window)
    return (
        chip is not None
        and chip.header.text() == header
        and ("4721" in chip.lines.text()) == secret
    )


def reload(qtbot: QtBot, window: MainWindow, sid: str) -> None:
    """Show *sid* afresh: its chip is built again from the stored recall record."""
    window.chat.set_session(None)
    qtbot.waitUntil(lambda: chip_of(window) is None)
    wait_op(qtbot, window.chat.set_session(sid))


def test_the_chip_hides_a_removed_sessions_line_until_undo_and_after_the_removal(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model, window, secret, other = opened(qtbot, make_window, make_services, 1)
    assert "4721" in ask(qtbot, window, model, other)
    qtbot.waitUntil(lambda: shows(window, SHOWN, secret=True))

    schedule(window, "remove", secret)
    qtbot.waitUntil(lambda: shows(window, HIDDEN, secret=False))
    (toast,) = window.toasts.toasts()
    toast.buttons["Undo"].click()
    window.select_session(other)  # Undo of a remove shows the session brought back
    qtbot.waitUntil(lambda: shows(window, SHOWN, secret=True))

    schedule(window, "remove", secret)
    qtbot.waitUntil(lambda: shows(window, HIDDEN, secret=False))
    reload(qtbot, window, other)  # the record still quotes it: the undo window is open
    qtbot.waitUntil(lambda: shows(window, HIDDEN, secret=False))

    run(qtbot, window.pending.flush())  # the window ends: the record is scrubbed
    qtbot.waitUntil(lambda: shows(window, TAKEN_OUT, secret=False))  # no Undo any more
    reload(qtbot, window, other)
    qtbot.waitUntil(lambda: shows(window, TAKEN_OUT, secret=False))


def test_the_chip_says_a_session_is_being_reset_and_shows_the_line_again_on_undo(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model, window, secret, other = opened(qtbot, make_window, make_services, 1)
    ask(qtbot, window, model, other)
    qtbot.waitUntil(lambda: shows(window, SHOWN, secret=True))
    schedule(window, "reset", secret)
    qtbot.waitUntil(
        lambda: shows(window, "1 line from a session being reset is hidden", secret=False)
    )
    (toast,) = window.toasts.toasts()
    toast.buttons["Undo"].click()
    assert window.chat.session_id == other  # the chip shown all along shows the line again
    qtbot.waitUntil(lambda: shows(window, SHOWN, secret=True))


def recall_row(window: MainWindow) -> str:
    """The timeline's recall row of the session shown ("" while there is none)."""
    rows = [e.text for e in window.timeline.model.events() if e.kind == "recall"]
    return rows[0] if len(rows) == 1 else ""


def test_the_timeline_leaves_the_line_out_in_the_undo_window_and_after(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model, window, secret, other = opened(qtbot, make_window, make_services, 1)
    ask(qtbot, window, model, other)
    qtbot.waitUntil(lambda: "4721" in recall_row(window))

    schedule(window, "remove", secret)
    held = "1 earlier message, hidden while its delete can be undone"
    qtbot.waitUntil(lambda: held in recall_row(window))
    assert "4721" not in recall_row(window)
    (toast,) = window.toasts.toasts()
    toast.buttons["Undo"].click()
    window.select_session(other)
    qtbot.waitUntil(lambda: "4721" in recall_row(window))

    schedule(window, "remove", secret)
    qtbot.waitUntil(lambda: "hidden" in recall_row(window))
    run(qtbot, window.pending.flush())  # the record is scrubbed, the row reloads
    qtbot.waitUntil(lambda: "1 earlier message, deleted since" in recall_row(window))
    assert "4721" not in recall_row(window)
