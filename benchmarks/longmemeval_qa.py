"""LongMemEval_S end to end: a user's long history imported, one question asked in a new session.

Each question of ``longmemeval_s_dev.json`` (shared data, never copied into
the repository) gets a fresh profile.  Its haystack — about 50 dated sessions
and 500 messages — is imported in this process through the core API
(``MemoryStore.import_messages``, with the real MiniLM embedder, as
``agenvoy-desktop import`` does), each session with its own date: message *j*
of a session said at ``date + 30 s × j``.  Then the question is asked through
the real agent (``AppServices``, the composition root of the window and of
``agenvoy-desktop chat``) in a NEW session, with the clock injected at the
question's date: the clock line, the recall lines' ages and the date tools
all read it, and no system clock is changed.

Imported profiles are cached under ``.bench-cache/longmemeval/`` (keyed by
the question, the embedding model, the archive's FTS text version and the
source of ``core/embedding.py``), so a rerun copies the profile instead of
embedding 500 messages again; the import time reported is the one measured
when the profile was built (``--rebuild`` builds them again).

The judge (:func:`judge`), written down here so the numbers can be checked:

- **abstention** (ids ending in ``_abs``): right when the answer says it was
  never told / does not know (:data:`DONT_KNOW`), and names no number or
  value as the answer would;
- **a rubric** (:data:`RUBRICS`, by question id) for open answers — the
  assistant's recommendations, a preference the answer should use, a yes/no
  with its reason: every group of alternatives must have one alternative in
  the answer.  The rubrics were written from the gold answers and checked by
  hand against a sample of answers (RESULTS §23);
- otherwise **normalised containment** of a gold answer (each of the
  alternatives "21 days. 22 days … is also acceptable" counts): case,
  punctuation and number words folded ("four" = 4, "$1,200" = 1200), the
  gold's numbers must all appear as numbers, and its other content words
  (not stopwords) must all appear.

Reported per question type: accuracy, whether an evidence message (``has_answer``)
reached the prompt (the recall block's message ids, or a tool result that
quotes it), turn and model seconds, first token, import seconds.

    .venv/bin/python benchmarks/longmemeval_qa.py [--quick] [--ids ID,...] [--types T,...]
        [--limit N] [--seed N] [--tag NAME] [--rebuild]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import benchlib

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.turn import AnswerDelta, RecallInjected, ToolCallStarted, TurnEvent
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.llm.engine import ChatEngine, extra_buffers_enabled
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.settings import Settings

DATA_FILE = "longmemeval_s_dev.json"
CACHE_VERSION = "1"
"""Bump to rebuild every cached profile (what an import writes changed)."""
MESSAGE_STEP_NS = 30 * 1_000_000_000
QUICK_PER_TYPE = 1
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "knowledge-update",
    "multi-session",
    "temporal-reasoning",
)
GOALS = {
    "overall": 0.60,
    "single-session-user": 0.85,
    "knowledge-update": 0.75,
    "single-session-assistant": 0.60,
    "single-session-preference": 0.50,
    "multi-session": 0.40,
    "temporal-reasoning": 0.40,
    "abstention": 0.80,
}
"""Issue 36's goals (starter model, 2 cores)."""


# -- the data ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Item:
    """One LongMemEval question with its haystack."""

    qid: str
    qtype: str
    question: str
    answer: str
    question_date: str
    sessions: list[tuple[str, str, list[dict[str, Any]]]]
    """(session id, date, messages) in the file's order."""

    @property
    def abstention(self) -> bool:
        return self.qid.endswith("_abs")

    @property
    def kind(self) -> str:
        """The row's group: abstention questions are their own group, as in the paper."""
        return "abstention" if self.abstention else self.qtype


