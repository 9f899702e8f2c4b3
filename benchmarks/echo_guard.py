"""Echo guard: does counting the user's message as already said stop the starter parroting it?

A chat answer's sampler (``llm/sampler.py``) has a flat repeat penalty and
llama.cpp's DRY guard; both used to see only the answer's own tokens, so an
answer that copied the user's message back ("I locked myself out of the
house again." → the same sentence) cost nothing.  With
``engine.REMEMBER_USER_MESSAGE`` the user's last message is counted as said
before the answer starts (``Sampler.remember``).

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter model with the app's settings and a
fixed seed).  Messages: the 24 statements, 20 greetings and 32 memory
questions of ``memory_facts``; each opens a new session and runs once per
variant (``off``, ``guard``), the variants interleaved message by message.
Reported per variant and set: parrots (five words in a row of the message,
or eight CJK characters), first-person echoes, refusals, answers speaking
of "the user", the median answer length, memory answers right, tool calls
and median model seconds.

    .venv/bin/python benchmarks/echo_guard.py [--quick] [--tag NAME]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import memory_qa
from memory_facts import CHITCHAT, FACTS, STATEMENTS, answer_matches
from statement_echo import echoed, parroted, refused, third_person, words_in

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm import engine as engine_module

VARIANTS: tuple[str, ...] = ("off", "guard")
QUICK_PER_SET = 4
SETS = ("statement", "chitchat", "memory")


@contextmanager
def variant(name: str) -> Iterator[None]:
    shipped = engine_module.REMEMBER_USER_MESSAGE
    engine_module.REMEMBER_USER_MESSAGE = name == "guard"
    try:
        yield
    finally:
        engine_module.REMEMBER_USER_MESSAGE = shipped


def messages(quick: bool) -> list[tuple[str, str, tuple[Any, ...]]]:
    """(set, text, accepted memory answers) per message."""
    n = QUICK_PER_SET if quick else None
    rows: list[tuple[str, str, tuple[Any, ...]]] = []
    rows += [("statement", s.text, ()) for s in STATEMENTS[:n]]
    rows += [("chitchat", text, ()) for text in CHITCHAT[:n]]
    rows += [("memory", f.question, f.accept) for f in FACTS[:n]]
    return rows


async def ask_all(services: AppServices, args: argparse.Namespace) -> list[dict[str, Any]]:
    todo = messages(args.quick)
    variants = tuple(args.variants.split(","))
    rows = []
    for index, (kind, text, accept) in enumerate(todo):
        turn_by = index % len(variants)
        order = variants[turn_by:] + variants[:turn_by]
        for name in order:
            with variant(name):
                turn = await memory_qa.ask(services, text)
            turn.extra = {
                "variant": name,
                "set": kind,
                "parrot": parroted(turn.answer, text),
                "echo": echoed(turn.answer, text),
                "refused": refused(turn.answer),
                "third_person": third_person(turn.answer),
                "answer_words": words_in(turn.answer),
            }
            if accept:
                turn.extra["answered"] = answer_matches(turn.answer, accept)
            verdict = "PARROT" if turn.extra["parrot"] else "-"
            memory_qa.progress(f"{name:5s} {kind}", index, len(todo), turn, verdict)
            rows.append(turn.row())
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        if not mine:
            continue
        per_set: dict[str, Any] = {}
        for kind in SETS:
            group = [r for r in mine if r["set"] == kind]
            if not group:
                continue
            per_set[kind] = {
                "n": len(group),
                "parrots": sum(1 for r in group if r["parrot"]),
                "echoes": sum(1 for r in group if r["echo"]),
                "refusals": sum(1 for r in group if r["refused"]),
                "speaks_of_the_user": sum(1 for r in group if r["third_person"]),
                "median_answer_words": memory_qa.median([r["answer_words"] for r in group]),
            }
            if kind == "memory":
                per_set[kind]["answered"] = sum(1 for r in group if r.get("answered"))
        out[name] = {
            **per_set,
            **memory_qa.turn_costs(mine),
        }
    return out


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, in order per message"
    )
    run = memory_qa.run_variants("echo guard", ask_all, totals)
    memory_qa.run_in_profile("echo_guard", ap.parse_args(), run)


if __name__ == "__main__":
    main()
