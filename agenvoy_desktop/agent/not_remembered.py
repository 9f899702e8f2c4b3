"""Saying "I don't know" when memory has nothing: a small model's answer to an unknown fact.

Asked about a fact of their life that the user never told ("What is my
daughter's name?"), the 0.5B starter invents one ("My daughter's name is
Emily.", "我女儿的名字是小明。") — the worst answer a memory-keeping assistant
can give.  Telling it not to guess does little: of 16 such questions it
admitted not knowing 1 as it was, 2 with a line saying so in the system
prompt.  Showing it works: made-up exchanges before the conversation, each
a question about a fact answered "I don't know: I can't find it in what
you've told me", and it answers that way — 10 of 16 with one English
exchange, and with two in the message's language 10 of the 11 questions
of ``benchmarks/unknown_facts.py`` that reached it (benchmarks/RESULTS.md
§11f).

So a small model's turn gets two such exchanges, in the message's
language, when all of these hold:

- the message asks for a fact of the user's own life (:func:`asks_for_own_fact`:
  "what/which/where/when/who … my/our …", 我…什么/哪/几…, "wie heißt mein…"),
  not for advice ("What should I cook for my kids?", 我怎么…);
- proactive recall put nothing in front of the model (the history search
  may still be offered; once it finds something, the exchanges are left out
  of the next round, whose prompt then holds the result);
- no earlier user message in the current window shares a content word with
  the question (the answer may be right there: "My daughter is Eva." … "What
  is my daughter's name?").

The exchanges are part of what the model was sent, so they are recorded
with the turn's recall event and the Context tab shows them, labelled as
made up.  Not shown when recall found something, even something weak:
with a recall block beside them the starter said "I don't know" to "What
is my bike lock code?" with the code in the block (planted facts answered
30 → 13 of 32).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agenvoy_desktop.agent.speech_act import SENTENCE_LEAD, asks_or_requests, sentences
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage

SHOW_EXAMPLE = True
"""Whether turns show the exchange at all (benchmarks switch it)."""
EVEN_WITH_RECALL = False
"""Show it even when recall put something in the prompt (measured, not shipped)."""
WITH_WEAK_RECALL = False
"""Show it when everything recall put in the prompt is weak evidence: no line clears
the stricter floor of a translated search (``query_translation.stricter``)."""
Example = tuple[tuple[str, str], ...]
"""The made-up exchanges: (question, answer) pairs."""

EXAMPLES: dict[str, Example] = {
    "en": (
        (
            "What is my sister's name?",
            "I don't know: I can't find it in what you've told me. Tell me, and I'll remember it.",
        ),
        ("What is my bank card PIN?", "I don't know: I can't find it in what you've told me."),
    ),
    "de": (
        (
            "Wie heißt meine Schwester?",
            "Das weiß ich nicht: Du hast es mir noch nicht gesagt. Sag es mir, dann merke ich es "
            "mir.",
        ),
        ("Wo wohnt mein Onkel?", "Das weiß ich nicht: Du hast es mir noch nicht gesagt."),
    ),
    "zh": (
        ("我姐姐叫什么名字？", "我不知道：你还没有告诉过我。告诉我，我会记住的。"),
        ("我的银行卡密码是多少？", "我不知道：你还没有告诉过我。"),
    ),
    "ja": (
        (
            "私の姉の名前は何ですか？",
            "わかりません。まだ教えてもらっていません。教えてくれれば覚えておきます。",
        ),
        ("私の車の番号は何ですか？", "わかりません。まだ教えてもらっていません。"),
    ),
}
"""Two exchanges per language: with one, the starter admitted 8 of 14 unknown facts in
Chinese, German and Japanese; with two, 12 of 14 (it copies the second, shorter answer)."""

_EN_ASK = re.compile(
    SENTENCE_LEAD
    + r"(?:(?:at|in|on|from|to|with|for|by|since|until)\s+)?"  # "At which university did I…"
    + r"(?:what|what's|whats|which|where|where's|when|when's|who|who's|whose"
    r"|how\s+(?:old|many|much|long|tall|big))\b",
    re.IGNORECASE,
)
_EN_OWN = re.compile(
    r"\b(?:my|our|mine|ours)\b|\b(?:am|do|did|was|were|have|had)\s+(?:i|we)\b", re.IGNORECASE
)
_EN_ADVICE = re.compile(
    r"\b(?:should|could|would|can|might|recommend|suggest|idea|ideas|tip|tips|good|best|"
    r"better|way|ways|gift|need|think|mean|means|help|helps)\b",
    re.IGNORECASE,
)
_DE_ASK = re.compile(
    SENTENCE_LEAD + r"(?:wie\s+(?:heißt|heisst|lautet|alt|viele|viel|lange)|wann|wo|was|wer|wessen"
    r"|welche|welcher|welches|welchen|welchem)\b",
    re.IGNORECASE,
)
_DE_OWN = re.compile(r"\b(?:mein\w*|unser\w*|ich|wir)\b", re.IGNORECASE)
_DE_ADVICE = re.compile(
    r"\b(?:soll|sollte|sollten|könnte|könnten|kann|kannst|empfiehlst|empfehlen|tipp|tipps|"
    r"idee|ideen|gut|gute|guter|gutes|beste|besten|besser)\b",
    re.IGNORECASE,
)
_ZH_OWN = re.compile(
    "我|女儿|女兒|儿子|兒子|老婆|老公|妻子|丈夫|太太|妈妈|媽媽|爸爸|孩子|哥哥|姐姐|弟弟|妹妹"
)
"""Chinese drops "my" before family: 女儿叫什么名字？ is "what is my daughter's name?"."""
_ZH_ASK = re.compile("什么|什麼|多少|多大|哪|几|幾|谁|誰")
_ZH_ADVICE = re.compile(
    "怎么|怎麼|如何|建议|建議|推荐|推薦|应该|應該|可以|能不能|帮我|幫我|该|該|为什么|為什麼|礼物|禮物"
)
_JA_OWN = re.compile("私|僕|俺|わたし|うち|自分")
_JA_ASK = re.compile("何|いつ|どこ|誰|いくつ|いくら|どれ|どの")
_JA_ADVICE = re.compile("どうすれば|どうしたら|おすすめ|べき|方法|なぜ")
_KANA = re.compile("[\u3040-\u30ff]")
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_GERMAN = re.compile(
    r"\b(?:ich|mein\w*|unser\w*|wie|wo|wann|was|welche\w*|wer|ist|hat|habe|heißt|der|die|das)\b",
    re.IGNORECASE,
)


def asks_for_own_fact(text: str) -> bool:
    """One of the message's questions asks for a fact of the user's own life, not for advice."""
    return any(asks_or_requests(s) and _own_fact_question(s) for s in sentences(text))


def _own_fact_question(sentence: str) -> bool:
    if _KANA.search(sentence):
        return _asks(sentence, _JA_OWN, _JA_ASK, _JA_ADVICE)
    if _CJK.search(sentence):
        return _asks(sentence, _ZH_OWN, _ZH_ASK, _ZH_ADVICE)
    if _EN_ASK.search(sentence):
        return _asks(sentence, _EN_OWN, _EN_ASK, _EN_ADVICE)
    return _asks(sentence, _DE_OWN, _DE_ASK, _DE_ADVICE)


def _asks(
    sentence: str, own: re.Pattern[str], ask: re.Pattern[str], advice: re.Pattern[str]
) -> bool:
    return bool(own.search(sentence) and ask.search(sentence) and not advice.search(sentence))


def language_of(text: str) -> str:
    """``ja``, ``zh``, ``de`` or ``en``: which example fits the message (a rough guess)."""
    if _KANA.search(text):
        return "ja"
    if _CJK.search(text):
        return "zh"
    if len(_GERMAN.findall(text)) >= 2 and _DE_ASK.search(text):
        return "de"
    return "en"


def example_for(text: str) -> Example:
    """The made-up exchange in the message's language."""
    return EXAMPLES[language_of(text)]


