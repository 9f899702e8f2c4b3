"""Saying "I don't know" when memory has nothing: a small model's answer to an unknown fact.

Asked about a fact of their life that the user never told ("What is my
daughter's name?"), the 0.5B starter invents one ("My daughter's name is
Emily.", "我女儿的名字是小明。") — the worst answer a memory-keeping assistant
can give.  Telling it not to guess does little: of 16 such questions it
admitted not knowing 1 as it was, 2 with a line saying so in the system
prompt.  Showing it works: made-up exchanges before the conversation, each
a question about a fact answered "I don't know: I can't find it in what
you've told me", and it answers that way — 10 of 16 with one English
exchange, and with two in the message's language 10 of the 11 questions
of ``benchmarks/unknown_facts.py`` that reached it (benchmarks/RESULTS.md
§11f).

So a small model's turn gets two such exchanges, in the message's
language, when all of these hold:

- the message asks for a fact of the user's own life (:func:`asks_for_own_fact`:
  "what/which/where/when/who … my/our …", 我…什么/哪/几…, "wie heißt mein…";
  ``own_fact`` in each language's file),
  not for advice ("What should I cook for my kids?", 我怎么…);
- proactive recall put nothing in front of the model (the history search
  may still be offered; once it finds something, the exchanges are left out
  of the next round, whose prompt then holds the result);
- no earlier user message in the current window shares a content word with
  the question (the answer may be right there: "My daughter is Eva." … "What
  is my daughter's name?").

The exchanges are part of what the model was sent, so they are recorded
with the turn's recall event and the Context tab shows them, labelled as
made up.  Not shown when recall found something, even something weak:
with a recall block beside them the starter said "I don't know" to "What
is my bike lock code?" with the code in the block (planted facts answered
30 → 13 of 32).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agenvoy_desktop.agent.speech_act import asks_or_requests, sentences
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.language import FALLBACK, Language, by_script, languages
from agenvoy_desktop.language import language_of as detect
from agenvoy_desktop.language.calendar_names import month_starts
from agenvoy_desktop.language.openings import own_fact_ask
from agenvoy_desktop.language.patterns import alternatives, compiled, either, whole_words

SHOW_EXAMPLE = True
"""Whether turns show the exchange at all (benchmarks switch it)."""
Example = tuple[tuple[str, str], ...]
"""The made-up exchanges: (question, answer) pairs."""

EXAMPLES: dict[str, Example] = {
    lang.code: lang.pairs("dont_know.examples")
    for lang in languages()
    if lang.pairs("dont_know.examples")
}
"""Two exchanges per language (``dont_know.examples``): with one, the starter admitted 8 of
14 unknown facts in Chinese, German and Japanese; with two, 12 of 14 (it copies the second,
shorter answer)."""
REPLY_LANGUAGES = tuple(lang.code for lang in languages() if lang.text("reply.never_told"))
"""The languages :func:`language_of` answers with: those whose file words the agent's own
replies (``reply.*``, read by ``answer_check``).  Another language's message is answered
in English there; its "I don't know" exchange already follows it (:func:`example_for`)."""


@dataclass(frozen=True, slots=True)
class _OwnFact:
    """One language's reading of a question for a fact of the user's own life."""

    ask: re.Pattern[str]
    own: re.Pattern[str]
    advice: re.Pattern[str]

    def asks(self, sentence: str) -> bool:
        return bool(
            self.own.search(sentence)
            and self.ask.search(sentence)
            and not self.advice.search(sentence)
        )


def _own_fact(lang: Language) -> _OwnFact:
    def words(key: str) -> str:
        listed = lang.words(key)
        return whole_words(listed) if lang.spaced else alternatives(listed)

    return _OwnFact(
        ask=own_fact_ask(lang),
        own=compiled(
            either(words("own_fact.own"), *lang.words("own_fact.own_patterns")), re.IGNORECASE
        ),
        advice=compiled(words("own_fact.advice"), re.IGNORECASE),
    )


_OWN_FACT = {lang.code: _own_fact(lang) for lang in languages()}
"""Per language, not one union: "my" and "was" are English, and "mein" and "was" German."""


def asks_for_own_fact(text: str) -> bool:
    """One of the message's questions asks for a fact of the user's own life, not for advice,
    and the message does not bring what it asks about (:func:`brings_its_own`)."""
    return not brings_its_own(text) and any(
        asks_or_requests(s) and _own_fact_question(s) for s in sentences(text)
    )


_CODE = re.compile(
    r"```|`[^`\n]+`|\b(?:def|function|class)\s+\w+\s*[(:{]|\w\([^()\n]*\)\s*(?:[:;{]|$)|[;{}]\s*$",
    re.MULTILINE,
)
_LISTED = re.compile(r":\s+(?!\d)(?P<after>[^\W\d_][^?\n]*)")
"""A colon that opens what the question is about ("my lunch: a banana and two eggs"); a
time ("14:05") is no list."""
_NUMBER = re.compile(r"(?<![\w.,:])\d+(?:[.,:]\d+)*(?P<tail>st|nd|rd|th|%|k\b)?", re.IGNORECASE)
_MONTH = compiled(rf"\b(?:{alternatives(month_starts())})", re.IGNORECASE)
NUMBERS_BROUGHT = 2
"""A message giving this many numbers (dates left out) brings the figures it asks about."""


def brings_its_own(text: str) -> bool:
    """The message holds what its question is about: code, a list after a colon, a
    percentage, or two numbers to work with.

    "What is wrong with my code? ```…```", "How many calories are in my lunch: a banana
    and two eggs?", "What is my BMI if I'm 180 cm and 80 kg?" read as questions for a
    fact of the user's life, and with nothing recalled the starter answered 11 of 12
    such questions "I don't know: I can't find it in what you've told me."
    (benchmarks/RESULTS.md §11f).  A question for a remembered fact rarely gives two
    figures of its own; dates ("on 5 March 2023", "the 12th") do not count.
    """
    if _CODE.search(text):
        return True
    for listed in _LISTED.finditer(text):
        if not _own_fact_ask_any(listed["after"]):
            return True
    figures = 0
    for number in _NUMBER.finditer(text):
        tail = (number["tail"] or "").casefold()
        if tail == "%":
            return True
        if tail in ("st", "nd", "rd", "th") or _is_date(text, number):
            continue
        figures += 1
    return figures >= NUMBERS_BROUGHT


def _is_date(text: str, number: re.Match[str]) -> bool:
    """A year (19xx, 20xx) or a day next to a month's name."""
    value = number.group(0)
    if len(value) == 4 and value[:2] in ("19", "20"):
        return True
    near = text[max(0, number.start() - 12) : number.end() + 12]
    return _MONTH.search(near) is not None


