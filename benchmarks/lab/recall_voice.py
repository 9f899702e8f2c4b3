"""Whose voice: does the starter answer "My code is 4721" or "Your code is 4721"?

Asked about a fact it recalled, the 0.5B starter copies the recalled line,
and the line is the user's own words: "What am I allergic to?" got "I'm
allergic to penicillin."  ``agent/pronouns.py`` turns the user's recalled
lines to face them before the model reads them ("You're allergic to
penicillin").

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter with the app's settings and a fixed
seed).  The planted facts' questions (``memory``) and the people asked about
by name (``named``), each in a new session, once per variant (``as-said``:
the lines as the user said them; ``second-person``: turned), interleaved
message by message.  Reported per variant and set: answers right, answers
that open in the user's voice ("My…", "I'm…", 我的…, 我对…), that open in
the second person and that speak of "the user", the median answer length,
tool calls and model seconds.

    .venv/bin/python benchmarks/lab/recall_voice.py [--quick] [--variants A,B] [--sets S] [--tag X]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any
from unittest.mock import patch

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import memory_qa
from memory_facts import FACTS, NAMED_FACTS, Fact
from statement_echo import third_person, words_in

from agenvoy_desktop.agent import recall
from agenvoy_desktop.agent.pronouns import swap_person
from agenvoy_desktop.agent.services import AppServices

VARIANTS: tuple[str, ...] = ("as-said", "second-person")
QUICK_PER_SET = 4
SETS = ("memory", "named")
SECOND_PERSON = re.compile(r"\s*(?:(?:Your|You|You're|You’re|You've)\b|你|您|あなた)")
ZH_FIRST_PERSON = re.compile(r"\s*我(?![不没沒找会會可能记記将將])")
"""A Chinese answer that speaks as the user ("我对青霉素过敏。"), not "我不知道"."""


def in_users_voice(answer: str) -> bool:
    """``memory_qa.in_users_voice``, and a Chinese answer opening with 我 that claims a fact."""
    return memory_qa.in_users_voice(answer) or ZH_FIRST_PERSON.match(answer) is not None


_AS_SAID = recall.format_line


def _facing_the_user(item: recall.RecallItem, *args: Any, **kwargs: Any) -> str:
    """A recalled line with the user's own words turned to face them (``pronouns``)."""
    if item.role == "user":
        item = dataclasses.replace(item, text=swap_person(item.text))
    return _AS_SAID(item, *args, **kwargs)


def variant(name: str) -> AbstractContextManager[Any]:
    """The variant in force for one turn."""
    return patch.object(
        recall, "format_line", _facing_the_user if name == "second-person" else _AS_SAID
    )


def messages(quick: bool, sets: Sequence[str] = SETS) -> memory_qa.Todo:
    """(set, text, accepted answers) per message of *sets*."""
    n = QUICK_PER_SET if quick else None
    rows: memory_qa.Todo = [("memory", f.question, f.accept) for f in FACTS[:n]]
    rows += [("named", f.question, f.accept) for f in NAMED_FACTS[:n]]
    return [row for row in rows if row[0] in sets]


def planted(quick: bool) -> list[Fact]:
    """The facts both sets ask about (the first few of each with ``--quick``)."""
    n = QUICK_PER_SET if quick else None
    return [*FACTS[:n], *NAMED_FACTS[:n]]


def judge(answer: str, _text: str) -> tuple[dict[str, Any], str]:
    said = {
        "users_voice": in_users_voice(answer),
        "the_user": third_person(answer),
        "second_person": SECOND_PERSON.match(answer) is not None,
        "answer_words": words_in(answer),
    }
    return said, "USER'S VOICE" if said["users_voice"] else "-"


async def ask_all(services: AppServices, args: argparse.Namespace) -> memory_qa.Rows:
    todo = messages(args.quick, args.sets.split(","))
    variants = tuple(args.variants.split(","))
    return await memory_qa.ask_interleaved(services, todo, variants, variant, judge)


def totals(rows: memory_qa.Rows) -> dict[str, Any]:
    def counts(group: memory_qa.Rows) -> dict[str, Any]:
        return {
            "answered": sum(1 for r in group if r.get("answered")),
            "users_voice": sum(1 for r in group if r["users_voice"]),
            "second_person": sum(1 for r in group if r["second_person"]),
            "the_user": sum(1 for r in group if r["the_user"]),
            "with_recall_block": sum(1 for r in group if r["recall_chars"]),
        }

    return memory_qa.totals_by_variant(rows, VARIANTS, SETS, counts)


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated, of the two")
    run = memory_qa.run_variants("whose voice", ask_all, totals, planted)
    memory_qa.run_in_profile("recall_voice", ap.parse_args(), run)


if __name__ == "__main__":
    main()
