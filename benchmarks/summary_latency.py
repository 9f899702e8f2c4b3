"""Latency of one rolling-summary pass over a 16-message chunk with the starter model.

Each round imports 16 LoCoMo turns (plus a 2-message window that stays out of
the summary) into a fresh session and runs ``Summarizer.run`` with the real
starter model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, greedy): one
schema-constrained generation that returns the merged summary.  The first
round also loads the model and is reported apart.  Reported: wall time per
pass, prompt and completion tokens, and whether every answer validated.

The design once hoped for "~6 s for a short conversation" on 2 cores; there is
no pass/fail threshold here, so the figure is recorded as measured
(benchmarks/RESULTS.md §7).

    .venv/bin/python benchmarks/summary_latency.py [--quick]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import benchlib
from benchlib import fmt_stats, stats_ms

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import read_records
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.starter import prepare_starter_model

CHUNK = 16
WINDOW = 2
CONTEXT = 8192
"""The app's default: the answer budget covers the longest answer the schema allows."""


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    rounds = 2 if args.quick else 6
    models = benchlib.BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    model_path = prepare_starter_model(models)
    convs = benchlib.load_locomo()
    with benchlib.temp_profile("summary") as paths:
        store = MemoryStore(paths, None)
        engine = ChatEngine(model_path, context_size=CONTEXT, temperature=0.0, seed=0)
        samples: list[dict[str, Any]] = []
        try:

            async def run() -> None:
                for number in range(rounds + 1):
                    conv = convs[number % len(convs)]
                    messages = benchlib.conversation_messages(conv)[: CHUNK + WINDOW]
                    sid = store.create_session(f"summary bench {number}")
                    store.append(sid, messages, embed=False)
                    started = time.perf_counter()
                    result = await Summarizer(store, engine, window_messages=WINDOW).run(sid)
                    seconds = time.perf_counter() - started
                    record = read_records(store.folder(sid))[-1]
                    samples.append(
                        {
                            "seconds": round(seconds, 2),
                            "stopped": result.stopped,
                            "folded": result.folded,
                            "prompt_tokens": record.prompt_tokens,
                            "completion_tokens": record.completion_tokens,
                            "error": result.error,
                        }
                    )
                    print(f"round {number}: {samples[-1]}", flush=True)

            asyncio.run(run())
        finally:
            engine.close()
            store.close()
    first, timed = samples[0], samples[1:]
    stats = stats_ms([s["seconds"] for s in timed])
    ok_passes = sum(1 for s in timed if s["stopped"] == "done" and s["folded"] > 0)
    print(f"first pass (includes model load): {first['seconds']} s")
    print(f"pass over {CHUNK} messages: {fmt_stats(stats)}; valid {ok_passes}/{len(timed)}")
    benchlib.write_result(
        "summary_latency",
        {
            "model": model_path.name,
            "chunk_messages": CHUNK,
            "first_pass": first,
            "passes": timed,
            "pass_latency": stats,
            "valid_passes": ok_passes,
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
