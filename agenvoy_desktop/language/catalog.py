"""The language files: read once, checked against one schema, kept in one order.

Each language is one TOML file in ``data/`` (``en.toml``, ``de.toml`` …) and
every word list, phrase and pattern the agent reads a message with comes
from these files; the modules that read messages only assemble them.  A
file is checked when it is read: a key that no module asks for (a typo, a
list under the wrong heading) or a value of the wrong kind stops the app
with one line naming the file and the key, rather than leaving a cue
silently empty.

The order is English first (the fallback: the app's prompts are English),
then the others by code, so every union of lists, and every pattern built
from them, comes out the same at every start.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

Script = Literal["latin", "han", "kana"]
"""How a language is written: ``latin`` spaces its words (word lists match whole words),
``han`` and ``kana`` do not (word lists match anywhere); ``kana`` text also holds Han
characters, so it is told apart by its kana."""
Kind = Literal["text", "words", "patterns", "pairs"]

FALLBACK = "en"
"""The language of the app's own prompts, assumed for any message no other fits."""


def _cues(section: str, *names: str) -> dict[str, Kind]:
    """The keys of cues: each a ``words`` list and a ``patterns`` list."""
    words: Kind = "words"
    patterns: Kind = "patterns"
    return {
        key: kind
        for name in names
        for key, kind in (
            (f"{section}.{name}.words", words),
            (f"{section}.{name}.patterns", patterns),
        )
    }