def _own_fact_ask_any(text: str) -> bool:
    """*text* opens like a question for a fact in some language ("what is my…")."""
    return any(own_fact_ask(lang).search(text) for lang in languages())


def _own_fact_question(sentence: str) -> bool:
    """The sentence read in its script's language (a CJK one), else in the first spaced
    language (English first) whose question for a fact it opens with."""
    found = by_script(sentence)
    if found is not None:
        return _OWN_FACT[found.code].asks(sentence)
    for lang in languages():
        if lang.spaced and _OWN_FACT[lang.code].ask.search(sentence):
            return _OWN_FACT[lang.code].asks(sentence)
    return False


def language_of(text: str) -> str:
    """One of :data:`REPLY_LANGUAGES` (English first): which reply wording fits
    the message (a rough guess: ``agenvoy_desktop.language.detect``)."""
    return detect(text, REPLY_LANGUAGES)


def example_for(text: str) -> Example:
    """The made-up exchange in the message's language (English's when it has none)."""
    return EXAMPLES.get(detect(text), EXAMPLES[FALLBACK])


def example_messages(example: Example | None) -> list[ChatMessage]:
    """The exchanges as chat messages, put between the system prompt and the conversation."""
    messages: list[ChatMessage] = []
    for question, answer in example or ():
        messages.append({"role": "user", "content": question})
        messages.append({"role": "assistant", "content": answer})
    return messages


def example_count(messages: Sequence[ChatMessage]) -> int:
    """How many messages after the system prompt are a made-up exchange (the Context tab)."""
    for example in EXAMPLES.values():
        shown = example_messages(example)
        if [dict(m) for m in messages[1 : 1 + len(shown)]] == shown:
            return len(shown)
    return 0


def example_to_json(example: Example) -> list[list[str]]:
    """The exchanges as stored with the turn's recall event."""
    return [[question, answer] for question, answer in example]


def example_from_json(value: object) -> Example | None:
    """The exchanges of a stored recall event (None when absent or unreadable)."""
    if not isinstance(value, list) or not value:
        return None
    pairs: list[tuple[str, str]] = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2):
            return None
        pairs.append((str(pair[0]), str(pair[1])))
    return tuple(pairs)


def window_may_answer(terms: Sequence[str], window: Sequence[Message]) -> bool:
    """An earlier user message in the window shares a content word with the question.

    *terms* are the question's content words (``recall.content_terms``); the
    window's last message is the question itself and is skipped.
    """
    if not terms:
        return False
    for message in window[:-1]:
        if message.role != "user" or message.is_tool_traffic:
            continue
        folded = message.content.casefold()
        if any(term in folded for term in terms):
            return True
    return False
