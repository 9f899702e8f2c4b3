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

    .venv/bin/python benchmarks/summary_latency.py [--quick] [--rounds N] [--load-only]
        [--tag NAME] [--no-loop-stop] [--no-drafts]

``--load-only`` replaces the first round by loading the model alone (round 1
then evaluates the instructions cold, as a pass after a chat turn does).
``--tag`` writes ``results/summary_latency.NAME.json`` (e.g. a before/after pair);
``--no-loop-stop`` / ``--no-drafts`` turn that speed-up off and add its name
to the file's (``summary_latency.NAME.no-loop-stop.json``).
Each round also records the process's CPU seconds (all threads: llama.cpp's
workers) and the load average, since on a shared machine wall time alone
mixes the pass's cost with its neighbours'.  Every pass record of a round is
kept: a round whose first answer was rejected shows two (``retried_after`` on
the first), and ``repeats_removed`` names sentences that validation dropped
instead of asking again.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from typing import Any

import benchlib
from benchlib import fmt_stats, stats_ms

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import PassRecord, read_records
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.starter import prepare_starter_model

CHUNK = 16
WINDOW = 2
CONTEXT = 8192
"""The app's default: the answer budget covers the longest answer the schema allows."""


def _cpu_seconds() -> float:
    """User + system CPU time of this process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pass(record: PassRecord) -> dict[str, Any]:
    """What one pass record says about time: its tokens, seconds and why it was redone."""
    wanted = ("retried_after", "repeats_removed")
    notes: dict[str, Any] = {k: record.extra[k] for k in wanted if k in record.extra}
    return {
        "kind": record.kind,
        "messages": record.messages,
        "seconds": record.duration_s,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        **notes,
    }


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (default 6)")
    ap.add_argument("--tag", default="", help="suffix of the result file")
    ap.add_argument("--load-only", action="store_true", help="no first pass: load the model")
    benchlib.summary_switches(ap)
    args = ap.parse_args()
    suffix = benchlib.apply_summary_switches(args)
    rounds = args.rounds or (2 if args.quick else 6)
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
                if args.load_only:
                    started = time.perf_counter()
                    await engine.count_tokens("load")
                    load = {"seconds": round(time.perf_counter() - started, 2), "load_only": True}
                    samples.append(load)
                for number in range(1 if args.load_only else 0, rounds + 1):
                    conv = convs[number % len(convs)]
                    messages = benchlib.conversation_messages(conv)[: CHUNK + WINDOW]
                    sid = store.create_session(f"summary bench {number}")
                    store.append(sid, messages, embed=False)
                    started, cpu = time.perf_counter(), _cpu_seconds()
                    result = await Summarizer(store, engine, window_messages=WINDOW).run(sid)
                    seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
                    records = read_records(store.folder(sid))
                    samples.append(
                        {
                            "seconds": round(seconds, 2),
                            "cpu_seconds": round(cpu, 2),
                            "loadavg_1m": round(os.getloadavg()[0], 2),
                            "stopped": result.stopped,
                            "folded": result.folded,
                            "passes": [_pass(r) for r in records],
                            "retries": sum(1 for r in records if "retried_after" in r.extra),
                            "prompt_tokens": sum(r.prompt_tokens for r in records),
                            "completion_tokens": sum(r.completion_tokens for r in records),
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
    cpu = stats_ms([s["cpu_seconds"] for s in timed])
    print(f"pass over {CHUNK} messages: {fmt_stats(stats)}; valid {ok_passes}/{len(timed)}")
    print(f"CPU seconds per pass: {fmt_stats(cpu)}")
    benchlib.write_result(
        (f"summary_latency.{args.tag}" if args.tag else "summary_latency") + suffix,
        {
            "model": model_path.name,
            "chunk_messages": CHUNK,
            "first_pass": first,
            "passes": timed,
            "pass_latency": stats,
            "pass_cpu": cpu,
            "valid_passes": ok_passes,
            "retries": sum(s["retries"] for s in timed),
            "prompt_tokens": [s["prompt_tokens"] for s in timed],
            "completion_tokens": [s["completion_tokens"] for s in timed],
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
