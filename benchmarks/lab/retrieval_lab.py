"""Offline lab for hybrid retrieval on LoCoMo: dump the routes once, try fusions fast.

``dump`` imports the 10 LoCoMo conversations through ``MemoryStore`` with the
real MiniLM embedder (texts cached in ``.bench-cache/embeddings``), then saves
for every question of categories 1-4: its query vector, the keyword route's
deep ranking (``search_chat_history``, limit 100, with bm25 scores) and every
stored vector of its conversation.  ``eval`` loads that dump and scores
variants of the hybrid route in numpy, tuned on one half of the conversations
(even / odd) and measured on the other, both ways round.  All groups write
``results/retrieval_lab.json``; one group (``--group names``) writes
``results/retrieval_lab.<group>.json``.

    .venv/bin/python benchmarks/lab/retrieval_lab.py dump
    .venv/bin/python benchmarks/lab/retrieval_lab.py eval [--group names]
"""

from __future__ import annotations

import argparse
import pickle
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.embedding import CONTEXT_TOKENS, _clip
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.vectors import from_blobs, message_of

DUMP = benchlib.BENCH_CACHE / "retrieval-lab.pkl"
CACHE = benchlib.BENCH_CACHE / "embeddings" / "retrieval-lab-texts.pkl"
CATEGORIES = (1, 2, 3, 4)
DEEP = 100
LIMIT = 10
ABSENT = 10**6
"""The rank of a message a route did not return."""
FloatArray = npt.NDArray[np.float32]


# -- a caching embedder ----------------------------------------------------------------------
class CachingEmbedder:
    """The real embedder behind a text -> vector cache kept on disk."""

    def __init__(self, model: Path) -> None:
        self._model = model
        self._real: Any = None
        self._cache: dict[str, FloatArray] = {}
        if CACHE.exists():
            self._cache = pickle.loads(CACHE.read_bytes())
        self.dim = 384

    def embed(self, texts: Sequence[str]) -> FloatArray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            if self._real is None:
                self._real = benchlib.open_embedder(self._model)
            for start in range(0, len(missing), 256):
                chunk = missing[start : start + 256]
                for text, vec in zip(chunk, self._real.embed(chunk), strict=True):
                    self._cache[text] = np.asarray(vec, dtype=np.float32)
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)

    def submit(self, texts: Sequence[str]) -> Future[FloatArray]:
        future: Future[FloatArray] = Future()
        future.set_result(self.embed(texts))
        return future

    def save(self) -> None:
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_bytes(pickle.dumps(self._cache))

    def close(self) -> None:
        self.save()
        if self._real is not None:
            self._real.close()


# -- dump ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Question:
    text: str
    category: int
    conversation: int
    evidence: frozenset[str]
    qvec: FloatArray
    kw: list[tuple[int, float]]  # keyword route (with context), rowid + bm25, best first
    kw_body: list[tuple[int, float]]  # keyword on the message's own words only
    hybrid: list[int]  # the shipped hybrid top 10


@dataclass(slots=True)
class Conv:
    rowids: list[int]  # in seq order
    refs: dict[int, str]
    text: dict[int, str]
    labels: list[int]  # vector labels
    matrix: FloatArray  # one row per label


@dataclass(slots=True)
class Dump:
    convs: list[Conv] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def dump() -> None:
    convs = benchlib.load_locomo()
    model = benchlib.embedding_model()
    embedder = CachingEmbedder(model)
    out = Dump()
    with benchlib.temp_profile("retrieval-lab") as paths:
        benchlib.install_model(paths, model)
        store = MemoryStore(paths, embedder, max_history_bytes=1 << 30)
        try:
            t0 = time.perf_counter()
            for conv in convs:
                store.import_messages(
                    benchlib.conversation_messages(conv), conv.session_id, title=conv.sample_id
                )
            print(f"imported in {time.perf_counter() - t0:.0f} s")
            for index, conv in enumerate(convs):
                out.convs.append(_conv(store, conv.session_id))
                for q in conv.questions:
                    if q.category not in CATEGORIES or not q.evidence:
                        continue
                    out.questions.append(_ask(store, embedder, conv, q, index))
                print(f"  {conv.session_id}: {len(out.questions)} questions so far")
        finally:
            store.close()
            embedder.close()
    DUMP.write_bytes(pickle.dumps(out))
    print(f"wrote {DUMP}")


