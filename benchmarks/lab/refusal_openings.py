"""Refusal openings: what a ban on them changes in the starter's answers to statements.

The starter sometimes answers a message that asks for nothing with a refusal
("My Wi-Fi password is tulip-river-42." → "I'm sorry, but I can't assist with
that.").  The app bans such openings for a small model's statement
(``agent/policy.REFUSAL_OPENINGS``, ``llm/openings.py``).  This benchmark
sends ``memory_facts.STATEMENTS`` plus seven statements of codes and news
straight to the engine (the small-model system prompt, no memory), once
without and once with the ban, per seed: a fresh engine for each half, the
same order, so an answer differs only where the ban changed a sample.

Reported per seed and in total: answers that refuse or apologise
(``statement_echo.refused``; sympathy is not counted), answers that *open*
with a banned phrase, and every answer the ban changed, side by side.

    .venv/bin/python benchmarks/lab/refusal_openings.py [--quick] [--seeds 0,1,2] [--whole-sorry]
"""

from __future__ import annotations

import asyncio
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import benchlib
from memory_facts import STATEMENTS
from statement_echo import refused

from agenvoy_desktop.agent.context import SMALL_MODEL_SYSTEM_PROMPT
from agenvoy_desktop.agent.policy import REFUSAL_OPENINGS
from agenvoy_desktop.core.model_api import ChatMessage, TextDelta
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.starter import prepare_starter_model

CODES_AND_NEWS = (
    "My bike lock code is 4417 and my locker at the hospital is number 23.",
    "My cat died yesterday.",
    "My passport number is X1234567.",
    "我的银行卡密码是 8812。",
    "My PIN for the bank card is 7731.",
    "The alarm code for the office is 2290.",
    "My Wi-Fi password is tulip-river-42.",
)
MAX_TOKENS = 48
"""Enough for the opening and the sentence after it."""


WHOLE_SORRY = tuple(
    dict.fromkeys(
        "I'm sorry"
        if p.startswith("I'm sorry")
        else "I\u2019m sorry"
        if p.startswith("I\u2019m sorry")
        else "I am sorry"
        if p.startswith("I am sorry")
        else "Sorry"
        if p.startswith("Sorry")
        else p
        for p in REFUSAL_OPENINGS
    )
)
"""``--whole-sorry``: "I'm sorry" banned with any continuation (sympathy too)."""


def opens_with_ban(answer: str) -> bool:
    return any(answer.lstrip().startswith(phrase) for phrase in REFUSAL_OPENINGS)


async def answers(
    engine: ChatEngine, messages: list[str], ban: tuple[str, ...]
) -> list[dict[str, Any]]:
    rows = []
    for text in messages:
        prompt: list[ChatMessage] = [
            {"role": "system", "content": SMALL_MODEL_SYSTEM_PROMPT},
            {"role": "user", "content": text},
        ]
        parts = []
        async for event in engine.chat(prompt, max_tokens=MAX_TOKENS, avoid_openings=ban):
            if isinstance(event, TextDelta):
                parts.append(event.text)
        answer = "".join(parts)
        rows.append({"message": text, "answer": answer, "refused": refused(answer)})
    return rows


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated sampling seeds")
    ap.add_argument("--whole-sorry", action="store_true", help="ban 'I'm sorry' however it goes on")
    args = ap.parse_args()
    phrases = WHOLE_SORRY if args.whole_sorry else REFUSAL_OPENINGS
    seeds = [int(s) for s in args.seeds.split(",")][: 1 if args.quick else None]
    messages = [s.text for s in STATEMENTS] + list(CODES_AND_NEWS)
    if args.quick:
        messages = messages[:4] + list(CODES_AND_NEWS[:2])
    models = benchlib.BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    model_path = prepare_starter_model(models)
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        halves = {}
        for label, ban in (("open", ()), ("banned", phrases)):
            engine = ChatEngine(model_path, context_size=4096, temperature=0.7, seed=seed)
            try:
                halves[label] = asyncio.run(answers(engine, messages, ban))
            finally:
                engine.close()
        changed = [
            {"message": a["message"], "open": a["answer"], "banned": b["answer"]}
            for a, b in zip(halves["open"], halves["banned"], strict=True)
            if a["answer"] != b["answer"]
        ]
        run = {
            "seed": seed,
            **{
                f"{label}_{what}": sum(1 for r in rows if test(r["answer"]))
                for label, rows in halves.items()
                for what, test in (("refusals", refused), ("banned_openings", opens_with_ban))
            },
            "changed": changed,
            "answers": halves,
        }
        runs.append(run)
        shown = {k: v for k, v in run.items() if k not in ("changed", "answers")}
        print(f"seed {seed}: {shown}, {len(changed)} answers changed", flush=True)
        for row in changed:
            print(f"  {row['message'][:50]!r}\n    open:   {row['open'][:110]!r}")
            print(f"    banned: {row['banned'][:110]!r}")
    totals = {
        key: sum(r[key] for r in runs)
        for key in runs[0]
        if key.endswith(("_refusals", "_banned_openings"))
    }
    totals["answers_changed"] = sum(len(r["changed"]) for r in runs)
    totals["statements"] = len(messages) * len(seeds)
    print(f"totals: {totals}")
    benchlib.write_result(
        "refusal_openings" + (".whole-sorry" if args.whole_sorry else ""),
        {"model": model_path.name, "max_tokens": MAX_TOKENS, "totals": totals, "runs": runs},
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