def load_items() -> list[Item]:
    path = benchlib.shared_data_dir() / DATA_FILE
    if not path.is_file():
        raise SystemExit(f"{DATA_FILE} not found at {path}; set {benchlib.SHARED_ENV}")
    raw = json.loads(path.read_text("utf-8"))
    return [
        Item(
            qid=str(q["question_id"]),
            qtype=str(q["question_type"]),
            question=str(q["question"]),
            answer=str(q["answer"]),
            question_date=str(q["question_date"]),
            sessions=list(
                zip(
                    q["haystack_session_ids"],
                    q["haystack_dates"],
                    q["haystack_sessions"],
                    strict=True,
                )
            ),
        )
        for q in raw
    ]


def parse_date(text: str) -> int:
    """``"2023/05/20 (Sat) 02:21"`` in local time, as UTC Unix nanoseconds."""
    cleaned = re.sub(r"\s*\([^)]*\)\s*", " ", text).strip()
    moment = datetime.strptime(cleaned, "%Y/%m/%d %H:%M").astimezone()
    return int(moment.timestamp()) * 1_000_000_000


def session_key(raw_id: str, index: int) -> str:
    """A session id the store accepts, unique within the haystack."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", raw_id)[:40].strip("-") or "s"
    return f"h{index:03d}-{safe}"


# -- the cached, imported profiles ------------------------------------------------------------
def cache_key(item: Item) -> str:
    from agenvoy_desktop.core.profile import PROFILE_FORMAT
    from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION

    digest = hashlib.sha256()
    embedding_src = benchlib.ROOT / "agenvoy_desktop" / "core" / "embedding.py"
    for part in (
        CACHE_VERSION,
        item.qid,
        benchlib.embedding_name(),
        str(FTS_TEXT_VERSION),
        str(PROFILE_FORMAT),
        hashlib.sha256(embedding_src.read_bytes()).hexdigest(),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def profile_folder(item: Item) -> Path:
    return benchlib.BENCH_CACHE / "longmemeval" / f"{item.qid}-{cache_key(item)}"


def is_cached(item: Item) -> bool:
    return (profile_folder(item) / "bench-meta.json").is_file()


@dataclass(slots=True)
class Built:
    """A cached profile: where it is, the evidence message ids, the import's seconds."""

    folder: Path
    evidence_ids: list[str]
    import_s: float
    messages: int


def build_profile(item: Item, embedder: Any, rebuild: bool) -> Built:
    """The question's haystack imported into a profile of its own (cached)."""
    folder = profile_folder(item)
    meta_file = folder / "bench-meta.json"
    if meta_file.is_file() and not rebuild:
        meta = json.loads(meta_file.read_text("utf-8"))
        return Built(folder, meta["evidence_ids"], meta["import_s"], meta["messages"])
    shutil.rmtree(folder, ignore_errors=True)
    paths = app_paths(folder).ensure()
    now = parse_date(item.question_date)
    services = AppServices.open(
        paths, settings=Settings(), embedder=embedder, chat_model=None, clock=lambda: now
    )
    evidence: list[str] = []
    count = 0
    began = time.perf_counter()
    try:
        for index, (raw_id, date, turns) in enumerate(item.sessions):
            base = parse_date(date)
            messages = []
            for j, turn in enumerate(turns):
                message = Message(
                    new_message_id(),
                    str(turn["role"]),
                    str(turn["content"]),
                    base + j * MESSAGE_STEP_NS,
                )
                messages.append(message)
                if turn.get("has_answer"):
                    evidence.append(message.id)
            if not messages:
                continue
            count += len(messages)
            services.storage.run_sync(
                services.store.import_messages, messages, session_key(raw_id, index)
            )
    finally:
        services.embedder = None  # shared across profiles: not closed here
        services.close()
    import_s = time.perf_counter() - began
    meta = {"evidence_ids": evidence, "import_s": round(import_s, 2), "messages": count}
    meta_file.write_text(json.dumps(meta), "utf-8")
    return Built(folder, evidence, import_s, count)