def _conv(store: MemoryStore, sid: str) -> Conv:
    pairs = store.archive.vectors(sid)
    rows = store.archive.messages(sid, 0, 10**9)
    return Conv(
        rowids=[r.rowid for r in rows],
        refs={r.rowid: r.message.ref or "" for r in rows},
        text={r.rowid: r.message.content for r in rows},
        labels=[label for label, _ in pairs],
        matrix=from_blobs([b for _, b in pairs], 384),
    )


def _ask(
    store: MemoryStore,
    embedder: CachingEmbedder,
    conv: benchlib.Conversation,
    q: benchlib.Question,
    index: int,
) -> Question:
    def run(mode: Any, limit: int) -> list[Any]:
        query = SearchQuery(q.question, mode=mode, limit=limit, session_id=conv.session_id)
        return search_chat_history(store, query).hits

    body = store.archive.keyword_search(q.question, limit=DEEP, session_id=conv.session_id)
    return Question(
        text=q.question,
        category=q.category,
        conversation=index,
        evidence=frozenset(q.evidence),
        qvec=embedder.embed([q.question])[0],
        kw=[(h.item.rowid, float(h.bm25 or 0.0)) for h in run("keyword", DEEP)],
        kw_body=[(item.rowid, float(score)) for item, score in body],
        hybrid=[h.item.rowid for h in run("hybrid", LIMIT)],
    )


_WH = re.compile(
    r"^\s*(?:(?:in|on|at|for|from|according to)\s+)?"
    r"(?:what|when|where|who|whom|whose|why|how|which)"
    r"(?:\s+(?:kinds?|types?|sorts?)\s+of)?(?:\s+(?:many|much|long|often))?\s+",
    re.IGNORECASE,
)
_AUX = re.compile(
    r"^((?:\S+\s+){0,2}?)(?:did|does|do|is|are|was|were|has|have|had|can|could|would|will|should|might)\s+",
    re.IGNORECASE,
)


def statement(question: str) -> str:
    """The question without its question word and auxiliary: "When did Caroline
    go to the support group?" -> "Caroline go to the support group"."""
    text = question.strip().rstrip("?").strip()
    text = _WH.sub("", text, count=1)
    text = _AUX.sub(r"\1", text, count=1)
    return text or question


class _Unpickler(pickle.Unpickler):
    """Reads a dump written by this script run as ``__main__`` from any importer."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__" and name in ("Dump", "Conv", "Question"):
            return globals()[name]
        return super().find_class(module, name)


def load() -> Dump:
    with DUMP.open("rb") as fh:
        data: Dump = _Unpickler(fh).load()
    return data


# -- eval ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Prepared:
    """One question as arrays over its conversation's messages (seq order)."""

    category: int
    conversation: int
    gold: npt.NDArray[np.bool_]  # evidence turns
    n_gold: int
    sem: FloatArray  # best cosine of each message
    kw: FloatArray  # bm25 (0 where the keyword route did not return it)
    kw_rank: npt.NDArray[np.int64]  # 1-based, large where absent
    qvec: FloatArray
    matrix: FloatArray  # the conversation's stored vectors
    owner: npt.NDArray[Any]  # message position of each vector
    msg_vecs: FloatArray  # one unit vector per message (mean of its parts)


def prepare(data: Dump, qvecs: FloatArray | None = None) -> list[Prepared]:
    out: list[Prepared] = []
    pos_maps = [{r: i for i, r in enumerate(c.rowids)} for c in data.convs]
    owners = [
        np.array([pos_maps[ci][message_of(lab)] for lab in c.labels])
        for ci, c in enumerate(data.convs)
    ]
    msg_vecs = []
    for ci, c in enumerate(data.convs):
        mv = np.zeros((len(c.rowids), c.matrix.shape[1]), dtype=np.float32)
        np.add.at(mv, owners[ci], c.matrix)
        msg_vecs.append(mv / np.maximum(np.linalg.norm(mv, axis=1, keepdims=True), 1e-6))
    for qi, q in enumerate(data.questions):
        conv, pos = data.convs[q.conversation], pos_maps[q.conversation]
        n = len(conv.rowids)
        qvec = q.qvec if qvecs is None else qvecs[qi]
        sem = best_per_message(conv.matrix @ qvec, owners[q.conversation], n)
        kw = np.zeros(n, dtype=np.float32)
        kw_rank = np.full(n, ABSENT, dtype=np.int64)
        for rank, (rowid, score) in enumerate(q.kw, start=1):
            kw[pos[rowid]] = score
            kw_rank[pos[rowid]] = rank
        gold = np.array([conv.refs[r] in q.evidence for r in conv.rowids])
        out.append(
            Prepared(
                q.category,
                q.conversation,
                gold,
                len(q.evidence),
                sem,
                kw,
                kw_rank,
                qvec,
                conv.matrix,
                owners[q.conversation],
                msg_vecs[q.conversation],
            )
        )
    return out


