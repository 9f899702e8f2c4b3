"""How one remembered message is shown to the model: its sentences that matter, dated.

Recall finds whole messages, and the messages people write to an assistant
are long: a request, then "By the way, I'm currently reading *The Seven
Husbands of Evelyn Hugo*", then another request.  Cut to its head and tail
(as recall did), such a message lost the one sentence that answered the
question; shown whole, five of them fill a small model's prompt with
requests it then answers instead.  So a line shows the sentences that carry
the question's words (:func:`focus`), in their order, with "…" where others
were left out.

A line also says when it was said and how long ago ("On 2023-05-02 (4
weeks ago) the user said: …"): "How long have I lived here?" and "Which did I do first?" are
answered from the dates, and where the user said the same thing twice with
different values ("I have 500 followers", later "I'm now at 600"), the newer
line is marked as the latest (:func:`latest_ids`) — the starter answered
with the older value when both were shown undated.

Everything here is pure: the storage thread gathers the messages
(``agent/recall.py``), these functions only choose and word.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from agenvoy_desktop.agent.date_reasoning import age_phrase, local_date
from agenvoy_desktop.agent.speech_act import asks_or_requests, sentences
from agenvoy_desktop.core.retrieval.fts_text import normalize
from agenvoy_desktop.language import languages
from agenvoy_desktop.language.calendar_names import capitalized_names
from agenvoy_desktop.language.patterns import compiled, either, every, group, word_pattern

FOCUS_CHARS = 300
"""About 75 tokens per remembered message: a fact and the sentence around it."""
GAP = " … "
_NUMBER = re.compile(r"\d")


def _capitalized_too(word: str) -> str:
    """*word* as a regex that also matches it capitalized ("ago", "Ago"): the first word of
    a sentence."""
    pattern, head = word_pattern(word), word[:1]
    cased = head.upper() != head.lower()
    return f"[{head.upper()}{head.lower()}]{pattern[1:]}" if cased else pattern


def _value_pattern() -> str:
    """Every language's ``values`` words as one regex: time words also capitalized, the
    months' and weekdays' names only capitalized ("May" is a month, "may" a verb), counts
    and spans only as written."""
    words = [
        *(_capitalized_too(word) for word in every("values.time_words")),
        *(word_pattern(name) for name in capitalized_names()),
        *(word_pattern(word) for key in ("values.counts", "values.spans") for word in every(key)),
    ]
    listed = "|".join(dict.fromkeys(words))
    return either(r"\d", rf"\b(?:{listed})\b" if listed else "")


_VALUE = compiled(_value_pattern())
"""A number or a time in a sentence: what a question's answer is often made of."""
_WORD = re.compile(r"\w+")


def focus(
    content: str, weights: Mapping[str, float], limit: int = FOCUS_CHARS, *, trim: bool = False
) -> str:
    """The sentences of *content* that carry the most of *weights*' terms, in order.

    A message that fits is shown whole.  Otherwise the best sentence is kept,
    then the next best while they fit; a sentence that tells is preferred to
    a question or request of the same weight (the fact is in the telling).
    Without any shared term the message's opening is shown, as before.
    *trim*: a message that fits is cut too, to the sentences that carry the
    terms and a number next to them (a quote: "I'm allergic to shellfish.",
    not the "Good morning!" before it).
    """
    flat = " ".join(content.split())
    if len(flat) <= limit and not trim:
        return flat
    parts = [" ".join(s.split()) for s in sentences(content)]
    scored = [(_sentence_score(part, weights), index) for index, part in enumerate(parts)]
    ranked = [index for score, index in sorted(scored, key=lambda s: (-s[0], s[1])) if score > 0]
    if not ranked:
        return clip_words(flat, limit)
    best = ranked[0]
    # the sentence next to the best that tells a number or a time ("I got a set of 10 for
    # $25 about a month ago" after "I've been using those training pads") is the fact more
    # often than a request elsewhere that repeats a word of the question
    valued = [
        i
        for i in (best + 1, best - 1)
        if 0 <= i < len(parts) and _VALUE.search(parts[i]) and not asks_or_requests(parts[i])
    ]
    ranked = [best, *valued, *(i for i in ranked[1:] if i not in valued)]
    chosen: list[int] = []
    used = 0
    for index in ranked:
        cost = len(parts[index]) + len(GAP)
        if chosen and used + cost > limit:
            continue
        chosen.append(index)
        used += cost
    if len(chosen) == 1 and len(parts[chosen[0]]) > limit:
        return clip_words(parts[chosen[0]], limit, around=_first_term(parts[chosen[0]], weights))
    for index in () if trim else (best + 1, best - 1):  # the fact is often next to the words
        cost = len(parts[index]) + len(GAP) if 0 <= index < len(parts) else limit + 1
        if index not in chosen and used + cost <= limit:
            chosen.append(index)
            used += cost
    return _joined(parts, sorted(chosen))


