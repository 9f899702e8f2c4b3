"""Which way a remembered amount changed, worked out by code."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent import answer_check
from agenvoy_desktop.agent.change_answers import (
    ChangeQuestion,
    amounts_in,
    parse_change_question,
    work_out,
)
from agenvoy_desktop.agent.date_reasoning import local_date
from agenvoy_desktop.agent.recall import BLOCK_HEADER, DEFAULT_FLOOR, RecallItem, find_block
from agenvoy_desktop.agent.worked_out import add_worked_out
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * SECOND
COFFEE = "Did I switch to more water per tablespoon of coffee in my French press, or less?"
EARLIER = (
    "I'm trying a new bean. By the way, I've found that 1 tablespoon of coffee for every "
    "6 ounces of water is the perfect French press ratio for me."
)
LATER = (
    "I've got my French press ratio down to a science: 1 tablespoon of coffee for every "
    "5 ounces of water."
)


def day(days: int) -> str:
    return local_date(T0 + days * DAY).isoformat()


def item(message_id: str, day: int, text: str, role: str = "user") -> RecallItem:
    return RecallItem(message_id, "s", None, T0 + day * DAY, role, text)


@pytest.mark.parametrize(
    ("question", "up", "down", "first_term"),
    [
        (COFFEE, "more", "less", "water"),
        ("Is my rent higher or lower than it was last year?", "higher", "lower", "rent"),
        ("Did my commute get shorter or longer after the move?", "longer", "shorter", "commute"),
        ("Did the number of followers go up or down?", "up", "down", "follower"),
    ],
)
def test_a_question_offering_two_opposite_ways_is_read(
    question: str, up: str, down: str, first_term: str
) -> None:
    parsed = parse_change_question(question)
    assert parsed is not None
    assert (parsed.up, parsed.down) == (up, down)
    assert first_term in parsed.terms


@pytest.mark.parametrize(
    "question",
    [
        "Is that more or less right?",  # the idiom names no amount
        "How many more followers do I have than last year?",  # a difference
        "Did I run faster or slower in the second race?",  # a time or a speed: not said
        "Should I buy more coffee?",
    ],
)
def test_other_questions_are_left_alone(question: str) -> None:
    parsed = parse_change_question(question)
    assert parsed is None or parsed == ChangeQuestion(parsed.up, parsed.down, parsed.terms)
    assert work_out(question, [item("a", 0, EARLIER), item("b", 90, LATER)]) is None


def test_amounts_keep_their_measure_and_leave_dates_and_places_out() -> None:
    found = amounts_in("On May 3 I finished my 5th project: 20,000 miles and $45 at 6 pm.")
    assert [(a.number.text, a.measure) for a in found] == [("20,000 miles", "mile"), ("$45", "$")]


def test_the_direction_is_worked_out_from_the_earliest_and_the_latest_line() -> None:
    items = [
        item("b", 140, LATER),
        item("a", 0, EARLIER),
        item("c", 10, "Do you like tea?", "assistant"),
    ]
    worked = work_out(COFFEE, items)
    assert worked is not None
    assert worked.words == ("less",)
    assert worked.later == ("more",)
    assert worked.sentence == (
        f"Less: from 6 ounces of water ({day(0)}) to 5 ounces of water ({day(140)}, the latest)."
    )
    assert [i.message_id for i in worked.items] == ["a", "b"]


def test_a_rise_gets_the_word_for_a_rise() -> None:
    items = [
        item("a", 0, "I have 500 followers on Instagram now."),
        item("b", 30, "Guess what, I'm at 650 followers on Instagram!"),
    ]
    worked = work_out("Do I have more followers on Instagram than before, or fewer?", items)
    assert worked is not None
    assert worked.words == ("more",)
    assert worked.sentence.startswith("More: from 500 followers on Instagram (")


@pytest.mark.parametrize(
    "lines",
    [
        [(0, EARLIER)],  # one line: nothing changed that we know of
        [(0, EARLIER), (0, LATER)],  # the same day: which came last is not certain
        [(0, EARLIER), (90, EARLIER)],  # the same amount
    ],
)
def test_nothing_certain_works_nothing_out(lines: list[tuple[int, str]]) -> None:
    items = [item(str(n), day, text) for n, (day, text) in enumerate(lines)]
    assert work_out(COFFEE, items) is None


def test_two_amounts_that_changed_leave_the_question_open() -> None:
    items = [
        item("a", 0, "I walk 3 km and drink 2 liters of water a day."),
        item("b", 60, "These days I walk 5 km and drink 3 liters of water."),
    ]
    assert work_out("Do I walk and drink more water now, or less?", items) is None


def test_the_block_ends_with_the_direction_and_the_check_holds_the_answer_to_it(
    store: MemoryStore,
) -> None:
    for day, text in ((0, EARLIER), (140, LATER)):
        sid = store.create_session(None)
        store.append(sid, conversation([text, "Sounds good!"], start=T0 + day * DAY))
    now = store.create_session("today")
    now_ns = T0 + 170 * DAY
    block = find_block(store, now, COFFEE, 16, DEFAULT_FLOOR, now_ns=now_ns)
    merged, worked = add_worked_out(
        store,
        now,
        COFFEE,
        block,
        window_messages=16,
        floor=DEFAULT_FLOOR,
        header=BLOCK_HEADER,
        now_ns=now_ns,
    )
    assert worked is not None
    assert merged.text.splitlines()[-1].startswith("Worked out from these lines: Less: from 6")
    wrong = answer_check.check(COFFEE, "You switched to more water.", [], computed=worked)
    assert wrong.problem == "not worked out"
    assert wrong.fallback == worked.sentence
    right = answer_check.check(COFFEE, "Less: 5 ounces instead of 6.", [], computed=worked)
    assert right.problem == ""
