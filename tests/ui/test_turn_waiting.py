"""A phase that lasts counts its seconds and explains itself; writing and the end do not count."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.turn import TurnResult
from agenvoy_desktop.ui.turn_status import (
    COUNT_AFTER_S,
    TurnStatusLine,
    phase_text,
    phase_tip,
)
from tests.scripted_chat import WAIT, ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_phase_counts_its_seconds_and_a_new_one_starts_again(qtbot: QtBot) -> None:
    line = TurnStatusLine()
    qtbot.addWidget(line)
    clock = FakeClock()
    line.clock = clock
    line.begin()
    line.say(phase_text("thinking"), phase_tip("thinking"))
    assert "reads what it is sent" in line.toolTip()
    clock.now += COUNT_AFTER_S - 1
    line.tick()
    assert line.text() == "Thinking…"  # a short wait says nothing more
    clock.now += 9
    line.tick()
    assert line.text() == f"Thinking… {COUNT_AFTER_S + 8} s"
    line.say("Reading notes.md…")
    line.tick()
    assert line.text() == "Reading notes.md…"  # counted from its own start
    assert line.toolTip() == ""
    line.say(phase_text("writing"))
    clock.now += 60
    assert not line._ticker.isActive()
    line.finish(TurnResult("s", answer="hi", total_s=1.0), "m")
    assert not line._ticker.isActive()
    assert line.phases == ["Thinking…", "Reading notes.md…", "Writing…", line.text()]


def test_a_turn_shows_the_thinking_tip_while_the_model_reads(
    qtbot: QtBot, make_services: ServicesFactory, make_window: WindowFactory
) -> None:
    model = ScriptedChatModel([[WAIT, "Hello"]])
    window = make_window(make_services(model))
    window.chat.send("hi")
    qtbot.waitUntil(model.waiting.is_set)
    status = window.chat.turn_status
    qtbot.waitUntil(lambda: status.phases[-1:] == ["Thinking…"])
    assert status.toolTip() == phase_tip("thinking")
    assert status._ticker.isActive()
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    assert not status._ticker.isActive()
