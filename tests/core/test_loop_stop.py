"""Ending a summary answer at its first repeated discussion (core/summarizer/loop_stop.py)."""

from __future__ import annotations

import json

from agenvoy_desktop.core.summarizer.loop_stop import LoopStop


def discussion(topic: str, description: str) -> dict[str, str]:
    return {"description": description, "last_discussed": "2023-01-20", "topic": topic}


def answer(*discussions: dict[str, str], current: str = "Dancing.") -> str:
    """An answer as the engine writes it: fields in the schema's (sorted) order."""
    return json.dumps(
        {"current_discussion": current, "key_decisions": [], "past_discussions": list(discussions)}
    )


KID = discussion("Dance Studio", "I've been into dancing since I was a kid; it's my escape.")
CHILD = discussion("Dance Studio", "I've been into dancing since I was a child and it's my escape")
POLITICS = discussion("Politics", "John wants to get into local politics.")


def test_the_answer_ends_before_the_first_repeat() -> None:
    """The starter's loop: the same discussion again with a word changed."""
    stop = LoopStop()
    text = answer(KID, POLITICS, CHILD, CHILD, CHILD)
    ended = stop(text)
    assert ended is not None
    assert json.loads(ended)["past_discussions"] == [KID, POLITICS]
    assert stop.repeated == ["Dance Studio"]


def test_as_the_engine_asks_it_stops_at_the_repeat_as_soon_as_it_is_whole() -> None:
    stop = LoopStop()
    text = answer(KID, CHILD, POLITICS)
    asked = [text[: i + 1] for i, char in enumerate(text) if char == "}"]
    results = [stop(prefix) for prefix in asked]
    assert results[:1] == [None]  # the first discussion alone repeats nothing
    first = next(i for i, r in enumerate(results) if r is not None)
    assert asked[first].endswith(json.dumps(CHILD))  # decided when the repeat closed
    assert json.loads(results[first] or "")["past_discussions"] == [KID]


def test_a_topic_listed_again_with_another_quote_is_a_repeat() -> None:
    """The starter's other loop: one topic, a different transcript line each time."""
    stop = LoopStop()
    first = discussion("Pet training", "Andrew: Cool! Positive reinforcement can really help.")
    again = discussion("pet-training", "Keep me updated on their progress.")
    ended = stop(answer(first, POLITICS, again, again))
    assert ended is not None
    assert json.loads(ended)["past_discussions"] == [first, POLITICS]
    assert stop.repeated == ["pet-training"]


def test_different_discussions_go_on() -> None:
    stop = LoopStop()
    other = discussion("Studio rent", "Looking at rents for a studio space downtown in March.")
    assert stop(answer(KID, POLITICS, other)) is None
    assert stop(answer(KID)) is None
    assert stop.repeated == []


def test_an_unfinished_answer_or_a_key_inside_text_is_left_alone() -> None:
    stop = LoopStop()
    text = answer(KID, CHILD)
    assert stop(text[: text.rindex("{") + 5]) is None  # the second discussion not closed yet
    inside = '{"current_discussion": "about \\"past_discussions\\": [{\\"topic\\": 1}]"'
    assert stop(inside + "}") is None
    assert stop("not json at all }") is None
    unsorted = json.dumps({"past_discussions": [KID, CHILD], "current_discussion": "x"})
    assert stop(unsorted) is None  # ending the list would lose the field after it
