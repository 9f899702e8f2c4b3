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
Japanese, Han for Chinese, a spaced language's function words), and searched
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
from agenvoy_desktop.language import language as language_file
from agenvoy_desktop.language import languages

TRANSLATE = True
"""Whether recall tries a translated question at all (benchmarks switch it)."""
MAX_TOKENS = 48
"""A question's translation; longer output is an answer, not a translation."""
FROM_ENGLISH = True
"""Whether an English question is also tried in the archive's other languages."""
MAX_TARGETS = 3
"""Other languages tried for one English question, until one finds something (each
costs a short generation, only when English found nothing)."""
LANGUAGE_NAMES = {lang.code: lang.name for lang in languages()}
Shots = tuple[tuple[str, str], ...]
SHOT_LANGUAGES = ("zh", "de", "ja")
"""Whose question shows the model how to translate into English, in this order: the prompt
that was measured (none of them is a benchmark question).  Another language's shot would
change the prompt of every language."""
SHOTS: Shots = tuple(
    shot
    for code in SHOT_LANGUAGES
    for shot in language_file(code).pairs("translation.into_english")
)
"""Into English: one question from each of :data:`SHOT_LANGUAGES`."""
SHOTS_FROM_ENGLISH: dict[str, Shots] = {
    lang.code: shots for lang in languages() if (shots := lang.pairs("translation.from_english"))
}
"""From English into each language the archive may hold (``translation.from_english``)."""
_CJK_RANGES = {"kana": ("\u3040", "\u3100"), "han": ("\u4e00", "\ua000")}
"""Where each CJK script's terms lie in the full-text vocabulary (one seek tells)."""
MARKERS_NEEDED = 2
"""Indexed words of a spaced language (``translation.archive_markers``, as the porter
stemmer leaves them: "meine" is "mein") that English text almost never has: two of
them mean that language was written."""


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
    for script in ("kana", "han"):
        low, high = _CJK_RANGES[script]
        if archive.vocabulary_has_range(low, high):
            found += [lang.code for lang in languages() if lang.script == script]
    for lang in languages():
        if len(found) >= MAX_TARGETS:
            break  # each check is a seek; no more are tried
        markers = lang.words("translation.archive_markers")
        if lang.spaced and markers and archive.vocabulary_count(markers) >= MARKERS_NEEDED:
            found.append(lang.code)
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
    script = language_file(language).script
    if script != "latin":
        written = cjk >= 2 and cjk * 2 > letters and (script == "han" or bool(_KANA.search(line)))
    else:
        written = letters >= 3 and cjk * 2 <= letters
    if not written or normalize(line) == normalize(question):
        return ""
    return line
