"""Proactive recall: what the user said before, in front of the model without a tool call.

A small local model does not decide to search its memory; it answers from
what is in its prompt, and invents the rest.  So before the first model round
of every turn the agent runs a hybrid search of the user's message over all
sessions (the current window excluded: the model sees it anyway) and puts the
hits that clear a relevance floor into a short, labelled block at the end of
the system prompt.  An unrelated message (a greeting, a general question)
should leave the block empty: every false line costs prompt tokens and can
mislead the model.

The floor is evidence from either route of the hybrid search:

- the **semantic** route's cosine similarity between the message and the
  hit (MiniLM: a question and the statement that answers it usually score
  above 0.5, unrelated chat below 0.35);
- the **keyword** route: the share of the message's content words (stopwords
  out, CJK as bigrams) that the hit contains, weighted by how rare each word
  is in the archive, so "bike lock code" counts and "what do you" does not;
- **names**: a capitalised word inside a sentence of the message ("What is
  Ana allergic to?") that the hit writes the same way.  People in the user's
  life are asked about by name, without "my", and such questions read as
  general ones.

The floor values are measured, not guessed: ``benchmarks/recall_floor.py``
sweeps them over planted facts (hit rate) and unrelated questions (false
injections), and benchmarks/RESULTS.md records the chosen point.

Everything here runs on the storage thread (it reads the archive and the
vector index); :func:`format_block` is pure.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from agenvoy_desktop.agent.date_reasoning import parse_temporal_question
from agenvoy_desktop.agent.date_reasoning.pointed import pointed_span
from agenvoy_desktop.agent.not_remembered import asks_for_own_fact
from agenvoy_desktop.agent.policy import is_personal
from agenvoy_desktop.agent.recall_lines import (
    focus,
    latest_ids,
    light_stem,
    related_words,
    term_in,
    values_in,
    when,
)
from agenvoy_desktop.agent.speech_act import asks_or_requests, sentences, tells_something
from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.embedding import embed_queries
from agenvoy_desktop.core.retrieval.fts_text import (
    CJK_FUNCTION_BIGRAMS,
    STOPWORDS,
    normalize,
    query_terms,
)
from agenvoy_desktop.core.search import (
    NOTHING_WITHHELD,
    SearchError,
    SearchQuery,
    Withheld,
    is_recallable,
    search_chat_history,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import local_date
from agenvoy_desktop.language import FALLBACK, language, language_of, languages
from agenvoy_desktop.language.patterns import alternatives, compiled, cue, either, every

log = logging.getLogger(__name__)

RECALL_CANDIDATES = 20
"""Hybrid hits considered per turn (the floor and the budget keep fewer)."""
RECALL_MAX_ITEMS = 5
RECALL_BUDGET_CHARS = 1_200
"""About 300 tokens: small next to the window, large enough for five facts."""
ITEM_MAX_CHARS = 320
IDF_CAP = 5_000
"""Document frequencies are counted up to this many (rarer words are what matter)."""
BLOCK_HEADER = language(FALLBACK).text("recall.header") or ""
"""The block's first line.  No explanation of pronouns: the starter echoed one
("I'm the user.") instead of the fact below it."""
BLOCK_HEADERS: dict[str, str] = {
    lang.code: header for lang in languages() if (header := lang.text("recall.header"))
}
"""The header in the message's script: under the English one the starter answered
Chinese questions in English ("我决定下个月开始学什么语言？" -> "I decided to start
learning Spanish.")."""
ADVICE_HEADERS: dict[str, str] = {
    lang.code: header for lang in languages() if (header := lang.text("recall.advice_header"))
}
"""The header when the message asks for advice ("Any tips?", "What do you think?"): there
the lines are not the answer but what the answer should fit ("I bought a power bank"),
and "use it only if it answers" kept the starter from using them at all."""
LOCALISED_HEADER = True
"""Whether the header follows the message's script (benchmarks switch it)."""
# Recalled lines stay as the user said them ("My bike lock code is 4721").  Turned to
# face the user ("Your …", agent/pronouns.py) they were measured and not shipped: with
# the starter, answers in the user's voice went 13 → 11 of 64 and answers right 58 → 56
# (benchmarks/lab/recall_voice.py, two seeds); it read "You're allergic to kiwi fruit" in
# the system prompt as said of itself.
_KANA = re.compile("[\u3040-\u30ff]")
_LONE_KANJI = re.compile(
    "(?<![\u3400-\u4dbf\u4e00-\u9fff])[\u3400-\u4dbf\u4e00-\u9fff](?![\u3400-\u4dbf\u4e00-\u9fff])"
)
"""A kanji between kana: in Japanese a word of its own (猫 in 家に猫はいますか), which no
bigram of the question shares with the line (猫は, 猫を)."""
_GRAMMAR_KANJI = frozenset(every("recall.grammar_kanji"))
"""Lone kanji in nearly every sentence (私, 何, 今): no topic."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_LATIN_WORD = re.compile(rf"[^\W{_CJK}_]+")
_MIN_WORD = 3


QueryKind = Literal["personal", "general", "cjk"]
"""Which floor a message gets (see :func:`query_kind`)."""


@dataclass(frozen=True, slots=True)
class RecallFloor:
    """Which hits count as relevant enough to show the model unasked.

    Three floors, by the kind of message (:func:`query_kind`):

    - **personal** (about the user or the past: "where do I live?", "what did
      we decide?"): likely to need memory, so moderate evidence is enough;
    - **general** (anything else in a Latin script: a general question, a
      greeting): strong evidence only — a greeting resembles every earlier
      greeting, and that is no reason to show one;
    - **cjk** (mostly Chinese/Japanese/Korean): MiniLM, an English model,
      puts almost any two CJK texts at cosine 0.6-0.8, so only shared words
      (bigrams) count.
    """

    personal_min_terms: int = 1
    """Content words of the message a personal hit must share, and then either..."""
    personal_cosine: float = 0.35
    """...this similarity (with ``personal_cosine_share`` of the words), or..."""
    personal_keyword: float = 0.5
    """...this rarity-weighted share of the message's content words."""
    personal_cosine_share: float = 0.0
    """The word share a hit passing on ``personal_cosine`` must also have.

    Measured and left at 0: cosine 0.5 with a share of 0.4 (or a share of
    0.7) kept questions about facts never told from finding loosely related
    lines (9 of 20 → 4), but missed "When is my daughter's birthday?" in
    "Hi, I'm Tomas. I work as a baker in Brno and my daughter Eva turns 7 on
    14 March." (cosine 0.49, share 0.45): one message that tells several
    things is far in meaning from a question about one of them
    (benchmarks/RESULTS.md §12)."""
    personal_cosine_alone: float = 0.75
    """A hit sharing no word needs this similarity.  A message's vector also holds the
    message before it (dialogue context), so the line after a fact scores nearly as
    high as the fact itself (0.69 measured) without containing it."""
    general_score: float = 0.85
    """``cosine + KEYWORD_WEIGHT * keyword share`` a hit must reach for a general message..."""
    general_min_query_terms: int = 2
    """...which must have this many content words at all ("How's it going?" has one: small
    talk resembles earlier small talk, and recalling it helps nobody)."""
    cjk_keyword: float = 0.2
    cjk_min_terms: int = 2
    named_keyword: float = 0.5
    """A general message's hit that shares a name with it clears at this word share.
    "What is Ana allergic to?" found "my sister Ana is allergic to celery" at
    cosine 0.32 (its vector also holds the line before it) and full word share,
    below the general score; "What is Tokyo famous for?" found "The festival in
    Tokyo was awesome!" at share 0.44, which this keeps out."""


KEYWORD_WEIGHT = 0.3
"""How much the keyword share adds to the cosine in the general floor's score."""
DEFAULT_FLOOR = RecallFloor()
E5_FLOOR = RecallFloor(personal_cosine=0.85, personal_cosine_alone=0.9, general_score=1.1)
"""multilingual-e5-small's cosines sit higher than MiniLM's: unrelated lines
score 0.7-0.8 against a question, the answering line 0.85-0.9.  In a profile of
60 earlier sessions, MiniLM's floor let 55 % of unrelated questions and 25 % of
small talk inject lines with e5; this one keeps the planted facts MiniLM's
floor keeps and lets 9 % and 5 % in (MiniLM: 6 % and 0 %; benchmarks/RESULTS.md
§12, "With multilingual-e5-small").  A first calibration: e5 is not the
prepared model yet, so only a profile that chooses it in Settings uses it."""
FLOORS_BY_MODEL: dict[str, RecallFloor] = {"multilingual-e5-small": E5_FLOOR}
"""Floors by the embedding model's own name (``core.model_name.embedding_model_name``)."""


def floor_for(model_name: str) -> RecallFloor:
    """The recall floor measured for this embedding model; MiniLM's for any other.

    A cosine floor is a property of the model that made the vectors: the same
    number means "related" for one model and "anything at all" for another.
    """
    return FLOORS_BY_MODEL.get(model_name, DEFAULT_FLOOR)


@dataclass(frozen=True, slots=True)
class RecallItem:
    """One remembered message that may be relevant to the user's message."""

    message_id: str
    session_id: str
    session_title: str | None
    time_ns: int
    role: str
    text: str
    cosine: float | None = None
    bm25: float | None = None
    coverage: float = 0.0
    """Rarity-weighted share of the message's content words found in this one."""
    matched_terms: int = 0
    query_terms: int = 0
    """Content words in the user's message (the coverage is a share of these)."""
    shared_names: int = 0
    """Names of the user's message (:func:`names_in`) that this one writes the same way."""
    own_cosine: float | None = None
    """The similarity of the shown text alone to the message (:func:`by_own_words`; None:
    not measured)."""
    seq: int = -1
    """The message's place in its session (its neighbours are read by it; -1: unknown)."""
    neighbours: tuple[Neighbour, ...] = ()
    """What the messages next to it add (:func:`add_neighbours`), shown under its line."""

    @property
    def closeness(self) -> float:
        """Its meaning's nearness to the message: the better of the stored vector's and the
        shown text's own similarity (:func:`by_own_words`; 0 when neither is known)."""
        return max(self.cosine or 0.0, self.own_cosine or 0.0)


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A sentence of the message just before or after a remembered one."""

    role: str
    text: str
    after: bool
    """Said after the remembered message (else before it)."""


@dataclass(frozen=True, slots=True)
class RecallBlock:
    """What one turn put in front of the model (``text`` is exactly what was sent)."""

    items: list[RecallItem] = field(default_factory=list)
    text: str = ""
    latest: frozenset[str] = frozenset()
    """Ids of the items marked as the latest of lines that say the same thing."""

    @property
    def message_ids(self) -> list[str]:
        return [item.message_id for item in self.items]


# -- what is withheld --------------------------------------------------------------------------
_withheld: ContextVar[Withheld] = ContextVar("recall_withheld", default=NOTHING_WITHHELD)


@contextlib.contextmanager
def withholding(withheld: Withheld) -> Iterator[None]:
    """Storage thread: every recall search inside the block leaves *withheld* out.

    A session removed or reset, or a message deleted, in the window's undo
    window is still in the store and must reach no prompt.  The lookup of one
    message runs many searches (its own, a translation's, the lines a date or
    a total is worked out from: ``agent/worked_out.py``), all through
    :func:`recall_candidates`; scoping the exclusion around the lookup
    reaches every one of them without passing it through each module.
    """
    token = _withheld.set(withheld)
    try:
        yield
    finally:
        _withheld.reset(token)


def withheld_now() -> Withheld:
    """What the enclosing :func:`withholding` block leaves out (nothing outside one)."""
    return _withheld.get()


# -- finding ---------------------------------------------------------------------------------
def recall_candidates(
    store: MemoryStore,
    session_id: str,
    text: str,
    window_messages: int,
    limit: int = RECALL_CANDIDATES,
    *,
    assistant: bool = False,
    time_range: tuple[int, int] | None = None,
    window_step: int = 0,
    points_at: tuple[int, int] | None = None,
) -> list[RecallItem]:
    """Storage thread: every hybrid hit for *text* with its evidence, no floor applied.

    Searches all sessions; the current session's window is excluded, its
    older messages are not.  A search that cannot run (no content words and
    no embedder) finds nothing rather than failing the turn.  *assistant*:
    the message asks about the assistant's own earlier words
    (:func:`asks_about_assistant`), so they are candidates too.  Each item's
    text is the part of the message that matters (:func:`recall_lines.focus`).
    *points_at*: the past time the message names (``SearchQuery.points_at``).
    """
    if not text.strip():
        return []
    terms = content_terms(text)
    query = SearchQuery(
        text=text,
        mode="hybrid" if store.embedder is not None else "keyword",
        limit=limit,
        session_id=None,
        exclude_window=window_messages,
        window_step=window_step,
        current_session=session_id,
        time_from_ns=None if time_range is None else time_range[0],
        time_to_ns=None if time_range is None else time_range[1],
        points_at=points_at,
        withheld=withheld_now(),
        keyword_also=tuple(sorted({word for term in terms for word in related_words(term)})),
    )
    try:
        result = search_chat_history(store, query)
    except SearchError:
        return []
    weights = _term_weights(store, terms)
    names = names_in(text)
    stating = worth_recalling("user", text)  # a question may ask to confirm what it repeats
    advice = asks_for_advice(text)
    titles: dict[str, str | None] = {}
    items: list[RecallItem] = []
    for hit in result.hits:
        message = hit.item.message
        if message.is_tool_traffic or not (
            worth_recalling(message.role, message.content)
            or (assistant and message.role == "assistant" and message.content.strip())
            or (advice and message.role == "user" and discloses(message.content))
        ):
            continue
        shown = new_part(message.content, terms) if stating else message.content
        if not shown:
            continue
        shown = focus(shown, weights)
        sid = hit.item.session_id
        if sid not in titles:
            meta = store.archive.session(sid)
            titles[sid] = meta.title if meta else None
        coverage, matched = term_coverage(weights, message.content)
        items.append(
            RecallItem(
                message_id=message.id,
                session_id=sid,
                session_title=titles[sid],
                time_ns=message.time_ns,
                role=message.role,
                text=shown,
                cosine=hit.cosine,
                bm25=hit.bm25,
                coverage=coverage,
                matched_terms=matched,
                query_terms=len(terms),
                shared_names=shared_names(names, message.content),
                seq=hit.item.seq,
            )
        )
    return items


GATHER_CANDIDATES = 40
GATHER_MAX_ITEMS = 8
GATHER_BUDGET_CHARS = 2_000
"""A question that counts, adds up or orders ("How many…", "Which did I do first…")
needs every line that mentions the thing, from several sessions: a wider search and
a larger block (about 500 tokens)."""
NEIGHBOUR_CHARS = 200
NEIGHBOUR_SHARE = 0.3
"""The share of the message's content words (rarity-weighted) a neighbour's sentence
must hold to be shown under a remembered line."""
ASSISTANT_NEIGHBOUR_SHARE = 0.6
"""The same for a sentence of the assistant's (its lists of advice mention everything)."""

_GATHERS = compiled(cue("recall.gathers"), re.IGNORECASE)
_ASSISTANT_POINTER = compiled(cue("recall.assistant"), re.IGNORECASE)


def gathers(text: str) -> bool:
    """The message counts, sums or orders things over time (a wider search; see above)."""
    return _GATHERS.search(text) is not None


def asks_about_assistant(text: str) -> bool:
    """The message points at what the assistant said before ("you recommended…",
    "remind me…", "in our previous conversation…"): its answers become recall
    candidates, as the user's statements always are."""
    return _ASSISTANT_POINTER.search(text) is not None


def add_neighbours(store: MemoryStore, items: Sequence[RecallItem], text: str) -> list[RecallItem]:
    """Storage thread: *items* with what the messages next to each add (see :class:`Neighbour`).

    The answer is often split over two messages: "I used a $5 coupon on
    coffee creamer" in one, the store it was used at in the next.  From the
    two readable messages on each side, the sentence holding the most of the
    question's words is shown under the line when it holds a fair share of
    them (:data:`NEIGHBOUR_SHARE`) and brings a value the line lacks (a
    number, a name).  When the question asks for a name ("Where…", "Who…",
    "Which store…") and the line holds none, the nearest user message on
    each side may give one even without the question's words ("I got it at
    Target").  A failed read leaves the items as they were: the neighbours
    help, they are not needed.
    """
    weights = _term_weights(store, content_terms(text))
    if not weights:
        return list(items)
    shown = " ".join(item.text for item in items)
    asks_name = _ASKS_NAME.match(text) is not None
    asked_names = set(names_in(text))
    out: list[RecallItem] = []
    for item in items:
        open_slot = asks_name and not (set(names_in(item.text)) - asked_names)
        try:
            out.append(_with_neighbours(store, item, weights, shown, open_slot=open_slot))
        except Exception:  # a refinement; the line itself is still shown
            log.debug("neighbours of %s unavailable", item.message_id, exc_info=True)
            out.append(item)
    return out


_NAME_QUESTION = either(
    alternatives(every("recall.name_questions.words")), *every("recall.name_questions.patterns")
)
_ASKS_NAME = compiled(rf"^\W*(?:{_NAME_QUESTION})\b" if _NAME_QUESTION else "", re.IGNORECASE)
"""A question that opens asking for a name: "Where…", "Who…", "Which store…"."""


def _with_neighbours(
    store: MemoryStore,
    item: RecallItem,
    weights: dict[str, float],
    shown: str,
    *,
    open_slot: bool = False,
) -> RecallItem:
    """*item* with the sentences its neighbours add (none already in *shown*, the block)."""
    if item.seq < 0:
        return item
    rows = store.archive.messages(item.session_id, max(item.seq - 6, 0), item.seq + 7)
    withheld = withheld_now()
    readable = [
        r for r in rows if is_recallable(r) and not withheld.hides(r.session_id, r.message.id)
    ]
    at = next((i for i, r in enumerate(readable) if r.seq == item.seq), None)
    if at is None:
        return item
    found: list[Neighbour] = []
    before, following = readable[max(at - 2, 0) : at][::-1], readable[at + 1 : at + 3]
    for side, after in ((before, False), (following, True)):
        best = _best_neighbour(side, weights, item.text, shown)
        if best is None and open_slot:
            best = _name_from(next((r for r in side if r.message.role == "user"), None), shown)
        if best is not None:
            found.append(Neighbour(best[0], best[1], after))
    return replace(item, neighbours=tuple(found)) if found else item


def _name_from(row: ArchivedMessage | None, shown: str) -> tuple[str, str] | None:
    """The first sentence of the user's message *row* that names someone or something."""
    if row is None:
        return None
    for sentence in sentences(row.message.content):
        flat = " ".join(sentence.split())
        if flat not in shown and names_in(sentence):
            return row.message.role, flat
    return None


def _best_neighbour(
    rows: Sequence[ArchivedMessage], weights: dict[str, float], line: str, shown: str
) -> tuple[str, str] | None:
    """The sentence of *rows* holding the most of the question's words (at least
    :data:`NEIGHBOUR_SHARE`) that brings a value or a name *line* lacks and that the
    block does not show already (*shown*)."""
    total = sum(weights.values()) or 1.0
    have = values_in(line) | set(names_in(line))
    best: tuple[float, str, str] | None = None
    for row in rows:
        for sentence in sentences(row.message.content):
            flat = " ".join(sentence.split())
            if flat in shown:
                continue
            folded = normalize(sentence)
            share = sum(w for t, w in weights.items() if t in folded) / total
            adds = (values_in(sentence) | set(names_in(sentence))) - have
            # the assistant's words (its advice runs long and names much) only when they
            # clearly answer the question: the user's own words are what recall is for
            floor = NEIGHBOUR_SHARE if row.message.role == "user" else ASSISTANT_NEIGHBOUR_SHARE
            if share >= floor and adds and (best is None or share > best[0]):
                best = (share, row.message.role, flat)
    return None if best is None else (best[1], best[2])


def find_items(
    store: MemoryStore,
    session_id: str,
    text: str,
    window_messages: int,
    floor: RecallFloor = DEFAULT_FLOOR,
    *,
    time_range: tuple[int, int] | None = None,
    window_step: int = 0,
    today: dt.date | None = None,
) -> list[RecallItem]:
    """Storage thread: the hits for *text* that clear the floor, best first, with what their
    neighbours add; as many as the block may show.

    A question that gathers (:func:`gathers`) gets a wider search and more
    items; one that points at the assistant's words (:func:`asks_about_assistant`)
    gets them as candidates.  *time_range* (UTC ns, inclusive) limits the search
    to messages said then; without one, a past time the message names, seen
    from *today*, is searched first (:func:`date_reasoning.pointed.pointed_span`).
    """
    wide = gathers(text)
    pointed = None if today is None or time_range else pointed_span(text, today)
    candidates = recall_candidates(
        store,
        session_id,
        text,
        window_messages,
        GATHER_CANDIDATES if wide else RECALL_CANDIDATES,
        assistant=asks_about_assistant(text),
        time_range=time_range,
        window_step=window_step,
        points_at=pointed,
    )
    kept = apply_floor(candidates, floor, kind=query_kind(text))
    most = GATHER_MAX_ITEMS if wide else RECALL_MAX_ITEMS
    if len(kept) > most:
        # the lines just below the cut are the ones the order may bring in
        kept = (
            by_own_words(store, kept[: OWN_WORDS_LOOK * most], text) + kept[OWN_WORDS_LOOK * most :]
        )
    if pointed is not None and not _asks_what_happened_then(text):
        kept = with_said_then(candidates, kept, pointed)
    return add_neighbours(store, kept[:most], text)


OWN_WORDS_LOOK = 2
"""How many times as many lines as the block shows :func:`by_own_words` orders again."""
OWN_WORDS_CHARS = 160
"""The longest shown text embedded again: a longer message's stored vector is mostly its own
words.  Embedding every line of 10-16 put 0.08-0.25 s before a turn's first token; the
short facts said in passing are the ones the context blurs."""


def by_own_words(store: MemoryStore, items: Sequence[RecallItem], text: str) -> list[RecallItem]:
    """Storage thread: *items* ordered again with the similarity of each shown text alone.

    A stored vector also holds the message before it (dialogue context), which
    finds a short reply ("Yes, 4721") but blurs a short fact said in passing:
    "I don't own a car, I cycle everywhere." said after talk of a trip scored
    0.24 against "Do I own a car?", below five lines of chat about someone's
    new car (0.30-0.37), and was the sixth of five.  Alone it scores 0.68.  The
    better of the two similarities orders the lines (the floor stays on the
    stored one); only when more lines clear than the block shows, since only
    then does the order choose; and only for short lines (:data:`OWN_WORDS_CHARS`).
    An embedding that fails leaves the order.
    """
    embedder = store.embedder
    short = [i for i, item in enumerate(items) if len(item.text) <= OWN_WORDS_CHARS]
    if embedder is None or len(items) < 2 or not short:
        return list(items)
    try:
        asked = embed_queries(embedder, [text])[0]
        shown = np.asarray(embedder.embed([items[i].text for i in short]), dtype=np.float32)
    except Exception:  # a refinement of the order; the stored one still works
        log.debug("own-words similarity unavailable", exc_info=True)
        return list(items)
    norms = np.linalg.norm(shown, axis=1) * (float(np.linalg.norm(asked)) or 1.0)
    cosines = (shown @ asked) / np.where(norms > 0, norms, 1.0)
    rescored = list(items)
    for i, cosine in zip(short, cosines, strict=True):
        rescored[i] = replace(items[i], own_cosine=float(cosine))
    rescored.sort(key=_strength, reverse=True)
    return rescored


POINTED_LOOK = 5
POINTED_ITEMS = 2
"""When no line above the floor was said at the time the question names, the messages
said then among the first POINTED_LOOK candidates are kept below it (at most
POINTED_ITEMS): "What did I do
with my cousin a week ago?" shares almost no words with "I was a bridesmaid at my
cousin's wedding", and the time narrows the search more than any floor."""


def _asks_what_happened_then(text: str) -> bool:
    """A "what did I do on …" question: ``agent/date_answers.py`` shows that day's lines."""
    question = parse_temporal_question(text)
    return question is not None and question.kind == "on_day"


def with_said_then(
    candidates: Sequence[RecallItem], kept: Sequence[RecallItem], span: tuple[int, int]
) -> list[RecallItem]:
    """*kept* plus the leading *candidates* said inside *span*, in the candidates' order;
    *kept* alone when it already holds a line said then."""
    if any(span[0] <= item.time_ns <= span[1] for item in kept):
        return list(kept)
    held = {item.message_id for item in kept}
    then = [
        item
        for item in candidates[:POINTED_LOOK]
        if span[0] <= item.time_ns <= span[1] and item.message_id not in held
    ][:POINTED_ITEMS]
    if not then:
        return list(kept)
    chosen = held | {item.message_id for item in then}
    return [item for item in candidates if item.message_id in chosen]


def said_at_named_time(text: str, items: Sequence[RecallItem], today: dt.date) -> bool:
    """Some of *items* were said at the past time *text* names: the question's words
    ("my relatives") may then name what the line says another way ("my cousin")."""
    span = pointed_span(text, today)
    return span is not None and any(span[0] <= item.time_ns <= span[1] for item in items)


def find_block(
    store: MemoryStore,
    session_id: str,
    text: str,
    window_messages: int,
    floor: RecallFloor = DEFAULT_FLOOR,
    *,
    header: str = BLOCK_HEADER,
    now_ns: int | None = None,
    window_step: int = 0,
) -> RecallBlock:
    """Storage thread: :func:`find_items` as the block the turn shows (:func:`block_for`)."""
    today = None if now_ns is None else local_date(now_ns)
    items = find_items(
        store, session_id, text, window_messages, floor, window_step=window_step, today=today
    )
    return block_for(text, items, header=header, now_ns=now_ns)


def block_for(
    text: str, items: Sequence[RecallItem], *, header: str = BLOCK_HEADER, now_ns: int | None
) -> RecallBlock:
    """The block for *items* found for the message *text* (a gathering question's is larger)."""
    wide = gathers(text)
    return format_block(
        items,
        GATHER_BUDGET_CHARS if wide else RECALL_BUDGET_CHARS,
        header,
        now_ns=now_ns,
        max_items=GATHER_MAX_ITEMS if wide else RECALL_MAX_ITEMS,
        query_terms=content_terms(text),
    )


def with_result(
    text: str,
    block: RecallBlock,
    items: Sequence[RecallItem],
    result: str,
    *,
    header: str,
    now_ns: int | None,
) -> RecallBlock:
    """*block* with *items* (the lines a result was worked out from, before any other) and
    *result* as its last line, if any (``agent/date_answers.py``, ``agent/number_answers.py``)."""
    used = {item.message_id for item in items}
    merged = block_for(
        text,
        [*items, *(i for i in block.items if i.message_id not in used)],
        header=header,
        now_ns=now_ns,
    )
    text = f"{merged.text or header}\n{result}" if result else merged.text
    return RecallBlock(merged.items, text, merged.latest)


def worth_recalling(role: str, content: str) -> bool:
    """Only what the user stated: not questions or requests, not the assistant's words.

    A question holds no fact ("Where do I live?" recalled for "Where do I
    live?" made the starter invent an answer), nor does a request ("Also
    list every temple in Kyoto" recalled for "Where did I decide to stay in
    Kyoto?" — the starter built an answer from it).  The assistant's words
    may be its own inventions: recalling them would turn one wrong answer
    into a memory.  search_chat_history still finds all of them.
    """
    return role == "user" and tells_something(content)


_DISCLOSING = compiled(cue("recall.disclosing"), re.IGNORECASE)


def discloses(content: str) -> bool:
    """A question or request of the user's that tells something of their own on the way.

    "What are some simple ways to keep my living room dust-free, especially with a cat
    that sheds a lot?" holds no statement, yet it says there is a cat that sheds; asked
    later "I've been sneezing a lot. Could it be my living room?", that is what advice
    should build on.  Such lines are recalled only for a message that asks for advice
    (:func:`asks_for_advice`): for a question of fact an earlier request misleads ("Also
    list every temple in Kyoto" made the starter build an answer from it).  A question
    about the user's own facts ("Where is my bike?") tells nothing and stays out.
    """
    return any(
        asks_or_requests(s) and _DISCLOSING.search(s) is not None and not asks_for_own_fact(s)
        for s in sentences(content)
    )


def new_part(content: str, said_now: Sequence[str]) -> str:
    """The sentences of *content* that say something the statement being answered does not.

    The user saying again what they said before ("Hi! My name is Lena and I
    live in Graz." in a new session) found the earlier message, and the
    starter model answered by copying the recalled line back: the user's own
    words echoed.  A recalled message is worth its place only for what the
    new message does not already say, so those sentences alone are shown
    ("" when nothing is left).  Only statements are pruned: "Do I live in
    Graz?" must still find "I live in Graz".
    """
    said = set(said_now)
    return " ".join(s for s in sentences(content) if not set(content_terms(s)) <= said)


def query_kind(text: str) -> QueryKind:
    """``cjk`` when at least half of the letters are CJK, else personal or general."""
    letters = [ch for ch in text if ch.isalpha()]
    cjk = sum(1 for ch in letters if _CJK_RUN.match(ch))
    if letters and cjk * 2 >= len(letters):
        return "cjk"
    return "personal" if is_personal(text) else "general"


def apply_floor(
    candidates: Sequence[RecallItem],
    floor: RecallFloor = DEFAULT_FLOOR,
    *,
    kind: QueryKind = "general",
) -> list[RecallItem]:
    """The candidates that clear the floor for this kind of message, best first."""
    kept = [item for item in candidates if clears(item, floor, kind)]
    kept.sort(key=_strength, reverse=True)
    return kept


def clears(item: RecallItem, floor: RecallFloor, kind: QueryKind) -> bool:
    """True when the hit's evidence reaches the floor of the message's kind."""
    cosine = item.cosine if item.cosine is not None else 0.0
    coverage = item.coverage if item.matched_terms else 0.0
    if kind == "cjk":
        return coverage >= floor.cjk_keyword and item.matched_terms >= floor.cjk_min_terms
    if kind == "personal":
        if item.matched_terms < floor.personal_min_terms:
            return cosine >= floor.personal_cosine_alone
        if cosine >= floor.personal_cosine and coverage >= floor.personal_cosine_share:
            return True
        return coverage >= floor.personal_keyword
    if item.shared_names and coverage >= floor.named_keyword:
        return True
    if item.query_terms < floor.general_min_query_terms:
        return False
    return cosine + KEYWORD_WEIGHT * coverage >= floor.general_score


def _strength(item: RecallItem) -> float:
    """Order of the kept hits: meaning (the better of the stored and the shown text's
    similarity, :func:`by_own_words`) and shared words together (as the general floor)."""
    coverage = item.coverage if item.matched_terms else 0.0
    return item.closeness + KEYWORD_WEIGHT * coverage


# -- keyword evidence ------------------------------------------------------------------------
def content_terms(text: str) -> list[str]:
    """The words that carry a message's meaning: Latin words (not stopwords), CJK bigrams."""
    folded = normalize(text)
    terms: list[str] = []
    for run in _CJK_RUN.findall(folded):
        grams = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
        terms.extend(g for g in grams if g not in CJK_FUNCTION_BIGRAMS)
        if len(run) > 1 and _KANA.search(run):
            terms.extend(k for k in _LONE_KANJI.findall(run) if k not in _GRAMMAR_KANJI)
    for word in _LATIN_WORD.findall(_CJK_RUN.sub(" ", folded)):
        if len(word) >= _MIN_WORD and word not in STOPWORDS and word not in _QUESTION_WORDS:
            terms.append(light_stem(word))
    return list(dict.fromkeys(terms))


def names_in(text: str) -> frozenset[str]:
    """Capitalised words inside the message's sentences: names of people and places.

    A sentence's first word is capitalised anyway; acronyms ("CPU"), "I"
    and weekdays or months are no one's name.  German capitalises every
    noun, so there a noun counts too: it still has to be written the same
    way in the hit and carry half of the message's words (``named_keyword``).
    """
    names: set[str] = set()
    for sentence in _SENTENCE_END.split(text):
        words = NAME_WORD.findall(sentence)
        for written in words[1:]:
            word = POSSESSIVE.sub("", written)
            if (
                len(word) >= 2
                and word[0].isupper()
                and not word.isupper()
                and word.casefold() not in _NOT_NAMES
            ):
                names.add(word)
    return frozenset(names)


def shared_names(names: frozenset[str], content: str) -> int:
    """How many of *names* *content* holds as whole words, capitalised the same way."""
    return sum(
        1 for name in names if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", content) is not None
    )


_SENTENCE_END = re.compile(r"[.!?;:]\s+|[\n。！？]")
NAME_WORD = re.compile(r"[^\W\d_][\w'’-]*")
"""A word as names are written: letters first, then letters, digits, apostrophes, hyphens."""
POSSESSIVE = re.compile(r"['’]s?$")
"""The possessive ending of a word ("Joe's" → "Joe")."""


_NOT_NAMES = frozenset(every("recall.not_names"))
"""Capitalised words that name no one: titles, weekdays, months."""
_QUESTION_WORDS = frozenset(every("recall.question_words"))
"""Question and chat words that the stopword list (built for documents) lacks, and the
words a question that counts or measures is asked with ("How many days did I spend…"), and
the pronouns that stand for what is asked about ("Am I allergic to anything?"): they are in
every such question and no answer's topic, so they only dilute a hit's word share."""


def question_word(word: str) -> bool:
    """A word every question of its kind has ("many", "days", "remember"): no topic."""
    return word in _QUESTION_WORDS


def _term_weights(store: MemoryStore, terms: Sequence[str]) -> dict[str, float]:
    """Inverse document frequency of each term in the archive (rare words weigh more).

    Counted up to a cap, so a common word costs a bounded number of postings.
    """
    if not terms:
        return {}
    total = max(store.archive.count(), 1)
    weights: dict[str, float] = {}
    for term in terms:
        df = doc_frequency(store, term)
        weights[term] = math.log(1.0 + total / (1.0 + df))
    return weights


def doc_frequency(
    store: MemoryStore, term: str, unknown: int = 0, withheld: Withheld = NOTHING_WITHHELD
) -> int:
    """Messages in the archive that hold *term* (*unknown* when the index cannot say),
    those *withheld* not counted."""
    parsed = query_terms(term)
    if not parsed:
        return unknown
    try:
        return store.archive.doc_frequency(
            parsed[0].expr,
            IDF_CAP,
            without_sessions=withheld.sessions,
            without_messages=withheld.messages,
        )
    except Exception:  # the weight is a refinement; equal weights still work
        log.debug("document frequency of %r unavailable", term, exc_info=True)
        return unknown


def term_coverage(weights: dict[str, float], content: str) -> tuple[float, int]:
    """(weighted share of the terms found in *content*, number found)."""
    if not weights:
        return 0.0, 0
    folded = normalize(content)
    found = [t for t in weights if term_in(t, folded)]
    total = sum(weights.values())
    return (sum(weights[t] for t in found) / total if total else 0.0), len(found)


# -- the block -------------------------------------------------------------------------------
def header_for(text: str) -> str:
    """The block's header for a message: Chinese or Japanese for a CJK one, else the
    message's language's (:func:`~agenvoy_desktop.language.language_of`), English where it
    has none; the advice form for a message that asks for advice (:func:`asks_for_advice`)."""
    headers = ADVICE_HEADERS if asks_for_advice(text) else BLOCK_HEADERS
    return headers.get(_header_language(text), headers[FALLBACK])


def _header_language(text: str) -> str:
    if not LOCALISED_HEADER:
        return FALLBACK
    if query_kind(text) == "cjk":
        script = "kana" if _KANA.search(text) else "han"
        return next((lang.code for lang in languages() if lang.script == script), FALLBACK)
    found = language(language_of(text))
    return found.code if found.spaced else FALLBACK  # a CJK word in a Latin message


def block_opening(text: str) -> str:
    """How a recall block for a message in *text*'s language starts: the header of a
    message that does not ask for advice, then the first line's ``- On``.

    The next turn's note is read ahead with it (``agent/read_ahead.py``): a
    turn with a recall block then evaluates ~26 tokens fewer before its first
    one.  A turn without a block, or with another header, only lost the read.
    """
    first_word = when(0, None).split()[0]  # every line opens with the day it was said
    return f"{BLOCK_HEADERS.get(_header_language(text), BLOCK_HEADER)}\n- {first_word}"


_ADVICE = compiled(cue("recall.advice"), re.IGNORECASE)


def asks_for_advice(text: str) -> bool:
    """The message asks for advice or a recommendation, not for a remembered fact.

    "Can you remind me of the website you recommended?" asks for a fact: the
    assistant's earlier words (:func:`asks_about_assistant`).
    """
    return _ADVICE.search(text) is not None and not asks_about_assistant(text)


def format_block(
    items: Sequence[RecallItem],
    budget_chars: int = RECALL_BUDGET_CHARS,
    header: str = BLOCK_HEADER,
    *,
    now_ns: int | None = None,
    max_items: int = RECALL_MAX_ITEMS,
    query_terms: Sequence[str] = (),
) -> RecallBlock:
    """The labelled block for the system prompt, within *budget_chars*, in time order.

    *items* come best first (:func:`apply_floor`): the best that fit the
    budget are chosen (a line too long for what is left is passed over, so a
    short answer ranked below two long lines still gets in; a neighbour's
    sentence already under a better line is not shown again), then listed in
    the order they were said, each with the day it was said and, knowing
    *now_ns*, its age ("On 2023-05-02 (4 weeks ago)").  A
    line that restates an earlier line's fact with another value is marked
    as the latest (:func:`recall_lines.latest_ids`, over *query_terms*):
    "How many followers do I have?" over "I reached 500" and, later, "I'm
    now at 600" was answered with the older value when the lines were
    ordered by match and undated.
    """
    chosen: list[RecallItem] = []
    used = 0
    said: set[str] = set()
    near_said: set[str] = set()
    for item in items[:max_items]:
        if item.text in said:  # the same words in two sessions: one line
            continue
        said.add(item.text)
        # a reply between two remembered lines is the one after the first and the one
        # before the second: shown under the better line only
        near = tuple(n for n in item.neighbours if n.text not in near_said)
        line = replace(item, neighbours=near)
        cost = len(format_line(line, now_ns))
        if chosen and used + cost > budget_chars:
            continue  # a shorter line further down may still fit
        chosen.append(line)
        used += cost
        near_said.update(n.text for n in near)
    if not chosen:
        return RecallBlock()
    chosen.sort(key=lambda item: (item.time_ns, item.seq))
    latest = latest_ids(
        [(i.message_id, i.time_ns, i.text) for i in chosen if i.role == "user"], query_terms
    )
    lines = [header]
    for index, item in enumerate(chosen):
        marked = item.message_id in latest
        same_day = (
            index > 0
            and not marked
            and local_date(item.time_ns) == local_date(chosen[index - 1].time_ns)
        )
        lines.append(format_line(item, now_ns, latest=marked, same_day=same_day))
    return RecallBlock(chosen, "\n".join(lines), latest)


SAME_DAY = "The same day"
"""Opens a line said on the day of the line above (a marked latest line keeps its date)."""


def format_line(
    item: RecallItem, now_ns: int | None = None, *, latest: bool = False, same_day: bool = False
) -> str:
    """``- On 2026-03-14 (3 weeks ago) the user said: "..."``, then what its neighbours add,
    one indented line each; *same_day*: ``- The same day the user said: "..."``.

    The block is read before a turn's first token (``prompt_reuse.py --deep``):
    a line's date and age are 23 tokens (Qwen spells digits one token each),
    "The same day" 9, and lines of one day are common — recall takes the
    messages of one conversation together.  The budget is counted with the
    full form, so the lines chosen do not depend on it.
    """
    said = SAME_DAY if same_day else when(item.time_ns, now_ns, latest=latest)
    who = _SPEAKER.get(item.role, item.role)
    lines = [f'- {said} {who}: "{clip(item.text)}"']
    for near in item.neighbours:
        lines.append(f'  {_near_label(near)}: "{clip(near.text, NEIGHBOUR_CHARS)}"')
    return "\n".join(lines)


_SPEAKER = {"user": "the user said", "assistant": "you said"}


def _near_label(near: Neighbour) -> str:
    if near.role == "assistant":
        return "you replied" if near.after else "you had said"
    return "the user went on" if near.after else "the user had said"


def clip(text: str, limit: int = ITEM_MAX_CHARS) -> str:
    """One line of at most *limit* characters (head and tail kept)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = limit * 2 // 3
    return flat[:head].rstrip() + " … " + flat[-(limit - head - 3) :].lstrip()