def best_per_message(sims: FloatArray, owner: npt.NDArray[Any], n: int) -> FloatArray:
    best = np.full(n, -2.0, dtype=np.float32)
    np.maximum.at(best, owner, sims.astype(np.float32))
    return best


def ranks_of(scores: FloatArray) -> npt.NDArray[np.int64]:
    """1-based rank of each entry by descending score (stable)."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


def recall_at(scores: FloatArray, p: Prepared, k: int = LIMIT) -> float:
    top = np.argsort(-scores, kind="stable")[:k]
    return float(p.gold[top].sum()) / p.n_gold


Variant = Callable[[Prepared, dict[str, Any]], FloatArray]


def rrf(p: Prepared, c: dict[str, Any]) -> FloatArray:
    depth, k, w = c["depth"], c["k"], c["w_sem"]
    sem_rank = ranks_of(p.sem)
    out = np.where(sem_rank <= depth, w / (k + sem_rank), 0.0)
    out += np.where(p.kw_rank <= depth, 1.0 / (k + p.kw_rank), 0.0)
    return out.astype(np.float32)


def score_fusion(p: Prepared, c: dict[str, Any]) -> FloatArray:
    """Convex mix of per-query normalised scores (keyword: bm25 / its max;
    semantic: min-max over its top N), each route cut at its depth."""
    depth = c["depth"]
    kw = p.kw / p.kw.max() if p.kw.max() > 0 else p.kw
    kw = np.where(p.kw_rank <= depth, kw, 0.0)
    top = np.sort(p.sem)[::-1]
    lo = top[min(c["n"], len(top)) - 1]
    hi = top[0]
    sem = np.clip((p.sem - lo) / max(hi - lo, 1e-6), 0.0, None)
    sem = np.where(ranks_of(p.sem) <= depth, sem, 0.0)
    return (c["a"] * sem + (1 - c["a"]) * kw).astype(np.float32)


def z_fusion(p: Prepared, c: dict[str, Any]) -> FloatArray:
    """z-scores over each route's top N, mixed convexly."""
    n = c["n"]

    def z(x: FloatArray, present: npt.NDArray[np.bool_]) -> FloatArray:
        top = np.sort(x[present])[::-1][:n]
        if len(top) < 2:
            return np.where(present, 0.0, -3.0).astype(np.float32)
        return np.where(present, (x - top.mean()) / max(top.std(), 1e-6), -3.0).astype(np.float32)

    kz = z(p.kw, p.kw_rank <= c["depth"])
    sz = z(p.sem, ranks_of(p.sem) <= c["depth"])
    return np.maximum(c["a"] * sz + (1 - c["a"]) * kz, -3.0).astype(np.float32)


def with_neighbours(base: Variant) -> Variant:
    """A message's score plus b x its best neighbour's (the turn after a
    question often holds the answer, and vice versa)."""

    def variant(p: Prepared, c: dict[str, Any]) -> FloatArray:
        s = base(p, c)
        s = s - s.min()
        nb = np.zeros_like(s)
        nb[1:] = np.maximum(nb[1:], s[:-1])
        nb[:-1] = np.maximum(nb[:-1], s[1:])
        return (s + c["b"] * nb).astype(np.float32)

    return variant


def rocchio(base: Variant) -> Variant:
    """Semantic route re-run with the query vector moved towards the keyword
    route's top m messages (pseudo-relevance feedback), then *base*."""

    def variant(p: Prepared, c: dict[str, Any]) -> FloatArray:
        top = np.argsort(p.kw_rank, kind="stable")[: c["m"]]
        top = top[p.kw_rank[top] < ABSENT]
        if len(top) == 0:
            return base(p, c)
        q = p.qvec + c["beta"] * p.msg_vecs[top].mean(axis=0)
        q = q / np.linalg.norm(q)
        return base(replace(p, sem=best_per_message(p.matrix @ q, p.owner, len(p.sem))), c)

    return variant


def shifted(s: FloatArray, by: int) -> FloatArray:
    """s moved *by* positions (out[i] = s[i - by]), zero-filled."""
    out = np.zeros_like(s)
    if by > 0:
        out[by:] = s[:-by]
    elif by < 0:
        out[:by] = s[-by:]
    else:
        out[:] = s
    return out


