"""What the user told in the conversation's window, as lines an answer may draw on.

Recall leaves the window out (the model reads those messages in the prompt
already), so a fact said a few turns back is in no recalled line.  The checks
that hold an answer to what the model was shown must count it all the same:
"What did I say my sister prefers?" two turns after "My sister prefers museums
to beaches." was answered from a weaker remembered line ("I'm planning a trip
to Lisbon … with my sister") and the right answer replaced by a quote of it,
and ``never_said`` called "prefers" a thing never told.

Only what the user *tells* counts: a question asked earlier in the window
("What is my bike lock code?") holds the question's words and no answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from agenvoy_desktop.agent.answer_check import Evidence
from agenvoy_desktop.agent.speech_act import asks_or_requests, sentences
from agenvoy_desktop.core.messages import Message


def told_in_window(window: Sequence[Message], asked_id: str) -> list[Evidence]:
    """The telling sentences of each user message of *window* but the one asked now
    (*asked_id*), a line per message, dated when it was said."""
    lines: list[Evidence] = []
    for message in window:
        if message.role != "user" or message.is_tool_traffic or message.id == asked_id:
            continue
        told = " ".join(s for s in sentences(message.content) if not asks_or_requests(s))
        if told:
            lines.append(Evidence(told, message.time_ns, "user"))
    return lines
