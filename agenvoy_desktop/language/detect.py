"""Which language a message is written in: a rough guess, good enough to pick a reply's
wording.

Chinese and Japanese tell themselves by their characters (kana first: Japanese
writes Han characters too).  A spaced language besides English needs two of its
marker words and one of its questions for a fact ("Wie heißt meine
Schwester?"): a German statement, or an English message with a German name in
it, stays English, the app's own language.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import cache

from agenvoy_desktop.language.catalog import FALLBACK, Language, language, languages
from agenvoy_desktop.language.openings import own_fact_ask
from agenvoy_desktop.language.patterns import whole_words

KANA = re.compile("[\u3040-\u30ff]")
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SCRIPTS = (("kana", KANA), ("han", HAN))
"""The scripts that tell a language by themselves, the more specific first."""
MARKERS_NEEDED = 2


def by_script(text: str) -> Language | None:
    """The CJK language whose script *text* holds (Japanese before Chinese), if any."""
    for script, marks in _SCRIPTS:
        if marks.search(text):
            return next((lang for lang in languages() if lang.script == script), None)
    return None


@cache
def _markers(code: str) -> re.Pattern[str]:
    return re.compile(whole_words(language(code).words("detect.markers")), re.IGNORECASE)


def language_of(text: str, among: Collection[str] | None = None) -> str:
    """The code of the language *text* is written in, among *among* (every language when
    None); :data:`~agenvoy_desktop.language.catalog.FALLBACK` when none fits."""
    found = by_script(text)
    if found is not None:
        return found.code if among is None or found.code in among else FALLBACK
    for lang in languages():
        if (
            not lang.spaced
            or lang.code == FALLBACK
            or (among is not None and lang.code not in among)
        ):
            continue
        if not lang.words("detect.markers"):
            continue
        if len(_markers(lang.code).findall(text)) >= MARKERS_NEEDED and own_fact_ask(lang).search(
            text
        ):
            return lang.code
    return FALLBACK
