"""Prompt reuse: what the KV cache of the previous prompt saves, on the real starter model.

The engine keeps the KV cache of the last prompt and evaluates only the
tokens after the longest common prefix (``llm/llama_model.py``).  Three
cases, each timed to the first token at the consumer (the first
``TextDelta``; the prompt's evaluation is nearly all of it), interleaved
with a *cold* request whose first system line differs, so nothing is
reused:

* **round 2 of a turn**: a ~4,000-token prompt (system prompt with a long
  summary), round 1 answered with a tool call; round 2 is the same prompt
  plus the call and its result.  Goal: round-2 TTFT / round-1 TTFT ≤ 0.2.
* **next turn**: the same system prompt and summary, the previous exchange
  added to the window and a new question.  Reported: TTFT against cold.
* **next turn with a changed recall block**: as above, but the end of the
  system prompt (where the recall block sits) differs; reuse stops there.

    nice -n 5 .venv/bin/python benchmarks/prompt_reuse.py [--quick] [--model PATH]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import benchlib
from chat_throughput import resolve_model

from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage, TextDelta
from agenvoy_desktop.llm.engine import ChatEngine, extra_buffers_enabled
from agenvoy_desktop.settings import default_threads

CONTEXT = 8192
GOAL_ROUND2 = 0.2
SUMMARY_LINE = (
    "- {n}. The user discussed the trip to Graz with Lena, the Hotel Daniel near the station, "
    "the bike lock code, packing lists, train times and the budget for week {n}."
)


def system_prompt(cold: int, recall: str = "") -> str:
    summary = "\n".join(SUMMARY_LINE.format(n=n) for n in range(1, 90))
    head = f"Session {cold}." if cold else "You are Agenvoy, a careful local assistant."
    tail = f"\n\nWhat the user told you before:\n{recall}" if recall else ""
    return f"{head}\n\nRolling summary of the conversation so far:\n{summary}{tail}"


def round_one(cold: int = 0, recall: str = "") -> list[ChatMessage]:
    return [
        {"role": "system", "content": system_prompt(cold, recall)},
        {"role": "user", "content": "What time is it, and what did we decide about the hotel?"},
    ]


def round_two(cold: int = 0) -> list[ChatMessage]:
    call: dict[str, Any] = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "current_time", "arguments": {}},
    }
    return [
        *round_one(cold),
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "2026-12-01 10:00 (Tuesday)", "tool_call_id": "call_1"},
    ]


def next_turn(cold: int = 0, recall: str = "") -> list[ChatMessage]:
    return [
        *round_one(cold, recall),
        {"role": "assistant", "content": "It is ten o'clock; you chose the Hotel Daniel."},
        {"role": "user", "content": "And how do I get there from the station?"},
    ]


async def ttft(engine: ChatEngine, messages: list[ChatMessage]) -> tuple[float, int]:
    """Seconds to the first text, and the prompt's length in tokens."""
    began = time.perf_counter()
    first: float | None = None
    prompt = 0
    async for event in engine.chat(messages, max_tokens=4, temperature=0.0):
        if isinstance(event, TextDelta) and first is None:
            first = time.perf_counter() - began
        elif isinstance(event, ChatFinished):
            prompt = event.prompt_tokens
            first = first if first is not None else event.duration_s
    return (first if first is not None else time.perf_counter() - began), prompt


async def measure(model: Path, rounds: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {
        "round1": [],
        "round2": [],
        "next_turn": [],
        "next_turn_new_recall": [],
        "cold": [],
    }
    prompt_tokens = 0
    with ChatEngine(
        model, context_size=CONTEXT, threads=default_threads(), temperature=0.0
    ) as engine:
        for n in range(1, rounds + 1):
            cold, _ = await ttft(engine, round_one(cold=1000 + n))  # nothing to reuse
            samples["cold"].append(cold)
            first, prompt_tokens = await ttft(engine, round_one(cold=n))  # cold start of a turn
            samples["round1"].append(first)
            samples["round2"].append((await ttft(engine, round_two(cold=n)))[0])
            samples["next_turn"].append((await ttft(engine, next_turn(cold=n)))[0])
            await ttft(engine, round_one(cold=n, recall="- my bike lock code is 4721"))
            new_recall = next_turn(cold=n, recall="- Lena is my sister")
            samples["next_turn_new_recall"].append((await ttft(engine, new_recall))[0])
    medians = {key: statistics.median(values) for key, values in samples.items()}
    return {
        "prompt_tokens_round1": prompt_tokens,
        "samples_s": samples,
        "median_s": medians,
        "round2_over_round1": medians["round2"] / medians["round1"],
        "next_turn_over_cold": medians["next_turn"] / medians["cold"],
        "next_turn_new_recall_over_cold": medians["next_turn_new_recall"] / medians["cold"],
    }


def main() -> int:
    ap = benchlib.parser(__doc__ or "")
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    model = resolve_model(args.model)
    result = asyncio.run(measure(model, 1 if args.quick else 3))
    m = result["median_s"]
    print(
        f"prompt: {result['prompt_tokens_round1']} tokens; extra buffers: {extra_buffers_enabled()}"
    )
    for key in ("cold", "round1", "round2", "next_turn", "next_turn_new_recall"):
        print(f"  {key:22} TTFT {m[key]:.2f} s")
    ratio = result["round2_over_round1"]
    print(
        f"round 2 / round 1: {ratio:.3f}  {benchlib.verdict(ratio <= GOAL_ROUND2)}"
        f" (goal <= {GOAL_ROUND2})"
    )
    print(
        f"next turn / cold: {result['next_turn_over_cold']:.3f}; "
        f"with a new recall block: {result['next_turn_new_recall_over_cold']:.3f}"
    )
    benchlib.write_result(
        "prompt_reuse",
        {**result, "extra_buffers": extra_buffers_enabled(), "goal_round2": GOAL_ROUND2},
        quick=args.quick,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
