"""What a question asks about that the user never mentioned.

"How many autographed footballs have I added to my collection?" recalled the
user's lines about autographed *baseballs*, and the starter counted those:
"You have added 20 autographed footballs."  Recall finds what is close; it
cannot say that the thing asked about is missing.  A question names its
thing with a rare word ("footballs", "my iPad case", "Tom", "Google"), and
when no recalled line holds that word and the archive holds it almost
nowhere, the honest answer is "you never told me about footballs"
(``agent/answer_check.py`` holds the answer to it).

Which words name a thing is read off the question (:func:`asked_things`):
a name, or a word a determiner, possessive or count stands before.  Only
such words are looked up, so a question's verbs and adjectives ("older",
"different") never make it "never told".

A name is held to more than its count: "Who became a parent first, Tom or
Alex?" was answered "Tom" though the user only ever told of Alex's baby,
and "How long had I worked before my job at Google?" with the years at
another firm — "Tom" and "Google" are in several archived messages, just
never with what the question asks of them.  A name no recalled line holds
is never told when no archived message holds it together with one of the
question's other things (:func:`_told_with`).

What the window withholds (a session removed or reset, a message deleted,
in its undo window: :func:`~agenvoy_desktop.agent.recall.withholding`) is
not counted: recall cannot show it, so a word said only there was never
told, as far as the answer may say.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from agenvoy_desktop.agent.date_reasoning import parse_temporal_question
from agenvoy_desktop.agent.not_remembered import asks_for_own_fact
from agenvoy_desktop.agent.recall import (
    IDF_CAP,
    NAME_WORD,
    POSSESSIVE,
    RecallItem,
    content_terms,
    doc_frequency,
    question_word,
    withheld_now,
)
from agenvoy_desktop.agent.recall_lines import light_stem
from agenvoy_desktop.core.retrieval.fts_text import STOPWORDS, normalize, query_terms
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.language.calendar_names import full_months, full_weekdays
from agenvoy_desktop.language.patterns import every

log = logging.getLogger(__name__)

NEVER_SAID_DF = 2
"""A question's word in at most this many archived messages (the question itself among
them) was, as good as, never said."""
MIN_WORD = 3


def _words(key: str) -> frozenset[str]:
    """The words under *key* of every language, lower case (a question's words are folded)."""
    return frozenset(w.casefold() for w in every(key))


_THING_LEAD = _words("never_said.determiners")
_OWN = _words("never_said.own")
_NOT_THINGS = _THING_LEAD | _words("never_said.not_things")
"""Words a determiner stands before that name no thing of their own (ordinals, numbers,
common adjectives, "name", "kind"), besides the question words."""
_NOT_NAMES = _words("never_said.not_names") | frozenset((*full_months(), *full_weekdays()))
"""Capitalised words that name no thing: "I'm", titles, and the months and weekdays (a
time)."""
_PRONOUNS = _words("never_said.pronouns")
_VERBS = _words("never_said.verbs")
_LIST_SEP = re.compile(r"\s*(?:,\s*(?:and|or)?|\band\b|\bor\b)\s*", re.IGNORECASE)


def asks_about_own_past(text: str) -> bool:
    """The question is about the user's own life ("Where do I…"), or orders two remembered
    events ("Who became a parent first, Tom or Alex?"): the things it names are looked up."""
    if asks_for_own_fact(text):
        return True
    question = parse_temporal_question(text)
    return question is not None and question.kind == "first"


def never_said(
    store: MemoryStore, text: str, items: Sequence[RecallItem], window: Sequence[str] = ()
) -> list[str]:
    """Storage thread: the things the question asks about that no recalled line holds and
    the archive holds (almost) nowhere, as the answer may name them ("your sister").

    *window*: what the user said in the conversation's window, which the model
    reads too ("My sister prefers museums." two turns back is told, though recall
    leaves the window out and the archive holds it once).  Messages withheld by
    the enclosing ``withholding`` block count as not there."""
    withheld = withheld_now()
    shown = normalize(
        " ".join(
            [*(i.text for i in items), *(n.text for i in items for n in i.neighbours), *window]
        )
    )
    out: list[str] = []
    asked = asked_things(text, shown)
    names = {light_stem(normalize(w)) for w, _ in asked if _is_name(text, w)}
    things = [light_stem(normalize(w)) for w, _ in asked]
    others = [t for t in things if t not in names] or [
        t for t in content_terms(text) if t not in names
    ]
    apart: list[str] = []
    for word, phrase in asked:
        term = light_stem(normalize(word))
        if term in shown:
            continue
        if doc_frequency(store, term, NEVER_SAID_DF + 1, withheld) <= NEVER_SAID_DF:
            out.append(phrase)
        elif term in names and not _told_with(store, term, others, withheld):
            apart.append(phrase)
    # a name never said at all is the surer gap: of "Tom or Alex", with Alex told of as
    # "my cousin Alex adopted a baby girl" and Tom nowhere, only Tom was never told
    return out or apart


def _is_name(text: str, word: str) -> bool:
    """*word* is capitalised inside *text*'s sentence, not its first word ("Tom", "Google")."""
    if not word[:1].isupper():
        return False
    return re.search(rf"(?<![.?!]\s)(?<!^)\b{re.escape(word)}\b", text) is not None


def _told_with(
    store: MemoryStore, name: str, others: Sequence[str], withheld: Withheld = NOTHING_WITHHELD
) -> bool:
    """An archived message besides the question holds *name* and one of *others*: the
    question's other things ("parent" of "Who became a parent first, Tom or Alex?"), or
    its other words where it names no thing ("buy" of "What did I buy at Target?").  True
    when unsure.  The question is archived before recall runs, so it counts once; a
    *withheld* message does not count."""
    name_terms = query_terms(name)
    other_exprs = [q.expr for t in others for q in query_terms(t)[:1]]
    if not name_terms or not other_exprs:
        return True
    expr = f"({name_terms[0].expr} AND ({' OR '.join(other_exprs)}))"
    try:
        found = store.archive.doc_frequency(
            expr,
            IDF_CAP,
            without_sessions=withheld.sessions,
            without_messages=withheld.messages,
        )
        return found > 1
    except Exception:  # a query the index cannot run: as good as told, so nothing is claimed
        log.debug("co-occurrence of %r unavailable", name, exc_info=True)
        return True


def asked_things(text: str, shown: str = "") -> list[tuple[str, str]]:
    """(word, phrase) for each word of a question that names a thing: a name ("Tom",
    "Google"), or a word a determiner, possessive or count stands before ("my iPad case"
    → ("iPad", "your iPad"), "a poster", "many autographed footballs").  A word in a list
    whose other members *shown* holds is left out: "workshops, lectures and conferences"
    asks about all three, and the user who attended two of them was still told about.
    """
    words = NAME_WORD.findall(text)
    things: dict[str, str] = {}
    for index, written in enumerate(words):
        word = POSSESSIVE.sub("", written)
        folded = word.casefold()
        stem = light_stem(folded)
        if (
            len(word) < MIN_WORD
            or stem in STOPWORDS
            or folded in _NOT_THINGS
            or folded in _NOT_NAMES  # weekdays and months name a time, not a thing
        ):
            continue
        if question_word(folded) or question_word(stem):
            continue
        lead = [w.casefold() for w in words[max(0, index - 2) : index]]
        if lead and question_word(lead[-1]):  # "how many years older": a measure
            continue
        named = index > 0 and word[0].isupper() and folded not in _NOT_NAMES
        # "my new bookshelf", "3 posters"; not "that I participated" (a pronoun between)
        counted = any(w in _THING_LEAD or w.isdigit() for w in lead) and lead[-1] not in _PRONOUNS
        if counted and _does(lead, folded):
            counted = False
        if (named or counted) and not _in_found_list(text, word, shown):
            own = bool(lead) and lead[-1] in _OWN
            things.setdefault(word, f"your {word}" if own else word)
    return list(things.items())


def _does(lead: Sequence[str], folded: str) -> bool:
    """*folded* is a verb a word after the determiner stands before: what the thing does
    ("does my brother live", "my sister prefers"), not a thing ("my visit")."""
    after_word = lead[-1] not in _THING_LEAD and not lead[-1].isdigit()
    return after_word and folded in _VERBS


def _in_found_list(text: str, word: str, shown: str) -> bool:
    """*word* is a member of a list ("A, B and C") another member of which *shown* holds.

    A choice ("Tom or Alex") is no such list: each side is asked about on its own."""
    for clause in re.split(r"[.?!;:]", text):
        if re.search(r"\bor\b", clause) and not re.search(r"\band\b", clause):
            continue
        members = [m for m in _LIST_SEP.split(clause) if m.strip()]
        if len(members) < 2 or not any(re.search(rf"\b{re.escape(word)}\b", m) for m in members):
            continue
        others = [m for m in members if not re.search(rf"\b{re.escape(word)}\b", m)]
        if any(light_stem(normalize(m.split()[-1])) in shown for m in others if m.split()):
            return True
    return False