# -- the judge --------------------------------------------------------------------------------
_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "once": 1,
    "twice": 2,
    "thrice": 3,
}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOP = _words(
    "a an the of to in on at for and or is was were are be been it its my your you i me "
    "we our he she they them his her their this that these those with by from as about "
    "did do does have has had not no yes also acceptable including included answer "
    "which what when where who how than then so"
)
DONT_KNOW = re.compile(
    r"\b(?:don'?t|do not|didn'?t|did not|can'?t|cannot|couldn'?t|could not|haven'?t|have not|"
    r"hasn'?t|never|no)\b[^.?!]{0,60}\b(?:know|remember|recall|find|mention(?:ed)?|told|tell|"
    r"said|say|record|information|details?|memory|sure|aware|shared|specif(?:y|ied))\b"
    r"|\bnot (?:enough|sure|mentioned|specified|provided|known|clear)\b"
    r"|\bno (?:record|information|mention|details?)\b|\bunknown\b|\bnot aware\b",
    re.IGNORECASE,
)
"""What saying "you never told me" looks like (abstention questions)."""

Rubric = tuple[tuple[str, ...], ...]
RUBRICS: dict[str, Rubric] = {
    # single-session-preference: the answer must use what the user told, not what the
    # question already says ("storage" is in any answer about a NAS; "capacity" is not).
    "09d032c9": (("power bank", "portable charger", "portable power"),),
    "1da05512": (
        (
            "capacity",
            "running out",
            "out of space",
            "external hard drive",
            "external drive",
            "storage issue",
            "storage problem",
        ),
    ),
    "75832dbd": (("medical", "healthcare", "health care", "radiolog", "clinical"),),
    "75f70248": (("luna", "your cat", "cat's", "cat hair", "cat dander"),),
    "b0479f84": (("our planet", "free solo", "tiger king", "planet earth", "attenborough"),),
    "fca70973": (
        (
            "disneyland",
            "knott",
            "six flags",
            "magic mountain",
            "universal studios",
            "special event",
            "nighttime show",
        ),
    ),
    # open answers
    "2bf43736": (("chapter 4", "chapter four", "fourth chapter"),),
    "352ab8bd": (("20",),),
    "4dfccbf8": (("ukulele",),),
    "6071bd76": (("less",),),
    "8cf51dda": (("subtype",), ("biomarker", "clinical", "biological", "prognos", "detect")),
    "89941a94": (("yes", "road bike"),),
    "cc539528": (("ruby",), ("python",), ("php",)),
    "e8a79c70": (("2-3", "2 to 3", "2 or 3", "2 3 eggs"),),
    "cc06de0d": (("6",), ("more", "difference", "=", "higher", "extra", "pricier", "−")),
    "gpt4_4929293b": (("cousin",), ("wedding",)),
    "gpt4_6dc9b45b": (("4 months", "four months"),),
    "2ebe6c90": (("21", "22"), ("day",)),
    "gpt4_1e4a8aeb": (("6", "7"), ("day",)),
    "gpt4_a2d1d1f6": (("3", "4"), ("day",)),
    "gpt4_61e13b3c": (("3 weeks", "three weeks", "21 days"),),
    "80ec1f4f_abs": (("0", "none", "no museum", "not visit", "didn't visit", "did not visit"),),
}
"""Per-question rubrics for answers that containment cannot judge: each inner tuple is a
group of alternatives, and every group needs one of them in the answer (folded as
:func:`fold`).  Abstention questions not listed here use :data:`DONT_KNOW`."""