def neighbour_sum(base: Variant) -> Variant:
    """s + bp x previous message's s + bn x next message's s (+ b2 for two away)."""

    def variant(p: Prepared, c: dict[str, Any]) -> FloatArray:
        s = base(p, c)
        s = s - s.min()
        out = s + c["bp"] * shifted(s, 1) + c["bn"] * shifted(s, -1)
        if c.get("b2"):
            out += c["b2"] * (shifted(s, 2) + shifted(s, -2))
        return out.astype(np.float32)

    return variant


def diversified(base: Variant) -> Variant:
    """Greedy top 10: a message within *span* turns of one already chosen has
    its score cut by *cut* (so the list covers more places in the conversation)."""

    def variant(p: Prepared, c: dict[str, Any]) -> FloatArray:
        s = base(p, c).astype(np.float64)
        s = s - s.min()
        out = np.full(len(s), -1.0)
        live = s.copy()
        for place in range(LIMIT):
            best = int(np.argmax(live))
            out[best] = LIMIT - place + 1.0
            live[best] = -np.inf
            lo, hi = max(best - c["span"], 0), best + c["span"] + 1
            live[lo:hi] = np.where(np.isfinite(live[lo:hi]), live[lo:hi] * (1 - c["cut"]), -np.inf)
        return out.astype(np.float32)

    return variant


def smoothed_routes(p: Prepared, c: dict[str, Any]) -> FloatArray:
    """RRF over routes whose scores were first smoothed over neighbours."""

    def smooth(x: FloatArray, present: npt.NDArray[np.bool_]) -> FloatArray:
        low = x[present].min() if present.any() else 0.0
        x = np.where(present, x - low, 0.0).astype(np.float32)
        return (x + c["b"] * np.maximum(shifted(x, 1), shifted(x, -1))).astype(np.float32)

    kw = smooth(p.kw / max(float(p.kw.max()), 1e-6), p.kw_rank < ABSENT)
    sem = smooth(p.sem, np.ones(len(p.sem), dtype=bool))
    return rrf(replace(p, sem=sem, kw_rank=np.where(kw > 0, ranks_of(kw), ABSENT)), c)


def grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = [{}]
    for name, values in axes.items():
        configs = [{**c, name: v} for c in configs for v in values]
    return configs


def mean_recall(items: Sequence[Prepared], fn: Variant, c: dict[str, Any]) -> float:
    return float(np.mean([recall_at(fn(p, c), p) for p in items])) if items else 0.0


ROWS: list[dict[str, Any]] = []


