"""The prompt layout: what changes every turn (the turn note) sits before the last user message."""

from __future__ import annotations

from agenvoy_desktop.agent.context import (
    build_messages,
    local_time_line,
    system_message,
    tool_results_note,
    turn_note,
    turn_note_index,
)
from agenvoy_desktop.agent.not_remembered import EXAMPLES, example_messages
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from tests.conftest import SECOND, T0, conversation, msg

BASE = "You are a test."
SUMMARY = "- the user likes tea"
RECALL = "What the user told you before:\n- My sister Lena lives in Graz."
HEAD: ChatMessage = {
    "role": "system",
    "content": f"{BASE}\n\nSummary of the earlier conversation:\n{SUMMARY}",
}
NOW = local_time_line(T0)


def build(window: list[Message], **kwargs: object) -> list[ChatMessage]:
    return build_messages(
        base_prompt=BASE,
        summary_text=SUMMARY,
        window=window,
        now_ns=T0,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_note_sits_before_the_last_user_message() -> None:
    window = conversation(["hi", "hello", "Where does my sister live?"])
    assert build(window, recall=RECALL) == [
        HEAD,
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": f"{NOW}\n\n{RECALL}"},
        {"role": "user", "content": "Where does my sister live?"},
    ]


def test_only_the_note_and_what_follows_change_between_turns() -> None:
    """Two turns with different recall blocks share everything before the note."""
    window = conversation(["a", "b", "c", "d", "e"])
    first = build(window[:3], recall="- one")
    second = build(window, recall="- two")
    assert second[:3] == first[:3]  # head and the first exchange: the cached prefix
    assert [m["role"] for m in second[3:]] == ["user", "assistant", "system", "user"]


def test_a_tool_round_keeps_the_calls_after_the_question() -> None:
    window = conversation(["hi", "hello", "what time is it?"])
    call = msg("assistant", "", T0 + 3 * SECOND, tool_calls=[{"id": "c1", "name": "now"}])
    result = msg("tool", "10:00", T0 + 4 * SECOND, tool_call_id="c1", name="now")
    round_two = build([*window, call, result], clock="none", recall=RECALL)
    assert [m["role"] for m in round_two] == [
        "system",
        "user",
        "assistant",
        "system",
        "user",
        "assistant",
        "tool",
    ]
    assert round_two[3]["content"] == RECALL
    # the answer round: the results move into the note, between the clock and the recall block
    notes = tool_results_note([call, result])
    answer = build(window, extra_system=notes, recall=RECALL)
    assert answer[3] == {"role": "system", "content": f"{NOW}\n\n{notes}\n\n{RECALL}"}
    assert answer[-1] == {"role": "user", "content": "what time is it?"}


def test_a_call_to_a_tool_that_does_not_exist_leaves_nothing_to_answer_from() -> None:
    """The starter answered with the inlined error itself; such results stay out."""
    call = msg("assistant", "", T0, tool_calls=[{"id": "c1", "name": "theme_park_weekend"}])
    error = msg(
        "tool",
        "unknown tool 'theme_park_weekend'; available tools: current_time",
        T0 + SECOND,
        tool_call_id="c1",
        name="theme_park_weekend",
        is_error=True,
    )
    assert tool_results_note([call, error]) == ""
    clock = msg("tool", "10:00", T0 + 2 * SECOND, tool_call_id="c2", name="current_time")
    assert "theme_park_weekend" not in tool_results_note([call, error, clock])
    assert "10:00" in tool_results_note([call, error, clock])


def test_a_new_session_reads_one_system_prompt_as_before() -> None:
    """Nothing before the question: base, time, results, recall, question, as one message."""
    question = conversation(["Where does my sister live?"])
    sent = build(question, extra_system="Results: none", recall=RECALL)
    single = system_message(BASE, SUMMARY, T0, "Results: none", recall=RECALL)
    assert sent == [single, {"role": "user", "content": "Where does my sister live?"}]
    assert single["content"] == f"{HEAD['content']}\n\n{NOW}\n\nResults: none\n\n{RECALL}"
    assert turn_note_index(sent) is None


def test_no_note_when_nothing_changes() -> None:
    window = conversation(["hi", "hello", "how are you?"])
    sent = build(window, clock="none")
    assert sent == [HEAD, *[{"role": m.role, "content": m.content} for m in window]]
    assert turn_note_index(sent) is None
    assert turn_note(T0, clock="none") == ""


def test_made_up_exchanges_stay_after_the_head() -> None:
    window = conversation(["hi", "hello", "What is my sister's name?"])
    examples = example_messages(EXAMPLES["en"])
    sent = build(window, examples=examples, clock="date")
    assert sent[1 : 1 + len(examples)] == examples
    note = turn_note_index(sent)
    assert note == len(sent) - 2
    assert sent[note]["content"].startswith("Today is ")
    # a new session with examples: one system prompt, as before
    fresh = build(window[2:], examples=examples, clock="date")
    assert fresh[1:] == [*examples, {"role": "user", "content": "What is my sister's name?"}]
    assert fresh[0]["content"].endswith(sent[note]["content"])
