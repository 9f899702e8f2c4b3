"""A small model shown how to say "I don't know" when memory has nothing (agent/not_remembered)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agenvoy_desktop.agent.not_remembered import (
    EXAMPLES,
    asks_for_own_fact,
    brings_its_own,
    example_messages,
    language_of,
    window_may_answer,
)
from agenvoy_desktop.agent.recall import BLOCK_HEADERS
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, TurnResult
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations.chat import recalls_for
from agenvoy_desktop.operations.timeline import load_timeline
from tests.conftest import msg
from tests.scripted_chat import Call, ScriptedChatModel, Seen


@pytest.mark.parametrize(
    "text",
    [
        "What is my daughter's name?",
        "When is my wife's birthday?",
        "Which hotel did I book in Lisbon?",
        "How old is my son?",
        "Thanks. And what's my employee ID?",
        "我女儿叫什么名字？",
        "我住在哪个城市？",
        "女儿叫什么名字？",  # Chinese drops "my" before family
        "Wie lautet mein WLAN-Passwort?",
        "Wann hat meine Mutter Geburtstag?",
        "私の血液型は何ですか？",
    ],
)
def test_questions_about_the_users_own_life(text: str) -> None:
    assert asks_for_own_fact(text)


@pytest.mark.parametrize(
    "text",
    [
        "How can I improve my sleep?",
        "What should I cook for my kids tonight?",
        "Can you suggest a name for my new puppy?",
        "What's a good birthday gift for my wife?",
        "Which exercises help my back pain?",
        "我怎么才能提高我的英语口语？",
        "我在想给妈妈买什么生日礼物。",
        "Wie kann ich meine Wohnung energiesparender machen?",
        "What is the capital of Australia?",
        "My daughter's name is Eva.",
        "Hi!",
    ],
)
def test_advice_general_questions_and_statements_are_not(text: str) -> None:
    assert not asks_for_own_fact(text)


@pytest.mark.parametrize(
    "text",
    [
        "What is wrong with my code?\n```python\ndef add(a, b):\n    return a - b\n```",
        "What is the time complexity of my function? def f(n): return sum(range(n))",
        "What language is my code written in? print('hi')",
        "How many calories are in my lunch: a banana and two eggs?",
        "Which of my two options is cheaper: renting at 900 a month or buying at 200k?",
        "What is my BMI if I'm 180 cm and 80 kg?",
        "What is 15% of my salary?",
        "My flight lands at 14:05 and the train leaves at 15:00. How long is my transfer?",
        "What's wrong with my essay? It's about climate change and it's too long.",
    ],
)
def test_a_question_that_brings_what_it_asks_about_asks_no_remembered_fact(text: str) -> None:
    """The starter answered 11 of 12 such questions "I don't know: I can't find it…"."""
    assert not asks_for_own_fact(text)


@pytest.mark.parametrize(
    "text",
    [
        "What did I buy on 5 March 2023?",
        "Where did I redeem a $5 coupon on coffee creamer?",
        "Which hotel did I book for the 12th?",
        "What time is my 3 pm meeting on 14 May?",
        "How much faster did I finish the 5K run compared to my previous year's time?",
        "What did I pay (in euros) for my bike?",
        "What is my right shoe size?",
    ],
)
def test_a_date_or_one_number_still_asks_for_a_remembered_fact(text: str) -> None:
    assert asks_for_own_fact(text)
    assert not brings_its_own(text)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("What is my daughter's name?", "en"),
        ("我女儿叫什么名字？", "zh"),
        ("私の血液型は何ですか？", "ja"),
        ("Wo arbeitet mein Bruder?", "de"),
        ("Where is Wo Hop restaurant?", "en"),
    ],
)
def test_the_example_follows_the_message_language(text: str, language: str) -> None:
    assert language_of(text) == language


def test_the_window_may_already_answer() -> None:
    told = msg("user", "My daughter is called Eva.", 1)
    asked = msg("user", "What is my daughter's name?", 3)
    assert window_may_answer(["daughter", "name"], [told, msg("assistant", "Nice!", 2), asked])
    assert not window_may_answer(["daughter", "name"], [asked])
    assert not window_may_answer(["daughter"], [msg("assistant", "Your daughter?", 1), asked])


# -- in a turn -------------------------------------------------------------------------------
def _registry() -> ToolRegistry:
    async def found(_args: dict[str, Any]) -> str:
        return 'From session s1:\n- 2026-03-01 10:00, the user said: "Eva is 7." (match)'

    empty = {"type": "object", "properties": {"query": {"type": "string"}}}
    return ToolRegistry([Tool("search_chat_history", "search", empty, found)])


def _run(
    store: MemoryStore,
    script: list[list[object]],
    texts: list[str],
    *,
    small: bool = True,
    model_type: type[ScriptedChatModel] = ScriptedChatModel,
) -> tuple[ScriptedChatModel, TurnResult, Agent, str]:
    sid = store.create_session("t")
    model = model_type(script)
    storage = Storage()
    try:
        agent = Agent(storage, store, model, _registry(), config=AgentConfig(small_model=small))
        result = TurnResult(sid)
        for text in texts:
            result = asyncio.run(agent.run_turn(sid, text))
    finally:
        storage.close()
    return model, result, agent, sid


def _example_in(messages: list[Any]) -> bool:
    return messages[1:5] == example_messages(EXAMPLES["en"])


def test_an_unknown_fact_gets_the_example_and_the_context_tab_shows_it(
    store: MemoryStore,
) -> None:
    model, result, agent, sid = _run(store, [["I don't know."]], ["What is my daughter's name?"])
    assert result.not_remembered
    sent = model.seen[0].messages
    assert _example_in(sent)
    assert sent[-1] == {"role": "user", "content": "What is my daughter's name?"}
    storage = Storage()
    try:
        agent.storage = storage
        shown = asyncio.run(agent.context_messages(sid))
    finally:
        storage.close()
    assert _example_in(shown)  # the Context tab: exactly as sent
    assert recalls_for(store, sid, store.history(sid).messages) == {}  # no "found 0" chip
    (line,) = [e for e in load_timeline(store, sid) if e.kind == "recall"]
    assert "Nothing remembered" in line.text


def test_chinese_question_gets_the_chinese_example(store: MemoryStore) -> None:
    """Nothing found, in Chinese or translated (the first call translates)."""
    script: list[list[object]] = [["Which city do I live in?"], ["我不知道。"]]
    model, result, _agent, _sid = _run(store, script, ["我住在哪个城市？"])
    assert result.searched_as == "Which city do I live in?"
    assert model.seen[1].messages[1:5] == example_messages(EXAMPLES["zh"])


def test_a_question_in_another_language_finds_what_was_told_in_english(
    store: MemoryStore,
) -> None:
    earlier = store.create_session("earlier")
    store.append(earlier, [msg("user", "My daughter's name is Eva, she turns 7 in March.", 1)])
    script: list[list[object]] = [["What is my daughter's name?"], ["她叫Eva。"]]
    model, result, _agent, sid = _run(store, script, ["我女儿叫什么名字？"])
    assert model.seen[0].messages[-1] == {"role": "user", "content": "我女儿叫什么名字？"}
    assert model.seen[0].tools is None  # the translation call
    assert "name is Eva" in result.recall_text
    assert result.recall_text.startswith(BLOCK_HEADERS["zh"])  # the header follows the message
    assert not result.not_remembered
    (line,) = [e for e in load_timeline(store, sid) if e.kind == "recall"]
    assert "What is my daughter's name?" in line.text


def test_an_answer_instead_of_a_translation_is_not_searched(store: MemoryStore) -> None:
    script: list[list[object]] = [["我女儿叫小明。"], ["我不知道。"]]
    _model, result, _agent, _sid = _run(store, script, ["我女儿叫什么名字？"])
    assert result.searched_as == ""
    assert result.not_remembered


def test_english_questions_and_statements_are_not_translated(store: MemoryStore) -> None:
    model, _result, _agent, _sid = _run(store, [["I don't know."]], ["What is my son's name?"])
    assert len(model.seen) == 1
    model, _result, _agent, _sid = _run(store, [["好的。"]], ["我女儿叫Eva。"])
    assert len(model.seen) == 1


def test_no_example_when_the_window_holds_the_answer(store: MemoryStore) -> None:
    model, result, _agent, _sid = _run(
        store, [["Nice!"], ["Eva."]], ["My daughter is called Eva.", "What is my daughter's name?"]
    )
    assert not result.not_remembered
    assert not _example_in(model.seen[-1].messages)


def test_no_example_once_the_search_found_something(store: MemoryStore) -> None:
    script: list[list[object]] = [[Call("search_chat_history", {"query": "daughter"})], ["7."]]
    model, _result, _agent, _sid = _run(store, script, ["What is my daughter's age?"])
    assert _example_in(model.seen[0].messages)
    assert not _example_in(model.seen[1].messages)
    assert any("Eva is 7." in str(m.get("content")) for m in model.seen[1].messages)


def test_no_example_for_advice_or_a_capable_model(store: MemoryStore) -> None:
    model, result, _agent, _sid = _run(store, [["Sleep more."]], ["How can I improve my sleep?"])
    assert not result.not_remembered
    model, result, _agent, _sid = _run(
        store, [["I don't know."]], ["What is my daughter's name?"], small=False
    )
    assert not result.not_remembered
    assert not _example_in(model.seen[0].messages)


def test_no_example_when_recall_found_something(store: MemoryStore) -> None:
    earlier = store.create_session("earlier")
    store.append(earlier, [msg("user", "My daughter's name is Eva and she is seven.", 1)])
    model, result, _agent, _sid = _run(store, [["Eva."]], ["What is my daughter's name?"])
    assert result.recall_text
    assert not result.not_remembered
    assert not _example_in(model.seen[0].messages)


class _TranslationFails(ScriptedChatModel):
    """Fails the first call (the translation), then follows its script."""

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        if not self.seen:
            self.seen.append(Seen(list(messages), None))
            raise RuntimeError("model crashed")
        return super().chat(messages, **kwargs)


def test_a_failed_translation_leaves_the_answer_to_the_turn(store: MemoryStore) -> None:
    _model, result, _agent, _sid = _run(
        store, [["我不知道。"]], ["我住在哪个城市？"], model_type=_TranslationFails
    )
    assert result.answer == "我不知道。"
    assert result.searched_as == ""
    assert result.not_remembered


def test_an_english_question_finds_what_was_told_in_chinese(store: MemoryStore) -> None:
    """The archive holds Chinese, so the English question is also searched in Chinese."""
    earlier = store.create_session("earlier")
    store.append(earlier, [msg("user", "我女儿叫Eva，三月满七岁。", 1)])
    script: list[list[object]] = [["我女儿叫什么名字？"], ["Her name is Eva."]]
    model, result, _agent, sid = _run(store, script, ["What is my daughter's name?"])
    assert (
        model.seen[0]
        .messages[0]["content"]
        .endswith("into Chinese word for word. You never answer them.")
    )
    assert result.searched_as == "我女儿叫什么名字？"
    assert result.searched_in == "zh"
    assert "我女儿叫Eva" in result.recall_text
    assert not result.not_remembered
    (line,) = [e for e in load_timeline(store, sid) if e.kind == "recall"]
    assert "searched in Chinese too" in line.text


def test_an_english_archive_is_not_searched_in_another_language(store: MemoryStore) -> None:
    earlier = store.create_session("earlier")
    store.append(earlier, [msg("user", "We went hiking in the Alps last summer.", 1)])
    model, result, _agent, _sid = _run(store, [["I don't know."]], ["What is my son's name?"])
    assert len(model.seen) == 1
    assert result.searched_as == ""


def test_weak_recall_is_left_alone(store: MemoryStore) -> None:
    """A recall block of weak evidence (a line that shares some of the question's words)
    gets no exchange: beside a block, the starter said "I don't know" to facts in it."""
    earlier = store.create_session("earlier")
    store.append(earlier, [msg("user", "My daughter has piano lessons on Fridays.", 1)])
    _model, result, _agent, _sid = _run(
        store, [["Fridays."]], ["When is my daughter's piano recital?"]
    )
    assert result.recall_text
    assert not result.not_remembered
