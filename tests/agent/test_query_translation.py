"""The translated question recall searches with (agent/query_translation)."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.query_translation import SHOTS, translation_prompt, usable


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
