"""What travels to a chat server: the turn note folded into the user's message."""

from __future__ import annotations

import json

from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.llm.openai_wire import notes_in_user_turns, wire_messages

HEAD: ChatMessage = {"role": "system", "content": "Be brief."}
NOTE: ChatMessage = {"role": "system", "content": "What the user told you before:\n- Lena"}
CALL = {"id": "c1", "type": "function", "function": {"name": "now", "arguments": {}}}


def test_a_note_goes_into_the_user_message_after_it() -> None:
    messages: list[ChatMessage] = [
        HEAD,
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        NOTE,
        {"role": "user", "content": "Who is my sister?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": "10:00", "tool_call_id": "c1"},
    ]
    wire = wire_messages(messages)
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert wire[0] == HEAD  # the head stays a system message
    assert wire[3]["content"] == "What the user told you before:\n- Lena\n\nWho is my sister?"
    assert json.loads(wire[4]["tool_calls"][0]["function"]["arguments"]) == {}
    assert messages[4]["content"] == "Who is my sister?"  # the caller's list is not modified


def test_leading_system_messages_and_a_note_without_a_question_stay() -> None:
    assert notes_in_user_turns([HEAD, NOTE]) == [HEAD, NOTE]
    ending: list[ChatMessage] = [HEAD, {"role": "user", "content": "hi"}, NOTE]
    assert notes_in_user_turns(ending) == ending
    assert notes_in_user_turns([]) == []
