"""Guessed tokens (prompt lookup) against plain decoding, interleaved, starter model.

``LlamaModel.generate(drafts=True)`` evaluates, with each sampled token, up
to four tokens that followed the same 3–4 tokens earlier in the prompt or the
answer (``agenvoy_desktop/llm/lookup.py``; one token after a refused guess,
one more after each guess kept whole), and keeps them up to the first one
the sampler did not choose.  Two kinds of work, each run with drafts off
and on, alternating which goes first, the KV cache emptied before every run
so both evaluate the whole prompt:

* a rolling-summary pass over 16 LoCoMo messages (``Summarizer.run``, as
  ``summary_latency.py``): seconds per pass and answer tokens;
* a chat answer about a 40-turn LoCoMo excerpt (the engine's own sampling):
  decoding tokens per second, first token to last.

The sampler chooses every token either way, but batched logits round
differently from one-token ones, so the two runs of a pair may say different
things: compare rates, and the totals over all pairs.

    .venv/bin/python benchmarks/lab/draft_ab.py [--quick] [--rounds N]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib
import llama_cpp
from benchlib import fmt_stats, stats_ms

import agenvoy_desktop.llm.engine as engine_mod
from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import read_records
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.llama_model import LlamaModel
from agenvoy_desktop.llm.starter import prepare_starter_model

CONTEXT = 8192
CHUNK, WINDOW = 16, 2
CHAT_TURNS = 40
QUESTIONS = (
    "Summarise what {a} told {b} in this conversation, in five sentences.",
    "List every person, place and activity mentioned above, one line each.",
)


PREFILL_S: list[float] = []
"""Seconds each prompt evaluation took (``LlamaModel._prefill``, wrapped in main), so a
pass's answer time is its generation time less its prompt's."""


def _timed_prefill() -> None:
    original = LlamaModel._prefill

    def prefill(model: LlamaModel, tokens: list[int], cancelled: Any) -> bool:
        started = time.perf_counter()
        try:
            return original(model, tokens, cancelled)
        finally:
            PREFILL_S.append(time.perf_counter() - started)

    LlamaModel._prefill = prefill  # type: ignore[method-assign]


def _forget(model: LlamaModel) -> None:
    """Empty the chat KV cache (worker thread), so the next prompt is evaluated whole."""
    llama_cpp.llama_memory_clear(model._memory, True)
    model._past.clear()
    model._snapshots.clear()


async def _cold(engine: ChatEngine) -> None:
    await engine._call(_forget)


async def summary_pass(engine: ChatEngine, store: MemoryStore, conv: Any) -> dict[str, Any]:
    messages = benchlib.conversation_messages(conv)[: CHUNK + WINDOW]
    sid = store.create_session(f"draft ab {conv.session_id}")
    store.append(sid, messages, embed=False)
    await _cold(engine)
    PREFILL_S.clear()
    started = time.perf_counter()
    result = await Summarizer(store, engine, window_messages=WINDOW).run(sid)
    seconds = time.perf_counter() - started
    records = read_records(store.folder(sid))
    tokens = sum(r.completion_tokens for r in records)
    answer_s = sum(r.duration_s for r in records) - sum(PREFILL_S)
    return {
        "seconds": round(seconds, 2),
        "prompt_s": round(sum(PREFILL_S), 2),
        "answer_s": round(answer_s, 2),
        "answer_tok_per_s": round(tokens / answer_s, 2),
        "completion_tokens": tokens,
        "passes": len(records),
        "ok": result.stopped == "done" and result.folded > 0,
    }


def chat_messages(conv: Any, question: str) -> list[ChatMessage]:
    lines = [f"{t.speaker}: {t.text}" for t in conv.turns[:CHAT_TURNS]]
    system = "You are a helpful assistant. Here is a conversation:\n" + "\n".join(lines)
    asked = question.format(a=conv.speaker_a, b=conv.speaker_b)
    return [{"role": "system", "content": system}, {"role": "user", "content": asked}]


async def chat_answer(engine: ChatEngine, messages: list[ChatMessage]) -> dict[str, Any]:
    await _cold(engine)
    finished: ChatFinished | None = None
    async for event in engine.chat(messages, max_tokens=256):
        if isinstance(event, ChatFinished):
            finished = event
    assert finished is not None
    assert finished.first_token_s is not None
    decode_s = finished.duration_s - finished.first_token_s
    tokens = finished.completion_tokens
    return {
        "completion_tokens": tokens,
        "decode_s": round(decode_s, 3),
        "tok_per_s": round((tokens - 1) / decode_s, 2) if tokens > 1 and decode_s > 0 else None,
    }


async def run_pairs(
    engine: ChatEngine, store: MemoryStore, convs: list[Any], rounds: int
) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {"summary": [], "chat": []}
    for number in range(rounds):
        conv = convs[number % len(convs)]
        order = (False, True) if number % 2 else (True, False)
        for kind in ("summary", "chat"):
            pair: dict[str, Any] = {"conversation": conv.session_id}
            for drafts in order:
                engine_mod.DRAFT_JSON = engine_mod.DRAFT_CHAT = drafts
                if kind == "summary":
                    row = await summary_pass(engine, store, conv)
                else:
                    row = await chat_answer(engine, chat_messages(conv, QUESTIONS[number % 2]))
                pair["on" if drafts else "off"] = row
            rows[kind].append(pair)
            print(f"round {number} {kind}: {pair}", flush=True)
    return rows


def _rate(tokens: float, seconds: float) -> float:
    return round(tokens / seconds, 2)


def _total(pairs: list[dict[str, Any]], side: str, key: str) -> float:
    return float(sum(p[side][key] for p in pairs))


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None, help="pairs of each kind (default 6)")
    args = ap.parse_args()
    rounds = args.rounds or (2 if args.quick else 6)
    model_path = prepare_starter_model(benchlib.BENCH_CACHE / "models")
    convs = benchlib.load_locomo()
    saved = engine_mod.DRAFT_JSON, engine_mod.DRAFT_CHAT
    _timed_prefill()
    with benchlib.temp_profile("draft-ab") as paths:
        store = MemoryStore(paths, None)
        engine = ChatEngine(model_path, context_size=CONTEXT, seed=0)
        try:
            rows = asyncio.run(run_pairs(engine, store, convs, rounds))
        finally:
            engine_mod.DRAFT_JSON, engine_mod.DRAFT_CHAT = saved
            engine.close()
            store.close()
    summary, chat = rows["summary"], rows["chat"]
    n = len(chat)  # a rate counts the tokens after the first
    report: dict[str, Any] = {
        "model": model_path.name,
        "summary": {
            "pairs": summary,
            "seconds": {s: stats_ms([p[s]["seconds"] for p in summary]) for s in ("off", "on")},
            "seconds_per_answer_token": {
                s: round(_total(summary, s, "seconds") / _total(summary, s, "completion_tokens"), 4)
                for s in ("off", "on")
            },
            "answer_tok_per_s_totals": {
                s: _rate(_total(summary, s, "completion_tokens"), _total(summary, s, "answer_s"))
                for s in ("off", "on")
            },
        },
        "chat": {
            "pairs": chat,
            "tok_per_s_totals": {
                s: _rate(_total(chat, s, "completion_tokens") - n, _total(chat, s, "decode_s"))
                for s in ("off", "on")
            },
        },
    }
    for side in ("off", "on"):
        print(f"summary pass, drafts {side}: {fmt_stats(report['summary']['seconds'][side])}")
    print(f"summary seconds per answer token: {report['summary']['seconds_per_answer_token']}")
    print(f"summary answer tok/s (totals): {report['summary']['answer_tok_per_s_totals']}")
    print(f"chat decoding tok/s (totals): {report['chat']['tok_per_s_totals']}")
    benchlib.write_result("draft_ab", report, quick=args.quick)


if __name__ == "__main__":
    main()