def fold(text: str) -> str:
    """Case, width and punctuation folded; number words and "$1,200" as plain digits."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    text = re.sub(r"(?<=\d)(?=[a-z])|(?<=[a-z])(?=\d)", " ", text)
    text = re.sub(r"[^\w.'%-]+", " ", text)
    text = re.sub(r"(?<!\d)[.'-]|[.'-](?!\d)", " ", text)
    words = [str(_NUMBER_WORDS.get(w, w)) for w in text.split()]
    return " " + " ".join(words) + " "


def gold_forms(answer: str) -> list[str]:
    """The gold answer and its alternatives ("21 days. 22 days (…) is also acceptable.")."""
    forms = []
    for sentence in re.split(r"(?<=[.!?])\s+", answer.strip()):
        cleaned = re.sub(r"\([^)]*\)", "", sentence)
        cleaned = re.sub(r"\b(?:is|are) also acceptable\b.*$", "", cleaned).strip(" .")
        if cleaned:
            forms.append(cleaned)
        if "also acceptable" not in sentence and forms:
            break  # the first sentence is the answer; later ones only when they say so
    return forms or [answer]


def _contains(answer: str, gold: str) -> bool:
    folded, target = fold(answer), fold(gold)
    if target.strip() and target in folded:
        return True
    words = target.split()
    numbers = [w for w in words if re.fullmatch(r"\d+(?:\.\d+)?%?", w)]
    content = [w for w in words if w not in _STOP and not re.fullmatch(r"[\d.%]+", w)]
    if numbers:
        return all(f" {n} " in folded or f" {n}%" in folded for n in numbers)
    return bool(content) and all(f" {w}" in folded for w in content)


_WHICH_FIRST = re.compile(r"\bfirst\b[^,?]*,\s*(?P<a>.+?)\s+or\s+(?P<b>.+?)\?", re.IGNORECASE)


def _first_of(item: Item) -> tuple[str, str] | None:
    """For "Which … first, A or B?": (the gold option, the other one); else None."""
    match = _WHICH_FIRST.search(item.question)
    if match is None or item.abstention:
        return None
    a, b = match["a"], match["b"]
    gold = fold(item.answer)

    def score(option: str) -> int:
        words = [w for w in fold(option).split() if w not in _STOP and len(w) > 2]
        return sum(1 for w in words if f" {w}" in gold)

    return (a, b) if score(a) >= score(b) else (b, a)


def _named_first(answer: str, gold: str, other: str) -> bool:
    """The answer names the gold option, and before the other one: "A came before B" and
    "B (…) came after A" are judged by which option the answer says first came first —
    containment alone counted "the festival (05-26) came before the Spanish classes" as
    naming the Spanish classes."""
    folded = fold(answer)

    def place(option: str) -> int:
        words = [w for w in fold(option).split() if w not in _STOP and len(w) > 2]
        spots = [folded.find(f" {w}") for w in words if f" {w}" in folded]
        return min(spots) if spots else -1

    at_gold, at_other = place(gold), place(other)
    if at_gold < 0:
        return False
    reversed_order = re.search(r"\b(?:after|later than|followed)\b", folded) is not None
    if at_other < 0:
        return True
    return (at_gold < at_other) != reversed_order


def judge(item: Item, answer: str) -> bool:
    """Whether *answer* is right for *item* (see the module docstring)."""
    rubric = RUBRICS.get(item.qid)
    if item.abstention and DONT_KNOW.search(answer) is not None:
        return True
    if (order := _first_of(item)) is not None:
        return _named_first(answer, *order)
    if rubric is not None:
        folded = fold(answer)
        return all(any(fold(alt).strip() in folded for alt in group) for group in rubric)
    if item.abstention:
        return False
    return any(_contains(answer, form) for form in gold_forms(item.answer))


# -- one question -----------------------------------------------------------------------------
@dataclass(slots=True)
class Row:
    qid: str
    qtype: str
    kind: str
    question: str
    gold: str
    answer: str = ""
    right: bool = False
    evidence_in_prompt: bool | None = None
    recall_text: str = ""
    tool_calls: list[str] = field(default_factory=list)
    turn_s: float = 0.0
    model_s: float = 0.0
    first_token_s: float | None = None
    recall_s: float = 0.0
    prompt_tokens: int = 0
    answer_tokens: int = 0
    checked: str = ""
    """What the answer check found in the model's first answer ("" nothing)."""
    answer_from: str = "model"
    replaced: list[str] = field(default_factory=list)
    """The model's answers the check replaced."""
    import_s: float = 0.0
    messages: int = 0
    load: str = ""