SCHEMA: dict[str, Kind] = {
    "language.name": "text",
    "language.script": "text",
    # telling the language of a message (spaced languages besides English)
    "detect.markers": "words",
    # what a sentence does (agent/speech_act.py)
    "speech.lead": "words",
    "speech.abbreviations": "words",
    "speech.quotes": "text",
    "speech.question_openings": "words",
    "speech.question_words": "words",
    "speech.question_endings": "words",
    "speech.request_openings": "words",
    "speech.request_words": "words",
    # "What did we talk about last time?" (agent/recap.py)
    "recap.patterns": "patterns",
    "recap.words": "words",
    "recap.header": "text",
    # questions about a fact of the user's own life (agent/not_remembered.py)
    "own_fact.ask_prepositions": "words",
    "own_fact.ask": "words",
    "own_fact.own": "words",
    "own_fact.own_patterns": "patterns",
    "own_fact.advice": "words",
    "dont_know.examples": "pairs",
    # asking in one language about what was told in another (agent/query_translation.py)
    "translation.into_english": "pairs",
    "translation.from_english": "pairs",
    "translation.archive_markers": "words",
    # which tools a small model's turn offers (agent/policy.py)
    **_cues(
        "cues", "files", "time", "past", "first_person", "documents", "questions", "small_talk"
    ),
    **_cues("cues", "collections"),
    "cues.spans": "words",
    "cues.span_questions": "words",
    "cues.span_after": "words",
    "cues.span_before": "words",
    "cues.refusal_openings": "words",
    # proactive recall (agent/recall.py)
    **_cues("recall", "gathers", "assistant", "name_questions", "advice", "disclosing"),
    "recall.not_names": "words",
    "recall.question_words": "words",
    "recall.kinds": "pairs",
    "recall.grammar_kanji": "words",
    "recall.same": "words",
    "recall.header": "text",
    "recall.advice_header": "text",
    # answers the agent words itself (agent/answer_check.py): "{words}", "{on}", "{day}",
    # "{source}" and "{text}" are filled in
    "reply.never_told_about": "text",
    "reply.never_told": "text",
    "reply.no_words": "text",
    "reply.quote_user": "text",
    "reply.quote_assistant": "text",
    "reply.quote_document": "text",
    "reply.quote_on": "text",
    "reply.yes": "text",
    "reply.no": "text",
    # number words read as values (agent/recall_lines.py)
    "numbers.words": "words",
    # totals and differences of two remembered numbers (agent/number_answers.py)
    "numbers.total": "words",
    "numbers.total_measures": "words",
    "numbers.of": "words",
    "numbers.total_prepositions": "words",
    "numbers.and": "words",
    "numbers.how_much": "words",
    "numbers.how_many": "words",
    "numbers.comparatives": "words",
    "numbers.money_comparatives": "words",
    "numbers.than": "words",
    "numbers.money_words": "words",
    "numbers.lead_verbs": "words",
    "numbers.lead_subjects": "words",
    "numbers.not_units": "words",
    "numbers.determiners": "words",
    "numbers.possessives": "words",
    "numbers.ordinal_suffixes": "words",
    "numbers.day_halves": "words",
    "numbers.yours": "pairs",
    # which way a remembered amount changed (agent/change_answers.py)
    "numbers.opposites": "pairs",
    "numbers.or": "words",
    # a number or a time in a sentence next to a remembered line (agent/recall_lines.py)
    "values.time_words": "words",
    "values.counts": "words",
    "values.spans": "words",
    # "How many days did I spend …?" counted from the lines (agent/date_answers.py)
    "dates.days_asked": "words",
    "dates.span_counts": "words",
    "dates.span_days": "words",
    # the months and weekdays, one entry each, the full name first (language/calendar_names.py)
    "dates.months": "words",
    "dates.weekdays": "words",
    # the words the date parser's phrase shapes take (agent/date_reasoning/mentions.py)
    "dates.count_words": "pairs",
    "dates.vague_counts": "words",
    "dates.not_days": "words",
    "dates.month_verbs": "words",
    "dates.stopwords": "words",
    **_cues("dates", "future"),
    # reading an answer against the user's lines (agent/answer_check.py)
    "answer.not_knowing.negations": "words",
    "answer.not_knowing.verbs": "words",
    "answer.not_knowing.words": "words",
    "answer.unsure.negations": "words",
    "answer.unsure.verbs": "words",
    "answer.refusal.openings": "words",
    "answer.refusal.cannot": "words",
    "answer.refusal.starts": "words",
    "answer.refusal.verbs": "words",
    "answer.after": "words",
    "answer.choice_between": "words",
    "answer.choice": "words",
    "answer.counts": "words",
    "answer.quantities": "words",
    "answer.name_openings": "words",
    "answer.name_which": "words",
    "answer.name_things": "words",
    "answer.yes_no_openings": "words",
    "answer.yes_no_words": "words",
    "answer.yes_no_endings": "words",
    "answer.clause_joins": "words",
    "answer.yes": "words",
    "answer.no": "words",
    "answer.yes_prefixes": "words",
    "answer.no_prefixes": "words",
    **_cues("answer", "negation", "reverses", "allergy", "asks_safe", "elliptic"),
    # what makes a sentence worth keeping in a summary (core/summary_facts.py)
    **_cues("summary", "plans", "people", "events", "listener", "openings"),
    **_cues("summary", "self", "liking", "remarks"),
    "summary.time_words": "words",
    "summary.not_names": "words",
    # the things a question names, looked up in the archive (agent/never_said.py)
    "never_said.determiners": "words",
    "never_said.own": "words",
    "never_said.not_things": "words",
    "never_said.not_names": "words",
    "never_said.pronouns": "words",
    "never_said.verbs": "words",
    # the answer said to the user as "you" (agent/voice.py)
    "voice.lead": "words",
    "voice.openers": "words",
    "voice.assistant_speech": "words",
    "voice.modals": "words",
    "voice.assistant_verbs": "words",
    "voice.no_record": "words",
    "voice.weak_after_am": "words",
    "voice.self_nouns": "words",
    "voice.not_able": "words",
    "voice.agree": "pairs",
    "voice.adverbs": "words",
    "voice.not_a_person": "words",
    "voice.third_person": "pairs",
    "voice.her_object_next": "words",
    # the user's words turned to face them (agent/pronouns.py)
    "pronouns.swaps": "pairs",
    "pronouns.object_forms": "pairs",
    "pronouns.takes_object": "words",
    "pronouns.kept_after": "pairs",
    "pronouns.lower_case_only": "words",
    "pronouns.always_capital": "words",
    # full-text search (core/retrieval/fts_text.py)
    "search.stopwords": "words",
    "search.function_bigrams": "words",
}
"""Every key a language file may hold, and what its value is: ``text`` a string,
``words`` a list of words or phrases (``*`` at the end: any ending), ``patterns`` a list of
regular expressions (where a word list cannot say it), ``pairs`` a list of two strings each."""

