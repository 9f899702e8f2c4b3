"""Decode speed: our ChatEngine vs bare llama-cpp-python, per extra-buffers path.

For each setting of llama.cpp's extra weight buffers (``AGENVOY_LLAMA_EXTRA_BUFFERS``
0 and 1: AMX / repacked kernels off and on) a child process loads the
starter model twice: our :class:`ChatEngine` (threads, prompt batch and GPU
layers as the app chooses them: physical cores for decoding, every logical
core for prompts, the calibrated prompt batch) and llama-cpp-python's
``Llama`` given exactly those settings, flash attention as the engine's
calibration chose it, and the same weight buffers.  A path whose kernels
fault kills only its child: the run reports the signal and goes on.

Each round renders the same chat (its system line numbered, so no round
reuses the previous one's KV cache) and generates N greedy tokens on both
sides, alternating which goes first.  Only decoding is timed, from the
first generated token to the last:

* ours: ``ChatEngine.chat`` consumed as a stream; (tokens - 1) / (last
  ``TextDelta`` - first ``TextDelta``).
* bare: ``Llama.generate(tokens, temp=0)``, llama-cpp-python's leanest token
  loop (no detokenising, no stop strings); (tokens - 1) / (last yield -
  first yield).

Acceptance: decode tokens/s ours / bare >= 0.95 as the ratio of the totals
over the interleaved rounds, for each path the machine can run; the
median of the per-round ratios is reported too.

    .venv/bin/python benchmarks/decode_ratio.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import benchlib
from benchlib import verdict
from chat_throughput import CONTEXT, messages_for, resolve_model

from agenvoy_desktop.core.model_api import ChatFinished, TextDelta
from agenvoy_desktop.llm.cpu_features import EXTRA_BUFFERS_ENV

ACCEPT_RATIO = 0.95
PATHS = ("0", "1")
CHILD_TIMEOUT_S = 540.0
_RESULT = "decode-ratio-result: "


# -- the child: one extra-buffers path --------------------------------------------------------
def run_bare(llm: Any, tokens: list[int], n_tokens: int) -> dict[str, Any]:
    stamps: list[float] = []
    for _token in llm.generate(tokens, temp=0.0, repeat_penalty=1.0, reset=True):
        stamps.append(time.perf_counter())
        if len(stamps) >= n_tokens:
            break
    return _decode_rate(len(stamps), stamps)


async def run_ours(engine: Any, round_no: int, n_tokens: int) -> dict[str, Any]:
    stamps: list[float] = []
    tokens = 0
    async for event in engine.chat(messages_for(round_no), max_tokens=n_tokens, temperature=0.0):
        if isinstance(event, TextDelta):
            stamps.append(time.perf_counter())
        elif isinstance(event, ChatFinished):
            tokens = event.completion_tokens
    return _decode_rate(tokens, stamps)


def _decode_rate(tokens: int, stamps: list[float]) -> dict[str, Any]:
    seconds = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return {"tokens": tokens, "decode_s": seconds, "decode_tok_s": (tokens - 1) / seconds}


async def child(model: Path, rounds: int, n_tokens: int) -> dict[str, Any]:
    from agenvoy_desktop.llm.buffer_probe import apply_stored_verdict
    from agenvoy_desktop.llm.cpu_features import extra_buffers_choice
    from agenvoy_desktop.llm.engine import ChatEngine
    from agenvoy_desktop.paths import machine_cache_dir

    apply_stored_verdict(machine_cache_dir())  # the environment decides; this only fills reasons
    ours: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    with ChatEngine(model, context_size=CONTEXT, seed=0) as engine:
        await engine.load()  # the prompt batch is calibrated here on a first run
        llm = benchlib.bare_llama(model, engine, CONTEXT)
        template_tokens = [
            llm.tokenize(_render(engine, r).encode(), add_bos=False, special=True)
            for r in range(-1, rounds)
        ]
        run_bare(llm, template_tokens[0], 8)  # warm-up: weights paged in, buffers sized
        await run_ours(engine, -1, 8)
        for r in range(rounds):
            if r % 2 == 0:
                bare.append(run_bare(llm, template_tokens[r + 1], n_tokens))
                ours.append(await run_ours(engine, r, n_tokens))
            else:
                ours.append(await run_ours(engine, r, n_tokens))
                bare.append(run_bare(llm, template_tokens[r + 1], n_tokens))
            print(
                f"  round {r + 1}/{rounds}: bare {bare[-1]['decode_tok_s']:.2f} tok/s,"
                f" ours {ours[-1]['decode_tok_s']:.2f} tok/s",
                file=sys.stderr,
                flush=True,
            )
        llm.close()
        settings = {
            "threads": engine.threads,
            "threads_batch": engine.threads_batch,
            "prompt_batch": engine.prompt_batch,
            "calibration": engine.calibration.summary() if engine.calibration else None,
            "gpu": engine.offload.reason if engine.offload else None,
            "extra_buffers": list(extra_buffers_choice()),
        }
    return {"settings": settings, "ours": ours, "bare": bare}


def _render(engine: Any, round_no: int) -> str:
    from agenvoy_desktop.llm.chat_format import ChatTemplate
    from agenvoy_desktop.llm.gguf_info import read_gguf_info

    info = read_gguf_info(engine.model_path)
    return ChatTemplate(info.chat_template, model=engine.model_path.name).render(
        messages_for(round_no)
    )


# -- the parent: one child per path ------------------------------------------------------------
def run_path(path: str, model: Path, rounds: int, n_tokens: int) -> dict[str, Any]:
    env = {**os.environ, EXTRA_BUFFERS_ENV: path}
    command = [sys.executable, __file__, "--child", "--model", str(model)]
    command += ["--rounds", str(rounds), "--tokens", str(n_tokens)]
    print(f"{EXTRA_BUFFERS_ENV}={path}: child process", flush=True)
    try:
        done = subprocess.run(
            command,
            env=env,
            stdout=subprocess.PIPE,
            timeout=CHILD_TIMEOUT_S,
            check=False,
            text=True,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": f"did not finish in {CHILD_TIMEOUT_S:.0f} s"}
    if done.returncode < 0:
        return {"outcome": f"killed by {signal.Signals(-done.returncode).name}"}
    lines = [line for line in done.stdout.splitlines() if line.startswith(_RESULT)]
    if done.returncode != 0 or not lines:
        return {"outcome": f"exited with status {done.returncode}"}
    return {"outcome": "ran", **summarise(json.loads(lines[-1].removeprefix(_RESULT)))}


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    ours, bare = data["ours"], data["bare"]

    def total(runs: list[dict[str, Any]]) -> float:
        return float(sum(r["tokens"] - 1 for r in runs) / sum(r["decode_s"] for r in runs))

    paired = [o["decode_tok_s"] / b["decode_tok_s"] for o, b in zip(ours, bare, strict=True)]
    ratio = total(ours) / total(bare)
    return {
        "settings": data["settings"],
        "ours_decode_tok_s": round(total(ours), 2),
        "bare_decode_tok_s": round(total(bare), 2),
        "ratio_total": round(ratio, 4),
        "ratio_paired_median": round(statistics.median(paired), 4),
        "paired_ratios": [round(x, 3) for x in paired],
        "tokens": [r["tokens"] for r in ours + bare],
        "pass": ratio >= ACCEPT_RATIO,
    }


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF to run (default: the starter model)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--paths", default=",".join(PATHS), help="extra-buffers settings to run")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    model = resolve_model(args.model)
    rounds = args.rounds or (2 if args.quick else 6)
    n_tokens = args.tokens or (24 if args.quick else 96)
    if args.child:
        from agenvoy_desktop.interpreter import responsive_threads

        responsive_threads()  # the GIL switch interval the window and `chat` run with
        result = asyncio.run(child(model, rounds, n_tokens))
        print(_RESULT + json.dumps(result), flush=True)
        return
    print(f"model {model} | {rounds} rounds x {n_tokens} tokens | loadavg {os.getloadavg()}")
    paths = {p: run_path(p, model, rounds, n_tokens) for p in args.paths.split(",")}
    for path, result in paths.items():
        if result["outcome"] != "ran":
            print(f"{EXTRA_BUFFERS_ENV}={path}: {result['outcome']} (not measurable here)")
            continue
        print(
            f"{EXTRA_BUFFERS_ENV}={path}: {verdict(result['pass'])} decode ours/bare = "
            f"{result['ratio_total']:.3f} (totals; limit {ACCEPT_RATIO}), "
            f"{result['ratio_paired_median']:.3f} (median of rounds); ours "
            f"{result['ours_decode_tok_s']} tok/s, bare {result['bare_decode_tok_s']} tok/s; "
            f"{result['settings']}"
        )
    benchlib.write_result(
        "decode_ratio",
        {
            "model": str(model),
            "rounds": rounds,
            "max_tokens": n_tokens,
            "paths": {f"{EXTRA_BUFFERS_ENV}={p}": r for p, r in paths.items()},
            "criterion": f"decode tok/s ours/bare (totals, interleaved rounds) >= {ACCEPT_RATIO}",
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
