"""An answer over remembered lines is said to the user: "you", not "the user" or their "I"."""

from __future__ import annotations

import asyncio
import random
import re

import pytest

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, AnswerDelta, TurnEvent
from agenvoy_desktop.agent.voice import Voice, VoiceStream
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation
from tests.scripted_chat import ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")

SCREEN = "How much screen time have I been averaging on Instagram per day?"
SCREEN_LINE = "I've been averaging around 2 hours of screen time on Instagram per day."


def _voice(question: str = SCREEN, *lines: str, about_assistant: bool = False) -> Voice:
    return Voice.for_turn(question, lines or (SCREEN_LINE,), about_assistant=about_assistant)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            "I have been averaging around 2 hours of screen time on Instagram per day.",
            "You have been averaging around 2 hours of screen time on Instagram per day.",
        ),
        ("Yes, I'm averaging 2 hours a day.", "Yes, you're averaging 2 hours a day."),
        (
            "Based on the conversation, the user has three bikes.",
            "Based on the conversation, you have three bikes.",
        ),
        (
            "The user attended yoga three times a week, which helps with his anxiety.",
            "You attended yoga three times a week, which helps with your anxiety.",
        ),
        (
            "The user mentioned that they are working 40 hours a week.",
            "You mentioned that you are working 40 hours a week.",
        ),
        ("The user usually goes there; the user likes it.", "You usually go there; you like it."),
        (
            "The user bought their new bookshelf from IKEA.",
            "You bought your new bookshelf from IKEA.",
        ),
        ("Based on the user's message, here is a list.", "Based on your message, here is a list."),
    ],
)
def test_the_user_is_addressed_as_you(answer: str, said: str) -> None:
    assert _voice().rewrite(answer) == said


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know: you haven't told me about football.",
        "I'm sorry, but I can't find that.",
        "I recommend setting a 30-minute limit on Instagram.",
        "I have no record of your screen time on Instagram.",
        "The user interface of Instagram shows your screen time.",
        "I hope this helps.",
        "You have been averaging 2 hours.",
    ],
)
def test_the_assistant_speaking_for_itself_is_left_alone(answer: str) -> None:
    assert _voice().rewrite(answer) == answer


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("No, I don't have a sister.", "No, you don't have a sister."),
        ("No, I do not have a sister.", "No, you do not have a sister."),
        ("I don't have any information about your sister.", None),
        ("I don't know: you haven't told me about a sister.", None),
        ("I can't find a sister in what you told me.", None),
    ],
)
def test_a_negated_statement_is_the_users_unless_its_verb_is_the_assistants(
    answer: str, said: str | None
) -> None:
    voice = _voice("Do I have a sister?", "I don't have a sister, only two brothers.")
    assert voice.rewrite(answer) == (answer if said is None else said)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("No, I am not a smoker.", "No, you are not a smoker."),
        ("No, I'm not a smoker.", "No, you're not a smoker."),
        ("I'm not sure whether you smoke.", None),
        ("I am not able to say.", None),
        ("I'm an AI language model, so I can't know.", None),
        ("I'm just a program.", None),
        ("I'm sorry, I can't tell.", None),
        ("I'm still a smoker.", "You're still a smoker."),
        ("I'm not able to tell whether you smoke.", None),
        ("I am not aware that you smoke.", None),
        ("I'm not certain you are a smoker.", None),
        ("I'm not familiar with your smoking.", None),
        ("I was able to quit smoking.", "You were able to quit smoking."),
    ],
)
def test_what_i_am_is_decided_past_not_and_a(answer: str, said: str | None) -> None:
    """Seen in the window: "Am I a smoker?" → "No, I am not a smoker."."""
    voice = _voice("Am I a smoker?", "I no longer smoke, I quit two years ago.")
    assert voice.rewrite(answer) == (answer if said is None else said)


def test_a_short_word_of_the_question_is_an_echo() -> None:
    voice = _voice("Do I have a cat?", "My neighbour feeds the birds.")
    assert voice.rewrite("Yes, I have a cat.") == "Yes, you have a cat."
    assert voice.rewrite("I have no record of a cat.") == "I have no record of a cat."


def test_a_thing_of_the_kind_asked_about_is_an_echo() -> None:
    """Seen in the window: "Do I have any pets?" under "we adopted a cat" → "Yes, I do have a
    cat."."""
    voice = Voice.for_turn(
        "Do I have any pets?", ["We adopted a cat last week."], about_assistant=False
    )
    assert voice.rewrite("Yes, I do have a cat.") == "Yes, you do have a cat."


def test_a_first_person_sentence_without_the_users_words_stays() -> None:
    answer = "I think so. I have been averaging 2 hours of screen time."
    assert _voice().rewrite(answer) == "I think so. You have been averaging 2 hours of screen time."


