"""Text preparation for FTS5 (the archive and the error memory): CJK bigrams, safe queries.

SQLite's ``unicode61`` tokenizer treats a run of Han characters as one token,
so ``記憶系統`` could never be found inside ``我們使用記憶系統來保存對話``.
We index CJK runs as overlapping bigrams (plus the run's last character as a
unigram, so single-character queries still match); a CJK query becomes a
phrase of its bigrams, which matches exactly the substring.  Latin text goes
to the FTS5 tokenizer after a light plural stemmer (:func:`stem`); the
archive's tokenizer is ``porter unicode61``, which stems English words fully
(painting / paints / painted), on documents and on quoted query terms alike.

Queries never reach FTS5 as syntax: every term is quoted, so ``"``, ``*``,
``NEAR(``, ``AND`` typed by a user are just text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from agenvoy_desktop.language.patterns import every

# Han, Hiragana, Katakana, Hangul and CJK punctuation-free ranges.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W{_CJK}]+", re.UNICODE)
_SPLIT = re.compile(f"([{_CJK}]+)")

FTS_TEXT_VERSION = 1
"""Bump when :func:`index_text` changes: the archive then rebuilds its FTS index."""

STOPWORDS = frozenset(every("search.stopwords"))
"""Words no query is about (each language's ``search.stopwords``): marked, not searched for."""


def normalize(text: str) -> str:
    """NFKC + case folding: full-width forms and case never decide a match."""
    return unicodedata.normalize("NFKC", text).casefold()


def _cjk_tokens(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def stem(word: str) -> str:
    """A light plural stemmer (hotels → hotel, cities → city, boxes → box).

    Applied identically to documents and queries, so it only has to be
    consistent, not linguistically perfect; exact words stay exact otherwise.
    """
    if len(word) <= 3 or not word.isascii() or not word.endswith("s") or word.endswith("ss"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    return word[:-1]


def _stem_match(match: re.Match[str]) -> str:
    return stem(match.group())


def index_text(text: str) -> str:
    """The string handed to FTS5 for a message's content."""
    parts: list[str] = []
    for chunk in _SPLIT.split(normalize(text)):
        if not chunk:
            continue
        if _CJK_RUN.fullmatch(chunk):
            parts.append(" ".join(_cjk_tokens(chunk)))
        else:
            parts.append(_WORD.sub(_stem_match, chunk))
    return " ".join(parts)


CJK_BIGRAM_TERMS = True
"""Whether a CJK run of :data:`CJK_SENTENCE_CHARS` or more is also searched bigram by
bigram (benchmarks switch it)."""
CJK_SENTENCE_CHARS = 5
"""From this length a CJK run reads as a sentence, not a word: "記憶系統" typed in a
search box still finds exactly that substring, and nothing ranked above it."""
CJK_FUNCTION_BIGRAMS = frozenset(every("search.function_bigrams"))
"""Bigrams that carry no meaning of their own (Chinese, then Japanese): a CJK query's
stopwords, and no evidence in recall's word share."""


@dataclass(frozen=True, slots=True)
class QueryTerm:
    """One FTS5 term: a quoted word, a quoted CJK bigram phrase, or a CJK prefix."""

    expr: str
    is_stopword: bool = False


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def _cjk_query_terms(run: str) -> list[QueryTerm]:
    """The terms of one CJK run: the run as a phrase, then (a sentence, not a word:
    :data:`CJK_SENTENCE_CHARS`) each of its bigrams.

    As a phrase alone, a question written without spaces (我的护照号码是多少？)
    matched only messages holding the whole question, so a CJK question never
    reached the keyword route and its recall rested on MiniLM, an English
    model.  Terms are joined by OR, so the bigrams find the messages that
    share the rarest of them (护照, 号码), and the phrase still ranks an exact
    match first.
    """
    if len(run) == 1:
        return [QueryTerm(expr=_quote(run) + " *")]
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    terms = [QueryTerm(expr=_quote(" ".join(grams)))]
    if CJK_BIGRAM_TERMS and len(run) >= CJK_SENTENCE_CHARS:
        terms += [QueryTerm(_quote(g), is_stopword=g in CJK_FUNCTION_BIGRAMS) for g in grams]
    return terms


def query_terms(query: str) -> list[QueryTerm]:
    """Split a user's query into safe FTS5 terms (deduplicated, in order)."""
    terms: list[QueryTerm] = []
    seen: set[str] = set()
    for chunk in _SPLIT.split(normalize(query)):
        if not chunk:
            continue
        if _CJK_RUN.fullmatch(chunk):
            for term in _cjk_query_terms(chunk):
                if term.expr not in seen:
                    seen.add(term.expr)
                    terms.append(term)
            continue
        for raw_word in _WORD.findall(chunk):
            word = raw_word.strip("_")
            if not word or word in seen:
                continue
            seen.add(word)
            stemmed = stem(word)
            terms.append(QueryTerm(expr=_quote(stemmed), is_stopword=word in STOPWORDS))
    return terms