def held_out(
    name: str, items: Sequence[Prepared], fn: Variant, configs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Tune on one half (even / odd conversations), measure on the other."""
    halves = [[p for p in items if p.conversation % 2 == h] for h in (0, 1)]
    table = [(c, [mean_recall(h, fn, c) for h in halves]) for c in configs]
    n0, n1 = len(halves[0]), len(halves[1])

    def overall(r: list[float]) -> float:
        return (r[0] * n0 + r[1] * n1) / (n0 + n1)

    best_all = max(table, key=lambda t: overall(t[1]))
    best_even = max(table, key=lambda t: t[1][0])
    best_odd = max(table, key=lambda t: t[1][1])
    row = {
        "variant": name,
        "best_all": best_all[0],
        "overall": round(overall(best_all[1]), 4),
        "even": round(best_all[1][0], 4),
        "odd": round(best_all[1][1], 4),
        "odd_tuned_on_even": round(best_even[1][1], 4),
        "even_tuned_on_odd": round(best_odd[1][0], 4),
        "tuned_even": best_even[0],
        "tuned_odd": best_odd[0],
    }
    print(
        f"{name:34s} all {row['overall']:.4f} (even {row['even']:.4f} odd {row['odd']:.4f})"
        f"  held out: odd {row['odd_tuned_on_even']:.4f} even {row['even_tuned_on_odd']:.4f}"
        f"  best {best_all[0]}",
        flush=True,
    )
    ROWS.append(row)
    return row


def query_side(data: Dump, items: list[Prepared], configs: list[dict[str, Any]]) -> None:
    """The question rewritten as a statement: alone, max-pooled with the
    original's cosine, and averaged with the original's vector."""
    embedder = CachingEmbedder(benchlib.embedding_model())
    try:
        rw = embedder.embed([statement(q.text) for q in data.questions])
    finally:
        embedder.close()
    alone = prepare(data, rw)
    mixed_vecs = np.stack([q.qvec for q in data.questions]) + rw
    mixed_vecs /= np.linalg.norm(mixed_vecs, axis=1, keepdims=True)
    mixed = prepare(data, mixed_vecs.astype(np.float32))
    pooled = [replace(p, sem=np.maximum(p.sem, a.sem)) for p, a in zip(items, alone, strict=True)]
    for name, group in (
        ("rewritten", alone),
        ("max(orig, rewritten)", pooled),
        ("mean vector", mixed),
    ):
        held_out(f"semantic only, {name}", group, lambda p, c: p.sem, [{}])
        held_out(f"rrf grid, {name}", group, rrf, configs)


def turn_texts(data: Dump, with_next: bool) -> list[str]:
    """Every turn's text in conversation order, bare or with ``(then: <head of the next>)``."""
    texts: list[str] = []
    for conv in data.convs:
        turns = [conv.text[r] for r in conv.rowids]
        for i, text in enumerate(turns):
            tail = ""
            if with_next and i + 1 < len(turns):
                tail = f" (then: {_clip(' '.join(turns[i + 1].split()), CONTEXT_TOKENS)})"
            texts.append(f"{text}{tail}")
    return texts


def extra_vectors(data: Dump, with_next: bool) -> FloatArray:
    """One more vector per turn (cached in ``.bench-cache/embeddings``)."""
    name = "locomo-turns-next" if with_next else "locomo-turns-bare"
    texts = turn_texts(data, with_next)
    vectors, _ = benchlib.cached_embeddings(name, texts, benchlib.embedding_model())
    return vectors.astype(np.float32)


def doc_cosines(items: list[Prepared], data: Dump, matrix: FloatArray) -> list[FloatArray]:
    """Each question's cosine with one extra vector per turn of its conversation."""
    starts = np.cumsum([0] + [len(c.rowids) for c in data.convs])
    return [
        (matrix[starts[p.conversation] : starts[p.conversation + 1]] @ p.qvec).astype(np.float32)
        for p in items
    ]


def evaluate_doc_side(items: list[Prepared], data: Dump) -> None:
    """Extra vectors per message (bare text; text + next turn), pooled with the shipped one."""
    extra = {
        "bare": doc_cosines(items, data, extra_vectors(data, with_next=False)),
        "next": doc_cosines(items, data, extra_vectors(data, with_next=True)),
    }
    combos = [("ctx+bare", ["bare"]), ("ctx+next", ["next"]), ("ctx+bare+next", ["bare", "next"])]
    rr = [{"k": k, "depth": 40, "w_sem": w} for k in (3, 10) for w in (0.5, 0.75, 1.0)]
    ns = [{**b, "bp": 0.25, "bn": x, "b2": 0.1} for b in rr for x in (0.25, 0.5)]
    for name, keys in combos:
        for pool in ("mean", "max"):
            group = []
            for i, p in enumerate(items):
                stack = np.stack([p.sem, *(extra[key][i] for key in keys)])
                sem = stack.mean(axis=0) if pool == "mean" else stack.max(axis=0)
                group.append(replace(p, sem=sem.astype(np.float32)))
            label = f"{pool}({name})"
            held_out(f"semantic only, {label}", group, lambda p, c: p.sem, [{}])
            held_out(f"rrf, {label}", group, rrf, rr)
            held_out(f"rrf + neighbour sum, {label}", group, neighbour_sum(rrf), ns)


def sentence_cosines(items: list[Prepared], data: Dump) -> list[FloatArray]:
    """Each question's best cosine with one vector per sentence of each turn of its
    conversation (turns of one sentence reuse their bare vector's sentence)."""
    texts: list[str] = []
    owner: list[int] = []  # global turn index of each sentence
    turn = 0
    for conv in data.convs:
        for rowid in conv.rowids:
            for sentence in benchlib.split_sentences(conv.text[rowid]) or [conv.text[rowid]]:
                texts.append(sentence)
                owner.append(turn)
            turn += 1
    vectors, _ = benchlib.cached_embeddings("locomo-sentences", texts, benchlib.embedding_model())
    matrix = vectors.astype(np.float32)
    owners = np.array(owner)
    starts = np.cumsum([0] + [len(c.rowids) for c in data.convs])
    out: list[FloatArray] = []
    for p in items:
        lo, hi = starts[p.conversation], starts[p.conversation + 1]
        mask = (owners >= lo) & (owners < hi)
        sims = matrix[mask] @ p.qvec
        out.append(best_per_message(sims, owners[mask] - lo, int(hi - lo)))
    return out


def evaluate_sentences(items: list[Prepared], data: Dump) -> None:
    """One vector per sentence of a turn, pooled (max) with the shipped vector."""
    per_sentence = sentence_cosines(items, data)
    rr = [{"k": k, "depth": 40, "w_sem": w} for k in (3, 10) for w in (0.5, 0.75, 1.0)]
    ns = [{**b, "bp": 0.25, "bn": x, "b2": 0.1} for b in rr for x in (0.25, 0.5)]
    for label, pool in (("sentences alone", False), ("max(shipped, sentences)", True)):
        group = [
            replace(p, sem=(np.maximum(p.sem, sent) if pool else sent).astype(np.float32))
            for p, sent in zip(items, per_sentence, strict=True)
        ]
        held_out(f"semantic only, {label}", group, lambda p, c: p.sem, [{}])
        held_out(f"rrf, {label}", group, rrf, rr)
        held_out(f"rrf + neighbour sum, {label}", group, neighbour_sum(rrf), ns)


def features(p: Prepared, extras: Sequence[FloatArray]) -> FloatArray:
    """Per-message features for a learned linear re-scorer: each route's
    reciprocal rank and normalised score, and the neighbours' keyword and
    semantic ones."""
    kw_r = np.where(p.kw_rank <= DEEP, 1.0 / (3 + p.kw_rank), 0.0)
    kw_n = p.kw / max(float(p.kw.max()), 1e-6)
    cols = [kw_r, kw_n]
    for cos in (p.sem, *extras):
        cols += [1.0 / (3 + ranks_of(cos)), cos - cos.max()]
    sem_r = 1.0 / (3 + ranks_of(np.mean([p.sem, *extras], axis=0)))
    for x in (kw_r, sem_r, kw_n):
        cols += [shifted(x, 1), shifted(x, -1)]
    return np.stack(cols, axis=1).astype(np.float32)


def train_logistic(x: FloatArray, y: FloatArray, steps: int = 400) -> FloatArray:
    """Weighted logistic regression (positives up-weighted), plain Adam."""
    w = np.zeros(x.shape[1] + 1, dtype=np.float64)
    xb = np.hstack([x, np.ones((len(x), 1), dtype=np.float32)]).astype(np.float64)
    pos_w = (len(y) - y.sum()) / max(y.sum(), 1.0)
    sw = np.where(y > 0, pos_w, 1.0)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, steps + 1):
        z = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (sw * (z - y)) / len(y) + 1e-4 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w.astype(np.float32)