def light_stem(word: str) -> str:
    """Enough stemming to match "codes"/"code", "lived"/"live": a prefix of the word."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= _STEM_MIN:
            return word[: -len(suffix)]
    return word


_STEM_MIN = 4
"""The shortest stem :func:`light_stem` leaves ("uses" stays, "codes" → "cod")."""


def _listed(text: str) -> list[str]:
    """The comma-separated words of a ``recall.kinds`` or ``recall.same`` entry, folded."""
    return [" ".join(normalize(word).split()) for word in text.split(",") if word.strip()]


def _related_words() -> dict[str, frozenset[str]]:
    """Each word of ``recall.kinds`` and ``recall.same`` (by its stem) with the words a line
    may say instead: a thing's kind, a kind's things, the same thing's other names."""
    related: dict[str, set[str]] = {}

    def link(word: str, others: Sequence[str]) -> None:
        related.setdefault(light_stem(word), set()).update(o for o in others if o != word)

    for lang in languages():
        for kind, listed in lang.pairs("recall.kinds"):
            things = _listed(listed)
            link(normalize(kind), things)
            for thing in things:
                link(thing, [normalize(kind)])
        for listed in lang.words("recall.same"):
            words = _listed(listed)
            for word in words:
                link(word, words)
    return {word: frozenset(others) for word, others in related.items() if others}


_RELATED = _related_words()
_RELATED_LINES: dict[str, re.Pattern[str]] = {}


def related_words(term: str) -> frozenset[str]:
    """The words a line may say for the stemmed *term*: its kind, its things, its other
    names (``recall.kinds``, ``recall.same``; empty: none)."""
    words = _RELATED.get(term)
    if words is None and term.endswith("s"):  # a short plural light_stem keeps ("pets")
        words = _RELATED.get(term[:-1])
    return words or frozenset()


def _related_line(term: str) -> re.Pattern[str] | None:
    """A pattern for the words that stand for *term* in a line (None: no word does)."""
    words = related_words(term)
    if not words:
        return None
    pattern = _RELATED_LINES.get(term)
    if pattern is None:
        spelled = sorted((r"\s+".join(map(re.escape, w.split())) for w in words), key=len)
        pattern = re.compile(rf"\b(?:{'|'.join(reversed(spelled))})(?:s|es)?\b")
        _RELATED_LINES[term] = pattern
    return pattern


_CJK_TERM = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def _starts_a_word(term: str, folded: str) -> bool:
    """*term* (a word's stem, or a CJK bigram) is the start of a word of *folded*: "eat"
    in "eating" and "eats", not in "great" ("Can I eat shrimp?" found a line about a
    great city holding its words).  A longer word may end a compound too ("schloss" in
    "Fahrradschloss", "teacher" in "schoolteacher"); CJK is not spaced, so a bigram may be
    anywhere."""
    if term not in folded:
        return False
    if len(term) >= _COMPOUND_PART or _CJK_TERM.search(term):
        return True
    return re.search(rf"(?<!\w){re.escape(term)}", folded) is not None


_COMPOUND_PART = 5
"""The shortest word still found inside another: a short one is part of many ("eat" in
"great", "art" in "party"), a long one mostly the head of a compound."""


AGENT_NOUN = re.compile(r"^([^\W\d_]{4,})(?:er|ist)$")
"""A word for who does something ("smoker", "teacher", "cyclist"): the line may say the
doing instead ("I no longer smoke", "I cycle everywhere"), which the word does not contain."""


def term_in(term: str, folded: str) -> bool:
    """*term* occurs in the normalised text *folded*, an agent noun also as its verb, a
    thing also as its kind or another name for it (:func:`_related_words`).

    Asked "Am I a smoker?", the answering line says "I quit smoking" (cosine
    0.54, no shared word, so under the floor of a line that shares none);
    asked "Can I eat shrimp?", it says "I'm allergic to shellfish".
    """
    if _starts_a_word(term, folded):
        return True
    related = _related_line(term)
    if related is not None and related.search(folded):
        return True
    noun = AGENT_NOUN.match(term)
    if noun is None:
        return False
    return re.search(rf"\b{re.escape(noun.group(1))}(?:e|es|ed|ing|s)?\b", folded) is not None


