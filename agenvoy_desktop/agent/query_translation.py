"""Asking in one language about what was told in another: recall with a translated question.

A user who writes in two languages tells a fact in English ("my daughter Eva
turns 7 on 14 March") and later asks in Chinese (我女儿叫什么名字？).  Neither
route of the recall search can bridge that: the keyword route needs the same
words, and MiniLM, an English model, puts a Chinese question nowhere near an
English sentence.  So when a question about the user's own life, written in
Chinese, Japanese or German, finds nothing, the chat model translates it into
English and recall searches again with the translation.

The 0.5B starter, asked plainly to translate, answered the question instead
("My daughter's name is Jane."); shown three translated questions first, it
translated (benchmarks/RESULTS.md §11g).  The translation costs one short
generation, only on that path.
"""

from __future__ import annotations

import re
from dataclasses import replace

from agenvoy_desktop.agent.recall import RecallFloor
from agenvoy_desktop.core.model_api import ChatMessage

TRANSLATE = True
"""Whether recall tries a translated question at all (benchmarks switch it)."""
MAX_TOKENS = 48
"""A question's translation; longer output is an answer, not a translation."""
SYSTEM = "You translate questions into English word for word. You never answer them."
SHOTS: tuple[tuple[str, str], ...] = (  # none of them is a benchmark question
    ("我女儿的学校在哪里？", "Where is my daughter's school?"),
    ("Wo wohnt meine Schwester?", "Where does my sister live?"),
    ("私の猫の名前は何ですか？", "What is my cat's name?"),
)


def stricter(floor: RecallFloor) -> RecallFloor:
    """The translated search's floor: a personal hit needs meaning and words together,
    or most of the words.

    With the usual floor, questions about facts never told found loosely
    related English lines once translated ("Wie lautet mein WLAN-Passwort im
    Büro?" → the parents' wifi password) and the starter answered from them;
    this one keeps those out and still passes a translation of what was told
    (benchmarks/RESULTS.md §11g).  It is not every search's floor: it misses
    a question about one thing in a message that tells several (§12).
    """
    return replace(floor, personal_cosine=0.5, personal_cosine_share=0.4, personal_keyword=0.7)


_LATIN = re.compile(r"[A-Za-z]")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


def translation_prompt(question: str) -> list[ChatMessage]:
    """The messages that ask the model for *question* in English."""
    messages: list[ChatMessage] = [{"role": "system", "content": SYSTEM}]
    for asked, english in SHOTS:
        messages.append({"role": "user", "content": asked})
        messages.append({"role": "assistant", "content": english})
    messages.append({"role": "user", "content": question})
    return messages


def usable(translation: str) -> str:
    """The translation's first line if it reads as English, else "" (nothing to search)."""
    line = translation.strip().splitlines()[0].strip() if translation.strip() else ""
    letters = len(_LATIN.findall(line))
    if letters < 3 or len(_CJK.findall(line)) * 2 > letters:
        return ""
    return line