class _Shared:
    """The one chat engine, lent to each question's services (they must not close it).

    With ``show`` every prompt and what the model wrote are printed (``--show-prompts``).
    """

    show = False

    def __init__(self, engine: ChatEngine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    async def chat(self, messages: list[Any], **kwargs: Any) -> Any:
        if self.show:
            print("\n=== prompt", file=sys.stderr)
            for message in messages:
                print(f"--- {message['role']}\n{message.get('content')}", file=sys.stderr)
        written: list[str] = []
        async for event in self._engine.chat(messages, **kwargs):
            if hasattr(event, "text"):
                written.append(event.text)
            yield event
        if self.show:
            print(f"=== the model wrote\n{''.join(written)}\n", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def copied_profile(built: Built) -> Iterator[AppPaths]:
    """A throw-away copy of a cached profile (a question's session never reaches the cache)."""
    base = benchlib.BENCH_CACHE / "profiles"
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="longmemeval-", dir=base)) / "profile"
    try:
        shutil.copytree(built.folder, folder)
        yield app_paths(folder).ensure()
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)


async def ask(item: Item, built: Built, engine: ChatEngine, embedder: Any) -> Row:
    """Copy the cached profile, ask the question in a new session at its date."""
    row = Row(item.qid, item.qtype, item.kind, item.question, item.answer)
    row.import_s, row.messages = round(built.import_s, 1), built.messages
    now = parse_date(item.question_date)
    with copied_profile(built) as paths:
        services = await asyncio.to_thread(
            AppServices.open,
            paths,
            settings=Settings(),
            embedder=embedder,
            chat_model=_Shared(engine),  # type: ignore[arg-type]
            clock=lambda: now,
        )
        try:
            await _turn(services, item, built, row)
        finally:
            services.embedder = None
            await asyncio.to_thread(services.close)
    row.load = load_text()
    return row


async def _turn(services: AppServices, item: Item, built: Built, row: Row) -> None:
    agent, store, storage = services.agent, services.store, services.storage
    assert agent is not None
    sid = await storage.run(store.create_session, "longmemeval")
    recalled: list[str] = []

    def on_event(event: TurnEvent) -> None:
        if isinstance(event, ToolCallStarted):
            row.tool_calls.append(event.name)
        elif isinstance(event, RecallInjected):
            recalled.extend(event.message_ids)
        elif isinstance(event, AnswerDelta):
            pass

    result = await agent.run_turn(sid, item.question, on_event=on_event)
    await agent.idle()
    tool_text = "\n".join(m.content for m in result.saved if m.role == "tool")
    ids = set(result.recall_ids) | set(recalled)
    row.answer = result.answer
    row.right = judge(item, result.answer)
    if built.evidence_ids:
        row.evidence_in_prompt = bool(ids & set(built.evidence_ids)) or any(
            e in tool_text for e in built.evidence_ids
        )
    row.recall_text = result.recall_text
    row.turn_s = round(result.total_s, 2)
    row.model_s = round(result.model_s, 2)
    row.first_token_s = None if result.first_token_s is None else round(result.first_token_s, 2)
    row.recall_s = round(result.recall_s, 3)
    row.prompt_tokens = result.prompt_tokens
    row.answer_tokens = result.answer_tokens
    row.checked = getattr(result, "checked", "")
    row.answer_from = getattr(result, "answer_from", "model")
    row.replaced = [text[:400] for text in getattr(result, "replaced", [])]


# -- recall alone (no chat model) ----------------------------------------------------------
def recall_only(item: Item, built: Built, embedder: Any) -> dict[str, Any]:
    """Where the evidence is in recall's candidates, floor and block, without the model.

    Fast (no generation), for working on retrieval: the same search, floor,
    neighbours and block the turn builds (``recall.find_block``).
    """

    now = parse_date(item.question_date)
    with copied_profile(built) as paths:
        services = AppServices.open(
            paths, settings=Settings(), embedder=embedder, chat_model=None, clock=lambda: now
        )
        try:
            return _recall_rows(services, item, built, now)
        finally:
            services.embedder = None
            services.close()


