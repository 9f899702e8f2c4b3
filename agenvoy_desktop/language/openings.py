"""How a sentence opens, per language: the lead before its first real word, and the
openings of a question about the user's own life.

Kept here rather than in the modules that use them because telling a
message's language (:mod:`~agenvoy_desktop.language.detect`) needs them too.
"""

from __future__ import annotations

import re
from functools import cache

from agenvoy_desktop.language.catalog import Language, language, languages
from agenvoy_desktop.language.patterns import alternatives, char_class, spaced


@cache
def sentence_lead() -> str:
    """A spaced sentence's opening before its first real word: quotes and fillers such as
    "and", "so", "well", "und" (``speech.lead``, ``speech.quotes``)."""
    quotes = char_class(
        ch for lang in languages() if lang.spaced for ch in lang.text("speech.quotes") or ""
    )
    return rf"^[\s{quotes}]*(?:(?:{alternatives(spaced('speech.lead'))})[\s,]+)*"


@cache
def cjk_lead() -> str:
    """A CJK sentence's opening before its first real character: spaces and corner quotes."""
    quotes = char_class(
        ch for lang in languages() if not lang.spaced for ch in lang.text("speech.quotes") or ""
    )
    return rf"^[\s{quotes}]*"


def own_fact_ask(lang: Language) -> re.Pattern[str]:
    """A question for a fact in *lang*: "what/which/where … ", "wie heißt …", 什么, 何 …"""
    return _own_fact_ask(lang.code)


@cache
def _own_fact_ask(code: str) -> re.Pattern[str]:
    lang = language(code)
    asks = alternatives(lang.words("own_fact.ask"))
    if not lang.spaced:
        return re.compile(asks, re.IGNORECASE)
    prepositions = alternatives(lang.words("own_fact.ask_prepositions"))
    before = rf"(?:(?:{prepositions})\s+)?" if prepositions else ""
    return re.compile(sentence_lead() + before + rf"(?:{asks})\b", re.IGNORECASE)
