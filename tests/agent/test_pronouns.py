"""The user's recalled words turned to face them (agent/pronouns.py)."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.pronouns import swap_person


@pytest.mark.parametrize(
    ("said", "turned"),
    [
        ("I'm allergic to penicillin.", "You're allergic to penicillin."),
        ("By the way, my bike lock code is 4721.", "By the way, your bike lock code is 4721."),
        ("I am a nurse and I was in Lisbon.", "You are a nurse and you were in Lisbon."),
        (
            "We decided to paint the nursery sage green.",
            "You decided to paint the nursery sage green.",
        ),
        ("Our dog is called Biscuit.", "Your dog is called Biscuit."),
        ("I’ve decided to take the train.", "You’ve decided to take the train."),
        ("Hi, I'm Marta.", "Hi, you're Marta."),
    ],
)
def test_first_person_becomes_second(said: str, turned: str) -> None:
    assert swap_person(said) == turned


@pytest.mark.parametrize(
    ("said", "turned"),
    [
        # "you" was the assistant: subject "I", object "me"
        (
            "I wear shoe size 44, in case you ever order shoes for me.",
            "You wear shoe size 44, in case I ever order shoes for you.",
        ),
        ("Can you remind me on Friday?", "Can I remind you on Friday?"),
        ("I gave the keys to you.", "You gave the keys to me."),
        ("You are great.", "I am great."),
        ("Thank you!", "Thank you!"),
    ],
)
def test_second_person_becomes_first(said: str, turned: str) -> None:
    assert swap_person(said) == turned


def test_the_country_stays() -> None:
    assert swap_person("Our US trip: tell us more.") == "Your US trip: tell you more."


@pytest.mark.parametrize(
    ("said", "turned"),
    [
        ("我对青霉素过敏。", "你对青霉素过敏。"),
        ("我们家新来的小猫叫年糕。", "你们家新来的小猫叫年糕。"),
        ("你能记住我的密码吗？", "我能记住你的密码吗？"),
        ("我先自我介绍一下。", "你先自我介绍一下。"),
        ("私の名前は田中です。", "あなたの名前は田中です。"),
    ],
)
def test_chinese_and_japanese(said: str, turned: str) -> None:
    assert swap_person(said) == turned


def test_other_languages_are_left_as_said() -> None:
    """German conjugates the verb with the pronoun ("ich bin" / "du bist"): no word swap."""
    assert swap_person("Ich bin allergisch gegen Kiwi.") == "Ich bin allergisch gegen Kiwi."


def test_recall_lines_stay_as_the_user_said_them() -> None:
    from agenvoy_desktop.agent import recall

    item = recall.RecallItem("m", "s", "Bike trip", 0, "user", "My bike lock code is 4721.")
    assert '"My bike lock code is 4721."' in recall.format_line(item)
