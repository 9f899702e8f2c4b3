"""The translated question recall searches with (agent/query_translation)."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.query_translation import (
    SHOTS,
    SHOTS_FROM_ENGLISH,
    other_languages,
    translation_prompt,
    usable,
)
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import msg


@pytest.mark.parametrize(
    ("said", "searched"),
    [
        ("What is my daughter's name?", "What is my daughter's name?"),
        ("  When does my passport expire?\nIt expires in May.", "When does my passport expire?"),
        ("我女儿叫小明。", ""),  # an answer in Chinese, not a translation
        ("My电动车 lock password?", "My电动车 lock password?"),  # mostly English: still useful
        ("", ""),
        ("?", ""),
    ],
)
def test_only_an_english_first_line_is_searched(said: str, searched: str) -> None:
    assert usable(said) == searched


def test_the_prompt_shows_translations_before_the_question() -> None:
    messages = translation_prompt("我住在哪个城市？")
    assert messages[0]["role"] == "system"
    assert [m["role"] for m in messages[1:-1]] == ["user", "assistant"] * len(SHOTS)
    assert messages[-1] == {"role": "user", "content": "我住在哪个城市？"}


@pytest.mark.parametrize(
    ("said", "language", "searched"),
    [
        ("我女儿叫什么名字？", "zh", "我女儿叫什么名字？"),
        ("What is my daughter's name?", "zh", ""),  # not translated
        ("私の娘の名前は何ですか？", "ja", "私の娘の名前は何ですか？"),
        ("我女儿叫什么名字？", "ja", ""),  # Chinese, not Japanese
        ("Wie heißt meine Tochter?", "de", "Wie heißt meine Tochter?"),
        ("What is my daughter's name?", "de", ""),  # the question again
    ],
)
def test_a_translation_from_english_must_be_written_in_its_language(
    said: str, language: str, searched: str
) -> None:
    assert usable(said, language, "What is my daughter's name?") == searched


def test_translations_from_english_show_that_direction() -> None:
    messages = translation_prompt("What is my son's name?", "ja")
    assert "into Japanese" in messages[0]["content"]
    assert messages[1]["content"] == SHOTS_FROM_ENGLISH["ja"][0][0]
    assert messages[2]["content"] == SHOTS_FROM_ENGLISH["ja"][0][1]


@pytest.mark.parametrize(
    ("texts", "languages"),
    [
        (["We went hiking in the Alps.", "The US trip was fun."], []),
        (["我女儿叫Eva。"], ["zh"]),
        (["私の猫の名前はタマです。"], ["ja", "zh"]),  # kanji may be Chinese too
        (["Mein Hund heißt Bello, meiner Schwester gehört er."], ["de"]),
        (["Ich weiß es nicht und es ist egal."], ["de"]),
        (["Ich bin müde und 我女儿叫Eva。"], ["zh", "de"]),
    ],
)
def test_the_languages_an_archive_holds(
    store: MemoryStore, texts: list[str], languages: list[str]
) -> None:
    sid = store.create_session("earlier")
    store.append(sid, [msg("user", text, i + 1) for i, text in enumerate(texts)])
    assert other_languages(store.archive) == languages
