"""Sampling loops: which chat sampling settings keep the starter model from repeating itself.

A story answer once looped the same paragraph seven times.  This runs ten
long-answer prompts that invite repetition (stories, explanations, long
lists) with the starter model under a few candidate
:class:`~agenvoy_desktop.settings.SamplingSettings`, through the app's own
:class:`~agenvoy_desktop.llm.engine.ChatEngine` (the app's system prompt, the
same sampler chain the window uses), and checks every answer for a loop:

* a paragraph (8+ words) that occurs twice,
* a sentence (6+ words) that occurs three times,
* a run of 10 words that occurs three times (a loop inside one long line),
* a paragraph (8+ words) that shares at least half of its 4-word sequences with
  an earlier one (the same paragraph come back with a few words changed).

Each prompt has its own fixed seed, the same under every setting, so the
settings are compared on the same random streams; answers are capped at
``--tokens`` (400) so a run fits in about a quarter of an hour on two cores.
Reported per setting: answers with a loop, distinct 4-gram share (1.0 = no
4-word sequence repeats), mean answer length, tokens/s, and what the app does
with the answer: a small model's turn ends it where a paragraph starts over
(:mod:`agenvoy_desktop.agent.answer_loops`), so also how many answers it would
end early and how many loops are left in the prose it keeps (verse and lists are
left as they are: a refrain is meant to come back).  The chosen defaults (the
starter's catalogue defaults) must leave no loop in that prose.

    nice -n 10 .venv/bin/python benchmarks/sampling_loops.py [--quick] [--model PATH] [--tokens N]
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import benchlib

from agenvoy_desktop.agent.answer_loops import is_verse, loop_start
from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT
from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage, TextDelta
from agenvoy_desktop.llm.catalogue import STARTER_SAMPLING, ModelCatalogue
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.paths import app_paths
from agenvoy_desktop.settings import SamplingSettings

CONTEXT = 2048
PROMPTS = (
    "Write a long story about a little robot who visits a different village every day.",
    "Tell me a bedtime story about a dragon who is afraid of the dark. Make it long.",
    "Explain in detail how a computer runs a program, from the source code to the CPU.",
    "List 40 fun facts about the ocean.",
    "Write a long poem about the sea with many verses.",
    "Explain recursion to a beginner with several examples, step by step.",
    "Write a story in which every paragraph starts with 'And then'.",
    "Give me a detailed 30-day plan to learn Python, one entry per day.",
    "Describe a walk through a big city, street by street, in as much detail as you can.",
    "Explain the water cycle in detail, then explain it again for a child.",
)
CANDIDATES: dict[str, SamplingSettings] = {
    "DRY 0.8": SamplingSettings(dry_multiplier=0.8),
    "plain (old defaults)": SamplingSettings(),
    "repeat penalty 1.1": SamplingSettings(repeat_penalty=1.1, repeat_last_n=64),
    "DRY 0.8 + repeat penalty 1.1": SamplingSettings(
        dry_multiplier=0.8, repeat_penalty=1.1, repeat_last_n=64
    ),
}
"""The candidates by name; ``--only NAME`` runs some (the starter's defaults always run)."""
STARTER = SamplingSettings(**STARTER_SAMPLING)
_WORD = re.compile(r"\w+(?:'\w+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Loop:
    """Why an answer counts as looping (empty fields: it does not)."""

    paragraph: str = ""
    sentence: str = ""
    ngram: str = ""
    near_paragraph: str = ""

    def __bool__(self) -> bool:
        return bool(self.paragraph or self.sentence or self.ngram or self.near_paragraph)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def repeated(items: list[str], min_words: int, times: int) -> str:
    """The first item of at least *min_words* words that occurs *times* times ('' if none)."""
    counts = Counter(" ".join(words(item)) for item in items)
    for item, count in counts.items():
        if count >= times and len(item.split()) >= min_words:
            return item
    return ""


def find_loop(text: str) -> Loop:
    """The loop in *text*, if any (module docstring: the four kinds)."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    sentences = [s for line in text.splitlines() for s in _SENTENCE.split(line) if s.strip()]
    tokens = words(text)
    grams = [" ".join(tokens[i : i + 10]) for i in range(len(tokens) - 9)]
    gram = next((g for g, n in Counter(grams).items() if n >= 3), "")
    near = near_repeat(paragraphs)
    return Loop(repeated(paragraphs, 8, 2), repeated(sentences, 6, 3), gram, near)


NEAR_SHARE = 0.5
"""Share of a paragraph's 4-word sequences found in an earlier one that makes it a repeat.

On the 400-token answers of 2026-12-01 the starter's defaults stayed at or below 0.48
(a poem's stanzas echo their first line); the word-for-word loops of the plain
settings scored 0.63-1.0."""


def near_repeat(paragraphs: list[str]) -> str:
    """The first paragraph (8+ words) sharing :data:`NEAR_SHARE` of its 4-grams with an
    earlier paragraph ('' if none)."""
    seen: list[set[tuple[str, ...]]] = []
    for paragraph in paragraphs:
        tokens = words(paragraph)
        grams = {tuple(tokens[i : i + 4]) for i in range(len(tokens) - 3)}
        if len(tokens) >= 8 and grams:
            if any(len(grams & before) >= NEAR_SHARE * len(grams) for before in seen):
                return " ".join(tokens)
            seen.append(grams)
    return ""


def prose(text: str) -> str:
    """*text* without its verse and lists (a refrain is meant to come back; the app leaves
    them, ``answer_loops.is_verse``)."""
    return "\n\n".join(p for p in re.split(r"\n\s*\n", text) if not is_verse(p))


def distinct_4grams(text: str) -> float:
    tokens = words(text)
    grams = [tuple(tokens[i : i + 4]) for i in range(len(tokens) - 3)]
    return len(set(grams)) / len(grams) if grams else 1.0


async def answer(engine: ChatEngine, prompt: str, max_tokens: int) -> tuple[str, ChatFinished]:
    messages: list[ChatMessage] = [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    ]
    parts: list[str] = []
    finish: ChatFinished | None = None
    async for event in engine.chat(messages, max_tokens=max_tokens):
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, ChatFinished):
            finish = event
    assert finish is not None
    return "".join(parts), finish


async def run_setting(
    engine: ChatEngine, name: str, sampling: SamplingSettings, prompts: tuple[str, ...], tokens: int
) -> dict[str, Any]:
    rows = []
    for index, prompt in enumerate(prompts):
        engine.sampling = SamplingSettings(**{**asdict(sampling), "seed": 1000 + index})
        started = time.perf_counter()
        text, finish = await answer(engine, prompt, tokens)
        seconds = time.perf_counter() - started
        loop = find_loop(text)
        cut = loop_start(text)
        kept = find_loop(prose(text[:cut]))
        rows.append(
            {
                "prompt": index,
                "loop": asdict(loop) if loop else None,
                "app_ends_at": cut,
                "loop_in_kept": bool(kept),
                "distinct_4grams": round(distinct_4grams(text), 3),
                "tokens": finish.completion_tokens,
                "seconds": round(seconds, 2),
                "finish": finish.finish_reason,
                "text": text,
            }
        )
        mark = ("LOOP" if loop else "ok") + (" (ended by the app)" if cut is not None else "")
        print(
            f"  {name:22s} #{index} {finish.completion_tokens:4d} tok {seconds:6.1f} s {mark}",
            flush=True,
        )
    return summarise(name, sampling, rows)


def summarise(name: str, sampling: SamplingSettings, rows: list[dict[str, Any]]) -> dict[str, Any]:
    tokens = sum(r["tokens"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    return {
        "setting": name,
        "sampling": asdict(sampling),
        "loops": sum(1 for r in rows if r["loop"]),
        "ended_by_app": sum(1 for r in rows if r["app_ends_at"] is not None),
        "loops_in_kept": sum(1 for r in rows if r["loop_in_kept"]),
        "answers": len(rows),
        "distinct_4grams": round(sum(r["distinct_4grams"] for r in rows) / len(rows), 3),
        "mean_tokens": round(tokens / len(rows), 1),
        "tokens_per_s": round(tokens / seconds, 2) if seconds else 0.0,
        "rows": rows,
    }


def starter_path(arg: str | None) -> Path:
    """--model, else the starter installed in the default profile."""
    if arg:
        return Path(arg)
    return ModelCatalogue(app_paths().models_dir).resolve("", "chat")


def chosen_candidates(only: list[str] | None) -> dict[str, SamplingSettings]:
    """The candidates to run, the starter's defaults first."""
    wanted = {n: s for n, s in CANDIDATES.items() if not only or n in only}
    starter = [n for n, s in CANDIDATES.items() if s == STARTER] or ["starter defaults"]
    return {starter[0]: STARTER, **{n: s for n, s in wanted.items() if s != STARTER}}


async def main_async(
    model: Path,
    prompts: tuple[str, ...],
    tokens: int,
    candidates: dict[str, SamplingSettings],
    save: Callable[[list[dict[str, Any]]], object],
) -> list[dict[str, Any]]:
    """Every candidate in turn; the result file is rewritten after each (a cut-short run counts)."""
    results: list[dict[str, Any]] = []
    with ChatEngine(model, context_size=CONTEXT, name=model.stem) as engine:
        await engine.load()
        for name, sampling in candidates.items():
            results.append(await run_setting(engine, name, sampling, prompts, tokens))
            save(results)
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    print(
        f"\n{'setting':30s} {'loops':>6s} {'ended':>6s} {'kept':>5s} "
        f"{'distinct4':>9s} {'mean tok':>8s} {'tok/s':>6s}"
    )
    for r in results:
        loops = f"{r['loops']}/{r['answers']}"
        print(
            f"{r['setting']:30s} {loops:>6s} {r['ended_by_app']:6d} {r['loops_in_kept']:5d} "
            f"{r['distinct_4grams']:9.3f} {r['mean_tokens']:8.1f} {r['tokens_per_s']:6.2f}"
        )
    print("ended: answers the app ends where a paragraph starts over; kept: loops left in")
    print("the prose it keeps (verse and lists are not counted: a refrain is meant to recur)")


def main() -> None:
    ap = benchlib.parser(__doc__ or "")
    ap.add_argument("--model", help="GGUF to test (default: the installed starter model)")
    ap.add_argument("--tokens", type=int, default=400, help="answer cap in tokens")
    ap.add_argument("--only", action="append", choices=list(CANDIDATES), help="run these")
    ap.add_argument("--tag", default="", help="suffix of the result file's name")
    args = ap.parse_args()
    prompts = PROMPTS[:2] if args.quick else PROMPTS
    tokens = 60 if args.quick else args.tokens
    model = starter_path(args.model)
    print(f"model {model}, {len(prompts)} prompts, up to {tokens} tokens each")
    name = "sampling_loops" + (f".{args.tag}" if args.tag else "")

    def save(results: list[dict[str, Any]]) -> Path:
        data = {"model": str(model), "max_tokens": tokens, "results": results}
        return benchlib.write_result(name, data, quick=args.quick)

    candidates = chosen_candidates(args.only)
    results = asyncio.run(main_async(model, prompts, tokens, candidates, save))
    print_table(results)
    chosen = next(r for r in results if r["sampling"] == asdict(STARTER))
    print(f"starter defaults: {chosen['setting']}")
    print(
        benchlib.verdict(chosen["loops_in_kept"] == 0),
        "starter defaults leave no loop in the prose the app keeps",
    )


if __name__ == "__main__":
    main()
