"""Facts that only the summary holds: asked in the same session with recall off.

For each planted fact of ``memory_facts.FACTS`` (and the held-out list when
more are asked for), one session of 40 messages: LoCoMo turns with the
fact said once by the user as the fifth message.  The real starter model
folds everything older than the window (16) into the rolling summary, so
the fact's message is outside what the next turn sends word for word (the
window reaches back at most 23).  Then the fact's question is asked in that
same session with tools off (``SessionSettings(tools=False)``: no recall,
no search, no document passages): only the summary can answer.

Each question is asked twice on the same summary, paired:

* **with facts** — the summary as saved (what ships);
* **model only** — the same summary with its ``facts`` removed (the
  model's topics, decisions and current discussion alone).

    .venv/bin/python benchmarks/summary_facts_qa.py [--quick] [--facts N]

Writes ``results/summary_facts_qa.json``: per fact the answers, whether the
fact's sentence is among the summary's facts, and the pass seconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import benchlib
from memory_facts import FACTS, HELDOUT_FACTS, Fact, answer_matches
from memory_qa import open_services, starter_path, warm_up

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.message_edit import delete_message
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.session_settings import SessionSettings, save_session_settings
from agenvoy_desktop.core.summary import Summary, load_summary, save_summary

MESSAGES = 40
FACT_AT = 4
SECOND_NS = 1_000_000_000
GOAL = 0.80


def session_messages(conv: benchlib.Conversation, slot: int, fact: Fact) -> list[Message]:
    """LoCoMo turns of *conv* with *fact* said by the user at :data:`FACT_AT`."""
    turns = conv.turns[slot * MESSAGES : (slot + 1) * MESSAGES - 1]
    messages = [
        Message(
            new_message_id(),
            "user" if t.speaker == conv.speaker_a else "assistant",
            t.text,
            t.time_ns,
        )
        for t in turns
    ]
    at = FACT_AT if messages[FACT_AT - 1].role == "assistant" else FACT_AT + 1
    said = Message(new_message_id(), "user", fact.said, messages[at - 1].time_ns + SECOND_NS)
    return [*messages[:at], said, *messages[at:]]


async def ask(services: AppServices, sid: str, question: str) -> tuple[str, float]:
    """One turn; the question and answer are deleted after, so the next ask starts alike."""
    agent = services.agent
    assert agent is not None
    started = time.perf_counter()
    result = await agent.run_turn(sid, question)
    await agent.idle()
    seconds = time.perf_counter() - started
    gone: set[str] = set()
    for message in result.saved:
        if message.id not in gone:
            gone.update(await services.storage.run(delete_message, services.store, sid, message.id))
    return result.answer, seconds


async def one_fact(services: AppServices, index: int, fact: Fact) -> dict[str, Any]:
    convs = benchlib.load_locomo()
    conv = convs[index % len(convs)]
    messages = session_messages(conv, index // len(convs), fact)
    store, storage = services.store, services.storage
    sid = f"facts-{index:02d}"
    await storage.run(store.import_messages, messages, sid)
    folder = store.folder(sid)
    await storage.run(save_session_settings, folder, SessionSettings(tools=False))
    summarizer = services.summarizer
    assert summarizer is not None
    started = time.perf_counter()
    run = await summarizer.run(sid, force=True, wait=True)
    pass_s = time.perf_counter() - started
    summary = load_summary(folder) or Summary()
    said_id = next(m.id for m in messages if m.content == fact.said)
    in_facts = any(f.source == said_id for f in summary.facts)
    answer, turn_s = await ask(services, sid, fact.question)
    save_summary(folder, replace(summary, facts=()))
    bare_answer, bare_s = await ask(services, sid, fact.question)
    save_summary(folder, summary)
    row = {
        "key": fact.key,
        "lang": fact.lang,
        "question": fact.question,
        "summary_stopped": run.stopped,
        "pass_s": round(pass_s, 1),
        "fact_kept": in_facts,
        "facts": len(summary.facts),
        "answer": answer[:300],
        "right": answer_matches(answer, fact.accept),
        "turn_s": round(turn_s, 1),
        "model_only_answer": bare_answer[:300],
        "model_only_right": answer_matches(bare_answer, fact.accept),
        "model_only_turn_s": round(bare_s, 1),
    }
    print(
        f"[{index + 1}] kept={in_facts} right={row['right']} model-only={row['model_only_right']}"
        f" pass {pass_s:.1f} s | {fact.question[:40]!r} -> {answer[:60]!r}",
        flush=True,
    )
    return row


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=None, help="facts to ask (default 32)")
    args = ap.parse_args()
    pool = (*FACTS, *HELDOUT_FACTS)
    count = args.facts or (6 if args.quick else 32)
    facts = pool[:count]
    starter_path()
    rows: list[dict[str, Any]] = []
    with benchlib.temp_profile("summary-facts-qa") as paths:
        services = open_services(paths, seed=0)
        assert services.agent is not None
        services.agent.after_turn = None  # this benchmark runs the one pass itself
        try:

            async def run() -> None:
                await warm_up(services)
                for index, fact in enumerate(facts):
                    rows.append(await one_fact(services, index, fact))

            asyncio.run(run())
        finally:
            services.close()
    right = sum(r["right"] for r in rows)
    bare = sum(r["model_only_right"] for r in rows)
    kept = sum(r["fact_kept"] for r in rows)
    totals = {
        "facts": len(rows),
        "right_with_facts": right,
        "accuracy_with_facts": round(right / max(1, len(rows)), 3),
        "right_model_only": bare,
        "accuracy_model_only": round(bare / max(1, len(rows)), 3),
        "fact_sentence_kept": kept,
        "goal": GOAL,
        "pass_seconds": benchlib.stats_ms([r["pass_s"] for r in rows]),
        "turn_seconds": benchlib.stats_ms([r["turn_s"] for r in rows]),
    }
    print(f"totals: {totals}")
    benchlib.write_result("summary_facts_qa", {"totals": totals, "rows": rows}, quick=args.quick)


if __name__ == "__main__":
    main()
