"""Calibrate proactive document recall's floors: evidence injected against false injections.

Setup as ``documents_recall.py``: each LoCoMo conversation is a collection of
dated Markdown notes, indexed with the real MiniLM embedder (the same cached
profile).  No chat model: each question only runs the two searches proactive
recall runs (by meaning and by words, ``DocumentIndex.semantic_ranked`` /
``keyword_ranked``), ``DEEP`` deep, and the floor is applied offline with the
product's own selection (``agent.document_recall.choose_passages``), so a
whole grid costs two searches per question.  A shallower search (the product
asks for ``max_passages + keyword_depth`` chunks per search) is the deep
list cut short; that this equals the product's search is checked for the
shipped setting (``document_tools._passages_of``) and reported.

What is asked (queries embedded once, in batches, with the real model):

- **evidence**: every category 1-4 question with evidence, of its own
  conversation's collection.  *Hit*: an injected passage covers one of the
  question's evidence turns; *recall* = hits / questions; *precision* =
  injected passages covering evidence / injected passages.
- **off-topic** negatives, asked of every collection: small talk and
  greetings, general-knowledge and code requests (also those of the
  conversation-memory floor, ``memory_facts``), and advice questions near the
  conversations' topics.  *False injection* = asks with any passage injected.
- reported, not constrained: category 5 (adversarial: a premise the notes
  contradict, e.g. the other speaker did it; LoCoMo's evidence for them is in
  the notes, so the passage that shows the premise wrong is a fair injection),
  and questions of *another* conversation (a personal question the collection
  cannot answer; those people's lives overlap in topic).

Rule: the setting with the highest evidence recall whose false injection on
the off-topic negatives is at most ``MAX_FALSE`` (ties: fewer false
injections, then higher precision, then higher floors).  Held out: chosen on
the even conversations' questions and collections, measured on the odd (and
the reverse).  Results: ``benchmarks/results/documents_floor.json``.

    .venv/bin/python benchmarks/documents_floor.py [--quick]
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import benchlib
import documents_notes as dn
import numpy as np
from benchlib import Stopwatch
from documents_recall import cached_collections, collection_name, questions_of
from memory_facts import CHITCHAT, HELDOUT_UNRELATED, UNRELATED

from agenvoy_desktop.agent.document_recall import SHIPPED, DocumentFloor, choose_passages
from agenvoy_desktop.agent.document_tools import Passage, _passages_of
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.rag.index import DocumentIndex
from agenvoy_desktop.rag.search import clean_query, hit_of

DEEP = 10
MAX_FALSE = 0.05
# e5's cosines sit higher than MiniLM's (unrelated text near 0.7-0.8), so its grid does too.
# Two other scales were tried and dropped (RESULTS.md §15.6, "One other scale" and "Centred
# cosines"): a chunk's cosine minus the question's mean over its collection, and cosines
# centred on the collection's mean vector; the code that measured them is in git history.
PASSAGE_FLOORS = [
    round((0.70 if benchlib.uses_e5() else 0.30) + 0.025 * i, 3) for i in range(17)
]  # 0.30 .. 0.70 (e5: 0.70 .. 1.10)
AGREED_STEP = 0.025
AGREED_LOWEST = 0.65 if benchlib.uses_e5() else 0.15
KEYWORD_DEPTHS = (1, 3, 5, 7)
CROSS_PER_COLLECTION = 20
BEFORE = DocumentFloor(0.40, 0.28, 3, 2, agreed_first=False)
"""The setting chosen on 13 questions, before this benchmark."""

SMALL_TALK: tuple[str, ...] = (
    "hi",
    "hello",
    "hey there",
    "thanks",
    "thank you!",
    "ok",
    "cool",
    "bye",
    "good night",
    "what's the weather like?",
    "what's the weather like today?",
    "write me a poem",
    "write me a poem about the sea",
    "tell me a joke",
    "how are you?",
    "who are you?",
    "what can you do?",
    "what time is it?",
    "what day is it today?",
    "can you help me?",
    "I'm bored",
    "that's great, thanks!",
    "sounds good",
    "never mind",
    "let's talk about something else",
    "summarize our conversation",
    "are you a robot?",
    "I love you",
    "good job",
    "sorry, my mistake",
)
NEAR_TOPIC = HELDOUT_UNRELATED[20:]
GENERAL = UNRELATED + HELDOUT_UNRELATED[:20]
OFF_TOPIC_GROUPS: dict[str, Sequence[str]] = {
    "small_talk": SMALL_TALK + CHITCHAT,
    "general": GENERAL,
    "near_topic": NEAR_TOPIC,
}
KINDS = ("evidence", "adversarial", "cross", *OFF_TOPIC_GROUPS)


@dataclass(slots=True)
class Asked:
    """One question asked of one collection: both deep rankings, no floor applied yet."""

    text: str
    kind: str
    conversation: int
    evidence: frozenset[str]
    semantic: list[tuple[int, float]]
    keyword: list[int]
    hits: dict[int, Any]  # rowid -> DocumentHit (text dropped)
    refs: dict[int, frozenset[str]]  # rowid -> dialogue ids it covers


@dataclass(frozen=True, slots=True)
class Plan:
    """What to ask of one collection: (text, kind, evidence)."""

    conversation: int
    items: list[tuple[str, str, frozenset[str]]]


# -- what is asked --------------------------------------------------------------------------
def plans(convs: Sequence[benchlib.Conversation]) -> list[Plan]:
    rng = random.Random(7)
    out: list[Plan] = []
    for number, conv in enumerate(convs):
        items = [(q.question, "evidence", frozenset(q.evidence)) for q in questions_of(conv)]
        items += [
            (q.question, "adversarial", frozenset(q.evidence))
            for q in conv.questions
            if q.category == 5
        ]
        others = [q.question for i, c in enumerate(convs) if i != number for q in questions_of(c)]
        picked = rng.sample(others, min(CROSS_PER_COLLECTION, len(others)))
        items += [(text, "cross", frozenset()) for text in picked]
        for group, texts in OFF_TOPIC_GROUPS.items():
            items += [(text, group, frozenset()) for text in texts]
        out.append(Plan(number, items))
    return out


def query_text(text: str) -> str | None:
    """The text the product searches with (None: nothing to search, no passages)."""
    try:
        return clean_query(text)
    except KnownError:
        return None


def embed_queries(texts: Iterable[str]) -> dict[str, np.ndarray]:
    unique = sorted({t for t in (query_text(x) for x in texts) if t is not None})
    vectors, seconds = benchlib.cached_embeddings(
        "documents-floor-queries", unique, benchlib.embedding_model(), queries=True
    )
    if seconds:
        print(f"  embedded {len(unique)} queries in {seconds:.1f} s")
    return dict(zip(unique, vectors.astype(np.float32), strict=True))


def ask_one(
    index: DocumentIndex,
    note: dn.NoteSet,
    item: tuple[str, str, frozenset[str]],
    number: int,
    vectors: dict[str, np.ndarray],
) -> Asked:
    text, kind, evidence = item
    query = query_text(text)
    if query is None:
        return Asked(text, kind, number, evidence, [], [], {}, {})
    semantic = index.semantic_ranked(vectors[query], DEEP)
    keyword = [rowid for rowid, _ in index.keyword_ranked(query, DEEP)]
    rows = index.chunk_rows(list(dict.fromkeys([*(r for r, _ in semantic), *keyword])))
    hits = {
        r: dataclasses.replace(hit_of(index.collection, row), text="") for r, row in rows.items()
    }
    refs = {
        r: frozenset(note.refs(row.path, row.start_line, row.end_line)) for r, row in rows.items()
    }
    return Asked(text, kind, number, evidence, semantic, keyword, hits, refs)


def matches_product(index: DocumentIndex, asked: Asked, vectors: dict[str, np.ndarray]) -> bool:
    """Whether the cut-short deep lists choose what the product's own search chooses."""
    query = query_text(asked.text)
    if query is None:
        return True
    real = _passages_of(index, query, vectors[query], SHIPPED.search_depth)
    ours = passages_at(asked, SHIPPED.search_depth)
    cite = [p.hit.citation for p in choose_passages(real, SHIPPED)]
    return cite == [p.hit.citation for p in choose_passages(ours, SHIPPED)]


