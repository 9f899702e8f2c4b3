"""What the user said, turned to face them: "my code is 4721" becomes "your code is 4721".

Proactive recall quotes the user's earlier messages to the model.  A 0.5B
model copies what it is shown, so asked "What am I allergic to?" over the
line "I'm allergic to penicillin", the starter answered "I'm allergic to
penicillin." — in the user's voice, as if it were the one allergic (6 of 32
memory answers, benchmarks/RESULTS.md §10).  Banning "My"/"I" openings made
the answers worse ("Myson is allergic…").  Turning the recalled line round
before the model sees it should leave the copy right ("You're allergic to
penicillin"), but measured with the starter it did not: the model read the
line in its system prompt as said of itself and answered "I am allergic to
kiwi fruit." (``benchmarks/lab/recall_voice.py``; ``recall.SECOND_PERSON`` is off).
Kept for models that read a system prompt as meant.

:func:`swap_person` swaps the first and the second person in English,
Chinese and Japanese (我↔你, 私↔あなた); other languages (German conjugates
the verb with the pronoun) are returned as said.  It is a word-level swap,
not a parser: "you" becomes "me" after a verb or preposition that takes an
object, or before the end of a clause, else "I"; "am"/"was" follow their
pronoun.
"""

from __future__ import annotations

import re

_APOS = "['\u2019]"
_EN_SWAPS: dict[str, str] = {
    "i am": "you are",
    "i was": "you were",
    "i wasn't": "you weren't",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "we're": "you're",
    "we've": "you've",
    "we'll": "you'll",
    "we'd": "you'd",
    "we": "you",
    "us": "you",
    "our": "your",
    "ours": "yours",
    "ourselves": "yourselves",
    "thank you": "thank you",
    "you are": "I am",
    "you were": "I was",
    "you weren't": "I wasn't",
    "you aren't": "I'm not",
    "you're": "I'm",
    "you've": "I've",
    "you'd": "I'd",
    "you'll": "I'll",
    "your": "my",
    "yours": "mine",
    "yourself": "myself",
    "you": "I",  # "me" where it is an object: see _swap_you
}
_EN_WORD = re.compile(
    r"(?<![\w'\u2019-])("
    + "|".join(
        re.escape(key).replace("'", _APOS).replace(r"\ ", r"\s+")
        for key in sorted(_EN_SWAPS, key=len, reverse=True)
    )
    + r")(?![\w'\u2019-])",
    re.IGNORECASE,
)
_TAKES_OBJECT = frozenset(
    re.findall(
        r"\S+",
        "to for with at from about of by like love thank thanks tell told ask asked help "
        "helped remind let give gave show send call see saw meet met bring brought text "
        "email pay paid owe trust",
    )
)
"""Words after which "you" is an object ("remind you" -> "remind me")."""
_CLAUSE_END = re.compile(r"\s*(?:[.,;:!?)\]\"\u201d\u3002\uff0c]|$)")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|[\"\u201c(]\s*)$")

_ZH_SWAPS = {"我们": "你们", "我們": "你們", "咱们": "你们", "你们": "我们", "你們": "我們"}
_ZH_WORD = re.compile("我们|我們|咱们|你们|你們|(?<!自)我|你|您")
_JA_WORD = re.compile("私|あなた")
_KANA = re.compile("[\u3040-\u30ff]")
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")


def swap_person(text: str) -> str:
    """*text* with "I"/"my"/我 and "you"/"your"/你 swapped (see the module docstring)."""
    if _KANA.search(text):
        return _JA_WORD.sub(lambda m: "あなた" if m.group() == "私" else "私", text)
    if _CJK.search(text):
        return _ZH_WORD.sub(_swap_zh, text)
    return _EN_WORD.sub(lambda m: _swap_en(m, text), text)


def _swap_zh(match: re.Match[str]) -> str:
    word = match.group()
    if word in _ZH_SWAPS:
        return _ZH_SWAPS[word]
    return "你" if word == "我" else "我"


def _swap_en(match: re.Match[str], text: str) -> str:
    said = match.group()
    key = re.sub(r"\s+", " ", said.lower().replace("\u2019", "'"))
    if key == "us" and said != "us":
        return said  # "US", the country
    swapped = _swap_you(text, match.start(), match.end()) if key == "you" else _EN_SWAPS[key]
    if "'" not in said and "\u2019" in said:
        swapped = swapped.replace("'", "\u2019")
    if swapped.startswith("I") and swapped[1:2] in ("", " ", "'", "\u2019"):
        return swapped  # "I" is written upper case anywhere
    if said[0].isupper() and (said[0] != "I" or _SENTENCE_START.search(text[: match.start()])):
        return swapped[0].upper() + swapped[1:]
    return swapped


def _swap_you(text: str, start: int, end: int) -> str:
    """The "me" of an object ("remind you", "for you", "…you."), else "I"."""
    before = re.findall(r"[\w']+", text[:start].lower())
    if before and before[-1] in _TAKES_OBJECT:
        return "me"
    if _CLAUSE_END.match(text, end) and before:
        return "me"
    return "I"
