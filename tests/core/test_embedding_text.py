"""What is embedded for a message: date, the message it follows, parts under the model's limit."""

from __future__ import annotations

from agenvoy_desktop.core.embedding import (
    MODEL_TOKENS,
    PART_TOKENS,
    embedding_parts,
    estimate_tokens,
    split_parts,
    with_previous,
)
from tests.conftest import T0, msg

LONG = " ".join(f"Sentence number {i} talks about the garden and the roses." for i in range(120))


def test_short_message_is_one_part_with_its_context() -> None:
    before = msg("user", "Which colour did you choose for the car?", T0)
    reply = msg("assistant", "The blue one.", T0 + 1)
    assert embedding_parts(reply, before) == [
        "(after: Which colour did you choose for the car?) The blue one."
    ]
    assert embedding_parts(reply, None) == ["The blue one."]
    blank = msg("user", "  ", T0)
    assert embedding_parts(reply, blank) == ["The blue one."]


def test_long_message_is_split_into_parts_that_fit_the_model() -> None:
    parts = split_parts(LONG)
    assert len(parts) > 1
    assert all(estimate_tokens(p) <= PART_TOKENS for p in parts)
    assert " ".join(parts) == LONG  # nothing lost, nothing repeated
    texts = embedding_parts(msg("user", LONG, T0), msg("assistant", "tell me more " * 80, T0))
    assert len(texts) == len(parts)
    assert all(estimate_tokens(t) < MODEL_TOKENS - 2 for t in texts)


def test_one_endless_sentence_is_cut_between_words() -> None:
    words = " ".join(f"word{i}" for i in range(2000))
    parts = split_parts(words)
    assert len(parts) > 1
    assert " ".join(parts) == words


def test_parts_are_capped_by_growing_the_budget() -> None:
    parts = split_parts(LONG * 4, budget=20, most=8)
    assert len(parts) <= 8
    assert " ".join(parts) == LONG * 4


def test_estimate_counts_cjk_characters_and_long_words() -> None:
    assert estimate_tokens("記憶系統") == 4
    assert estimate_tokens("a b c") == 3
    assert estimate_tokens("internationalization") >= 3
    assert estimate_tokens("") == 0


def test_previous_skips_tool_traffic_and_empty_messages() -> None:
    history = [
        msg("user", "list the files", T0),
        msg("assistant", "", T0 + 1, tool_calls=[{"id": "c1", "function": {"name": "ls"}}]),
        msg("tool", "a.txt b.txt", T0 + 2, tool_call_id="c1"),
        msg("assistant", "   ", T0 + 3),
        msg("assistant", "two files", T0 + 4),
    ]
    previous = with_previous(history, [history[0].id, history[4].id])
    assert previous[history[0].id] is None
    assert previous[history[4].id] is history[0]
