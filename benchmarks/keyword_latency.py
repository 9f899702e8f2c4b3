"""Keyword search latency over 1,000,000 archived messages.

The archive is built from real text: LoCoMo turns split into sentences and
recombined (1-3 sentences from random turns per message), with the speakers'
names swapped for names drawn from a list that includes them, so rows are not
copies of each other.  Messages go in through ``Archive.add_messages`` in
batches of 10,000, as 10 sessions of 100,000.  The 10 LoCoMo conversations are
added as 10 more (real) sessions, so retrieval quality can be checked at scale.
The archive is cached in ``.bench-cache/`` and reused while its recipe matches.

Queries are LoCoMo questions (natural language).  Measured:

* ``Archive.keyword_search`` (the FTS5 route), scope all and scope one
  100k-message session; ``search_chat_history(mode="keyword")`` (the whole
  tool path, with excerpts), same scopes;
* diagnosis: ``build_match`` and fts5vocab (document frequency) look-ups, the
  slowest queries;
* a POSTINGS_BUDGET sweep: latency against keyword recall@10 of the LoCoMo
  questions inside the 1M archive (scope = their session, and scope = all,
  where a hit counts only in the right conversation; note the filler is made
  of the same sentences with other names, so scope = all is adversarial).

Acceptance: p95 <= 30 ms.

    .venv/bin/python benchmarks/keyword_latency.py [--quick]
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import benchlib
from benchlib import Stopwatch, fmt_stats, stats_ms, verdict

import agenvoy_desktop.core.archive as archive_mod
from agenvoy_desktop.core.archive import (
    SCHEMA_VERSION,
    Archive,
    ArchivedMessage,
)
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import AppPaths, app_paths

ACCEPT_P95_MS = 30.0
LIMIT = 10
BATCH = 10_000
WARMUP = 30
SEED = 20240501
BUILD_VERSION = 3  # bump when the corpus recipe changes
BUDGET_SWEEP = (40_000, 12_000, 6_000)  # POSTINGS_BUDGET values tried besides the shipped one
# Connection-level tunings tried on a fresh connection each: (SQLite cache MiB, df memo, budget).
TUNINGS = ((None, True, None), (2, True, None), (None, False, None), (2, False, None))
"""(page cache MiB, None = shipped; remembered common-term counts on/off; budget)."""

# Names swapped in for the LoCoMo speakers (so rows differ beyond sentence order);
# the LoCoMo speakers themselves are added to this pool at build time.
_NAMES_TEXT = """
Aaron Abigail Adam Aisha Alan Alice Amara Amir Andrea Angela Anna Arjun Ava Ben Bianca Brian
Camila Carlos Carmen Chen Chloe Chris Clara Daniel Diana Diego Dmitri Elena Eli Emma Eric Eva
Fatima Felix Fiona Frank Gabriel Grace Hana Hannah Harper Hassan Helen Henry Hugo Ian Ingrid
Isaac Ivy Jack Jade Jamal Jasmine Javier Jin Joel Jonas Julia Kai Karen Kenji Kevin Kiara Laila
Lars Laura Leo Lily Lucas Lucia Luis Maya Mei Mia Miguel Mila Nadia Naomi Nina Noah Nora Olga
Oliver Omar Oscar Paul Pedro Priya Quinn Rafael Rania Ravi Rosa Ruby Ryan Sara Selin Simon
Sofia Sven Tara Teresa Theo Tomas Uma Valentina Victor Wei Yara Yusuf Zara Zoe
"""
NAMES = _NAMES_TEXT.split()


def sizes(quick: bool) -> tuple[int, int]:
    """(filler sessions, messages per filler session)."""
    return (2, 50_000) if quick else (10, 100_000)


def filler_ids(n_sessions: int) -> list[str]:
    return [f"bench-{s:02d}" for s in range(n_sessions)]


# -- corpus ------------------------------------------------------------------------------
class Corpus:
    """Endless stream of distinct chat messages recombined from LoCoMo sentences."""

    def __init__(self, convs: Sequence[benchlib.Conversation], seed: int) -> None:
        self.rng = random.Random(seed)
        self.sentences = sorted(
            {s for c in convs for t in c.turns for s in benchlib.split_sentences(t.text)}
        )
        speakers = sorted({c.speaker_a for c in convs} | {c.speaker_b for c in convs})
        self.names = sorted(set(NAMES) | set(speakers))
        self.speaker_re = re.compile(r"\b(" + "|".join(map(re.escape, speakers)) + r")\b")

    def message(self) -> str:
        rng = self.rng
        count = rng.choice((1, 2, 2, 3))
        text = " ".join(rng.choice(self.sentences) for _ in range(count))
        text = self.speaker_re.sub(lambda _m: rng.choice(self.names), text)
        return f"{rng.choice(self.names)}: {text}"


def add_filler_session(archive: Archive, corpus: Corpus, sid: str, n: int, t0: int) -> set[int]:
    archive.ensure_session(sid, t0)
    seen: set[int] = set()
    for first in range(0, n, BATCH):
        batch = [
            Message(
                new_message_id(),
                "user" if (first + i) % 2 == 0 else "assistant",
                corpus.message(),
                t0 + (first + i) * 10**9,
            )
            for i in range(min(BATCH, n - first))
        ]
        seen.update(hash(m.content) for m in batch)
        archive.add_messages(sid, batch, t0)
    return seen


def add_locomo_sessions(archive: Archive, convs: Sequence[benchlib.Conversation]) -> int:
    rows = 0
    for conv in convs:
        archive.ensure_session(conv.session_id, 0)
        messages = benchlib.conversation_messages(conv)
        rows += len(archive.add_messages(conv.session_id, messages, 0))
    return rows


def build_archive(paths: AppPaths, n_sessions: int, per_session: int) -> dict[str, Any]:
    """Fill a fresh archive; returns build facts (time, rows, distinct contents).

    The LoCoMo sessions go in half-way, so they are neither the newest nor the
    oldest rows (a recency-biased ranking gets no free help).
    """
    convs = benchlib.load_locomo()
    corpus = Corpus(convs, SEED)
    archive = Archive(paths.archive_db)
    seen: set[int] = set()
    base_ns = 1_500_000_000 * 10**9
    locomo_rows = 0
    with Stopwatch() as sw:
        for number, sid in enumerate(filler_ids(n_sessions)):
            if number == n_sessions // 2:
                locomo_rows = add_locomo_sessions(archive, convs)
            t0 = base_ns + number * per_session * 10**9
            seen |= add_filler_session(archive, corpus, sid, per_session, t0)
            done = (number + 1) * per_session
            print(f"  {sid}: {done:,} rows, {time.perf_counter() - sw.start:.0f} s")
    archive._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    archive.close()
    filler = n_sessions * per_session
    return {
        "filler_rows": filler,
        "locomo_rows": locomo_rows,
        "rows": filler + locomo_rows,
        "distinct_filler_contents": len(seen),
        "build_s": round(sw.seconds, 1),
        "rows_per_s": round((filler + locomo_rows) / sw.seconds),
    }


def cached_archive(quick: bool) -> tuple[AppPaths, dict[str, Any]]:
    """The benchmark archive, built once and reused while its recipe is unchanged."""
    n_sessions, per_session = sizes(quick)
    folder = benchlib.BENCH_CACHE / ("keyword-quick" if quick else "keyword-1m")
    recipe = {
        "build_version": BUILD_VERSION,
        "sessions": n_sessions,
        "per_session": per_session,
        "seed": SEED,
        "schema": SCHEMA_VERSION,
        "fts_text_version": FTS_TEXT_VERSION,
    }
    stamp_file = folder / "stamp.json"
    paths = app_paths(folder / "profile")
    if stamp_file.exists():
        saved = json.loads(stamp_file.read_text("utf-8"))
        if saved.get("recipe") == recipe and paths.archive_db.exists():
            print(f"using cached archive {paths.archive_db.relative_to(benchlib.ROOT)}")
            return paths, {**saved["build"], "cached": True}
    shutil.rmtree(folder, ignore_errors=True)
    paths.ensure()
    print(f"building archive: {n_sessions} sessions x {per_session:,} messages + LoCoMo ...")
    build = build_archive(paths, n_sessions, per_session)
    stamp_file.write_text(json.dumps({"recipe": recipe, "build": build}, indent=2), "utf-8")
    return paths, {**build, "cached": False}


# -- variants ---------------------------------------------------------------------------------
@contextmanager
def postings_budget(value: int) -> Iterator[None]:
    """Temporarily change ``archive.POSTINGS_BUDGET`` (read at call time).

    The in-session budget keeps its shipped ratio to the archive-wide one.
    """
    saved = archive_mod.POSTINGS_BUDGET, archive_mod.SESSION_POSTINGS_BUDGET
    ratio = saved[1] / saved[0]
    archive_mod.POSTINGS_BUDGET = value
    archive_mod.SESSION_POSTINGS_BUDGET = int(value * ratio)
    try:
        yield
    finally:
        archive_mod.POSTINGS_BUDGET, archive_mod.SESSION_POSTINGS_BUDGET = saved


Searcher = Callable[[str, str | None], list[tuple[ArchivedMessage, float]]]


def variants(archive: Archive) -> dict[str, Searcher]:
    """The shipped route, and the same code with other POSTINGS_BUDGET values."""

    def with_budget(budget: int) -> Searcher:
        def search(q: str, sid: str | None) -> list[tuple[ArchivedMessage, float]]:
            with postings_budget(budget):
                return archive.keyword_search(q, limit=LIMIT, session_id=sid, with_context=True)

        return search

    shipped = archive_mod.POSTINGS_BUDGET
    budgets = [shipped, *(b for b in BUDGET_SWEEP if b != shipped)]
    out = {f"budget={b}{' (shipped)' if b == shipped else ''}": with_budget(b) for b in budgets}
    return out


# -- measuring ----------------------------------------------------------------------------
def time_each(
    queries: Sequence[str], run: Callable[[int, str], object], cpu: list[float] | None = None
) -> list[float]:
    """Warm up on a few queries, then time every query once (wall clock).

    With *cpu*, the calling thread's CPU time per query is collected too: SQLite
    runs on this thread, so CPU well below wall time means the machine was busy.
    """
    for i, q in enumerate(queries[:WARMUP]):
        run(i, q)
    out: list[float] = []
    for i, q in enumerate(queries):
        c0 = time.thread_time()
        t0 = time.perf_counter()
        run(i, q)
        out.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.thread_time() - c0)
    return out


def timed(name: str, queries: Sequence[str], run: Callable[[int, str], object]) -> dict[str, Any]:
    cpu: list[float] = []
    stats = stats_ms(time_each(queries, run, cpu))
    cpu_stats = stats_ms(cpu)
    print(f"  {name:30s} {fmt_stats(stats)}  [cpu p95 {cpu_stats['p95_ms']:.2f} ms]")
    return {**stats, "cpu": cpu_stats}


def measure_current(
    store: MemoryStore, queries: Sequence[str], sids: Sequence[str]
) -> dict[str, Any]:
    """The core as it is: archive route and whole tool path, both scopes."""
    archive = store.archive

    def sid(i: int) -> str:
        return sids[i % len(sids)]

    return {
        "archive_all": timed(
            "archive scope=all",
            queries,
            lambda _i, q: archive.keyword_search(q, limit=LIMIT, with_context=True),
        ),
        "archive_session": timed(
            "archive scope=session",
            queries,
            lambda i, q: archive.keyword_search(
                q, limit=LIMIT, session_id=sid(i), with_context=True
            ),
        ),
        "tool_all": timed(
            "search_chat_history scope=all",
            queries,
            lambda _i, q: search_chat_history(store, SearchQuery(q, mode="keyword", limit=LIMIT)),
        ),
        "tool_session": timed(
            "search_chat_history scope=session",
            queries,
            lambda i, q: search_chat_history(
                store, SearchQuery(q, mode="keyword", limit=LIMIT, session_id=sid(i))
            ),
        ),
        "build_match_only": timed(
            "build_match only", queries, lambda _i, q: archive.build_match(q)
        ),
    }


def locomo_recall(search: Searcher, scoped: bool, quick: bool) -> float:
    """Keyword recall@10 on LoCoMo (categories 1-4) inside the big archive.

    *scoped*: search the question's own session; else all sessions, where a
    hit counts only if it is an evidence turn of the right conversation.
    """
    scores: list[float] = []
    for conv in benchlib.load_locomo():
        questions = [q for q in conv.questions if q.category in (1, 2, 3, 4) and q.evidence]
        for question in questions[:: 6 if quick else 3]:
            hits = search(question.question, conv.session_id if scoped else None)
            refs = {h.message.ref for h, _ in hits if h.session_id == conv.session_id}
            scores.append(len(refs & set(question.evidence)) / len(question.evidence))
    return round(sum(scores) / len(scores), 4)


def scope_all(search: Searcher) -> Callable[[int, str], object]:
    return lambda _i, q: search(q, None)


def scope_session(search: Searcher, sids: Sequence[str]) -> Callable[[int, str], object]:
    return lambda i, q: search(q, sids[i % len(sids)])


def archive_searcher(archive: Archive) -> Searcher:
    """The archive route as search_chat_history uses it (context column on)."""
    return lambda q, sid: archive.keyword_search(q, limit=LIMIT, session_id=sid, with_context=True)


def unfilled_recall(quick: bool) -> float:
    """Session-scoped keyword recall@10 of the same questions in an archive of LoCoMo alone.

    The reference for what the filler (and the postings budget) costs at scale.
    """
    convs = benchlib.load_locomo()
    with benchlib.temp_profile("keyword-unfilled") as paths:
        archive = Archive(paths.archive_db)
        try:
            add_locomo_sessions(archive, convs)
            return locomo_recall(archive_searcher(archive), True, quick)
        finally:
            archive.close()


def compare_variants(
    archive: Archive, queries: Sequence[str], sids: Sequence[str], quick: bool
) -> dict[str, Any]:
    """Latency (both scopes) and LoCoMo recall@10 at scale (both scopes) per variant."""
    out: dict[str, Any] = {}
    for name, search in variants(archive).items():
        row: dict[str, Any] = {
            "recall@10_session": locomo_recall(search, True, quick),
            "recall@10_all": locomo_recall(search, False, quick),
            "all": stats_ms(time_each(queries, scope_all(search))),
            "session": stats_ms(time_each(queries, scope_session(search, sids))),
        }
        out[name] = row
        print(
            f"  {name:30s} all p95 {row['all']['p95_ms']:6.2f} ms  session p95 "
            f"{row['session']['p95_ms']:6.2f} ms  recall@10 session {row['recall@10_session']:.4f}"
            f"  all {row['recall@10_all']:.4f}"
        )
    return out


def tuned_archive(path: Path, cache_mib: int | None, df_memo: bool) -> Archive:
    """A fresh Archive connection with another page cache and/or without remembered counts.

    The shipped connection has a 64 MiB cache (``PAGE_CACHE_KIB``; SQLite's
    default is 2 MiB) and remembers common terms' counts (``_term_df``).
    """
    archive = Archive(path)
    if cache_mib:
        archive._db.execute(f"PRAGMA cache_size = -{cache_mib * 1024}")
    if not df_memo:
        archive._term_df = (  # type: ignore[method-assign]
            lambda expr, cap, scope, columns, _newest: archive._doc_freq(expr, cap, scope, columns)
        )
    return archive


def compare_tunings(path: Path, queries: Sequence[str], sids: Sequence[str]) -> dict[str, Any]:
    """Latency of the shipped keyword_search under connection-level tunings."""
    out: dict[str, Any] = {}
    for cache_mib, df_memo, budget in TUNINGS:
        name = (
            f"cache={'shipped' if cache_mib is None else f'{cache_mib}MiB'}"
            f" df-memo={'on' if df_memo else 'off'}"
            f" budget={budget or archive_mod.POSTINGS_BUDGET}"
        )
        archive = tuned_archive(path, cache_mib, df_memo)
        try:
            with postings_budget(budget or archive_mod.POSTINGS_BUDGET):
                search = archive_searcher(archive)
                row = {
                    "all": stats_ms(time_each(queries, scope_all(search))),
                    "session": stats_ms(time_each(queries, scope_session(search, sids))),
                }
        finally:
            archive.close()
        out[name] = row
        print(
            f"  {name:45s} all p95 {row['all']['p95_ms']:6.2f} ms  "
            f"session p95 {row['session']['p95_ms']:6.2f} ms"
        )
    return out


def vocab_df(archive: Archive, term: str) -> int:
    """A term's document frequency from fts5vocab (walks the term's whole doclist)."""
    rows = archive._query("SELECT doc FROM messages_vocab WHERE term = ?", (term,))
    return int(rows[0][0]) if rows else 0


def vocab_lookup(archive: Archive, terms: Iterator[str], n: int = 2000) -> dict[str, Any]:
    """Time ``SELECT doc FROM messages_vocab WHERE term=?`` (a full df, for reference)."""
    samples: list[tuple[float, int]] = []
    for _, term in zip(range(n), terms, strict=False):
        t0 = time.perf_counter()
        df = vocab_df(archive, term)
        samples.append((time.perf_counter() - t0, df))
    slope = sum(t for t, _ in samples) / max(sum(df for _, df in samples), 1)
    return {**stats_ms([t for t, _ in samples]), "us_per_1000_docs": round(slope * 1e9, 1)}


def slowest(archive: Archive, queries: Sequence[str], k: int = 5) -> list[dict[str, Any]]:
    """The slowest scope-all queries with their MATCH expression and postings."""
    rows: list[tuple[float, str]] = []
    for q in queries:
        t0 = time.perf_counter()
        archive.keyword_search(q, limit=LIMIT, with_context=True)
        rows.append((time.perf_counter() - t0, q))
    rows.sort(reverse=True)
    out = []
    for t, q in rows[:k]:
        match = archive.build_match(q, with_context=True)
        terms = match.split(" OR ") if match else []
        postings = sum(vocab_df(archive, term.strip('"')) for term in terms)
        out.append({"ms": round(t * 1000, 2), "query": q, "match": match, "postings": postings})
    return out


def query_set(quick: bool) -> list[str]:
    questions = [q.question for c in benchlib.load_locomo() for q in c.questions]
    return questions[::6] if quick else questions[::3]


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    n_sessions, _ = sizes(args.quick)
    sids = filler_ids(n_sessions)
    paths, build = cached_archive(args.quick)
    db_bytes = sum(p.stat().st_size for p in paths.memory_dir.glob("archive.sqlite3*"))
    queries = query_set(args.quick)
    store = MemoryStore(paths, None)
    try:
        archive = store.archive
        print(f"{len(queries)} LoCoMo questions as queries, limit {LIMIT}, {build['rows']:,} rows")
        current = measure_current(store, queries, sids)
        print("variants (latency: same queries; recall: LoCoMo questions in the big archive):")
        compared = compare_variants(archive, queries, sids, args.quick)
        print("connection tunings (fresh connection each, df memo starts empty):")
        tunings = compare_tunings(paths.archive_db, queries, sids)
        slow = slowest(archive, queries)
        unfilled = unfilled_recall(args.quick)
        print(f"keyword recall@10 of the same questions in LoCoMo alone: {unfilled:.4f}")
        words = iter(w for q in queries for w in re.findall(r"[a-z]+", q.lower()))
        vocab = vocab_lookup(archive, words)
    finally:
        store.close()
    worst = max(current[k]["p95_ms"] for k in ("archive_all", "archive_session"))
    worst_tool = max(current[k]["p95_ms"] for k in ("tool_all", "tool_session"))
    acceptance = {
        "criterion": f"keyword search p95 <= {ACCEPT_P95_MS} ms over {build['rows']:,} messages",
        "archive_p95_ms": worst,
        "tool_p95_ms": worst_tool,
        "pass": worst_tool <= ACCEPT_P95_MS,
        "variants_passing": [
            name
            for name, row in compared.items()
            if max(row["all"]["p95_ms"], row["session"]["p95_ms"]) <= ACCEPT_P95_MS
        ],
    }
    print(
        f"\nbuild: {build['rows']:,} rows in {build['build_s']} s "
        f"({build['rows_per_s']:,}/s, cached={build['cached']}); "
        f"distinct filler contents {build['distinct_filler_contents']:,}; "
        f"DB {db_bytes / 2**20:.0f} MiB"
    )
    print(f"fts5vocab df lookup: {fmt_stats(vocab)}; {vocab['us_per_1000_docs']} us per 1000 docs")
    print(f"slowest: {slow[0]}")
    print(f"variants within {ACCEPT_P95_MS} ms: {acceptance['variants_passing']}")
    print(
        f"{verdict(acceptance['pass'])}: current keyword p95 {worst_tool:.2f} ms (tool path), "
        f"{worst:.2f} ms (archive route); limit {ACCEPT_P95_MS} ms"
    )
    benchlib.write_result(
        "keyword_latency",
        {
            "build": build,
            "db_bytes": db_bytes,
            "queries": len(queries),
            "limit": LIMIT,
            "current": current,
            "variants": compared,
            "tunings": tunings,
            "vocab_df_lookup": vocab,
            "slowest_scope_all": slow,
            "unfilled_recall@10_session": unfilled,
            "budget_loss_session": {
                name: round(unfilled - row["recall@10_session"], 4)
                for name, row in compared.items()
            },
            "acceptance": acceptance,
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
