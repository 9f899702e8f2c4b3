"""Where recall looks beyond one statement: neighbours, the assistant's words, the dates, and
what was never said."""

from __future__ import annotations

import datetime as dt

import pytest

from agenvoy_desktop.agent import date_answers
from agenvoy_desktop.agent.never_said import asked_things, never_said
from agenvoy_desktop.agent.recall import (
    BLOCK_HEADER,
    DEFAULT_FLOOR,
    asks_about_assistant,
    find_block,
    find_items,
    gathers,
)
from agenvoy_desktop.agent.worked_out import add_worked_out
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * SECOND


def _session(store: MemoryStore, texts: list[str], start: int = T0, step: int = SECOND) -> str:
    sid = store.create_session(None)
    store.append(sid, conversation(texts, start=start, step=step))
    return sid


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Can you remind me of the website you recommended for free lessons?", True),
        ("How many eggs did you say we need for the omelette?", True),
        ("In our previous conversation, what were the three objectives we outlined?", True),
        ("你之前推荐的那家餐厅叫什么？", True),
        ("What is my bike lock code?", False),
        ("You are great, thanks!", False),
    ],
)
def test_questions_about_the_assistants_words_are_told_apart(text: str, expected: bool) -> None:
    assert asks_about_assistant(text) is expected


def test_questions_that_count_or_order_gather_more() -> None:
    assert gathers("How many doctor's appointments did I go to in March?")
    assert gathers("Which did I do first, the hike or the concert?")
    assert not gathers("What is my bike lock code?")


def test_the_assistants_answer_is_recalled_when_the_question_points_at_it(
    store: MemoryStore,
) -> None:
    _session(
        store,
        [
            "I want to learn music theory. Where should I start?",
            "Here are a few resources. 1. MusicTheory.net: this website offers free lessons and "
            "exercises on rhythm, chords and scales. 2. Online courses on Udemy and Coursera. "
            "3. YouTube channels such as Rick Beato and Adam Neely.",
        ],
    )
    now = store.create_session("today")
    question = "Can you remind me of the website you recommended for free music theory lessons?"
    block = find_block(store, now, question, 16)
    assert "you said" in block.text
    assert "MusicTheory.net" in block.text
    plain = find_block(store, now, "What free music theory lessons are there?", 16)
    assert "MusicTheory.net" not in plain.text  # the assistant's words only when pointed at


def test_a_neighbour_that_names_the_place_comes_with_the_line(store: MemoryStore) -> None:
    _session(
        store,
        [
            "I redeemed a $5 coupon on coffee creamer last Sunday, such a good deal.",
            "Nice! Those add up quickly.",
            "I got it at Target, they had a sale on everything.",
            "Good to know.",
        ],
    )
    now = store.create_session("today")
    items = find_items(store, now, "Where did I redeem a $5 coupon on coffee creamer?", 16)
    first = next(i for i in items if "redeemed" in i.text)
    assert [near.text for near in first.neighbours] == [
        "I got it at Target, they had a sale on everything."
    ]
    # a line that names the place already brings nothing along
    other = store.create_session(None)
    store.append(
        other,
        conversation(["I redeemed the gift voucher at Decathlon.", "Nice.", "I got it at Lidl."]),
    )
    items = find_items(store, now, "Where did I redeem the gift voucher?", 16)
    voucher = next(i for i in items if "voucher" in i.text)
    assert voucher.neighbours == ()


def test_words_never_said_are_named(store: MemoryStore) -> None:
    _session(
        store,
        [
            "I added three autographed baseballs to my collection this spring.",
            "What a collection!",
        ],
    )
    now = store.create_session("today")
    question = "How many autographed footballs have I added to my collection?"
    store.append(now, conversation([question], start=T0 + DAY))  # asked: stored first
    block = find_block(store, now, question, 16)
    assert never_said(store, question, block.items) == ["footballs"]
    told = "How many autographed baseballs have I added to my collection?"
    assert never_said(store, told, find_block(store, now, told, 16).items) == []


def test_asked_things_are_names_and_counted_nouns() -> None:
    def words(text: str, shown: str = "") -> list[str]:
        return [word for word, _phrase in asked_things(text, shown)]

    assert words("Who became a parent first, Tom or Alex?") == ["parent", "Tom", "Alex"]
    assert asked_things("How many years older is my grandma than me?") == [
        ("grandma", "your grandma")
    ]
    assert words("What is my sister's name?") == ["sister"]
    assert "conferences" not in words(
        "How many days did I spend at the workshops, lectures and the conferences?",
        shown="workshop lectur",
    )


def test_what_the_thing_does_is_no_thing() -> None:
    def words(text: str) -> list[str]:
        return [word for word, _phrase in asked_things(text)]

    # "I don't know: you haven't told me about live." was the answer to be
    assert words("Where does my brother live?") == ["brother"]
    assert words("What did I say my sister prefers?") == ["sister"]
    assert words("What did my doctor recommend?") == ["doctor"]
    # right after a determiner it names the thing, and a compound keeps its noun
    assert words("How long was my visit to Rome?") == ["visit", "Rome"]
    assert words("How long is my daily commute to work?") == ["daily", "commute"]


