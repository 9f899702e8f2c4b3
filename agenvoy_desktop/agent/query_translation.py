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

The other way round works alike: an English question about the user's own
life that finds nothing is translated into the other languages the archive
holds (:func:`other_languages`, read off the full-text vocabulary: kana for
Japanese, Han for Chinese, German function words), and searched
again in each until one finds something (with the usual floor of the
translation's script: a CJK translation gets the CJK floor).
"""

from __future__ import annotations

import re
from dataclasses import replace

from agenvoy_desktop.agent.recall import RecallFloor
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.retrieval.fts_text import normalize

TRANSLATE = True
"""Whether recall tries a translated question at all (benchmarks switch it)."""
MAX_TOKENS = 48
"""A question's translation; longer output is an answer, not a translation."""
FROM_ENGLISH = True
"""Whether an English question is also tried in the archive's other languages."""
MAX_TARGETS = 3
"""Other languages tried for one English question, until one finds something (each
costs a short generation, only when English found nothing)."""
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese", "ja": "Japanese", "de": "German"}
Shots = tuple[tuple[str, str], ...]
SHOTS: Shots = (  # none of them is a benchmark question
    ("我女儿的学校在哪里？", "Where is my daughter's school?"),
    ("Wo wohnt meine Schwester?", "Where does my sister live?"),
    ("私の猫の名前は何ですか？", "What is my cat's name?"),
)
"""Into English: one question from each language."""
SHOTS_FROM_ENGLISH: dict[str, Shots] = {
    "zh": (
        ("Where is my daughter's school?", "我女儿的学校在哪里？"),
        ("Where does my sister live?", "我姐姐住在哪里？"),
        ("What is my cat's name?", "我的猫叫什么名字？"),
    ),
    "ja": (
        ("Where is my daughter's school?", "私の娘の学校はどこですか？"),
        ("Where does my sister live?", "私の姉はどこに住んでいますか？"),
        ("What is my cat's name?", "私の猫の名前は何ですか？"),
    ),
    "de": (
        ("Where is my daughter's school?", "Wo ist die Schule meiner Tochter?"),
        ("Where does my sister live?", "Wo wohnt meine Schwester?"),
        ("What is my cat's name?", "Wie heißt meine Katze?"),
    ),
}
"""From English into each language the archive may hold."""
_GERMAN_MARKERS = ("ich", "nicht", "und", "ist", "mein", "meiner")
"""Indexed words (as the porter stemmer leaves them: "meine" is "mein") that English
text almost never has; two of them mean German was written."""


def system_prompt(language: str) -> str:
    """The translator's instructions, into *language*."""
    name = LANGUAGE_NAMES[language]
    return f"You translate questions into {name} word for word. You never answer them."


def other_languages(archive: Archive) -> list[str]:
    """Storage thread: the languages besides English that the archive's messages are
    written in, read off the full-text vocabulary (one index seek each), at most
    :data:`MAX_TARGETS`.

    Japanese writes Han characters too, so an archive with kana is searched in
    Japanese first and in Chinese second: the vocabulary cannot tell a
    Japanese user's kanji from a Chinese line."""
    found: list[str] = []
    if archive.vocabulary_has_range("\u3040", "\u3100"):
        found.append("ja")
    if archive.vocabulary_has_range("\u4e00", "\ua000"):
        found.append("zh")
    if archive.vocabulary_count(_GERMAN_MARKERS) >= 2:
        found.append("de")
    return found[:MAX_TARGETS]


def stricter(floor: RecallFloor) -> RecallFloor:
    """The translated search's floor: a personal hit needs meaning and words together,
    or most of the words.

    With the usual floor, questions about facts never told found loosely
    related English lines once translated ("Wie lautet mein WLAN-Passwort im
    Büro?" → the parents' wifi password) and the starter answered from them;
    this one keeps those out and still passes a translation of what was told
    (benchmarks/RESULTS.md §11g).  It is not every search's floor: it misses
    a question about one thing in a message that tells several (§12).

    A CJK translation needs twice the usual share of the question's bigrams:
    "What is my health insurance card number?" put into Japanese shared 番号
    and 号は with "私の自転車の鍵の番号は6614です。" (a share of 0.24), and the
    starter answered 6614; translations of what was told shared 0.5–1.0.
    """
    return replace(
        floor,
        personal_cosine=0.5,
        personal_cosine_share=0.4,
        personal_keyword=0.7,
        cjk_keyword=2 * floor.cjk_keyword,
    )


_LATIN = re.compile(r"[A-Za-z]")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_KANA = re.compile("[\u3040-\u30ff]")


def translation_prompt(question: str, language: str = "en") -> list[ChatMessage]:
    """The messages that ask the model for *question* in *language*."""
    messages: list[ChatMessage] = [{"role": "system", "content": system_prompt(language)}]
    for asked, translated in SHOTS if language == "en" else SHOTS_FROM_ENGLISH[language]:
        messages.append({"role": "user", "content": asked})
        messages.append({"role": "assistant", "content": translated})
    messages.append({"role": "user", "content": question})
    return messages


def usable(translation: str, language: str = "en", question: str = "") -> str:
    """The translation's first line if it is written in *language* (and is not
    *question* again), else "" (nothing to search)."""
    line = translation.strip().splitlines()[0].strip() if translation.strip() else ""
    letters = len(_LATIN.findall(line))
    cjk = len(_CJK.findall(line))
    if language in ("zh", "ja"):
        written = cjk >= 2 and cjk * 2 > letters and (language == "zh" or bool(_KANA.search(line)))
    else:
        written = letters >= 3 and cjk * 2 <= letters
    if not written or normalize(line) == normalize(question):
        return ""
    return line
