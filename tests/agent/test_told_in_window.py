"""What the user told in the window counts as told, for never_said and the answer check.

Recall leaves the window out; the answer-check tests that run whole turns
are in ``test_turn_answer_check.py``.
"""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.never_said import never_said
from agenvoy_desktop.agent.told_in_window import told_in_window
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import T0, conversation

pytestmark = pytest.mark.usefixtures("utc")


def _window(*texts: str) -> list[Message]:
    return conversation(list(texts))


def test_only_what_the_user_tells_is_a_line() -> None:
    window = _window(
        "My sister prefers museums to beaches. Which museum would she like?",
        "The Gulbenkian, perhaps.",
        "What is my bike lock code?",
        "It is 4721.",
        "What did I say my sister prefers?",
    )
    lines = told_in_window(window, asked_id=window[-1].id)
    assert [line.text for line in lines] == ["My sister prefers museums to beaches."]
    assert lines[0].role == "user"
    assert lines[0].time_ns == window[0].time_ns


def test_the_message_asked_now_is_no_line_even_when_it_tells() -> None:
    window = _window("I moved to Graz. Where do I live now?", "In Graz.", "I moved to Graz.")
    lines = told_in_window(window, asked_id=window[-1].id)
    assert [line.text for line in lines] == ["I moved to Graz."]
    assert lines[0].time_ns == window[0].time_ns


def test_a_word_told_in_the_window_was_said(store: MemoryStore) -> None:
    question = "What did I say my sister prefers?"
    sid = store.create_session("today")
    store.append(sid, conversation([question], start=T0))
    # said once: with the question, the archive holds "sister" twice, "as good as never said"
    store.append(sid, conversation(["My sister prefers museums to beaches."], start=T0 - 60))
    assert never_said(store, question, []) == ["your sister"]
    assert never_said(store, question, [], ["My sister prefers museums to beaches."]) == []
