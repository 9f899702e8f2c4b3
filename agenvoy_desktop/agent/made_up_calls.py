"""A small model's answer written as calls to tools it was never offered.

The starter writes its answer as a call to a made-up tool
(``{"name": "Our Lisbon plan", "arguments": {"date": …}}``); told
"unknown tool", it wrote the error back as JSON, and that became the
answer.  A round that is only such calls (:func:`answer_in_disguise`) is
dropped by the turn and the next one offers no tools, so the model answers
in words from the same context (nothing of the dropped round is stored or
shown).  A misspelt tool (``read_clock``: a snake_case name) is not a
disguise: it hears "unknown tool …; available tools: …" and may call the
right one — unless it is named after the user's own words and like no tool
offered (:func:`named_after_message`; ``theme_park_weekend`` for "I am
planning another theme park weekend…": told "unknown tool", the starter
called it again and then the clock, three rounds and 60–98 s on an AMD EPYC).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from agenvoy_desktop.core.model_api import ToolCallRequest

_TOOL_LIKE = re.compile(r"[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)+")
"""A name shaped like a tool's (``read_file``), not like words of an answer ("Sintra")."""
_NAME_PART = re.compile(r"[_.-]")
_WORD = re.compile(r"[^\W\d_]+")


def answer_in_disguise(
    text: str, calls: Sequence[ToolCallRequest], *, offered: Sequence[str], question: str
) -> bool:
    """A round that wrote nothing and only called tools not *offered*, each under a name
    shaped like no tool's, or one named after the user's *question*."""
    return not text.strip() and all(
        call.name not in offered
        and (
            not _TOOL_LIKE.fullmatch(call.name) or named_after_message(call.name, question, offered)
        )
        for call in calls
    )


def named_after_message(name: str, message: str, offered: Sequence[str]) -> bool:
    """A made-up tool *name* is the topic of the user's *message*, not a misspelt tool: at
    least half of its parts of four letters or more are words of the message, and no
    *offered* tool is spelt close to it (``search_history`` is a misspelt
    ``search_chat_history`` even when the message says "search my history")."""
    parts = [p for p in _NAME_PART.split(name.casefold()) if len(p) >= 4]
    if not parts or difflib.get_close_matches(name, offered, n=1, cutoff=0.6):
        return False
    said = {w.casefold() for w in _WORD.findall(message)}
    return 2 * sum(p in said for p in parts) >= len(parts)
