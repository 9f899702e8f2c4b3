"""How the timeline words a recall record and a summary pass that something changed."""

from __future__ import annotations

from agenvoy_desktop.core.summary import PassRecord
from agenvoy_desktop.operations.timeline import archive_event, summary_event
from tests.conftest import T0


def test_the_timeline_says_a_recalled_line_was_deleted_since() -> None:
    block = 'Said before:\n- you said: "a keeper"'
    detail = {"text": block, "ids": ["b"], "withdrawn": 1, "message_id": "q"}
    event = archive_event(T0, "recall", detail, [])
    assert event is not None
    assert event.text.startswith("Recalled 1 earlier message (1 more deleted since):")
    assert "a keeper" in event.text


def test_the_timeline_says_a_summary_pass_was_stopped() -> None:
    record = PassRecord(kind="stopped", time_ns=T0, model="m", messages=20, duration_s=3.25)
    event = summary_event(record)
    assert event.text == "Summary pass stopped after 3.2 s · 20 messages wait for the next pass"


def test_a_record_with_every_line_deleted_says_so_without_a_dangling_colon() -> None:
    detail = {"text": "", "ids": [], "withdrawn": 1, "message_id": "q"}
    event = archive_event(T0, "recall", detail, [])
    assert event is not None
    assert event.text == "Recalled 1 earlier message, deleted since"
