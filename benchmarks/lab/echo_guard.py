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

    .venv/bin/python benchmarks/lab/echo_guard.py [--quick] [--tag NAME]
"""

from __future__ import annotations

import argparse
from contextlib import AbstractContextManager
from typing import Any
from unittest.mock import patch

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import memory_qa
from memory_facts import CHITCHAT, FACTS, STATEMENTS
from statement_echo import echoed, parroted, refused, third_person, words_in

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm import engine as engine_module

VARIANTS: tuple[str, ...] = ("off", "guard")
QUICK_PER_SET = 4
SETS = ("statement", "chitchat", "memory")


def variant(name: str) -> AbstractContextManager[Any]:
    """The variant in force for one turn."""
    return patch.object(engine_module, "REMEMBER_USER_MESSAGE", name == "guard")


def messages(quick: bool) -> list[tuple[str, str, tuple[Any, ...]]]:
    """(set, text, accepted memory answers) per message."""
    n = QUICK_PER_SET if quick else None
    rows: list[tuple[str, str, tuple[Any, ...]]] = []
    rows += [("statement", s.text, ()) for s in STATEMENTS[:n]]
    rows += [("chitchat", text, ()) for text in CHITCHAT[:n]]
    rows += [("memory", f.question, f.accept) for f in FACTS[:n]]
    return rows


def judge(answer: str, text: str) -> tuple[dict[str, Any], str]:
    said = {
        "parrot": parroted(answer, text),
        "echo": echoed(answer, text),
        "refused": refused(answer),
        "third_person": third_person(answer),
        "answer_words": words_in(answer),
    }
    return said, "PARROT" if said["parrot"] else "-"


async def ask_all(services: AppServices, args: argparse.Namespace) -> list[dict[str, Any]]:
    variants = tuple(args.variants.split(","))
    return await memory_qa.ask_interleaved(services, messages(args.quick), variants, variant, judge)


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def counts(group: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "parrots": sum(1 for r in group if r["parrot"]),
            "echoes": sum(1 for r in group if r["echo"]),
            "refusals": sum(1 for r in group if r["refused"]),
            "speaks_of_the_user": sum(1 for r in group if r["third_person"]),
        }

    return memory_qa.totals_by_variant(rows, VARIANTS, SETS, counts)


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, in order per message"
    )
    run = memory_qa.run_variants("echo guard", ask_all, totals)
    memory_qa.run_in_profile("echo_guard", ap.parse_args(), run)


if __name__ == "__main__":
    main()
