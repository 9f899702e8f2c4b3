"""Chit-chat: greetings, thanks and small talk answered at once, without tools.

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter model with the app's default settings
and a fixed seed), because a greeting must stay cheap in a profile that has
memory: a recall block or a tool call for "Hi!" is exactly what makes a small
model slow.  Each of the 20 messages of ``memory_facts.CHITCHAT`` (English,
German, Chinese) opens a new session.

Reported: tool calls per turn, turns with a recall block, and the medians of
seconds to the first answer token, model seconds and turn seconds.

Goal (starter model, 2 cores): no tool call, median model time < 10 s.

    .venv/bin/python benchmarks/chitchat.py [--quick] [--messages N] [--facts N] [--tag NAME]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import memory_qa
from memory_facts import CHITCHAT, FACTS

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.paths import AppPaths

QUICK_MESSAGES = 6
ACCEPT_MODEL_S = 10.0


async def ask_all(services: AppServices, messages: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for index, text in enumerate(messages):
        turn = await memory_qa.ask(services, text)
        turn.extra = {"load": memory_qa.load_text()}
        verdict = "TOOLS" if turn.tools else "no tools"
        memory_qa.progress("chit-chat", index, len(messages), turn, verdict)
        rows.append(turn.row())
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {
        "messages": n,
        "tool_calls_per_turn": round(sum(r["tool_calls"] for r in rows) / n, 2),
        "turns_with_tool_calls": sum(1 for r in rows if r["tool_calls"]),
        "turns_with_recall_block": sum(1 for r in rows if r["recall_chars"]),
        "median_first_token_s": memory_qa.median([r["first_token_s"] for r in rows]),
        "median_model_s": memory_qa.median([r["model_s"] for r in rows]),
        "median_turn_s": memory_qa.median([r["turn_s"] for r in rows]),
        "max_model_s": round(max(r["model_s"] for r in rows), 2),
    }


async def run(args: argparse.Namespace, paths: AppPaths) -> dict[str, Any]:
    messages = CHITCHAT[: args.messages or (QUICK_MESSAGES if args.quick else len(CHITCHAT))]
    facts = FACTS[: args.facts or (memory_qa.QUICK_FACTS if args.quick else len(FACTS))]
    seed = None if args.seed < 0 else args.seed
    services = await asyncio.to_thread(memory_qa.open_services, paths, seed)
    try:
        _planted, setup = await memory_qa.prepare(services, facts, seed)
        rows = await ask_all(services, messages)
    finally:
        await asyncio.to_thread(services.close)
    total = totals(rows)
    print("\n=== chit-chat")
    for key, value in total.items():
        print(f"  {key:26s} {value}")
    median_model = total["median_model_s"] or float("inf")
    return {
        "setup": setup,
        "totals": total,
        "turns": rows,
        "acceptance": {
            "criterion": f"no tool calls, median model time < {ACCEPT_MODEL_S} s",
            "pass": total["turns_with_tool_calls"] == 0 and median_model < ACCEPT_MODEL_S,
        },
    }


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=0, help="send only the first N messages")
    ap.add_argument("--facts", type=int, default=0, help="plant only the first N facts")
    memory_qa.run_in_profile("chitchat", ap.parse_args(), run)


if __name__ == "__main__":
    main()
