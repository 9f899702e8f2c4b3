"""What a message does, sentence by sentence: tell, ask or request.

Two decisions hang on it.  Proactive recall shows the model only what the
user *stated* before (a remembered question holds no fact), and a small
model gets no tools for a message that only tells something: "I have a
dentist appointment tomorrow morning." offered the clock (because of
"tomorrow") and the 0.5B starter called it twice and answered with the
time; "I locked myself out of the house again." offered the history search
(because of "again") and it searched 16 times (benchmarks/statement_echo.py).

The rules are plain word lists in English, German, Chinese and Japanese and
err towards "asks": a question read as a statement loses its tools, a
statement read as a question only keeps today's behaviour.  A sentence asks
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


def word_alternatives(text: str) -> str:
    """A regex alternation of the space-separated words of *text*, each escaped."""
    return "|".join(re.escape(w) for w in text.split())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")
"""After . ! ? only before a space ("todo.txt" is one word), after 。！？ always."""
SENTENCE_LEAD = r"^[\s\"'„“(]*(?:(?:and|also|so|but|now|then|ok|okay|oh|well|hey|und|na)[\s,]+)*"
"""A sentence's opening before its first real word: quotes, "and", "so", "well", "und"…"""
_QUESTION_START = re.compile(
    SENTENCE_LEAD
    + r"(?:"
    + word_alternatives(
        "what what's whats which where where's when who who's whom whose why how how's "
        "is isn't are aren't am was wasn't were do does did don't doesn't didn't "
        "can can't could would will won't should shall may might have has had "
        "wer wie wo woher wohin wann warum wieso weshalb welche welcher welches welchen "
        "kannst kann könntest können hast habe hat bist ist sind gibt weißt"
    )
    + r")\b",
    re.IGNORECASE,
)
_REQUEST_START = re.compile(
    SENTENCE_LEAD
    + r"(?:(?:"
    + word_alternatives(
        "please pls plz bitte list read show give find search look open explain suggest "
        "summarize summarise translate compare describe calculate compute convert draft "
        "write fix create plan check tell help remind count sort make add delete remove "
        "rename move copy save "
        "lies zeig zeige such suche finde erkläre erklär schreib schreibe gib mach hilf "
        "öffne prüfe übersetze nenne liste"
    )
    + r")\b|(?:could|would|will|can)\s+you\b|(?:kannst|könntest)\s+du\b)",
    re.IGNORECASE,
)
_CJK_ASK = re.compile(
    r"[吗嗎呢][\s。！!.]*$|什么|什麼|哪|多少|几|幾|谁|誰|怎么|怎麼|为什么|為什麼|是否|有没有|有沒有"
    r"|か[\s。！!.]*$|何|どこ|いつ|どう"
)
_CJK_REQUEST = re.compile(
    r"^[\s「『]*(?:请|請|帮我|幫我|给我|給我|告诉我|告訴我|麻烦|麻煩|查|找|读|讀|打开|打開|列出|写|寫"
    r"|翻译|翻譯|看看|解释|解釋|总结|總結|计算|計算)|ください|て下さい"
)


def sentences(text: str) -> list[str]:
    """The message's sentences (split after . ! ? and their CJK forms, and at line breaks)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def asks_or_requests(sentence: str) -> bool:
    """The sentence asks a question or asks for something to be done."""
    if sentence.endswith(("?", "？")):
        return True
    return any(
        pattern.search(sentence)
        for pattern in (_QUESTION_START, _REQUEST_START, _CJK_ASK, _CJK_REQUEST)
    )


def only_tells(text: str) -> bool:
    """Every sentence of the message tells something; none asks or requests."""
    parts = sentences(text)
    return bool(parts) and not any(asks_or_requests(s) for s in parts)


def tells_something(text: str) -> bool:
    """At least one sentence of the message tells something."""
    return any(not asks_or_requests(s) for s in sentences(text))