def test_days_between_two_events_are_worked_out(store: MemoryStore) -> None:
    _session(store, ["I attended the gardening workshop yesterday.", "How was it?"], start=T0)
    _session(
        store,
        ["Today I finally planted the tomato saplings.", "Well done."],
        start=T0 + 6 * DAY,
    )
    now = store.create_session("today")
    question = (
        "How many days passed between the day I attended the gardening workshop "
        "and the day I planted the tomato saplings?"
    )
    worked = date_answers.work_out(
        store, now, question, 16, floor=DEFAULT_FLOOR, now_ns=T0 + 10 * DAY
    )
    assert worked is not None
    assert "7 days apart" in worked.sentence  # "yesterday" dates the workshop a day earlier
    assert worked.values == frozenset({"7"})
    assert len(worked.items) == 2


def test_a_question_about_a_day_finds_what_was_told_of_it(store: MemoryStore) -> None:
    wednesday = dt.datetime(2023, 11, 15, 14, 0, tzinfo=dt.UTC)
    said = int(wednesday.timestamp()) * SECOND
    _session(
        store,
        ["I started taking ukulele lessons with my friend Rachel today!", "How fun!"],
        start=said,
    )
    _session(store, ["Rachel and I went hiking in the spring.", "Nice."], start=said - 200 * DAY)
    now_ns = said + 61 * DAY
    now = store.create_session("today")
    question = "What did I do with Rachel on the Wednesday two months ago?"
    worked = date_answers.work_out(store, now, question, 16, floor=DEFAULT_FLOOR, now_ns=now_ns)
    assert worked is not None
    assert [i.text for i in worked.items] == [
        "I started taking ukulele lessons with my friend Rachel today!"
    ]
    assert worked.values == frozenset()


def test_a_name_said_only_with_other_things_was_never_told(store: MemoryStore) -> None:
    for text in (
        "My colleague Tom moved to Berlin last spring.",
        "Tom recommended a great ramen place near the office.",
        "I went bouldering with Tom on Saturday.",
        "My cousin Alex just became a parent: a baby girl!",
    ):
        _session(store, [text, "Nice."])
    now = store.create_session("today")
    question = "Who became a parent first, Tom or Alex?"
    store.append(now, conversation([question], start=T0 + DAY))  # asked: stored first
    # "Tom" is in three messages, never with "parent"; Alex's line is recalled
    alex = [i for i in find_block(store, now, question, 16).items if "Alex" in i.text]
    assert never_said(store, question, alex) == ["Tom"]
    # told with what is asked: not "never told", though recall shows nothing
    asked = "Where did Tom recommend a ramen place?"
    store.append(now, conversation([asked], start=T0 + 2 * DAY))
    assert "Tom" not in never_said(store, asked, [])


def test_a_name_never_said_at_all_is_named_alone(store: MemoryStore) -> None:
    for text in (
        "My cousin Alex just adopted a baby girl from China.",
        "Alex had a wonderful experience with her agency.",
        "Alex sends me photos of the baby every week.",
        "Being a parent of twins must be exhausting.",
        "My neighbour became a parent in May.",
        "Which parent app do you recommend?",
    ):
        _session(store, [text, "Nice."])
    now = store.create_session("today")
    question = "Who became a parent first, Tom or Alex?"
    store.append(now, conversation([question], start=T0 + DAY))
    # Alex is never said with "parent", but Tom is said nowhere: only Tom was never told
    assert never_said(store, question, []) == ["Tom"]


def test_a_pronoun_between_keeps_a_verb_from_being_a_thing() -> None:
    question = "What was the life event of one of my relatives that I participated in?"
    words = [word for word, _ in asked_things(question)]
    assert "relatives" in words
    assert "participated" not in words


def test_the_days_a_month_s_lines_tell_of_are_added_up(store: MemoryStore) -> None:
    may = dt.datetime(2023, 5, 1, 12, 0, tzinfo=dt.UTC)
    said = int(may.timestamp()) * SECOND
    _session(
        store,
        [
            "By the way, I attended a lecture on sustainable development on the 10th of April.",
            "Sounds inspiring.",
            "I learned about normalization in a 2-day workshop I attended on the 17th and "
            "18th of April.",
            "Great.",
        ],
        start=said,
    )
    now = store.create_session("today")
    question = "How many days did I spend attending workshops and lectures in April?"
    now_ns = said + DAY
    block = find_block(store, now, question, 16, now_ns=now_ns)
    shown, worked = add_worked_out(
        store,
        now,
        question,
        block,
        window_messages=16,
        floor=DEFAULT_FLOOR,
        header=BLOCK_HEADER,
        now_ns=now_ns,
    )
    assert isinstance(worked, date_answers.WorkedOut)
    assert len(worked.items) == 2
    assert worked.values == frozenset({"3"})
    assert shown.text.endswith("= 3 days.")
    # another question about the month is left as it was
    assert date_answers.with_days_counted("What did I attend in April?", worked) is worked