def ask_all(
    convs: Sequence[benchlib.Conversation], quick: bool
) -> tuple[list[Asked], dict[str, Any], float]:
    paths, notes, build = cached_collections(convs, quick)
    todo = plans(convs)
    vectors = embed_queries(text for plan in todo for text, _, _ in plan.items)
    asked: list[Asked] = []
    agree = checked = 0
    for plan, conv, note in zip(todo, convs, notes, strict=True):
        index = dn.open_index(paths, collection_name(conv))
        try:
            for item in plan.items:
                one = ask_one(index, note, item, plan.conversation, vectors)
                asked.append(one)
                agree += matches_product(index, one, vectors)
                checked += 1
        finally:
            index.close()
        print(f"  {collection_name(conv)}: {len(plan.items)} questions")
    return asked, build, agree / max(checked, 1)


# -- scoring ----------------------------------------------------------------------------------
def passages_at(asked: Asked, depth: int) -> list[Passage]:
    """The passages a search *depth* deep finds (as ``document_tools._passages_of`` merges them)."""
    semantic = asked.semantic[:depth]
    cosine = dict(semantic)
    rank = {rowid: place for place, rowid in enumerate(asked.keyword[:depth])}
    rowids = list(dict.fromkeys([*cosine, *rank]))
    return [Passage(asked.hits[r], cosine.get(r), rank.get(r)) for r in rowids if r in asked.hits]