def test_nothing_is_turned_round_when_asked_what_the_assistant_said() -> None:
    voice = _voice("What sealant did you recommend for the vase?", "I glued the vase.")
    answer = "I recommended a clear silicone sealant for the vase."
    assert voice.rewrite(answer) == answer


def test_a_named_person_keeps_his_pronoun() -> None:
    answer = "The user met Tom, and he was kind."
    assert _voice().rewrite(answer) == "You met Tom, and he was kind."


@pytest.mark.parametrize(
    "answer",
    [
        "I have been averaging around 2 hours of screen time on Instagram. I hope it helps!",
        "Based on this, the user has been averaging 2 hours. The user's goal is 30 minutes.",
        "Yes. I'm averaging 2 hours on Instagram, which the user said is a lot.\n\nI suggest less.",
        "I don't know: you haven't told me about Instagram.",
    ],
)
def test_a_stream_shows_exactly_the_rewritten_answer(answer: str) -> None:
    rng = random.Random(answer)
    for _ in range(20):
        stream, shown, at = VoiceStream(_voice()), "", 0
        while at < len(answer):
            step = rng.randint(1, 7)
            shown += stream.feed(answer[at : at + step])
            at += step
        assert shown + stream.flush() == _voice().rewrite(answer)


def test_a_stream_holds_back_only_an_undecided_first_person_opening() -> None:
    stream = VoiceStream(_voice())
    assert stream.feed("Sure, ") == ""  # "Sure, I …" may become "Sure, you …"
    assert stream.feed("I have been ") == ""
    shown = stream.feed("averaging around 2 hours of screen time")
    assert shown.startswith("Sure, you have been averaging")
    plain = VoiceStream(_voice())
    assert plain.feed("Two hours a day on ") == "Two hours a "  # the last two words wait


def test_without_a_voice_the_stream_passes_through() -> None:
    stream = VoiceStream(None)
    assert stream.feed("I have ") == "I have "
    assert stream.flush() == ""


# -- in a turn ----------------------------------------------------------------------------------
def test_a_turn_saves_and_streams_the_answer_in_the_second_person(store: MemoryStore) -> None:
    earlier = store.create_session("Earlier")
    store.append(
        earlier,
        conversation(
            ["We should plan the week.", "Sure.", SCREEN_LINE, "That's quite a lot."],
            start=T0,
            step=86_400 * SECOND,
        ),
    )
    asked = store.create_session("today")
    pieces = ["I have ", "been averaging ", "around 2 hours ", "of screen time ", "per day."]
    model = ScriptedChatModel([pieces])
    storage, events = Storage(), list[TurnEvent]()
    try:
        agent = Agent(storage, store, model, ToolRegistry(), config=AgentConfig(small_model=True))
        result = asyncio.run(agent.run_turn(asked, SCREEN, on_event=events.append))
    finally:
        storage.close()
    assert result.answer == "You have been averaging around 2 hours of screen time per day."
    streamed = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    assert streamed == result.answer
    assert store.history(asked).messages[-1].content == result.answer


def test_without_recall_the_answer_is_untouched(store: MemoryStore) -> None:
    asked = store.create_session("today")
    model = ScriptedChatModel([["The user table holds one row per user."]])
    storage = Storage()
    try:
        agent = Agent(storage, store, model, ToolRegistry(), config=AgentConfig(small_model=True))
        result = asyncio.run(agent.run_turn(asked, "What does the user table hold?"))
    finally:
        storage.close()
    assert result.answer == "The user table holds one row per user."
    assert re.search("user", result.answer)


def test_quoted_words_stay_as_written() -> None:
    answer = 'You told me on 2023-10-09: "I\'ve been averaging 2 hours. The user limit is 30."'
    assert _voice().rewrite(answer) == answer
    mixed = 'The user said "I have been averaging 2 hours" on Instagram.'
    assert _voice().rewrite(mixed) == 'You said "I have been averaging 2 hours" on Instagram.'


@pytest.mark.parametrize(
    ("question", "answer", "said"),
    [
        ("我妈妈的生日是哪天？", "我的妈妈的生日是十月三号。", "你的妈妈的生日是十月三号。"),
        (
            "我们的婚礼决定在哪里办？",
            "我们的婚礼将在杭州西湖边办。",
            "你们的婚礼将在杭州西湖边办。",
        ),
        ("我住在哪里？", "我住在北京。我希望这能帮到你。", "你住在北京。我希望这能帮到你。"),
        ("我对什么过敏？", "我不知道：你没有告诉过我。", "我不知道：你没有告诉过我。"),
    ],
)
def test_a_chinese_answer_in_the_users_voice_is_turned_round(
    question: str, answer: str, said: str
) -> None:
    voice = Voice.for_turn(question, [], about_assistant=False)
    assert voice.rewrite(answer) == said
    stream = VoiceStream(voice)
    shown = "".join(stream.feed(char) for char in answer)
    assert shown  # Chinese streams too, though it has no spaces between words
    assert shown + stream.flush() == said
