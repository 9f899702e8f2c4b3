"""Flash attention on against off, interleaved: summary passes and chat answers, starter model.

The calibration (``llm/calibration.py``) picks flash attention per machine
from a short measurement at 384 tokens of context; this checks the choice on
the work the app does.  One process, one loaded model; each round runs the
same job twice, once per setting, the order alternating between rounds, with
the chat context rebuilt for each (so both evaluate their prompt cold):

* a rolling-summary pass over 16 LoCoMo messages (as ``summary_latency.py``),
* a chat answer of up to 160 tokens to a ~1,500-token conversation.

Reported per setting: wall seconds, and tokens/s of the decoding alone (first
generated token to last: prompt time left out).  The ratio off/on of the
totals, measured in one run, is the honest comparison on a shared machine.

    .venv/bin/python benchmarks/lab/attention_ab.py [--rounds N] [--quick]
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib

from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage, TextDelta
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import read_records
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.llama_model import LlamaModel
from agenvoy_desktop.llm.starter import prepare_starter_model

CHUNK, WINDOW, CONTEXT, ANSWER = 16, 2, 8192, 160
SETTINGS = {"on": True, "off": False}


def _chat_messages(conv: benchlib.Conversation) -> list[ChatMessage]:
    """~1,500 tokens of a LoCoMo conversation, then a question about it."""
    lines = [f"{m.role}: {m.content}" for m in benchlib.conversation_messages(conv)[:60]]
    return [
        {"role": "system", "content": "You are a helpful assistant. Answer from the notes."},
        {"role": "user", "content": "Notes:\n" + "\n".join(lines)[:6000]},
        {"role": "assistant", "content": "I have read the notes."},
        {"role": "user", "content": "Describe in detail what the two people talked about."},
    ]


async def _set(engine: ChatEngine, flash: bool) -> None:
    def apply(model: LlamaModel) -> None:
        model.use_settings(model.prompt_batch, flash)

    await engine._call(apply)  # a benchmark switching one setting on the loaded model


async def _summary(engine: ChatEngine, store: MemoryStore, conv: Any) -> dict[str, Any]:
    sid = store.create_session("attention bench")
    store.append(sid, benchlib.conversation_messages(conv)[: CHUNK + WINDOW], embed=False)
    started = time.perf_counter()
    result = await Summarizer(store, engine, window_messages=WINDOW).run(sid)
    seconds = time.perf_counter() - started
    records = read_records(store.folder(sid))
    return {
        "seconds": round(seconds, 2),
        "ok": result.stopped == "done" and result.folded > 0,
        "completion_tokens": sum(r.completion_tokens for r in records),
    }


async def _chat(engine: ChatEngine, conv: Any) -> dict[str, Any]:
    started = time.perf_counter()
    first = last = 0.0
    tokens = 0
    async for event in engine.chat(_chat_messages(conv), max_tokens=ANSWER):
        if isinstance(event, TextDelta):
            last = time.perf_counter()
            first = first or last
        elif isinstance(event, ChatFinished):
            tokens = event.completion_tokens
    decode_s = max(last - first, 1e-9)
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "completion_tokens": tokens,
        "decode_tok_s": round(max(tokens - 1, 0) / decode_s, 2),
    }


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None, help="rounds per job (default 4)")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 4)
    model_path = prepare_starter_model(benchlib.BENCH_CACHE / "models")
    convs = benchlib.load_locomo()
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {
        job: {name: [] for name in SETTINGS} for job in ("summary", "chat")
    }
    with benchlib.temp_profile("attention") as paths:
        store = MemoryStore(paths, None)
        engine = ChatEngine(model_path, context_size=CONTEXT, temperature=0.0, seed=0)
        try:

            async def run() -> None:
                await engine.count_tokens("load")
                for number in range(rounds):
                    conv = convs[(number + 1) % len(convs)]
                    order = list(SETTINGS) if number % 2 == 0 else list(reversed(SETTINGS))
                    for name in order:
                        await _set(engine, SETTINGS[name])
                        samples["summary"][name].append(await _summary(engine, store, conv))
                        await _set(engine, SETTINGS[name])
                        samples["chat"][name].append(await _chat(engine, conv))
                        print(
                            f"round {number + 1} flash {name}: summary "
                            f"{samples['summary'][name][-1]}, chat {samples['chat'][name][-1]}",
                            flush=True,
                        )

            asyncio.run(run())
        finally:
            engine.close()
            store.close()
    report: dict[str, Any] = {"model": model_path.name, "rounds": rounds, "samples": samples}
    for job, by_setting in samples.items():
        totals = {name: sum(s["seconds"] for s in runs) for name, runs in by_setting.items()}
        report[f"{job}_seconds"] = totals
        report[f"{job}_ratio_off_on"] = round(totals["off"] / max(totals["on"], 1e-9), 3)
        print(
            f"{job}: seconds on {totals['on']:.1f}, off {totals['off']:.1f}; off/on "
            f"{report[f'{job}_ratio_off_on']}"
        )
    chat_rates = {name: [s["decode_tok_s"] for s in runs] for name, runs in samples["chat"].items()}
    report["chat_decode_tok_s"] = chat_rates
    report["loadavg_end"] = os.getloadavg()
    print(f"chat decode tok/s: {chat_rates}")
    benchlib.write_result("attention_ab", report, quick=args.quick)


if __name__ == "__main__":
    main()
