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

:func:`swap_person` swaps the first and the second person in the languages
whose file has ``pronouns.swaps``: English, Chinese and Japanese (我↔你,
私↔あなた); others (German conjugates the verb with the pronoun) are returned
as said.  In a spaced language it is a word-level swap, not a parser: "you"
becomes "me" after a verb or preposition that takes an object, or before the
end of a clause, else "I" (``pronouns.object_forms``); "am"/"was" follow their
pronoun.  The words are the language files' (``pronouns.*``), built into one
pattern per script when this module is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agenvoy_desktop.language import Language, languages
from agenvoy_desktop.language.detect import KANA
from agenvoy_desktop.language.patterns import compiled

_APOS = "['\u2019]"
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
"""Han characters (Chinese, or Japanese with its kana): the unspaced swaps apply."""
_CLAUSE_END = re.compile(r"\s*(?:[.,;:!?)\]\"\u201d\u3002\uff0c]|$)")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|[\"\u201c(]\s*)$")
_HEAD = re.compile(r"[^\s'\u2019]*")
"""A phrase's first word ("I" of "I'm not")."""


@dataclass(frozen=True, slots=True)
class _Swaps:
    """One script's swaps: the pattern of every word to turn, and what each becomes."""

    pattern: re.Pattern[str]
    swaps: Mapping[str, str]


def _alternative(word: str, kept_after: Iterable[tuple[str, str]]) -> str:
    """*word* as a regex: an apostrophe matches either kind, a space any white space, and
    it is no match after a character that makes it another word (自我, "self")."""
    body = re.escape(word).replace("'", _APOS).replace(r"\ ", r"\s+")
    return (
        "".join(f"(?<!{re.escape(before)})" for before, kept in kept_after if kept == word) + body
    )


def _swaps(among: Iterable[Language]) -> _Swaps:
    """The swaps of the languages *among*, longer phrases first; spaced languages' words
    match whole words, in any case."""
    chosen = tuple(among)
    swaps = {
        said.lower(): turned for lang in chosen for said, turned in lang.pairs("pronouns.swaps")
    }
    kept_after = [pair for lang in chosen for pair in lang.pairs("pronouns.kept_after")]
    listed = "|".join(_alternative(w, kept_after) for w in sorted(swaps, key=len, reverse=True))
    spaced = any(lang.spaced for lang in chosen)
    if spaced and listed:
        listed = rf"(?<![\w'\u2019-])({listed})(?![\w'\u2019-])"
    return _Swaps(compiled(listed, re.IGNORECASE if spaced else 0), swaps)


_SPACED = _swaps(lang for lang in languages() if lang.spaced)
_KANA_SWAPS = _swaps(lang for lang in languages() if lang.script == "kana")
_HAN_SWAPS = _swaps(lang for lang in languages() if lang.script == "han")
_OBJECT_FORMS = {
    said.lower(): turned
    for lang in languages()
    for said, turned in lang.pairs("pronouns.object_forms")
}
_TAKES_OBJECT = frozenset(
    w.lower() for lang in languages() for w in lang.words("pronouns.takes_object")
)
"""Words after which "you" is an object ("remind you" -> "remind me")."""
_LOWER_CASE_ONLY = frozenset(
    w for lang in languages() for w in lang.words("pronouns.lower_case_only")
)
"""Words swapped only as written in lower case ("us"; "US" is the country)."""
_ALWAYS_CAPITAL = frozenset(
    w for lang in languages() for w in lang.words("pronouns.always_capital")
)
"""Words written with a capital anywhere in a sentence ("I")."""


def swap_person(text: str) -> str:
    """*text* with "I"/"my"/我 and "you"/"your"/你 swapped (see the module docstring)."""
    if KANA.search(text):
        return _swap_unspaced(_KANA_SWAPS, text)
    if _CJK.search(text):
        return _swap_unspaced(_HAN_SWAPS, text)
    return _SPACED.pattern.sub(lambda m: _swap_spaced(m, text), text)


def _swap_unspaced(table: _Swaps, text: str) -> str:
    return table.pattern.sub(lambda m: table.swaps[m.group()], text)


def _head(phrase: str) -> str:
    found = _HEAD.match(phrase)
    return found.group() if found else ""


def _swap_spaced(match: re.Match[str], text: str) -> str:
    said = match.group()
    key = re.sub(r"\s+", " ", said.lower().replace("\u2019", "'"))
    if key in _LOWER_CASE_ONLY and said != key:
        return said  # "US", the country
    swapped = _SPACED.swaps[key]
    if key in _OBJECT_FORMS:
        swapped = _object_or_subject(text, match.start(), match.end(), _OBJECT_FORMS[key], swapped)
    if "'" not in said and "\u2019" in said:
        swapped = swapped.replace("'", "\u2019")
    if _head(swapped) in _ALWAYS_CAPITAL:
        return swapped  # "I" is written upper case anywhere
    if said[0].isupper() and (
        _head(said) not in _ALWAYS_CAPITAL or _SENTENCE_START.search(text[: match.start()])
    ):
        return swapped[0].upper() + swapped[1:]
    return swapped


def _object_or_subject(text: str, start: int, end: int, as_object: str, as_subject: str) -> str:
    """*as_object* where the word is an object ("remind you", "for you", "…you."), else
    *as_subject*."""
    before = re.findall(r"[\w']+", text[:start].lower())
    if before and before[-1] in _TAKES_OBJECT:
        return as_object
    if _CLAUSE_END.match(text, end) and before:
        return as_object
    return as_subject