def example_messages(example: Example | None) -> list[ChatMessage]:
    """The exchanges as chat messages, put between the system prompt and the conversation."""
    messages: list[ChatMessage] = []
    for question, answer in example or ():
        messages.append({"role": "user", "content": question})
        messages.append({"role": "assistant", "content": answer})
    return messages


def example_count(messages: Sequence[ChatMessage]) -> int:
    """How many messages after the system prompt are a made-up exchange (the Context tab)."""
    for example in EXAMPLES.values():
        shown = example_messages(example)
        if [dict(m) for m in messages[1 : 1 + len(shown)]] == shown:
            return len(shown)
    return 0


def example_to_json(example: Example) -> list[list[str]]:
    """The exchanges as stored with the turn's recall event."""
    return [[question, answer] for question, answer in example]


def example_from_json(value: object) -> Example | None:
    """The exchanges of a stored recall event (None when absent or unreadable)."""
    if not isinstance(value, list) or not value:
        return None
    pairs: list[tuple[str, str]] = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2):
            return None
        pairs.append((str(pair[0]), str(pair[1])))
    return tuple(pairs)


def window_may_answer(terms: Sequence[str], window: Sequence[Message]) -> bool:
    """An earlier user message in the window shares a content word with the question.

    *terms* are the question's content words (``recall.content_terms``); the
    window's last message is the question itself and is skipped.
    """
    if not terms:
        return False
    for message in window[:-1]:
        if message.role != "user" or message.is_tool_traffic:
            continue
        folded = message.content.casefold()
        if any(term in folded for term in terms):
            return True
    return False