def evaluate_learned(items: list[Prepared], data: Dump) -> None:
    """A logistic re-scorer over both routes' ranks and scores and their
    neighbours', trained on one half, measured on the other."""
    bare = doc_cosines(items, data, extra_vectors(data, with_next=False))
    nxt = doc_cosines(items, data, extra_vectors(data, with_next=True))
    feats = [features(p, [b, n]) for p, b, n in zip(items, bare, nxt, strict=True)]
    mu = np.concatenate(feats).mean(axis=0)
    sd = np.concatenate(feats).std(axis=0) + 1e-6
    feats = [(f - mu) / sd for f in feats]
    for tune in (0, 1):
        idx = [i for i, p in enumerate(items) if p.conversation % 2 == tune]
        test = [i for i, p in enumerate(items) if p.conversation % 2 != tune]
        x = np.concatenate([feats[i] for i in idx])
        y = np.concatenate([items[i].gold.astype(np.float32) for i in idx])
        w = train_logistic(x, y)
        r_test = np.mean([recall_at(feats[i] @ w[:-1], items[i]) for i in test])
        r_tune = np.mean([recall_at(feats[i] @ w[:-1], items[i]) for i in idx])
        half = "even" if tune == 0 else "odd"
        print(f"learned linear, tuned on {half}: tune {r_tune:.4f}, held out {r_test:.4f}")
        ROWS.append({"variant": f"learned linear, tuned on {half}", "held_out": round(r_test, 4)})


