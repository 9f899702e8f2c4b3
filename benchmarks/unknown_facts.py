"""Facts never told: does the starter say it does not know, or invent an answer?

Asked "What is my daughter's name?" with nothing about her in memory, the
0.5B starter answered "My daughter's name is Emily."  A small model's turn
now shows it a made-up exchange that ends in "I don't know"
(``agent/not_remembered.py``) when recall found nothing for a question about
the user's own life.

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter model with the app's settings and a
fixed seed), so recall runs over real memory.  Messages, each in a new
session, once per variant (``off``: no exchange; ``example``: as shipped;
``one-way``: as shipped, but an English question is not translated into the
archive's other languages, as before 2026-12-02), the variants interleaved
message by message:

- ``unknown``: the 20 questions of ``memory_facts.UNKNOWN_FACTS`` (English,
  Chinese, German, Japanese), whose answers were never told;
- ``advice``: the 10 of ``OWN_ADVICE``, first-person questions that ask for
  help, which must still get help;
- ``brought``: the 12 of ``OWN_MATERIAL``, questions about the user's things
  that bring what they ask about ("What is wrong with my code? ```…```",
  "How many calories are in my lunch: a banana and two eggs?"), which must be
  worked on, not answered "I don't know";
- ``memory``: the planted facts' questions, which must still be answered;
- ``multi``: questions about one of several facts told in one message
  (``MULTI_FACTS``, planted too), the answers a stricter test of the
  evidence loses first.

Reported per variant and set: answers that admit not knowing (``admits``),
turns that showed the exchange, memory answers right, the median answer
length, tool calls and median model seconds.  (The exchange shown even beside a
recall block, or beside weak evidence only, was measured here too and not
shipped: benchmarks/RESULTS.md.)

    .venv/bin/python benchmarks/unknown_facts.py [--quick] [--variants A,B] [--sets S] [--tag X]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import memory_qa
from memory_facts import FACTS, MULTI_FACTS, OWN_ADVICE, OWN_MATERIAL, UNKNOWN_FACTS, Fact
from statement_echo import words_in

from agenvoy_desktop.agent import not_remembered, query_translation
from agenvoy_desktop.agent.services import AppServices

VARIANTS: tuple[str, ...] = ("off", "example", "one-way")
QUICK_PER_SET = 4
SETS = ("unknown", "advice", "brought", "memory", "multi")
ADMITS = re.compile(
    r"don't know|do not know|don’t know|not know|can't find|cannot find|can’t find|"
    r"haven't (?:told|mentioned|shared|said)|have not (?:told|mentioned)|"
    r"didn't (?:tell|mention)|not sure|no information|don't have|do not have|"
    r"can't recall|cannot recall|not mentioned|not provided|"
    r"(?:could|can) you (?:tell|let|share|provide)|please (?:tell|let|share|provide)|"
    r"不知道|没有告诉|沒有告訴|还没有告诉|没有提到|不清楚|告诉我|"
    r"weiß (?:ich )?nicht|keine Information|nicht gesagt|nicht bekannt|"
    r"わかりません|分かりません|知りません|教えてもらっていません",
    re.IGNORECASE,
)
"""An answer that says it does not know, or asks to be told."""


def admits(answer: str) -> bool:
    return ADMITS.search(answer) is not None


@contextmanager
def variant(name: str) -> Iterator[None]:
    shipped = (not_remembered.SHOW_EXAMPLE, query_translation.FROM_ENGLISH)
    not_remembered.SHOW_EXAMPLE = name != "off"
    query_translation.FROM_ENGLISH = name != "one-way"
    try:
        yield
    finally:
        not_remembered.SHOW_EXAMPLE, query_translation.FROM_ENGLISH = shipped


def messages(quick: bool, sets: Sequence[str] = SETS) -> list[tuple[str, str, tuple[Any, ...]]]:
    """(set, text, accepted memory answers) per message of *sets*."""
    n = QUICK_PER_SET if quick else None
    rows: list[tuple[str, str, tuple[Any, ...]]] = []
    rows += [("unknown", text, ()) for text in UNKNOWN_FACTS[:n]]
    rows += [("advice", text, ()) for text in OWN_ADVICE[:n]]
    rows += [("brought", text, ()) for text in OWN_MATERIAL[:n]]
    rows += [("memory", f.question, f.accept) for f in FACTS[:n]]
    rows += [("multi", f.question, f.accept) for f in MULTI_FACTS[:n]]
    return [row for row in rows if row[0] in sets]


def planted(quick: bool) -> list[Fact]:
    """The planted facts and the several-to-a-message ones (the first few with ``--quick``)."""
    n = memory_qa.QUICK_FACTS if quick else None
    return [*FACTS[:n], *MULTI_FACTS[:n]]


def judge(answer: str, _text: str) -> tuple[dict[str, Any], str]:
    said = {"admits": admits(answer), "answer_words": words_in(answer)}
    return said, "ADMITS" if said["admits"] else "-"


async def ask_all(services: AppServices, args: argparse.Namespace) -> list[dict[str, Any]]:
    todo = messages(args.quick, args.sets.split(","))
    variants = tuple(args.variants.split(","))
    return await memory_qa.ask_interleaved(services, todo, variants, variant, judge)


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def counts(group: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "admits": sum(1 for r in group if r["admits"]),
            "example_shown": sum(1 for r in group if r["not_remembered"]),
            "with_recall_block": sum(1 for r in group if r["recall_chars"]),
        }

    return memory_qa.totals_by_variant(rows, VARIANTS, SETS, counts)


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument(
        "--variants", default="off,example", help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated, of the five")
    run = memory_qa.run_variants("unknown facts", ask_all, totals, planted)
    memory_qa.run_in_profile("unknown_facts", ap.parse_args(), run)


if __name__ == "__main__":
    main()
