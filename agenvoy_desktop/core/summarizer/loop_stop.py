"""Ending a summary answer whose list of discussions starts going round in circles.

A small model that has said what the messages hold often keeps filling the
answer's last list: the 0.5B starter wrote the same discussion ("Dance
Studio: I've been into dancing since I was a child…") five times in a row,
a third of its answer, and every copy costs decoding time before the
summary drops it again.  The engine shows this module the answer after each
token that closes a JSON object (``complete_json``'s ``stop_when``); once a
discussion repeats an earlier one, the answer is ended before it.

The engine writes the answer's fields in the schema's order, sorted by
name, so ``past_discussions`` is the last one and closing it (``]}``)
finishes the answer; where it is not last (another model's order) the
answer goes on, and a repeat inside an earlier list is left to
``summary.without_repeats`` and ``summary.one_per_topic``.

A discussion repeats an earlier one when it says the same (most of its
content terms) or files itself under the same topic: the starter's loops
keep the topic and quote another line of the transcript each time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.core.summary import SUMMARY_SCHEMA, terms, topic_key

LAST_LIST = "past_discussions"
FIELDS = frozenset(SUMMARY_SCHEMA["required"])
REPEAT_SHARE = 0.8
"""A discussion whose content terms are this share or more of an earlier one's is a repeat."""
SAME_TOPIC = True
"""A discussion under an earlier one's topic is a repeat too; benchmarks switch it."""
_LIST_START = re.compile(rf'"{LAST_LIST}"\s*:\s*\[\s*')
_DECODER = json.JSONDecoder(strict=False)


@dataclass(slots=True)
class LoopStop:
    """The ``stop_when`` check for one summary answer; remembers what it cut."""

    repeated: list[str] = field(default_factory=list)
    """The topic of the discussion the answer was ended before (at most one)."""

    def __call__(self, answer: str) -> str | None:
        """*answer* ended before its first repeated discussion, or None to go on."""
        found = _first_repeat(answer)
        if found is None:
            return None
        end, topic = found
        finished = answer[:end].rstrip().rstrip(",").rstrip() + "]}"
        try:
            value = json.loads(finished, strict=False)
        except ValueError:
            return None
        if not isinstance(value, dict) or set(value) != FIELDS:
            return None  # the list was not the answer's last field
        self.repeated.append(topic)
        return finished


def _first_repeat(answer: str) -> tuple[int, str] | None:
    """Where the first discussion that repeats an earlier one starts, and its topic."""
    match = _LIST_START.search(answer)
    if match is None or not _top_level(answer, match.start()):
        return None
    seen: list[set[str]] = []
    topics: set[str] = set()
    position = match.end()
    while True:
        try:
            item, end = _DECODER.raw_decode(answer, position)
        except ValueError:
            return None  # the next item is not complete yet
        if not isinstance(item, dict):
            return None
        words = terms(_text(item))
        topic = topic_key(str(item.get("topic", "")))
        if seen and words and any(_repeats(words, earlier) for earlier in seen):
            return position, str(item.get("topic", ""))
        if SAME_TOPIC and topic and topic in topics:
            return position, str(item.get("topic", ""))
        seen.append(words)
        topics.add(topic)
        rest = answer[end:].lstrip()
        if not rest.startswith(","):
            return None
        position = len(answer) - len(rest[1:].lstrip())


def _top_level(answer: str, key_at: int) -> bool:
    """Whether the key at *key_at* is a field of the answer (not text inside a string)."""
    head = answer[:key_at].rstrip().rstrip(",")
    try:
        value = json.loads(head + "}", strict=False)
    except ValueError:
        return False
    return isinstance(value, dict)


def _text(item: dict[str, Any]) -> str:
    return f"{item.get('topic', '')} {item.get('description', '')}"


def _repeats(words: set[str], earlier: set[str]) -> bool:
    return len(words & earlier) >= REPEAT_SHARE * len(words)
