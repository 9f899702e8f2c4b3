"""Regular expressions built from the language files' word lists.

A word list becomes an alternation of the words, each escaped; in a
phrase the spaces match any run of white space (``could you`` is
``could\\s+you``), and a ``*`` at a word's end stands for any ending
(``mein*``: mein, meine, meinem …).  A spaced language's words match whole
words; a CJK language's anywhere.  ``patterns`` lists are regular
expressions already and join the alternation as they are.

A cue is the union over every language: a German word in an English
message is rare enough that one pattern serves every message, and it is
what makes a language one file more rather than a change in every module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agenvoy_desktop.language.catalog import Language, languages


def word_pattern(word: str) -> str:
    """One word or phrase as a regex (see the module docstring)."""
    tail = r"\w*" if word.endswith("*") else ""
    body = word.removesuffix("*")
    return r"\s+".join(re.escape(part) for part in body.split()) + tail


def alternatives(words: Iterable[str]) -> str:
    """A regex alternation of *words*, each as :func:`word_pattern` writes it (duplicates once)."""
    return "|".join(dict.fromkeys(word_pattern(w) for w in words))


def either(*parts: str) -> str:
    """The non-empty *parts* joined as alternatives."""
    return "|".join(part for part in parts if part)


def spaced(key: str, among: Iterable[Language] | None = None) -> list[str]:
    """The entries under *key* of every spaced language (English first)."""
    return [w for lang in among or languages() if lang.spaced for w in lang.words(key)]


def unspaced(key: str, among: Iterable[Language] | None = None) -> list[str]:
    """The entries under *key* of every language written without spaces (Chinese, Japanese)."""
    return [w for lang in among or languages() if not lang.spaced for w in lang.words(key)]


def every(key: str) -> list[str]:
    """The entries under *key* of every language, in the catalog's order."""
    return [w for lang in languages() for w in lang.words(key)]


def whole_words(words: Iterable[str]) -> str:
    r"""``\b(?:…)\b`` around *words* ("" when there are none)."""
    listed = alternatives(words)
    return rf"\b(?:{listed})\b" if listed else ""


def cue(name: str, among: Iterable[Language] | None = None) -> str:
    """The regex text of the cue *name* (``cues.time``, ``recall.gathers`` …) over every
    language: the spaced languages' words as whole words, then every language's
    patterns, then the unspaced languages' words, matched anywhere."""
    chosen = tuple(among or languages())
    return either(
        whole_words(spaced(f"{name}.words", chosen)),
        *(p for lang in chosen for p in lang.words(f"{name}.patterns")),
        alternatives(unspaced(f"{name}.words", chosen)),
    )


def char_class(chars: Iterable[str]) -> str:
    """The characters as the inside of a regex character class."""
    return "".join(re.escape(ch) for ch in dict.fromkeys(chars))


NEVER = "(?!)"
"""A regex that matches nothing: what an empty cue compiles to (an empty one matches all)."""


def group(prefix: str, words: Iterable[str], suffix: str = "") -> str:
    """``prefix(?:words)suffix``, or "" when there are no *words* (nothing to match)."""
    listed = alternatives(words)
    return f"{prefix}(?:{listed}){suffix}" if listed else ""


def compiled(text: str, flags: int = 0) -> re.Pattern[str]:
    """*text* compiled, :data:`NEVER` when it is empty."""
    return re.compile(text or NEVER, flags)