def _recall_rows(services: AppServices, item: Item, built: Built, now: int) -> dict[str, Any]:
    from agenvoy_desktop.agent import recall
    from agenvoy_desktop.agent.never_said import asks_about_own_past, never_said
    from agenvoy_desktop.agent.worked_out import add_worked_out
    from agenvoy_desktop.core.timeutil import local_date

    store, run = services.store, services.storage.run_sync
    sid = run(store.create_session, "recall-only")
    text = item.question
    wide = recall.asks_about_assistant(text)
    candidates = run(
        recall.recall_candidates, store, sid, text, 16, recall.GATHER_CANDIDATES, assistant=wide
    )
    kept = recall.apply_floor(candidates, kind=recall.query_kind(text))
    block = run(recall.find_block, store, sid, text, 16, recall.DEFAULT_FLOOR, now_ns=now)
    block, worked = run(
        add_worked_out,
        store,
        sid,
        text,
        block,
        window_messages=16,
        floor=recall.DEFAULT_FLOOR,
        header=recall.BLOCK_HEADER,
        now_ns=now,
    )
    unsaid = (
        run(never_said, store, text, block.items)
        if asks_about_own_past(text)
        and not recall.said_at_named_time(text, block.items, local_date(now))
        else []
    )
    evidence = set(built.evidence_ids)
    rank = next((i for i, c in enumerate(candidates) if c.message_id in evidence), None)
    kept_rank = next((i for i, c in enumerate(kept) if c.message_id in evidence), None)
    return {
        "qid": item.qid,
        "kind": item.kind,
        "question": item.question,
        "candidate_rank": rank,
        "kept_rank": kept_rank,
        "kept": len(kept),
        "in_block": bool(evidence & set(block.message_ids)) if evidence else None,
        "block_chars": len(block.text),
        "block": block.text,
        "never_said": unsaid,
        "worked_out": None if worked is None else worked.sentence,
    }


def run_recall_only(args: argparse.Namespace) -> dict[str, Any]:
    """``--recall-only``: :func:`recall_only` for each chosen question (cached profiles only
    with ``--cached-only``)."""
    items = choose(load_items(), args)
    with benchlib.temp_profile("longmemeval-models") as model_paths:
        embedder = benchlib.open_embedder(
            benchlib.install_model(model_paths, benchlib.embedding_model())
        )
    rows = []
    try:
        for item in items:
            if args.cached_only and not is_cached(item):
                continue
            built = build_profile(item, embedder, args.rebuild)
            row = recall_only(item, built, embedder)
            rows.append(row)
            print(
                f"{row['kind'][:16]:16s} cand {row['candidate_rank']!s:>4s} "
                f"kept {row['kept_rank']!s:>4s}/{row['kept']:2d} block {row['in_block']!s:5s} "
                f"{row['block_chars']:5d} ch | {row['question'][:70]} "
                f"{row['never_said'] or ''}",
                flush=True,
            )
    finally:
        embedder.close()
    with_evidence = [r for r in rows if r["in_block"] is not None]
    summary = {
        "questions": len(rows),
        "evidence_in_candidates": sum(r["candidate_rank"] is not None for r in with_evidence),
        "evidence_kept": sum(r["kept_rank"] is not None for r in with_evidence),
        "evidence_in_block": sum(bool(r["in_block"]) for r in with_evidence),
        "with_evidence": len(with_evidence),
        "median_block_chars": _median(r["block_chars"] for r in rows),
    }
    print(summary)
    return {"summary": summary, "rows": rows}