def evaluate_speaker(items: list[Prepared], data: Dump) -> None:
    """Diagnostic only (LoCoMo-specific, not shippable: the app's messages carry
    roles, not names): boost messages spoken by the one speaker a question names."""
    boosted = []
    for p, q in zip(items, data.questions, strict=True):
        conv = data.convs[q.conversation]
        speakers = [conv.text[r].split(":", 1)[0] for r in conv.rowids]
        named = {n for n in speakers if n in q.text}
        match = np.array([sp in named for sp in speakers]) if len(named) == 1 else None
        boosted.append((p, match))

    lookup = {id(p): m for p, m in boosted}

    def variant(p: Prepared, c: dict[str, Any]) -> FloatArray:
        s = neighbour_sum(rrf)(p, c)
        match = lookup[id(p)]
        if match is None:
            return s
        return (s * np.where(match, 1.0, 1.0 - c["cut"])).astype(np.float32)

    cfg = [
        {"k": 3, "depth": 40, "w_sem": w, "bp": 0.25, "bn": 0.5, "b2": 0.1, "cut": cut}
        for w in (0.5, 0.75)
        for cut in (0.0, 0.25, 0.5, 0.75)
    ]
    held_out("rrf + neighbours + speaker (diag)", items, variant, cfg)


def evaluate_names(items: list[Prepared], data: Dump) -> None:
    """Messages that write a name the question names (``recall.names_in``, the
    same rule as proactive recall's): the others' fused score is cut by *cut*
    (before or after the neighbour sum), or matches gain *add* x the top score."""
    from agenvoy_desktop.agent.recall import names_in, shared_names

    lookup: dict[int, npt.NDArray[np.bool_] | None] = {}
    for p, q in zip(items, data.questions, strict=True):
        conv = data.convs[q.conversation]
        names = names_in(q.text)
        match = np.array([shared_names(names, conv.text[r]) > 0 for r in conv.rowids])
        lookup[id(p)] = match if names and match.any() and not match.all() else None

    def cut_after(p: Prepared, c: dict[str, Any]) -> FloatArray:
        s = neighbour_sum(rrf)(p, c)
        match = lookup[id(p)]
        if match is None:
            return s
        return (s * np.where(match, 1.0, 1.0 - c["cut"])).astype(np.float32)

    def cut_before(p: Prepared, c: dict[str, Any]) -> FloatArray:
        match = lookup[id(p)]

        def base(p2: Prepared, c2: dict[str, Any]) -> FloatArray:
            s = rrf(p2, c2)
            if match is None:
                return s
            return (s * np.where(match, 1.0, 1.0 - c2["cut"])).astype(np.float32)

        return neighbour_sum(base)(p, c)

    cfg = [
        {"k": 3, "depth": 40, "w_sem": w, "bp": 0.25, "bn": 0.5, "b2": 0.1, "cut": cut}
        for w in (0.5, 0.75, 1.0)
        for cut in (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0)
    ]
    held_out("rrf + neighbours, names cut after", items, cut_after, cfg)
    held_out("rrf + neighbours, names cut before", items, cut_before, cfg)

    def cut_by_share(p: Prepared, c: dict[str, Any]) -> FloatArray:
        """Cut scaled by how rare the matching messages are (a name in most
        messages says little about which one answers)."""
        s = neighbour_sum(rrf)(p, c)
        match = lookup[id(p)]
        if match is None:
            return s
        share = float(match.mean())
        cut = c["cut"] * min(1.0, (1.0 - share) / c["rare"])
        return (s * np.where(match, 1.0, 1.0 - cut)).astype(np.float32)

    rare = [{**x, "rare": r} for x in cfg for r in (0.25, 0.5, 0.75)]
    held_out("rrf + neighbours, names cut by rarity", items, cut_by_share, rare)
    shares = [float(m.mean()) for m in lookup.values() if m is not None]
    print("share of messages writing the name: p10/p50/p90", np.percentile(shares, [10, 50, 90]))
    named = sum(1 for m in lookup.values() if m is not None)
    print(f"questions naming someone a message writes (not all messages): {named}/{len(items)}")


def evaluate_neighbours(items: list[Prepared]) -> None:
    base = [
        {"k": 3, "depth": 40, "w_sem": 0.5},
        {"k": 3, "depth": 40, "w_sem": 0.75},
        {"k": 10, "depth": 40, "w_sem": 0.75},
        {"k": 3, "depth": 100, "w_sem": 0.75},
    ]
    nb = [{**b, "b": x} for b in base for x in (0.3, 0.5, 0.7, 1.0)]
    held_out("rrf + max neighbour", items, with_neighbours(rrf), nb)
    ns = [
        {**b, "bp": x, "bn": y, "b2": z}
        for b in base
        for x in (0.0, 0.25, 0.5)
        for y in (0.0, 0.25, 0.5)
        for z in (0.0, 0.1)
    ]
    held_out("rrf + neighbour sum", items, neighbour_sum(rrf), ns)
    sm = [{**b, "b": x} for b in base for x in (0.1, 0.25, 0.5)]
    held_out("rrf over smoothed routes", items, smoothed_routes, sm)
    dv = [
        {"k": 3, "depth": 40, "w_sem": w, "bp": 0.25, "bn": bn, "b2": 0.1, "span": sp, "cut": cut}
        for w in (0.5, 0.75)
        for bn in (0.25, 0.5)
        for sp in (1, 2, 4)
        for cut in (0.1, 0.25, 0.5)
    ]
    held_out("rrf + neighbour sum, diversified", items, diversified(neighbour_sum(rrf)), dv)
    sf = grid(
        a=(0.3, 0.4, 0.5), n=(10, 40), depth=(40, 100), bp=(0.25, 0.5), bn=(0.25, 0.5), b2=(0.0,)
    )
    held_out("score fusion + neighbour sum", items, neighbour_sum(score_fusion), sf)


