"""The past time a question names: searched first, kept below the floor, never "never said"."""

from __future__ import annotations

import datetime as dt

from agenvoy_desktop.agent.date_reasoning.pointed import (
    local_midnight_ns,
    pointed_days,
    pointed_span,
)
from agenvoy_desktop.agent.recall import RecallItem, said_at_named_time, with_said_then

TODAY = dt.date(2023, 4, 1)  # a Saturday


def test_pointed_days_reads_past_times_only() -> None:
    assert pointed_days("What did I do with Rachel on the Wednesday two months ago?", TODAY) == (
        dt.date(2023, 2, 1),
        dt.date(2023, 2, 1),
    )
    assert pointed_days("Which bike did I fix in February?", TODAY) == (
        dt.date(2023, 2, 1),
        dt.date(2023, 2, 28),
    )
    assert pointed_days("Any film for tonight?", TODAY) is None  # today points at no memory
    assert pointed_days("What is my dog's name?", TODAY) is None


def test_pointed_span_covers_whole_local_days() -> None:
    span = pointed_span("What did I buy on March 3?", TODAY)
    assert span == (
        local_midnight_ns(dt.date(2023, 3, 3)),
        local_midnight_ns(dt.date(2023, 3, 4)) - 1,
    )


def _item(mid: str, time_ns: int) -> RecallItem:
    return RecallItem(
        message_id=mid,
        session_id="s",
        session_title=None,
        time_ns=time_ns,
        role="user",
        text=mid,
    )


def test_lines_said_then_are_kept_below_the_floor_only_when_none_was_kept() -> None:
    span = (100, 200)
    candidates = [_item("a", 50), _item("b", 150), _item("c", 160), _item("d", 170)]
    assert [i.message_id for i in with_said_then(candidates, [], span)] == ["b", "c"]
    kept = [candidates[0]]
    assert [i.message_id for i in with_said_then(candidates, kept, span)] == ["a", "b", "c"]
    assert with_said_then(candidates, [candidates[3]], span) == [candidates[3]]
    late = [_item(f"x{i}", 50) for i in range(5)] + [_item("y", 150)]
    assert with_said_then(late, [], span) == []  # past the first five: not pulled in


def test_a_line_said_at_the_named_time_answers_a_question_worded_otherwise() -> None:
    today = dt.date(2023, 6, 22)
    span = pointed_span("the life event of my relatives a week ago", today)
    assert span is not None
    inside, outside = _item("w", span[0] + 1), _item("o", span[0] - 1)
    assert said_at_named_time("the life event of my relatives a week ago", [inside], today)
    assert not said_at_named_time("the life event of my relatives a week ago", [outside], today)
    assert not said_at_named_time("the life event of my relatives", [inside], today)
