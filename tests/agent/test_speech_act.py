"""Telling, asking, requesting: the sentence rules behind recall and the small-model tools."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.speech_act import (
    asks_or_requests,
    only_tells,
    sentences,
    tells_something,
)

TELLS = [
    "I locked myself out of the house again.",
    "I have a dentist appointment tomorrow morning.",
    "Hi! My name is Lena and I live in Graz.",
    "Remember, my shoe size is 44.",
    "Note to self: my passport expires on 14 March 2027.",
    "I'm allergic to kiwi fruit, so please keep that in mind for recipes.",
    "My notes are in ~/notes/todo.txt.",
    "Ich habe morgen einen Zahnarzttermin.",
    "我们家的小猫今天把花瓶打碎了。",
    "对了，我的电动车锁密码是6083。",
    "ジムのロッカー番号は527番です。",
]
ASKS = [
    "What is my bike lock code?",
    "what is my bike lock code",
    "Where do I live",
    "Do you remember my PIN",
    "Is it going to rain tomorrow",
    "Also list every temple in Kyoto with opening hours.",
    "Please read ~/notes/todo.txt",
    "Can you summarize this article.",
    "Tell me a joke.",
    "Lies die Datei bericht.md",
    "Wie spät ist es",
    "Kannst du mir helfen.",
    "我的电动车锁密码是多少",
    "你记得我住在哪里吗",
    "请把这个翻译成英文。",
    "帮我查一下明天的天气。",
    "レモンの木にはいつ水をやりますか",
]


@pytest.mark.parametrize("text", TELLS)
def test_statements_only_tell(text: str) -> None:
    assert only_tells(text)
    assert tells_something(text)


@pytest.mark.parametrize("text", ASKS)
def test_questions_and_requests_ask(text: str) -> None:
    assert all(asks_or_requests(s) for s in sentences(text))
    assert not only_tells(text)
    assert not tells_something(text)


def test_a_statement_with_a_question_asks_and_tells() -> None:
    text = "I locked myself out again. What should I do?"
    assert not only_tells(text)
    assert tells_something(text)


def test_sentences_split_after_marks_and_line_breaks() -> None:
    assert sentences("Hi! I live in Graz.\nMy code is 4721") == [
        "Hi!",
        "I live in Graz.",
        "My code is 4721",
    ]
    assert sentences("我住在格拉茨。你呢？") == ["我住在格拉茨。", "你呢？"]
    assert sentences("   ") == []
    assert not only_tells("")


def test_a_title_before_a_name_ends_no_sentence() -> None:
    """Cut after "Mrs.", a quote of the sentence holding "teacher" lost the name."""
    assert sentences("My teacher is Mrs. Okonkwo. She is great!") == [
        "My teacher is Mrs. Okonkwo.",
        "She is great!",
    ]
    assert sentences("Mein Arzt ist Dr. Weber. Gut.") == ["Mein Arzt ist Dr. Weber.", "Gut."]