def _sentence_score(sentence: str, weights: Mapping[str, float]) -> float:
    folded = normalize(sentence)
    score = sum(weight for term, weight in weights.items() if term_in(term, folded))
    if score and not asks_or_requests(sentence):
        score *= 1.25
    return score


def _first_term(sentence: str, weights: Mapping[str, float]) -> int:
    folded = normalize(sentence)
    places = [folded.find(term) for term in weights if term in folded]
    return min(places) if places else 0


def _joined(parts: Sequence[str], chosen: Sequence[int]) -> str:
    out = ""
    previous = -2
    for index in chosen:
        if out:
            out += " " if index == previous + 1 else GAP
        elif index > 0:
            out = GAP.lstrip()
        out += parts[index]
        previous = index
    if chosen and chosen[-1] < len(parts) - 1:
        out += GAP.rstrip()
    return out


def clip_words(text: str, limit: int, around: int = 0) -> str:
    """At most *limit* characters of *text*, cut at word boundaries, holding position *around*."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    start = max(0, min(around - limit // 3, len(flat) - limit))
    if start:
        start = flat.find(" ", start) + 1 or start
    end = start + limit
    if end < len(flat):
        end = flat.rfind(" ", start, end) if flat.rfind(" ", start, end) > start else end
    head = "…" if start else ""
    tail = "…" if end < len(flat) else ""
    return f"{head}{flat[start:end].strip()}{tail}"


# -- dates ------------------------------------------------------------------------------------
def when(time_ns: int, now_ns: int | None, *, latest: bool = False) -> str:
    """``On 2023-05-02`` or, knowing today, ``On 2023-05-02 (4 weeks ago)``, with ", the
    latest" in the brackets for a line marked so.

    Worded as when it was *said*: written "2023-05-28, 2 days ago:", the
    starter answered "How long did I wait for my asylum decision?" with "2
    days" (the line said "over a year").
    """
    said = local_date(time_ns)
    notes = [] if now_ns is None else [age_phrase(said, local_date(now_ns))]
    if latest:
        notes.append("the latest")
    return f"On {said.isoformat()}" + (f" ({', '.join(notes)})" if notes else "")


# -- the same thing said again -------------------------------------------------------------------
def values_in(text: str) -> frozenset[str]:
    """The numbers of *text*, number words and ordinals as digits ("fifth", "5th" → "5").

    The number words are every language's (``numbers`` in the language files);
    "first" and "second" are left out: "at first", "first, I…" and "a second"
    are far more often prose than a count.

    What changes when a fact is updated, and what an answer must repeat to
    draw on a line.
    """
    folded = normalize(text)
    out: set[str] = set()
    for word in _WORD.findall(folded):
        if word in _NUMBER_WORDS:
            out.add(_NUMBER_WORDS[word])
        elif _NUMBER.search(word):
            out.add(_ORDINAL.sub("", word))
    return frozenset(out)


_ORDINAL = compiled(group(r"(?<=\d)", every("numbers.ordinal_suffixes"), "$"))


def _number_words() -> dict[str, str]:
    """Every language's number words (``numbers`` in its file) as the digits they stand for."""
    out: dict[str, str] = {}
    for lang in languages():
        for value, forms in enumerate(lang.words("numbers.words")):
            for word in forms.split():
                out.setdefault(normalize(word), str(value))
    return out


_NUMBER_WORDS = _number_words()


def latest_ids(
    lines: Sequence[tuple[str, int, str]], query_terms: Sequence[str], *, share: float = 0.5
) -> frozenset[str]:
    """Ids of the lines that restate an earlier line's fact with another value.

    *lines* are ``(id, time_ns, text)``.  Two lines say "the same thing" when
    each holds at least *share* of the question's content terms that either
    holds; they differ when both hold values (numbers, number words) and these differ.  The
    newer of such a pair is the latest, unless a still newer one restates it.
    """
    terms = [t for t in query_terms if t]
    if not terms or len(lines) < 2:
        return frozenset()
    holds = {lid: {t for t in terms if t in normalize(text)} for lid, _, text in lines}
    values = {lid: values_in(text) for lid, _, text in lines}
    ordered = sorted(lines, key=lambda line: line[1])
    latest: set[str] = set()
    for place, (newer, _, _) in enumerate(ordered):
        for older, _, _ in ordered[:place]:
            differ = values[newer] and values[older] and values[newer] != values[older]
            if differ and _same_thing(holds[newer], holds[older], share):
                latest.add(newer)
                latest.discard(older)
    return frozenset(latest)


def _same_thing(a: set[str], b: set[str], share: float) -> bool:
    either = a | b
    if not either:
        return False
    both = a & b
    return len(both) / len(either) >= share and bool(both)
