"""End-to-end memory QA: facts said once in an earlier conversation, asked in a new session.

Setup: each fact of ``memory_facts.FACTS`` gets its own earlier session of
60 real LoCoMo turns (fact *i* takes conversation ``i % 10``, turns
``60 * (i // 10)`` onwards; speaker_a = user, speaker_b = assistant, plain
text without the speaker's name, LoCoMo's session dates).  Near the middle,
after an assistant turn, the user says the fact once, in passing: one more
user message before the next LoCoMo user turn, with no reply of its own (a
shared acknowledgement such as "Noted." would be the same message in every
session and pull unrelated sessions into recall).  Session titles name only
the LoCoMo sample, never the fact.  The sessions are imported through
``MemoryStore.import_messages`` with the real MiniLM embedder, as
``agenvoy-desktop import`` does.

Then every question runs one full turn in a NEW session through
``AppServices`` (the composition root the window and ``agenvoy-desktop chat``
use) with the real ``ChatEngine`` over the starter model, the app's default
``Settings()`` (temperature 0.7, 8,192-token context, 2 threads here) and a
fixed sampling seed (``--seed``, default 0) so a rerun on the same machine
asks the same questions the same way.  After each turn the question's session
is removed, so no question can find an earlier question's answer.

Per fact: answered (the normalised answer contains an accepted string,
``memory_facts.answer_matches``), the fact in the recall block (its message
id in ``TurnResult.recall_ids`` or its text in ``recall_text``), the fact in
a tool result, tool calls, seconds per turn, seconds to the first answer
token.  Then ``UNRELATED`` questions: the false-injection rate is the share
whose recall block is not empty.  Turns from before proactive recall existed
have no ``recall_text``; they count as an empty block.

Goal (starter model, 2 cores): accuracy >= 0.80, median turn <= 30 s.

    .venv/bin/python benchmarks/memory_qa.py [--quick] [--facts N] [--unrelated N] [--tag NAME]
        [--named | --cross [--no-translate]]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import benchlib
from memory_facts import (
    CROSS_FACTS,
    FACTS,
    NAMED_FACTS,
    NAMED_UNRELATED,
    REVERSE_FACTS,
    UNRELATED,
    Fact,
    answer_matches,
)

from agenvoy_desktop.agent import query_translation
from agenvoy_desktop.agent import recall as recall_module
from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.turn import AnswerDelta, ToolCallStarted, TurnEvent
from agenvoy_desktop.core.lifecycle import remove_session
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.llm.engine import ChatEngine, extra_buffers_enabled
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import Settings

TURNS_PER_FACT = 60
QUICK_FACTS = 8
QUICK_UNRELATED = 8
ACCEPT_ACCURACY = 0.80
ACCEPT_MEDIAN_TURN_S = 30.0
SECOND_NS = 1_000_000_000


# -- the earlier conversations -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Planted:
    """Where a fact was said: its session and its message id."""

    fact: Fact
    session_id: str
    message_id: str


def _turn_message(conv: benchlib.Conversation, turn: benchlib.Turn) -> Message:
    role = "user" if turn.speaker == conv.speaker_a else "assistant"
    return Message(new_message_id(), role, turn.text, turn.time_ns)


def earlier_session(
    conv: benchlib.Conversation, slot: int, fact: Fact
) -> tuple[list[Message], Message]:
    """60 LoCoMo turns with the fact said once by the user near the middle.

    The fact follows an assistant turn (so the user speaks next, as in a real
    exchange), 1 s after it and before the user's next LoCoMo turn.
    """
    turns = conv.turns[slot * TURNS_PER_FACT : (slot + 1) * TURNS_PER_FACT]
    if len(turns) < TURNS_PER_FACT:
        raise SystemExit(f"{conv.sample_id} has no LoCoMo turns left for slot {slot}")
    messages = [_turn_message(conv, t) for t in turns]
    middle = len(messages) // 2
    at = next(i for i in range(middle, len(messages)) if messages[i - 1].role == "assistant")
    before = messages[at - 1].time_ns
    said = Message(new_message_id(), "user", fact.said, before + SECOND_NS)
    return [*messages[:at], said, *messages[at:]], said


def plant_facts(services: AppServices, facts: Sequence[Fact]) -> list[Planted]:
    """Import one earlier session per fact (embedded with the real MiniLM)."""
    convs = benchlib.load_locomo()
    planted: list[Planted] = []
    for index, fact in enumerate(facts):
        conv = convs[index % len(convs)]
        messages, said = earlier_session(conv, index // len(convs), fact)
        sid = f"earlier-{index:02d}"
        title = f"{conv.sample_id} part {index // len(convs) + 1}"
        services.storage.run_sync(services.store.import_messages, messages, sid, title=title)
        planted.append(Planted(fact, sid, said.id))
    return planted


# -- one turn ------------------------------------------------------------------------------
@dataclass(slots=True)
class Turn:
    """What one question's turn did, in the terms this benchmark reports."""

    question: str
    answer: str
    recall_text: str
    recall_ids: list[str]
    tool_results: list[str]
    tools: list[str]
    turn_s: float
    model_s: float
    first_token_s: float | None
    not_remembered: bool = False
    """The turn showed the model how to say it does not know (``agent/not_remembered.py``)."""
    searched_as: str = ""
    """The English translation recall searched with (``agent/query_translation.py``)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(data.pop("extra"))
        data["answer"] = self.answer[:400]
        data["recall_chars"] = len(self.recall_text)
        data["recall_text"] = self.recall_text[:600]
        data["tool_results"] = [r[:300] for r in self.tool_results]
        data["tool_calls"] = len(self.tools)
        for key in ("turn_s", "model_s", "first_token_s"):
            if data[key] is not None:
                data[key] = round(data[key], 2)
        return data


async def ask(services: AppServices, question: str) -> Turn:
    """One full turn in a fresh session, which is removed afterwards."""
    agent, store, storage = services.agent, services.store, services.storage
    assert agent is not None, "no chat model"
    sid = await storage.run(store.create_session, "memory-qa")
    tools: list[str] = []
    first: list[float] = []
    started = time.perf_counter()

    def on_event(event: TurnEvent) -> None:
        if isinstance(event, AnswerDelta) and not first and event.text.strip():
            first.append(time.perf_counter() - started)
        elif isinstance(event, ToolCallStarted):
            tools.append(event.name)

    result = await agent.run_turn(sid, question, on_event=on_event)
    await agent.idle()
    await storage.run(remove_session, store, sid)
    reported = getattr(result, "first_token_s", None)
    return Turn(
        question=question,
        answer=result.answer,
        recall_text=str(getattr(result, "recall_text", "") or ""),
        recall_ids=[str(i) for i in getattr(result, "recall_ids", []) or []],
        tool_results=[m.content for m in result.saved if m.role == "tool"],
        tools=tools,
        turn_s=result.total_s,
        model_s=result.model_s,
        first_token_s=reported if reported is not None else (first[0] if first else None),
        not_remembered=bool(getattr(result, "not_remembered", False)),
        searched_as=str(getattr(result, "searched_as", "") or ""),
    )


# -- the app -------------------------------------------------------------------------------
def starter_path() -> Path:
    """The starter GGUF, assembled once into ``.bench-cache/models``."""
    from agenvoy_desktop.llm.starter import prepare_starter_model

    models = benchlib.BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    return Path(prepare_starter_model(models))


def open_engine(seed: int | None, model: Path | None = None) -> ChatEngine:
    """The starter (or *model*) as the app's default settings open it, with a sampling seed."""
    models = Settings().models
    return ChatEngine(
        model or starter_path(),
        context_size=models.context_size,
        threads=models.threads,
        gpu_layers=models.gpu_layers,
        temperature=models.temperature,
        max_answer_tokens=models.max_answer_tokens,
        seed=seed,
    )