# -- totals -----------------------------------------------------------------------------------
def load_text() -> str:
    path = Path("/proc/loadavg")
    return path.read_text().split(" ")[0] if path.exists() else "?"


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def _p90(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    return round(present[min(len(present) - 1, int(0.9 * len(present)))], 2)


def group_totals(rows: Sequence[Row]) -> dict[str, Any]:
    with_evidence = [r for r in rows if r.evidence_in_prompt is not None]
    reached = [r for r in with_evidence if r.evidence_in_prompt]
    return {
        "n": len(rows),
        "right": sum(r.right for r in rows),
        "accuracy": round(sum(r.right for r in rows) / len(rows), 3) if rows else None,
        "evidence_in_prompt": f"{len(reached)}/{len(with_evidence)}",
        "right_when_evidence_in_prompt": f"{sum(r.right for r in reached)}/{len(reached)}",
        "median_turn_s": _median(r.turn_s for r in rows),
        "p90_turn_s": _p90(r.turn_s for r in rows),
        "median_model_s": _median(r.model_s for r in rows),
        "p90_model_s": _p90(r.model_s for r in rows),
        "median_first_token_s": _median(r.first_token_s for r in rows),
        "median_import_s": _median(r.import_s for r in rows),
        "tool_calls": sum(len(r.tool_calls) for r in rows),
        "checked": sum(bool(r.checked) for r in rows),
        "answered_by_quote": sum(r.answer_from == "quote" for r in rows),
        "answered_by_second_try": sum(r.answer_from == "second try" for r in rows),
    }


def totals(rows: Sequence[Row]) -> dict[str, Any]:
    out = {"overall": group_totals(rows)}
    for kind in (*TYPES, "abstention"):
        group = [r for r in rows if r.kind == kind]
        if group:
            out[kind] = group_totals(group)
    return out


def print_totals(total: dict[str, Any]) -> None:
    print(
        f"\n{'type':27s} {'n':>3s} {'right':>5s} {'acc':>6s} {'goal':>5s} "
        f"{'evidence':>9s} {'right|ev':>9s} {'turn p50':>8s} {'p90':>6s}"
    )
    for name, t in total.items():
        goal = GOALS.get(name)
        print(
            f"{name:27s} {t['n']:3d} {t['right']:5d} {t['accuracy']:6.3f} "
            f"{'' if goal is None else f'{goal:.2f}':>5s} {t['evidence_in_prompt']:>9s} "
            f"{t['right_when_evidence_in_prompt']:>9s} {t['median_turn_s'] or 0:8.1f} "
            f"{t['p90_turn_s'] or 0:6.1f}"
        )


# -- main -------------------------------------------------------------------------------------
def choose(items: Sequence[Item], args: argparse.Namespace) -> list[Item]:
    chosen = list(items)
    if args.ids:
        wanted = set(args.ids.split(","))
        chosen = [i for i in chosen if i.qid in wanted]
    if args.types:
        kinds = set(args.types.split(","))
        chosen = [i for i in chosen if i.qtype in kinds or i.kind in kinds]
    if args.quick:
        seen: dict[str, int] = {}
        picked = []
        for item in chosen:
            if seen.get(item.kind, 0) < QUICK_PER_TYPE:
                seen[item.kind] = seen.get(item.kind, 0) + 1
                picked.append(item)
        chosen = picked
    if args.limit:
        chosen = chosen[: args.limit]
    return chosen


def open_engine(seed: int | None, model: Path | None = None) -> ChatEngine:
    from memory_qa import open_engine as starter_engine

    return starter_engine(seed, model)


def progress(index: int, total: int, row: Row) -> None:
    ev = {None: "-", True: "ev", False: "no-ev"}[row.evidence_in_prompt]
    print(
        f"[{index + 1}/{total}] {'OK' if row.right else 'WRONG':5s} {ev:5s} {row.turn_s:5.1f} s "
        f"{row.kind[:18]:18s} {row.checked[:10]:10s} {row.answer_from[:6]:6s} "
        f"| {row.question[:60]!r} -> {row.answer[:90]!r} "
        f"(gold {row.gold[:40]!r})",
        file=sys.stderr,
        flush=True,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    items = choose(load_items(), args)
    seed = None if args.seed < 0 else args.seed
    with benchlib.temp_profile("longmemeval-models") as model_paths:
        embedder = benchlib.open_embedder(
            benchlib.install_model(model_paths, benchlib.embedding_model())
        )
    engine = open_engine(seed, args.chat_model)
    rows: list[Row] = []
    try:
        await engine.load()
        async for _event in engine.chat([{"role": "user", "content": "Hello"}], max_tokens=4):
            pass
        for index, item in enumerate(items):
            if args.cached_only and not is_cached(item):
                continue
            built = await asyncio.to_thread(build_profile, item, embedder, args.rebuild)
            row = await ask(item, built, engine, embedder)
            progress(index, len(items), row)
            rows.append(row)
    finally:
        engine.close()
        embedder.close()
    total = totals(rows)
    print_totals(total)
    return {
        "setup": {
            "model": engine.name,
            "seed": seed,
            "temperature": engine.temperature,
            "threads": engine.threads,
            "context_size": engine.requested_context,
            "extra_buffers": extra_buffers_enabled(),
            "questions": len(rows),
        },
        "goals": GOALS,
        "totals": total,
        "rows": [
            {
                **{k: getattr(r, k) for k in r.__slots__},  # type: ignore[attr-defined]
                "answer": r.answer[:600],
                # the haystack's words stay in the shared data: only the block's size is kept
                # (--show-prompts prints the prompts to the terminal)
                "recall_text": "",
                "recall_chars": len(r.recall_text),
            }
            for r in rows
        ],
    }


def rejudge(path: Path) -> dict[str, Any]:
    """Judge a result file's stored answers again (after a rubric changed), without a model."""
    data = json.loads(path.read_text("utf-8"))
    items = {item.qid: item for item in load_items()}
    rows = []
    for raw in data["rows"]:
        row = Row(**{k: raw[k] for k in Row.__slots__ if k in raw})  # type: ignore[attr-defined]
        row.right = judge(items[row.qid], row.answer)
        rows.append(row)
    data["totals"] = totals(rows)
    data["rows"] = [
        {**raw, "right": row.right} for raw, row in zip(data["rows"], rows, strict=True)
    ]
    print_totals(data["totals"])
    return data


def main() -> None:
    from agenvoy_desktop.interpreter import responsive_threads

    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--ids", default="", help="comma-separated question ids")
    ap.add_argument("--types", default="", help="comma-separated question types (or abstention)")
    ap.add_argument("--limit", type=int, default=0, help="the first N chosen questions")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (-1: unseeded)")
    ap.add_argument("--tag", default="", help="suffix of the result file")
    ap.add_argument("--rebuild", action="store_true", help="import the haystacks again")
    ap.add_argument(
        "--recall-only", action="store_true", help="no chat model: where recall puts the evidence"
    )
    ap.add_argument(
        "--cached-only",
        action="store_true",
        help="only questions whose profile is cached (while another run builds the rest)",
    )
    ap.add_argument("--rejudge", type=Path, help="judge this result file's answers again")
    ap.add_argument(
        "--chat-model", type=Path, help="another GGUF to answer with (default: the starter)"
    )
    ap.add_argument(
        "--show-prompts", action="store_true", help="print every prompt and what the model wrote"
    )
    args = ap.parse_args()
    if args.rejudge:
        path = args.rejudge
        path.write_text(json.dumps(rejudge(path), indent=2, ensure_ascii=False) + "\n", "utf-8")
        return
    responsive_threads()
    _Shared.show = args.show_prompts
    if args.recall_only:
        tag = f".{args.tag}" if args.tag else ""
        benchlib.write_result(f"longmemeval_recall{tag}", run_recall_only(args), quick=args.quick)
        return
    data = asyncio.run(run(args))
    name = f"longmemeval_qa.{args.tag}" if args.tag else "longmemeval_qa"
    benchlib.write_result(name, data, quick=args.quick)


if __name__ == "__main__":
    main()
