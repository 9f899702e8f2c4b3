"""Totals and differences of two remembered numbers, worked out by code."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.number_answers import (
    NumberQuestion,
    number_for,
    parse_number_question,
    work_out,
)
from agenvoy_desktop.agent.recall import DEFAULT_FLOOR
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * SECOND


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "What is the total number of comments on my Facebook Live session and my most "
            "popular YouTube video?",
            NumberQuestion(
                "sum", ("my Facebook Live session", "my most popular YouTube video"), "comments"
            ),
        ),
        (
            "What is the total amount I spent on gifts for my coworker and brother?",
            NumberQuestion(
                "sum", ("gifts for my coworker", "gifts for my brother"), "spent", money=True
            ),
        ),
        (
            "How much more expensive was the taxi ride compared to the train fare?",
            NumberQuestion("difference", ("the taxi ride", "the train fare"), "", money=True),
        ),
        (
            "How many years older is my grandma than me?",
            NumberQuestion("difference", ("my grandma", "me"), "years"),
        ),
    ],
)
def test_totals_and_differences_are_read(question: str, expected: NumberQuestion) -> None:
    assert parse_number_question(question) == expected


@pytest.mark.parametrize(
    "question",
    ["What is my bike lock code?", "How many days did I spend in Paris?", "Any tips for my run?"],
)
def test_other_questions_are_left_alone(question: str) -> None:
    assert parse_number_question(question) is None


def test_the_number_that_goes_with_the_unit_is_taken() -> None:
    line = "Last week my Facebook Live session on May 3 got 12 comments and 40 views."
    number = number_for(line, "my Facebook Live session", "comments", money=False)
    assert number is not None
    assert number.value == 12
    fare = number_for("I missed it by 5 minutes; the taxi cost me $12.", "taxi", "", money=True)
    assert fare is not None
    assert fare.text == "$12"
    assert number_for("The taxi was late at 10:30.", "taxi", "", money=True) is None
    # the amount in the sentence after the one that names the thing
    shower = (
        "I was at a baby shower and got a gift receipt, in case my coworker wanted to "
        "exchange anything. I purchased her a set of baby clothes, totaling $100."
    )
    gift = number_for(shower, "gifts for my coworker", "spent", money=True)
    assert gift is not None
    assert gift.text == "$100"


def test_a_total_over_two_sessions_is_worked_out(store: MemoryStore) -> None:
    for day, text in (
        (0, "My recent Facebook Live session about vegan recipes got 12 comments."),
        (5, "My most popular YouTube video has 21 comments so far."),
    ):
        sid = store.create_session(None)
        store.append(sid, conversation([text, "Nice!"], start=T0 + day * DAY))
    now = store.create_session("today")
    question = (
        "What is the total number of comments on my recent Facebook Live session and my "
        "most popular YouTube video?"
    )
    worked = work_out(store, now, question, 16, floor=DEFAULT_FLOOR)
    assert worked is not None
    assert worked.values == frozenset({"33"})
    assert worked.sentence.endswith("= 33 comments.")
    assert len(worked.items) == 2


def test_a_missing_number_works_nothing_out(store: MemoryStore) -> None:
    sid = store.create_session(None)
    store.append(sid, conversation(["My Facebook Live session went well.", "Great."]))
    now = store.create_session("today")
    question = "What is the total number of comments on my Facebook Live session and my blog?"
    assert work_out(store, now, question, 16, floor=DEFAULT_FLOOR) is None