def open_services(paths: AppPaths, seed: int | None) -> AppServices:
    """AppServices as the app builds them, with a seeded engine and the real MiniLM."""
    embedder = benchlib.open_embedder(benchlib.install_model(paths, benchlib.embedding_model()))
    engine = open_engine(seed)
    return AppServices.open(paths, settings=Settings(), embedder=embedder, chat_model=engine)


async def warm_up(services: AppServices) -> None:
    """Load the model and run one short generation, outside every timing."""
    model = services.chat_model
    assert isinstance(model, ChatEngine)
    await model.load()
    async for _event in model.chat([{"role": "user", "content": "Hello"}], max_tokens=4):
        pass


async def prepare(
    services: AppServices, facts: Sequence[Fact], seed: int | None
) -> tuple[list[Planted], dict[str, Any]]:
    """Plant *facts* (timed), then load and warm the model: the facts and the run's setup."""
    began = time.perf_counter()
    planted = await asyncio.to_thread(plant_facts, services, facts)
    import_s = time.perf_counter() - began
    print(f"planted {len(planted)} facts in {import_s:.0f} s; load {load_text()}", file=sys.stderr)
    setup = {**setup_summary(services, planted, seed), "import_s": round(import_s, 1)}
    await warm_up(services)
    return planted, setup