_CODE = re.compile(r"^[a-z]{2,3}$")


class LanguageDataError(ValueError):
    """A language file that cannot be used: unreadable, or not the schema's shape."""


@dataclass(frozen=True, slots=True)
class Language:
    """One language's file, checked: its entries under their dotted keys."""

    code: str
    name: str
    script: Script
    entries: Mapping[str, object]

    @property
    def spaced(self) -> bool:
        """Words are separated by spaces: word lists match whole words only."""
        return self.script == "latin"

    def words(self, key: str) -> tuple[str, ...]:
        """The ``words`` or ``patterns`` list under *key* (empty when the file has none)."""
        value = self.entries.get(_known(key, "words", "patterns"), ())
        return tuple(value) if isinstance(value, list) else ()

    def text(self, key: str) -> str | None:
        """The ``text`` under *key*, or None when the file has none."""
        value = self.entries.get(_known(key, "text"))
        return value if isinstance(value, str) else None

    def pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        """The ``pairs`` under *key* (empty when the file has none)."""
        value = self.entries.get(_known(key, "pairs"), ())
        if not isinstance(value, list):
            return ()
        return tuple((str(pair[0]), str(pair[1])) for pair in value)


def _known(key: str, *kinds: Kind) -> str:
    """*key*, if the schema has it as one of *kinds* (a module asking for a typo is a bug)."""
    if SCHEMA.get(key) not in kinds:
        raise KeyError(f"no {'/'.join(kinds)} key {key!r} in the language schema")
    return key


def parse(code: str, source: str) -> Language:
    """The language file *source* of *code*, checked against :data:`SCHEMA`."""
    where = f"language file {code}.toml"
    try:
        table = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise LanguageDataError(f"{where}: not valid TOML ({exc})") from None
    entries = dict(_flatten(table))
    for key, value in entries.items():
        kind = SCHEMA.get(key)
        if kind is None:
            raise LanguageDataError(f"{where}: unknown key {key!r}")
        _check(where, key, kind, value)
    name, script = entries.get("language.name"), entries.get("language.script")
    if not isinstance(name, str) or script not in ("latin", "han", "kana"):
        raise LanguageDataError(
            f"{where}: needs language.name and a language.script of latin, han or kana"
        )
    return Language(code, name, script, entries)


def _flatten(table: Mapping[str, object], prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _check(where: str, key: str, kind: Kind, value: object) -> None:
    if kind == "text":
        ok = isinstance(value, str)
    elif kind == "pairs":
        ok = isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p)
            for p in value
        )
    else:
        ok = isinstance(value, list) and all(isinstance(s, str) and s for s in value)
    if not ok:
        raise LanguageDataError(f"{where}: {key} must be {_SHAPES[kind]}")
    if kind == "patterns":
        for pattern in value:  # type: ignore[attr-defined]  # a list, checked above
            try:
                re.compile(pattern)
            except re.error as exc:
                raise LanguageDataError(
                    f"{where}: {key} has a bad pattern {pattern!r} ({exc})"
                ) from None


_SHAPES: dict[Kind, str] = {
    "text": "a string",
    "words": "a list of non-empty strings",
    "patterns": "a list of regular expressions",
    "pairs": "a list of [string, string] pairs",
}


@cache
def languages() -> tuple[Language, ...]:
    """Every language file shipped with the app, English first, then by code."""
    folder = resources.files(__package__).joinpath("data")
    found: list[Language] = []
    for entry in folder.iterdir():
        code, _, suffix = entry.name.partition(".")
        if suffix != "toml" or not _CODE.match(code):
            continue  # the example sentences (``en.examples.toml``) are the tests' reading
        found.append(parse(code, entry.read_text(encoding="utf-8")))
    if not any(language.code == FALLBACK for language in found):
        raise LanguageDataError(f"language file {FALLBACK}.toml is missing")
    return tuple(sorted(found, key=lambda language: (language.code != FALLBACK, language.code)))


def language(code: str) -> Language:
    """The language *code* (``KeyError`` when no file has it)."""
    for known in languages():
        if known.code == code:
            return known
    raise KeyError(code)
