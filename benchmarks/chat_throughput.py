"""Streaming chat throughput: ChatEngine.chat vs a bare llama-cpp-python completion.

Both run the starter model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M) in this
process with the same threads (decode / prompt, as the engine plans them),
prompt batch (the engine's calibrated one), context, flash attention and
weight buffers, greedy, on the same prompt, which is the chat template rendered by the
model's own template.  Each round first changes the system prompt's first
line, so neither side can reuse the previous round's KV cache and both pay
the full prompt evaluation.  Rounds alternate which side goes first
(the machine is shared: alternating spreads any background load evenly).

* bare: ``Llama.create_completion(prompt, max_tokens=N, temperature=0,
  stream=False)``; tokens/s = completion tokens / wall time of the call.
* ours: ``ChatEngine.chat(messages, max_tokens=N, temperature=0)`` consumed
  as a stream on an asyncio loop; tokens/s = completion tokens / wall time
  from the call to ``ChatFinished``; time to first token measured at the
  consumer (first ``TextDelta``).

Acceptance: ours / bare tokens/s >= 0.95, as the ratio of the
totals (all tokens / all seconds of each side over the interleaved runs).
The machine is shared and single runs swing by 2x, so the per-round paired
ratios (each pair ran back to back) and their median are reported too.  The
prompt asks for a long answer so that both sides generate all N tokens
(checked, and the greedy texts compared).

    .venv/bin/python benchmarks/chat_throughput.py [--quick] [--model PATH]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import benchlib
from benchlib import fmt_stats, stats_ms, verdict

from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage, TextDelta
from agenvoy_desktop.llm.chat_format import ChatTemplate
from agenvoy_desktop.llm.cpu_features import thread_plan
from agenvoy_desktop.llm.engine import ChatEngine, extra_buffers_enabled
from agenvoy_desktop.llm.gguf_info import read_gguf_info

ACCEPT_RATIO = 0.95
DEFAULT_MODEL = Path("/tmp/qwen-starter.gguf")
CONTEXT = 2048
QUESTION = (
    "Write a complete Python module that implements a red-black tree with insert, delete, "
    "search, in-order traversal and a pretty printer. Include docstrings, type hints and a "
    "long usage example at the end."
)


def resolve_model(arg: str | None) -> Path:
    """--model, else /tmp/qwen-starter.gguf, else the starter assembled into .bench-cache."""
    if arg:
        return Path(arg)
    if DEFAULT_MODEL.is_file():
        return DEFAULT_MODEL
    try:
        from agenvoy_desktop.llm.starter import prepare_starter_model
    except ImportError as exc:
        raise SystemExit(f"no model: pass --model PATH ({exc})") from exc
    models = benchlib.BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    return Path(prepare_starter_model(models))


def messages_for(round_no: int) -> list[ChatMessage]:
    return [
        {"role": "system", "content": f"Session {round_no}.\nYou are a careful coding assistant."},
        {"role": "user", "content": QUESTION},
    ]


def run_bare(llm: Any, prompt: str, n_tokens: int) -> dict[str, Any]:
    started = time.perf_counter()
    result = llm.create_completion(
        prompt, max_tokens=n_tokens, temperature=0.0, repeat_penalty=1.0, stream=False
    )
    seconds = time.perf_counter() - started
    tokens = int(result["usage"]["completion_tokens"])
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "text": result["choices"][0]["text"],
    }


async def run_ours(
    engine: ChatEngine, messages: list[ChatMessage], n_tokens: int
) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    last = started
    parts: list[str] = []
    done: ChatFinished | None = None
    async for event in engine.chat(messages, max_tokens=n_tokens, temperature=0.0):
        now = time.perf_counter()
        if isinstance(event, TextDelta):
            first = first if first is not None else now
            last = now
            parts.append(event.text)
        elif isinstance(event, ChatFinished):
            done = event
    seconds = time.perf_counter() - started
    assert done is not None
    tokens = done.completion_tokens
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "ttft_s": (first or seconds) - started,
        "decode_tokens_per_s": (tokens - 1) / (last - first) if first and last > first else None,
        "text": "".join(parts),
        "prompt_tokens": done.prompt_tokens,
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["tokens_per_s"] for r in runs]
    return {
        "runs": len(runs),
        "tokens": [r["tokens"] for r in runs],
        "tokens_per_s": [round(x, 2) for x in rates],
        "median_tokens_per_s": round(statistics.median(rates), 2),
        "total_tokens_per_s": round(
            sum(r["tokens"] for r in runs) / sum(r["seconds"] for r in runs), 2
        ),
    }


async def measure(
    model: Path, threads: int | None, rounds: int, n_tokens: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    info = read_gguf_info(model)
    template = ChatTemplate(info.chat_template, model=model.name)
    bare: list[dict[str, Any]] = []
    ours: list[dict[str, Any]] = []
    with ChatEngine(model, context_size=CONTEXT, threads=threads, seed=0) as engine:
        await engine.load()  # the prompt batch is calibrated here on a first run
        llm = benchlib.bare_llama(model, engine, CONTEXT)
        # warm-up: first decodes touch the weights and size the buffers
        warm = messages_for(-1)
        run_bare(llm, template.render(warm), 8)
        await run_ours(engine, warm, 8)
        for round_no in range(rounds):
            messages = messages_for(round_no)
            prompt = template.render(messages)
            if round_no % 2 == 0:
                bare.append(run_bare(llm, prompt, n_tokens))
                ours.append(await run_ours(engine, messages, n_tokens))
            else:
                ours.append(await run_ours(engine, messages, n_tokens))
                bare.append(run_bare(llm, prompt, n_tokens))
            b, o = bare[-1], ours[-1]
            print(
                f"round {round_no + 1}/{rounds}: bare {b['tokens']} tok {b['tokens_per_s']:.2f}/s"
                f" | ours {o['tokens']} tok {o['tokens_per_s']:.2f}/s,"
                f" first token {o['ttft_s'] * 1000:.0f} ms,"
                f" same text: {b['text'] == o['text']}"
            )
    llm.close()
    return bare, ours


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF to run (default: the starter model)")
    ap.add_argument("--threads", type=int, default=None, help="decode threads (default: auto)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=None)
    args = ap.parse_args()
    model = resolve_model(args.model)
    rounds = args.rounds or (2 if args.quick else 12)
    n_tokens = args.tokens or (32 if args.quick else 96)
    threads = thread_plan(args.threads)
    print(f"model {model} | threads {threads} | {rounds} rounds x {n_tokens} tokens")
    bare, ours = asyncio.run(measure(model, args.threads, rounds, n_tokens))
    bare_s, ours_s = summary(bare), summary(ours)
    ratio_median = ours_s["median_tokens_per_s"] / bare_s["median_tokens_per_s"]
    ratio_total = ours_s["total_tokens_per_s"] / bare_s["total_tokens_per_s"]
    paired = [o["tokens_per_s"] / b["tokens_per_s"] for b, o in zip(bare, ours, strict=True)]
    ratio_paired = statistics.median(paired)
    ttft = stats_ms([r["ttft_s"] for r in ours])
    decode = [r["decode_tokens_per_s"] for r in ours if r["decode_tokens_per_s"]]
    same_text = sum(b["text"] == o["text"] for b, o in zip(bare, ours, strict=True))
    full = all(r["tokens"] == n_tokens for r in bare + ours)
    ok = ratio_total >= ACCEPT_RATIO and full
    print(
        f"bare: median {bare_s['median_tokens_per_s']} tok/s, total {bare_s['total_tokens_per_s']}"
    )
    print(
        f"ours: median {ours_s['median_tokens_per_s']} tok/s, total {ours_s['total_tokens_per_s']}"
    )
    print(f"time to first token (ours, {ours[0]['prompt_tokens']}-token prompt): {fmt_stats(ttft)}")
    print(f"identical greedy text in {same_text}/{len(ours)} rounds")
    print(
        f"{verdict(ok)}: ours/bare tokens/s = {ratio_total:.3f} (totals; limit {ACCEPT_RATIO}), "
        f"{ratio_paired:.3f} (median of paired rounds), {ratio_median:.3f} (ratio of medians)"
    )
    benchlib.write_result(
        "chat_throughput",
        {
            "model": str(model),
            "threads": threads[0],
            "threads_batch": threads[1],
            "context": CONTEXT,
            "extra_buffers": extra_buffers_enabled(),
            "max_tokens": n_tokens,
            "prompt_tokens": ours[0]["prompt_tokens"],
            "bare": bare_s,
            "ours": {
                **ours_s,
                "decode_only_median_tokens_per_s": round(statistics.median(decode), 2)
                if decode
                else None,
            },
            "time_to_first_token": ttft,
            "identical_text_rounds": same_text,
            "acceptance": {
                "criterion": (
                    f"ours/bare tokens/s (totals over interleaved runs) >= {ACCEPT_RATIO}, "
                    f"all runs {n_tokens} tokens"
                ),
                "ratio_total": round(ratio_total, 4),
                "ratio_paired_median": round(ratio_paired, 4),
                "paired_ratios": [round(x, 3) for x in paired],
                "ratio_of_medians": round(ratio_median, 4),
                "all_runs_full_length": full,
                "pass": ok,
            },
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