def progress(label: str, index: int, total: int, turn: Turn, verdict: str) -> None:
    tools = ",".join(turn.tools) or "-"
    print(
        f"[{label} {index + 1}/{total}] {verdict:9s} {turn.turn_s:5.1f} s "
        f"recall {len(turn.recall_text):4d} ch  tools {tools}  "
        f"| {turn.question[:40]!r} -> {turn.answer[:60]!r}",
        file=sys.stderr,
        flush=True,
    )


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def load_text() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "?"


# -- the two question sets -----------------------------------------------------------------
def fact_in(planted: Planted, texts: Sequence[str]) -> bool:
    """The fact (its id or its sentence) occurs in one of *texts*."""
    return any(planted.message_id in t or planted.fact.said in t for t in texts)


async def ask_facts(services: AppServices, planted: Sequence[Planted]) -> list[dict[str, Any]]:
    rows = []
    for index, item in enumerate(planted):
        turn = await ask(services, item.fact.question)
        answered = answer_matches(turn.answer, item.fact.accept)
        in_recall = item.message_id in turn.recall_ids or fact_in(item, [turn.recall_text])
        in_tool = fact_in(item, turn.tool_results)
        turn.extra = {
            "fact": item.fact.key,
            "kind": item.fact.kind,
            "lang": item.fact.lang,
            "answered": answered,
            "in_recall": in_recall,
            "in_tool_result": in_tool,
            "load": load_text(),
        }
        progress("fact", index, len(planted), turn, "OK" if answered else "WRONG")
        rows.append(turn.row())
    return rows


