"""What a message does, sentence by sentence: tell, ask or request.

Two decisions hang on it.  Proactive recall shows the model only what the
user *stated* before (a remembered question holds no fact), and a small
model gets no tools for a message that only tells something: "I have a
dentist appointment tomorrow morning." offered the clock (because of
"tomorrow") and the 0.5B starter called it twice and answered with the
time; "I locked myself out of the house again." offered the history search
(because of "again") and it searched 16 times (benchmarks/statement_echo.py).

The rules are plain word lists, one set per language (``speech`` in
``agenvoy_desktop/language/data``), and err towards "asks": a question read
as a statement loses its tools, a statement read as a question only keeps
today's behaviour.  A sentence asks
or requests when it

- ends with a question mark, or starts like a question ("what", "how",
  "is", "do", "wie", "kannst" …), or carries a CJK question word or final
  particle (什么, 多少, 吗, か …);
- starts with a request ("please", "can you", "bitte", 请, 帮我 …) or an
  imperative verb ("read", "list", "explain", "lies", "zeig", 查, 列出 …).

"Remember, my shoe size is 44." and "Note to self: …" tell: saying a fact
is not asking for a tool.  A "please" inside a sentence does not make it a
request ("I'm allergic to kiwi, so please keep that in mind.").
"""

from __future__ import annotations

import re

from agenvoy_desktop.language.openings import cjk_lead, sentence_lead
from agenvoy_desktop.language.patterns import (
    alternatives,
    compiled,
    either,
    every,
    group,
    spaced,
    unspaced,
)

_NOT_AN_END = "".join(rf"(?<!\b{re.escape(word)})" for word in every("speech.abbreviations"))
_SENTENCE_END = re.compile(rf"{_NOT_AN_END}(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")
"""After . ! ? only before a space ("todo.txt" is one word), after 。！？ always; never after
a title or an abbreviation ("my teacher is Mrs. Okonkwo." is one sentence: cut after "Mrs.",
a quote of the sentence holding "teacher" lost the name)."""
SENTENCE_LEAD = sentence_lead()
"""A sentence's opening before its first real word: quotes, "and", "so", "well", "und"…"""
_QUESTION_START = compiled(
    group(SENTENCE_LEAD, spaced("speech.question_openings"), r"\b"), re.IGNORECASE
)
_REQUEST_START = compiled(
    group(SENTENCE_LEAD, spaced("speech.request_openings"), r"\b"), re.IGNORECASE
)
_CJK_ASK = compiled(
    either(
        alternatives(unspaced("speech.question_words")),
        group("", unspaced("speech.question_endings"), r"[\s。！!.]*$"),
    )
)
_CJK_REQUEST = compiled(
    either(
        group(cjk_lead(), unspaced("speech.request_openings")),
        alternatives(unspaced("speech.request_words")),
    )
)


def sentences(text: str) -> list[str]:
    """The message's sentences (split after . ! ? and their CJK forms, and at line breaks)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def asks_or_requests(sentence: str) -> bool:
    """The sentence asks a question or asks for something to be done."""
    return asks(sentence) or requests(sentence)


def asks(sentence: str) -> bool:
    """The sentence asks a question: a question mark, a question's opening or word."""
    if sentence.endswith(("?", "？")):
        return True
    return bool(_QUESTION_START.search(sentence) or _CJK_ASK.search(sentence))


def requests(sentence: str) -> bool:
    """The sentence asks for something to be done ("please", "can you", an imperative)."""
    return bool(_REQUEST_START.search(sentence) or _CJK_REQUEST.search(sentence))


def only_tells(text: str) -> bool:
    """Every sentence of the message tells something; none asks or requests."""
    parts = sentences(text)
    return bool(parts) and not any(asks_or_requests(s) for s in parts)


def tells_something(text: str) -> bool:
    """At least one sentence of the message tells something."""
    return any(not asks_or_requests(s) for s in sentences(text))
