"""What the agent knows about the languages it reads: one data file per language.

Every word list the agent reads a message with (question openings, request
verbs, recap phrases, time and "past" words, the "I don't know" examples,
stopwords …) lives in ``data/<code>.toml``, checked against one schema
(:mod:`~agenvoy_desktop.language.catalog`), and the modules that read
messages build their patterns from it (:mod:`~agenvoy_desktop.language.patterns`).
Adding a language is one data file and its example sentences
(``data/<code>.examples.toml``, read by ``tests/test_language_examples.py``).

Below ``core`` in the layers: the full-text index's stopwords come from
here too, and this package imports nothing of the app's.
"""

from __future__ import annotations

from agenvoy_desktop.language.catalog import (
    FALLBACK,
    Language,
    LanguageDataError,
    language,
    languages,
)
from agenvoy_desktop.language.detect import by_script, language_of

__all__ = [
    "FALLBACK",
    "Language",
    "LanguageDataError",
    "by_script",
    "language",
    "language_of",
    "languages",
]
