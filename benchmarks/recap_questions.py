""" "What did we talk about last time?": answered from the last conversation, or not?

Proactive recall searches by the message's words, and a recap question has
none; the starter then said "I don't know" with earlier sessions beside it.
``agent/recap.py`` puts the user's last messages of the most recent other
session in front of the model instead.

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter with the app's settings and a fixed
seed); the most recent session is the last one planted.  Each recap question
in a new session (removed afterwards), once per variant (``off``: as before,
recall's search only; ``recap``: as shipped), interleaved.  Reported per
variant: answers that name something the user said in that session (a
content word of its last user messages, not of the question), answers that
admit not knowing, median answer length and seconds.

    .venv/bin/python benchmarks/recap_questions.py [--quick] [--variants A,B] [--tag X]
"""

from __future__ import annotations

import argparse
from contextlib import AbstractContextManager
from typing import Any
from unittest.mock import patch

import memory_qa
from statement_echo import words_in
from unknown_facts import admits

from agenvoy_desktop.agent import recap
from agenvoy_desktop.agent.recall import content_terms
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.lifecycle import remove_session

VARIANTS: tuple[str, ...] = ("off", "recap")
QUESTIONS: tuple[str, ...] = (
    "What did we talk about last time?",
    "What were we talking about?",
    "Where did we leave off?",
    "What did we chat about yesterday?",
    "Can you remind me what we discussed last time?",
    "What have we been talking about lately?",
    "上次我们聊了什么？",
    "我们之前聊了什么？",
    "Worüber haben wir gesprochen?",
    "前回は何を話しましたか？",
)
LAST_WORDS: set[str] = set()
"""Content words of the user's last messages in the most recent session (filled at start)."""


def variant(name: str) -> AbstractContextManager[Any]:
    """The variant in force for one turn."""
    return patch.object(recap, "RECAP", name == "recap")


def judge(answer: str, question: str) -> tuple[dict[str, Any], str]:
    named = bool((set(content_terms(answer)) - set(content_terms(question))) & LAST_WORDS)
    said = {"names_it": named, "admits": admits(answer), "answer_words": words_in(answer)}
    return said, "NAMES IT" if named else "ADMITS" if said["admits"] else "-"


async def ask_all(services: AppServices, args: argparse.Namespace) -> memory_qa.Rows:
    def last_said() -> None:
        store = services.store
        sid = store.create_session("probe")
        for item in recap.last_conversation(store, sid):
            LAST_WORDS.update(content_terms(item.text))
        remove_session(store, sid)

    await services.storage.run(last_said)
    todo: memory_qa.Todo = [("recap", q, ()) for q in QUESTIONS[: 4 if args.quick else None]]
    variants = tuple(args.variants.split(","))
    return await memory_qa.ask_interleaved(services, todo, variants, variant, judge)


def totals(rows: memory_qa.Rows) -> dict[str, Any]:
    def counts(group: memory_qa.Rows) -> dict[str, Any]:
        return {
            "names_it": sum(1 for r in group if r["names_it"]),
            "admits": sum(1 for r in group if r["admits"]),
            "with_recall_block": sum(1 for r in group if r["recall_chars"]),
        }

    return memory_qa.totals_by_variant(rows, VARIANTS, ("recap",), counts)


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    run = memory_qa.run_variants("recap questions", ask_all, totals)
    memory_qa.run_in_profile("recap_questions", ap.parse_args(), run)


if __name__ == "__main__":
    main()