def evaluate_ceiling(items: list[Prepared]) -> None:
    """Recall@10 of a perfect re-ordering of the candidates (both routes' top
    *depth*, with and without their neighbours): what re-ranking could reach."""
    for depth in (10, 20, 40, 100):
        for neighbours in (False, True):
            halves: list[list[float]] = [[], []]
            for p in items:
                cand = (p.kw_rank <= depth) | (ranks_of(p.sem) <= depth)
                if neighbours:
                    c = cand.astype(np.float32)
                    cand = cand | (shifted(c, 1) > 0) | (shifted(c, -1) > 0)
                halves[p.conversation % 2].append(min(int((p.gold & cand).sum()), LIMIT) / p.n_gold)
            name = f"ceiling, depth {depth}{' + neighbours' if neighbours else ''}"
            even, odd = float(np.mean(halves[0])), float(np.mean(halves[1]))
            print(f"{name:34s} even {even:.4f} odd {odd:.4f}")
            ROWS.append({"variant": name, "even": round(even, 4), "odd": round(odd, 4)})


def evaluate_fusion(items: list[Prepared]) -> None:
    """The routes alone, the shipped RRF, an RRF grid and score fusions."""
    held_out("semantic only", items, lambda p, c: p.sem, [{}])
    held_out("keyword only", items, lambda p, c: p.kw, [{}])
    held_out("rrf shipped (k3 d40 w.5)", items, rrf, [{"k": 3, "depth": 40, "w_sem": 0.5}])
    held_out("rrf grid", items, rrf, RRF_GRID)
    sf = grid(a=(0.1, 0.2, 0.3, 0.4, 0.5), n=(10, 40, 100), depth=(40, 100))
    held_out("score fusion max/minmax", items, score_fusion, sf)
    sz = grid(a=(0.2, 0.3, 0.4, 0.5), n=(10, 40), depth=(40, 100))
    held_out("score fusion z", items, z_fusion, sz)


def evaluate_query(items: list[Prepared], data: Dump) -> None:
    """Query rewriting and pseudo-relevance feedback."""
    query_side(data, items, RRF_GRID)
    pr = grid(k=(3, 10), depth=(40,), w_sem=(0.5, 0.75, 1.0), m=(1, 3, 5), beta=(0.5, 1.0, 2.0))
    held_out("rocchio(kw top m) + rrf", items, rocchio(rrf), pr)


RRF_GRID = grid(k=(1, 3, 5, 10, 20), depth=(20, 40, 100), w_sem=(0.25, 0.5, 0.75, 1.0))
GROUPS: dict[str, Callable[[list[Prepared], Dump], None]] = {
    "fusion": lambda items, _data: evaluate_fusion(items),
    "query": evaluate_query,
    "neighbours": lambda items, _data: evaluate_neighbours(items),
    "doc": evaluate_doc_side,
    "sentences": evaluate_sentences,
    "learned": evaluate_learned,
    "speaker": evaluate_speaker,
    "names": evaluate_names,
    "ceiling": lambda items, _data: evaluate_ceiling(items),
}


def evaluate(data: Dump, group: str) -> None:
    items = prepare(data)
    for name, run in GROUPS.items():
        if group in ("all", name):
            run(items, data)
    name = "retrieval_lab" if group == "all" else f"retrieval_lab.{group}"
    benchlib.write_result(name, {"variants": ROWS}, quick=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("dump", "eval"))
    parser.add_argument("--group", default="all", choices=("all", *GROUPS))
    args = parser.parse_args()
    if args.what == "dump":
        dump()
    else:
        evaluate(load(), args.group)


if __name__ == "__main__":
    main()