def injected(asked: Asked, floor: DocumentFloor, cache: dict[int, list[Passage]]) -> list[int]:
    """Row ids of the chunks the block would show for *asked* under *floor*."""
    depth = floor.search_depth
    if depth not in cache:
        cache[depth] = passages_at(asked, depth)
    by_citation = {h.citation: r for r, h in asked.hits.items()}
    return [by_citation[p.hit.citation] for p in choose_passages(cache[depth], floor)]


Prepared = list[tuple[Asked, dict[int, list[Passage]]]]
"""Each ask with its passages per search depth (filled as settings ask for them)."""
Row = tuple[DocumentFloor, dict[str, Any]]


def score(prepared: Prepared, floor: DocumentFloor) -> dict[str, Any]:
    """Per kind: asks, asks with a block, and for evidence questions hits and precision."""
    counts: dict[str, list[int]] = {kind: [0, 0, 0, 0, 0] for kind in KINDS}
    for asked, cache in prepared:
        shown = injected(asked, floor, cache)
        row = counts[asked.kind]
        row[0] += 1
        row[1] += bool(shown)
        good = [r for r in shown if asked.refs.get(r, frozenset()) & asked.evidence]
        row[2] += bool(good)
        row[3] += len(good)
        row[4] += len(shown)
    out: dict[str, Any] = {}
    for kind, (n, blocks, hits, good, shown) in counts.items():
        if not n:
            continue
        out[kind] = {"n": n, "injected": round(blocks / n, 4)}
        if kind in ("evidence", "adversarial"):
            out[kind]["evidence_hit"] = round(hits / n, 4)
            out[kind]["precision"] = round(good / shown, 4) if shown else None
    off = [counts[g] for g in OFF_TOPIC_GROUPS if counts[g][0]]
    out["off_topic_false"] = round(sum(c[1] for c in off) / max(sum(c[0] for c in off), 1), 4)
    return out


def grid() -> list[DocumentFloor]:
    floors: list[DocumentFloor] = []
    for passage in PASSAGE_FLOORS:
        agreed = AGREED_LOWEST
        while agreed <= passage + 1e-9:
            for depth in KEYWORD_DEPTHS:
                for first in (False, True):
                    floors.append(
                        DocumentFloor(passage, round(agreed, 3), depth, SHIPPED.max_passages, first)
                    )
            agreed += AGREED_STEP
    return floors


def choose(
    rows: Sequence[tuple[DocumentFloor, dict[str, Any]]],
) -> tuple[DocumentFloor, dict[str, Any]]:
    """The rule of the module docstring."""
    allowed = [r for r in rows if r[1]["off_topic_false"] <= MAX_FALSE]

    def key(row: Row) -> tuple[float, ...]:
        floor, s = row
        return (
            s["evidence"]["evidence_hit"],
            -s["off_topic_false"],
            s["evidence"]["precision"] or 0.0,
            floor.passage,
            floor.agreed,
        )

    return max(allowed, key=key)


def line(name: str, floor: DocumentFloor, s: dict[str, Any]) -> str:
    ev = s["evidence"]
    order = "agreed 1st" if floor.agreed_first else "by cosine"
    parts = [
        f"{name:<8} {floor.passage:.3f} {floor.agreed:.3f} kw{floor.keyword_depth} {order}",
        f"recall {ev['evidence_hit']:.3f} prec {ev['precision'] or 0:.3f} inj {ev['injected']:.3f}",
        f"false {s['off_topic_false']:.3f}",
    ]
    parts += [f"{g} {s[g]['injected']:.3f}" for g in (*OFF_TOPIC_GROUPS, "cross") if g in s]
    if "adversarial" in s:
        parts.append(f"cat5 {s['adversarial']['injected']:.3f}")
    return " | ".join(parts)


