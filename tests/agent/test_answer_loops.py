"""answer_loops: a small model's answer that starts over ends where it does, in the turn."""

from __future__ import annotations

import asyncio

from agenvoy_desktop.agent.answer_loops import LoopWatch, loop_start
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, TurnEvent, TurnResult
from agenvoy_desktop.core.store import MemoryStore
from tests.scripted_chat import ScriptedChatModel

STORY = [
    "Mira lived in a lighthouse at the end of a long grey pier, and every night she "
    "climbed the stairs to light the lamp for the fishing boats.",
    "One winter the lamp went out during a storm, and Mira had to find a way to bring "
    "the light back before the boats came home.",
    "She decided to face the storm with courage and determination, but it was not easy "
    "for a small girl alone on the pier.",
    "As she continued up the stairs of the old lighthouse, Mira found that nobody could "
    "help her bring the light back to the boats.",
]
LOOP = [
    "She decided to face the storm with courage and determination once again, but it "
    "was not easy for a small girl alone.",
    "As she continued up the stairs of the old lighthouse, Mira found that nobody could "
    "help her bring the light back home.",
    "She decided to face the storm with courage and determination once more, but it was "
    "not easy for a small girl alone on the pier.",
]


def paragraphs(parts: list[str]) -> str:
    return "\n\n".join(parts) + "\n\n"


def test_a_story_that_starts_over_is_cut_where_it_does() -> None:
    text = paragraphs(STORY + LOOP)
    cut = loop_start(text)
    assert cut is not None
    assert text[:cut].rstrip().endswith(STORY[-1])
    assert loop_start(paragraphs(STORY)) is None


def test_streaming_finds_the_same_place_as_the_whole_text() -> None:
    text = paragraphs(STORY + LOOP)
    watch = LoopWatch()
    found = [c for i in range(0, len(text), 5) if (c := watch.feed(text[i : i + 5])) is not None]
    assert found == [loop_start(text)]  # reported once


def test_refrains_lists_code_and_short_lines_are_left_alone() -> None:
    chorus = "Oh the sea, the sea,\nit calls me home to thee,\nacross the waves so free,\n"
    verse = "I walked along the shore,\nI heard the ocean roar,\nI could not ask for more,\n"
    song = paragraphs([verse, chorus, verse.replace("walked", "ran"), chorus, chorus])
    assert loop_start(song) is None
    days = "- Day 1: write small Python functions\n- Day 2: write small Python functions again\n"
    plan = paragraphs([days + "- Day 3: rest", days + "- Day 3: test them"])
    assert loop_start(plan) is None
    block = (
        "```python\ndef add(a, b):\n    return a + b  # add the two numbers and return them\n```"
    )
    assert loop_start(paragraphs([block, block, block])) is None
    assert loop_start(paragraphs(["Thank you so much!"] * 5)) is None  # too short to judge


def test_chinese_is_not_measured() -> None:
    line = "她决定鼓起勇气面对黑暗，但这并不容易，因为她只是一个小女孩。"
    assert loop_start(paragraphs([line] * 4)) is None


def _run(script: list[list[object]], *, small: bool, store: MemoryStore) -> list[TurnEvent]:
    sid = store.create_session("t")
    events: list[TurnEvent] = []
    storage = Storage()
    try:
        agent = Agent(
            storage,
            store,
            ScriptedChatModel(script),
            ToolRegistry([]),
            config=AgentConfig(small_model=small),
        )
        asyncio.run(agent.run_turn(sid, "Tell me a long story.", on_event=events.append))
    finally:
        storage.close()
    return events


def _streamed(parts: list[str]) -> list[object]:
    """The story as a model streams it: a few words at a time."""
    text = paragraphs(parts)
    return [text[i : i + 12] for i in range(0, len(text), 12)]


def test_the_turn_ends_a_small_models_loop_and_keeps_the_story(store: MemoryStore) -> None:
    events = _run([_streamed(STORY + LOOP + STORY)], small=True, store=store)
    result = events[-1]
    assert isinstance(result, TurnResult)
    assert result.ended_at_loop
    assert not result.interrupted
    assert result.answer == paragraphs(STORY).rstrip()
    saved = store.history(result.session_id).messages[-1]
    assert saved.content == result.answer
    assert not saved.extra.get("interrupted")


def test_a_capable_model_is_not_cut(store: MemoryStore) -> None:
    events = _run([_streamed(STORY + LOOP)], small=False, store=store)
    result = events[-1]
    assert isinstance(result, TurnResult)
    assert not result.ended_at_loop
    assert result.answer == paragraphs(STORY + LOOP)
