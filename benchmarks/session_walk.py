"""Deep in one session through the real agent: what each turn makes the model evaluate.

``prompt_reuse.py --deep`` builds prompts by hand; this walks the app's own
turn (recall, the plan's tools, the turn note) in one session of the
``memory_qa.py`` profile: a mix of small talk, statements and questions
about the planted facts, one after another, as a person types them.  For
every turn: the prompt tokens the prefill computed (what the KV cache did
not hold), seconds to the first answer token, and (``--read``) how long the
model stayed busy after the answer (reading ahead, a summary pass): the
person reads the answer that long before typing the next message.
``--no-read-ahead`` turns the read-ahead off (``agent/read_ahead.py``), for
the comparison.  ``--typing`` has the person pause once before the last
word of each message (the window hands the words so far to the agent after
a pause: ``Agent.draft_changed``); the walk waits until the model has read
that draft's prompt, then sends the whole message.

``--restart`` then starts the app again on the walked session, twice, and
sends one more message at once, with no pause in typing: once as the
window does since the session it opens is read ahead (``Agent.session_opened``,
the walk waiting until it is read: the person looks at the window), once
sent right after the model loaded with nothing read, as before.  What the
first turn after a start evaluates, and its first token.

    .venv/bin/python benchmarks/session_walk.py [--quick] [--read] [--typing] [--no-read-ahead]
        [--restart] [--tag NAME]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import benchlib
import memory_qa
from memory_facts import FACTS

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.turn import Agent
from agenvoy_desktop.llm.llama_model import LlamaModel
from agenvoy_desktop.paths import AppPaths

EVALUATED = [0, 0]
"""Prompt tokens evaluated since the last reset; whether a prefill is running."""


def count_prefills() -> None:
    """Add up the prompt tokens every prefill evaluates (all rounds of a turn)."""
    prefill, decode = LlamaModel._prefill, LlamaModel._decode

    def counting_prefill(self: LlamaModel, tokens: Any, *args: Any, **kwargs: Any) -> bool:
        EVALUATED[1] = 1
        try:
            return prefill(self, tokens, *args, **kwargs)
        finally:
            EVALUATED[1] = 0

    def counting_decode(self: LlamaModel, batch: Any) -> None:
        if EVALUATED[1]:
            EVALUATED[0] += int(batch.n_tokens)
        decode(self, batch)

    LlamaModel._prefill = counting_prefill  # type: ignore[method-assign]
    LlamaModel._decode = counting_decode  # type: ignore[method-assign]


MESSAGES = (
    "Hi! How are you today?",
    "I'm planning a trip to Lisbon next month with my sister.",
    "What should I pack for a week there in spring?",
    "What is my bike lock code?",
    "Thanks! Can you suggest three things to see in Lisbon?",
    "My sister prefers museums to beaches.",
    "Which of those would she like most?",
    "我的电动车锁密码是多少？",
    "How long is the flight from Vienna to Lisbon, roughly?",
    "Remind me, where am I going next month?",
    "Could you write a short packing list?",
    "Great, thank you!",
    "What did I say my sister prefers?",
    "Any tips for trams there?",
    "How do I say thank you in Portuguese?",
    "Okay, that's all for now.",
)


async def reading(services: AppServices) -> float:
    """Seconds until the model has nothing left to do (a read-ahead, a summary pass):
    the person reads the answer at least that long."""
    engine = services.chat_model
    began = time.perf_counter()
    while getattr(engine, "_active", None):  # noqa: ASYNC110 - the engine has no idle event
        await asyncio.sleep(0.05)
    return round(time.perf_counter() - began, 2)


async def walk(
    services: AppServices, sid: str, messages: tuple[str, ...], args: Any
) -> list[dict[str, Any]]:
    agent = services.agent
    assert agent is not None
    rows = []
    for index, text in enumerate(messages):
        typed_s = 0.0
        if args.typing:
            agent.draft_changed(sid, benchlib.before_last_word(text))
            await agent.idle()
            typed_s = await reading(services)
        EVALUATED[0] = 0
        result = await agent.run_turn(sid, text)
        evaluated = EVALUATED[0]
        await agent.idle()
        read_s = await reading(services) if args.read else 0.0
        row = {
            "turn": index + 1,
            "message": text,
            "evaluated": evaluated,
            "first_token_s": result.first_token_s,
            "model_s": round(result.model_s, 2),
            "turn_s": round(result.total_s, 2),
            "recall_chars": len(result.recall_text or ""),
            "answer": result.answer[:300],
            "answer_from": result.answer_from,
            "tools_offered": list(result.tools_offered),
            "recall": result.recall_text or "",
            "then_busy_s": read_s,
            "read_while_typed_s": typed_s,
        }
        print(
            f"[{index + 1:2d}] eval {evaluated:4d}  ttft {row['first_token_s'] or 0:5.2f} s  "
            f"model {row['model_s']:5.2f} s  recall {row['recall_chars']:4d}  "
            f"then busy {read_s:5.2f} s  "
            f"{text[:40]!r} -> {row['answer'][:50]!r}",
            file=sys.stderr,
            flush=True,
        )
        rows.append(row)
    return rows


async def run(args: Any, paths: AppPaths) -> dict[str, Any]:
    count_prefills()
    if args.no_read_ahead:  # the turn as it was before reading ahead
        Agent.read_ahead_later = lambda self, session_id=None: None  # type: ignore[method-assign]
    facts = FACTS[: memory_qa.QUICK_FACTS if args.quick else 8]
    services = await asyncio.to_thread(memory_qa.open_services, paths, 0)
    try:
        _planted, setup = await memory_qa.prepare(services, facts, 0)
        sid = await services.storage.run(services.store.create_session, "session-walk")
        rows = await walk(services, sid, MESSAGES[:6] if args.quick else MESSAGES, args)
    finally:
        await asyncio.to_thread(services.close)
    restarts = []
    if args.restart:
        for opened, text in ((True, AFTER_RESTART[0]), (False, AFTER_RESTART[1])):
            restarts.append(await first_turn_after_start(paths, sid, text, opened=opened))
    later = [r for r in rows[1:] if r["first_token_s"] is not None]
    ttfts = sorted(r["first_token_s"] for r in later)
    totals = {
        "read_ahead": not args.no_read_ahead,
        "waits_for_idle": bool(args.read),
        "typing_pause_before_last_word": bool(args.typing),
        "median_evaluated": statistics.median(r["evaluated"] for r in rows[1:]),
        "max_evaluated": max(r["evaluated"] for r in rows[1:]),
        "max_first_token_s": ttfts[-1],
        "mean_first_token_s": round(statistics.fmean(ttfts), 2),
        "median_first_token_s": round(statistics.median(r["first_token_s"] for r in later), 2),
        "median_model_s": round(statistics.median(r["model_s"] for r in rows[1:]), 2),
    }
    print(totals, file=sys.stderr)
    return {"setup": setup, "totals": totals, "turns": rows, "after_restart": restarts}


AFTER_RESTART = ("What is my bike lock code again?", "And where am I going next month?")
"""Sent at once after the app started again (two: each start adds one exchange)."""


async def first_turn_after_start(
    paths: AppPaths, sid: str, text: str, *, opened: bool
) -> dict[str, Any]:
    """Start the app again on *sid*; send *text* at once (see ``--restart``)."""
    services = await asyncio.to_thread(memory_qa.open_services, paths, 0)
    try:
        agent = services.agent
        assert agent is not None
        await services.preload_chat_model()  # as the window does once it is usable
        read_s = 0.0
        if opened:
            agent.session_opened(sid)
            await agent.idle()
            read_s = await reading(services)
        else:
            agent.read_ahead_later = lambda session_id=None: None  # type: ignore[method-assign]
        EVALUATED[0] = 0
        result = await agent.run_turn(sid, text)
        row = {
            "session_read_ahead": opened,
            "read_while_looking_s": read_s,
            "message": text,
            "evaluated": EVALUATED[0],
            "first_token_s": result.first_token_s,
            "model_s": round(result.model_s, 2),
            "tools_offered": list(result.tools_offered),
            "answer": result.answer[:300],
        }
    finally:
        await asyncio.to_thread(services.close)
    print(f"after a restart: {row}", file=sys.stderr, flush=True)
    return row


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument(
        "--read",
        action="store_true",
        help="after each answer wait until the model is idle (the person reads meanwhile)",
    )
    ap.add_argument("--no-read-ahead", action="store_true", help="turn reading ahead off")
    ap.add_argument(
        "--restart",
        action="store_true",
        help="then start again on the session and send one message at once (twice)",
    )
    ap.add_argument(
        "--typing",
        action="store_true",
        help="pause before each message's last word: the draft's prompt is read meanwhile",
    )
    memory_qa.run_in_profile("session_walk", ap.parse_args(), run)


if __name__ == "__main__":
    main()