def held_out(asked: Sequence[Asked], floors: Sequence[DocumentFloor]) -> list[dict[str, Any]]:
    """Choose on the even conversations, measure on the odd (and the reverse)."""
    folds = []
    for parity in (0, 1):
        tune: Prepared = [(a, {}) for a in asked if a.conversation % 2 == parity]
        test: Prepared = [(a, {}) for a in asked if a.conversation % 2 != parity]
        if not tune or not test:
            continue
        best, _ = choose([(f, score(tune, f)) for f in floors])
        folds.append(
            {
                "chosen_on": "even" if parity == 0 else "odd",
                "floor": dataclasses.asdict(best),
                "test": score(test, best),
                "shipped_on_test": score(test, SHIPPED),
                "before_on_test": score(test, BEFORE),
            }
        )
    return folds


def per_passage_floor(rows: Sequence[Row], agreed_first: bool) -> list[dict[str, Any]]:
    """For each passage floor, the rule's pick among its settings (or the fewest false ones)."""
    out = []
    order = "agreed first" if agreed_first else "by cosine"
    print(f"\nbest allowed setting per passage floor, {order}:")
    for passage in PASSAGE_FLOORS:
        near = [r for r in rows if r[0].passage == passage and r[0].agreed_first == agreed_first]
        allowed = [r for r in near if r[1]["off_topic_false"] <= MAX_FALSE]
        pick = choose(allowed) if allowed else min(near, key=lambda r: r[1]["off_topic_false"])
        out.append({"floor": dataclasses.asdict(pick[0]), **pick[1], "allowed": bool(allowed)})
        print(line("allowed" if allowed else "none ok", *pick))
    return out


def alone(prepared: Prepared) -> list[dict[str, Any]]:
    """Meaning alone (no lower bar for agreed passages, cosine order): the plain trade-off."""
    out = []
    print("\nmeaning alone (agreed floor = passage floor, cosine order):")
    for passage in PASSAGE_FLOORS:
        floor = DocumentFloor(passage, passage, 1, SHIPPED.max_passages, agreed_first=False)
        s = score(prepared, floor)
        out.append({"floor": dataclasses.asdict(floor), **s})
        print(line("alone", floor, s))
    return out


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    convs = benchlib.load_locomo()[: 1 if args.quick else None]
    with Stopwatch() as sw:
        asked, build, agree = ask_all(convs, args.quick)
    prepared: Prepared = [(a, {}) for a in asked]
    print(
        f"asked {len(asked)} in {sw.seconds:.1f} s;"
        f" cut-short lists choose what the product chooses on {agree:.2%}"
    )
    floors = grid()
    with Stopwatch() as sweep:
        rows = [(f, score(prepared, f)) for f in floors]
    best, best_score = choose(rows)
    shipped = score(prepared, SHIPPED)
    before = score(prepared, BEFORE)
    print(f"{len(floors)} settings scored in {sweep.seconds:.1f} s\n")
    print(line("before", BEFORE, before))
    print(line("shipped", SHIPPED, shipped))
    print(line("chosen", best, best_score))
    tables = {f"agreed_first_{first}": per_passage_floor(rows, first) for first in (False, True)}
    plain = alone(prepared)
    folds = held_out(asked, floors)
    for fold in folds:
        print(
            f"\nheld out (chosen on the {fold['chosen_on']} conversations, measured on the rest):"
        )
        print(line("chosen", DocumentFloor(**fold["floor"]), fold["test"]))
        print(line("shipped", SHIPPED, fold["shipped_on_test"]))
        print(line("before", BEFORE, fold["before_on_test"]))
    benchlib.write_result(
        "documents_floor",
        {
            "build": build,
            "asked": {k: sum(a.kind == k for a in asked) for k in KINDS},
            "ask_s": round(sw.seconds, 1),
            "sweep_s": round(sweep.seconds, 1),
            "settings": len(floors),
            "cut_short_matches_product": round(agree, 4),
            "rule": f"max evidence recall s.t. off-topic false injection <= {MAX_FALSE}",
            "before": {"floor": dataclasses.asdict(BEFORE), **before},
            "shipped": {"floor": dataclasses.asdict(SHIPPED), **shipped},
            "chosen": {"floor": dataclasses.asdict(best), **best_score},
            "best_per_passage_floor": tables,
            "passage_floor_alone": plain,
            "held_out": folds,
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