async def ask_unrelated(services: AppServices, questions: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for index, question in enumerate(questions):
        turn = await ask(services, question)
        injected = bool(turn.recall_text.strip())
        turn.extra = {"injected": injected, "load": load_text()}
        progress("unrelated", index, len(questions), turn, "INJECTED" if injected else "clean")
        rows.append(turn.row())
    return rows


USERS_VOICE = re.compile(r"\s*(?:(?:My|I|I'm|I’m|I've|Mein|Meine|Ich)\b|我的|我们的|我們的)")


def in_users_voice(answer: str) -> bool:
    """The answer opens as the user would say it ("My bike lock code is 4721.").

    Banning these openings (2026-12-02) made it worse: RESULTS §10.
    """
    return USERS_VOICE.match(answer) is not None


def rate(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 3) if rows else None


def totals(facts: Sequence[dict[str, Any]], unrelated: Sequence[dict[str, Any]]) -> dict[str, Any]:
    both = [*facts, *unrelated]
    recall_hits = [r for r in facts if r["in_recall"] or r["in_tool_result"]]
    return {
        "facts": len(facts),
        "accuracy": rate(facts, "answered"),
        "recall_hit_rate": round(len(recall_hits) / len(facts), 3) if facts else None,
        "in_recall_block_rate": rate(facts, "in_recall"),
        "in_tool_result_rate": rate(facts, "in_tool_result"),
        "answered_when_in_recall": _answered_given(facts, "in_recall"),
        "answers_in_the_users_voice": sum(1 for r in facts if in_users_voice(r["answer"])),
        "searched_in_english_too": sum(1 for r in facts if r.get("searched_as")),
        "shown_the_dont_know_exchanges": sum(1 for r in facts if r.get("not_remembered")),
        "fact_median_turn_s": median([r["turn_s"] for r in facts]),
        "fact_median_first_token_s": median([r["first_token_s"] for r in facts]),
        "fact_tool_calls_per_turn": _per_turn(facts),
        "unrelated": len(unrelated),
        "false_injection_rate": rate(unrelated, "injected"),
        "unrelated_median_turn_s": median([r["turn_s"] for r in unrelated]),
        "unrelated_tool_calls_per_turn": _per_turn(unrelated),
        "all_median_turn_s": median([r["turn_s"] for r in both]),
        "all_median_model_s": median([r["model_s"] for r in both]),
    }


def _per_turn(rows: Sequence[dict[str, Any]]) -> float | None:
    return round(sum(r["tool_calls"] for r in rows) / len(rows), 2) if rows else None


def _answered_given(rows: Sequence[dict[str, Any]], key: str) -> str:
    held = [r for r in rows if r[key]]
    return f"{sum(r['answered'] for r in held)}/{len(held)}"


def print_totals(total: dict[str, Any]) -> None:
    print("\n=== memory QA")
    for key, value in total.items():
        print(f"  {key:32s} {value}")


# -- main ----------------------------------------------------------------------------------
def arguments(description: str) -> argparse.ArgumentParser:
    ap = benchlib.parser(description)
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (-1: unseeded)")
    ap.add_argument("--tag", default="", help="suffix of the result file, e.g. 'before'")
    ap.add_argument(
        "--english-header",
        action="store_true",
        help="the recall block's header in English for every message (before 2026-12-02)",
    )
    ap.add_argument(
        "--capable-prompt",
        action="store_true",
        help="give the starter the capable models' system prompt (the one before 2026-12-02)",
    )
    return ap


def result_name(base: str, tag: str) -> str:
    return f"{base}.{tag}" if tag else base


def setup_summary(
    services: AppServices, planted: Sequence[Planted], seed: int | None
) -> dict[str, Any]:
    model = services.chat_model
    assert isinstance(model, ChatEngine)
    return {
        "model": model.name,
        "temperature": model.temperature,
        "seed": seed,
        "threads": model.threads,
        "context_size": model.requested_context,
        "extra_buffers": extra_buffers_enabled(),
        "earlier_sessions": len(planted),
        "turns_per_session": TURNS_PER_FACT + 1,
    }


async def run(args: argparse.Namespace, paths: AppPaths) -> dict[str, Any]:
    all_facts, all_unrelated = (
        (NAMED_FACTS, NAMED_UNRELATED)
        if args.named
        else (CROSS_FACTS, ())
        if args.cross
        else (REVERSE_FACTS, ())
        if args.reverse
        else (FACTS, UNRELATED)
    )
    facts = all_facts[: args.facts or (QUICK_FACTS if args.quick else len(all_facts))]
    unrelated = all_unrelated[
        : args.unrelated or (QUICK_UNRELATED if args.quick else len(all_unrelated))
    ]
    seed = None if args.seed < 0 else args.seed
    services = await asyncio.to_thread(open_services, paths, seed)
    if args.capable_prompt:
        assert services.agent is not None
        services.agent.config.system_prompt = DEFAULT_SYSTEM_PROMPT
    if args.english_header:
        recall_module.LOCALISED_HEADER = False
    try:
        planted, setup = await prepare(services, facts, seed)
        fact_rows = await ask_facts(services, planted)
        unrelated_rows = await ask_unrelated(services, unrelated)
    finally:
        await asyncio.to_thread(services.close)
    total = totals(fact_rows, unrelated_rows)
    print_totals(total)
    accuracy = total["accuracy"] or 0.0
    median_turn = total["fact_median_turn_s"] or float("inf")
    return {
        "setup": setup,
        "totals": total,
        "facts": fact_rows,
        "unrelated": unrelated_rows,
        "acceptance": {
            "criterion": f"accuracy >= {ACCEPT_ACCURACY}, median turn <= {ACCEPT_MEDIAN_TURN_S} s",
            "accuracy": accuracy,
            "median_turn_s": total["fact_median_turn_s"],
            "pass": accuracy >= ACCEPT_ACCURACY and median_turn <= ACCEPT_MEDIAN_TURN_S,
        },
    }


Rows = list[dict[str, Any]]


def turn_costs(rows: Rows) -> dict[str, Any]:
    """Tool calls per turn and the median model and first-token seconds of *rows*."""
    return {
        "tool_calls_per_turn": round(sum(r["tool_calls"] for r in rows) / max(len(rows), 1), 2),
        "median_model_s": median([r["model_s"] for r in rows]),
        "median_first_token_s": median([r["first_token_s"] for r in rows]),
    }


Todo = list[tuple[str, str, tuple[Any, ...]]]
"""(set, message, accepted memory answers) per message of a variants benchmark."""
Judge = Callable[[str, str], tuple[dict[str, Any], str]]
"""(answer, message) -> (what the row records of it, the progress line's verdict)."""


async def ask_interleaved(
    services: AppServices,
    todo: Todo,
    variants: Sequence[str],
    switch: Callable[[str], AbstractContextManager[Any]],
    judge: Judge,
) -> Rows:
    """Each message once per variant, the variants' order turning message by message.

    *switch* puts a variant in force for one turn; rows carry ``variant``,
    ``set``, what *judge* says and, for memory questions, ``answered``."""
    rows: Rows = []
    width = max(len(v) for v in variants)
    for index, (kind, text, accept) in enumerate(todo):
        turn_by = index % len(variants)
        for name in [*variants[turn_by:], *variants[:turn_by]]:
            with switch(name):
                turn = await ask(services, text)
            judged, verdict = judge(turn.answer, text)
            turn.extra = {"variant": name, "set": kind, **judged}
            if accept:
                turn.extra["answered"] = answer_matches(turn.answer, accept)
            progress(f"{name:{width}s} {kind}", index, len(todo), turn, verdict)
            rows.append(turn.row())
    return rows


def totals_by_variant(
    rows: Rows,
    variants: Sequence[str],
    sets: Sequence[str],
    counts: Callable[[Rows], dict[str, Any]],
) -> dict[str, Any]:
    """Per variant and set: n, *counts*, median answer words (and memory answers right),
    then the variant's tool calls and median seconds (:func:`turn_costs`).

    Rows carry ``variant``, ``set`` and ``answer_words`` (and ``answered`` for memory)."""
    out: dict[str, Any] = {}
    for name in variants:
        mine = [r for r in rows if r["variant"] == name]
        if not mine:
            continue
        per_set: dict[str, Any] = {}
        for kind in sets:
            group = [r for r in mine if r["set"] == kind]
            if not group:
                continue
            per_set[kind] = {
                "n": len(group),
                **counts(group),
                "median_answer_words": median([r["answer_words"] for r in group]),
            }
            if any("answered" in r for r in group):
                per_set[kind]["answered"] = sum(1 for r in group if r.get("answered"))
        out[name] = {**per_set, **turn_costs(mine)}
    return out


def run_variants(
    title: str,
    ask_all: Callable[[AppServices, argparse.Namespace], Coroutine[Any, Any, Rows]],
    totals: Callable[[Rows], dict[str, Any]],
    plant: Callable[[bool], Sequence[Fact]] = lambda quick: FACTS[:QUICK_FACTS] if quick else FACTS,
) -> Callable[[argparse.Namespace, AppPaths], Coroutine[Any, Any, dict[str, Any]]]:
    """The ``run`` of a benchmark that sends its messages once per variant.

    The facts of *plant* planted (given whether ``--quick``; by default all
    of ``FACTS``, or the quick set), *ask_all* sends the messages, *totals*
    sums its rows per variant; the totals are printed.
    """

    async def run(args: argparse.Namespace, paths: AppPaths) -> dict[str, Any]:
        facts = plant(args.quick)
        seed = None if args.seed < 0 else args.seed
        services = await asyncio.to_thread(open_services, paths, seed)
        try:
            _planted, setup = await prepare(services, facts, seed)
            rows = await ask_all(services, args)
        finally:
            await asyncio.to_thread(services.close)
        total = totals(rows)
        print(f"\n=== {title}")
        for name, values in total.items():
            print(f"  {name}: {values}")
        return {"setup": setup, "totals": total, "turns": rows}

    return run


def run_in_profile(
    name: str,
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace, AppPaths], Coroutine[Any, Any, dict[str, Any]]],
) -> None:
    """Run *run* in a throw-away profile as the app runs, and write ``results/<name>[.tag]``."""
    from agenvoy_desktop.interpreter import responsive_threads

    responsive_threads()  # as the window and `agenvoy-desktop chat` run
    with benchlib.temp_profile(name.replace("_", "-")) as paths:
        data = asyncio.run(run(args, paths))
    benchlib.write_result(result_name(name, args.tag), data, quick=args.quick)


def main() -> None:
    ap = arguments(__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=0, help="ask only the first N facts")
    ap.add_argument("--unrelated", type=int, default=0, help="ask only the first N unrelated")
    ap.add_argument(
        "--named",
        action="store_true",
        help="ask NAMED_FACTS and NAMED_UNRELATED (people and places by name) instead",
    )
    ap.add_argument(
        "--cross",
        action="store_true",
        help="ask CROSS_FACTS (told in English, asked in Chinese, German or Japanese) instead",
    )
    ap.add_argument(
        "--reverse",
        action="store_true",
        help="ask REVERSE_FACTS (told in Chinese, Japanese or German, asked in English) instead",
    )
    ap.add_argument(
        "--no-translate",
        action="store_true",
        help="recall does not retry with an English translation (before 2026-12-02)",
    )
    args = ap.parse_args()
    if args.no_translate:
        query_translation.TRANSLATE = False
    name = (
        "memory_qa_named"
        if args.named
        else "memory_qa_cross"
        if args.cross
        else "memory_qa_reverse"
        if args.reverse
        else "memory_qa"
    )
    run_in_profile(name, args, run)


if __name__ == "__main__":
    main()
