"""A summary pass after a chat turn, and a turn after the pass: saved KV states against none.

The app alternates chat turns and rolling-summary passes on one model, and
each used to wipe the other's KV cache (``llm/kv_snapshots.py``).  Each round
here: a chat turn (system prompt + ~1,500 tokens of LoCoMo conversation + a
question), then a summary pass over 16 other messages, then the next chat
turn (the same conversation, one more exchange), another pass (which can
reuse the first pass's instructions) and a third turn.  Rounds alternate between
saved states on (the app) and off (``BUDGET_BYTES = 0``: nothing is kept),
in one process on one loaded starter model.  Reported per setting: the
second pass's seconds and the time to first token of the turns after a pass.

    .venv/bin/python benchmarks/lab/prompt_switch.py [--rounds N] [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib

from agenvoy_desktop.core.model_api import ChatMessage, TextDelta
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.llm import kv_snapshots
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.llama_model import LlamaModel
from agenvoy_desktop.llm.starter import prepare_starter_model

CHUNK, WINDOW, CONTEXT, ANSWER = 16, 2, 8192, 48
BUDGET = kv_snapshots.BUDGET_BYTES


def _chat(conv: benchlib.Conversation, turn: int) -> list[ChatMessage]:
    lines = [f"{m.content}" for m in benchlib.conversation_messages(conv)[:60]]
    messages: list[ChatMessage] = [
        {"role": "system", "content": "You are a helpful assistant. Answer from the notes."},
        {"role": "user", "content": "Notes:\n" + "\n".join(lines)[:6000]},
        {"role": "assistant", "content": "I have read the notes."},
    ]
    for n in range(turn + 1):
        if n:
            messages.append({"role": "assistant", "content": "They talked about their week."})
        messages.append({"role": "user", "content": f"Question {n + 1}: what did they do?"})
    return messages


async def _ttft(engine: ChatEngine, messages: list[ChatMessage]) -> float:
    started = time.perf_counter()
    first = 0.0
    async for event in engine.chat(messages, max_tokens=ANSWER):
        if isinstance(event, TextDelta) and not first:
            first = time.perf_counter() - started
    return first


async def _pass(engine: ChatEngine, store: MemoryStore, conv: Any) -> float:
    sid = store.create_session("switch bench")
    store.append(sid, benchlib.conversation_messages(conv)[: CHUNK + WINDOW], embed=False)
    started = time.perf_counter()
    await Summarizer(store, engine, window_messages=WINDOW).run(sid)
    return time.perf_counter() - started


async def _round(
    engine: ChatEngine, store: MemoryStore, convs: list[Any], n: int
) -> dict[str, Any]:
    """Turn, pass, turn, pass, turn: the second pass follows a turn and an earlier pass."""
    chat = convs[n % len(convs)]
    first_ttft = await _ttft(engine, _chat(chat, 0))
    first_pass = await _pass(engine, store, convs[(n + 1) % len(convs)])
    turn_after_pass = await _ttft(engine, _chat(chat, 1))
    second_pass = await _pass(engine, store, convs[(n + 2) % len(convs)])
    turn_after_second = await _ttft(engine, _chat(chat, 2))
    return {
        "first_turn_ttft_s": round(first_ttft, 2),
        "first_pass_s": round(first_pass, 2),
        "next_turn_ttft_s": round(turn_after_pass, 2),
        "pass_s": round(second_pass, 2),
        "turn_after_second_pass_ttft_s": round(turn_after_second, 2),
    }


def _forget_states(model: LlamaModel) -> None:
    model._snapshots.clear()


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None, help="rounds per setting (default 2)")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 2)
    model_path = prepare_starter_model(benchlib.BENCH_CACHE / "models")
    convs = benchlib.load_locomo()
    samples: dict[str, list[dict[str, Any]]] = {"saved": [], "none": []}
    with benchlib.temp_profile("switch") as paths:
        store = MemoryStore(paths, None)
        engine = ChatEngine(model_path, context_size=CONTEXT, temperature=0.0, seed=0)
        try:

            async def run() -> None:
                await engine.count_tokens("load")
                for n in range(2 * rounds):
                    name = ("saved", "none")[(n + n // 2) % 2]  # saved, none, none, saved, ...
                    kv_snapshots.BUDGET_BYTES = BUDGET if name == "saved" else 0
                    await engine._call(_forget_states)  # each round starts with none held
                    samples[name].append(await _round(engine, store, convs, n // 2))
                    print(f"round {n + 1} ({name}): {samples[name][-1]}", flush=True)

            asyncio.run(run())
        finally:
            kv_snapshots.BUDGET_BYTES = BUDGET
            engine.close()
            store.close()
    report: dict[str, Any] = {"model": model_path.name, "rounds": rounds, "samples": samples}
    for key in ("pass_s", "next_turn_ttft_s"):
        medians = {name: statistics.median(s[key] for s in runs) for name, runs in samples.items()}
        report[f"{key}_median"] = medians
        print(f"{key}: saved states {medians['saved']:.2f}, none {medians['none']:.2f}")
    report["loadavg_end"] = os.getloadavg()
    benchlib.write_result("prompt_switch", report, quick=args.quick)


if __name__ == "__main__":
    main()
