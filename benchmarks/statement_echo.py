"""Statements: does a recall block make the starter echo the user's words?

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter model with the app's settings and a
fixed seed).  Each of the 24 messages of ``memory_facts.STATEMENTS`` is a
statement, not a question, touching one planted fact: said again in other
words, or a related topic where the fact could help ("I locked myself out"
when the spare key's place is known).  Each opens a new session.

Every message runs once per pass, the passes one after the other over the
same profile (``--passes``, default ``statement-recall,shipped``):

* ``statement-recall``: proactive recall for every message, as the app did
  before statements lost it (the recalled sentences the statement already
  says are pruned).
* ``shipped``: as the app runs now: a small model's statement gets no recall
  block (``agent/policy.wants_recall``) and no tools, and its answer cannot
  open with a refusal (``policy.REFUSAL_OPENINGS``).
* ``refusals-open``: the same without that ban.

Reported per pass: turns with a recall block, how many blocks held the
planted fact and how many held only other lines, **echoes** (the answer
repeats four or more of the user's words in the first person — "Hi Lena! My
name is Lena…" — from the message or from a recalled line; for CJK six
characters with 我), **parrots** (five words in a row of the message, or
eight CJK characters), answers that speak of **"the user"** in the third
person, answers that **use the memory** (on a ``related`` statement, they
contain what only the fact says: "Okafor" for the dentist, "allerg" for the
fruit salad), **refusals** ("I'm sorry, but I can't assist with that."),
the median answer length in words (CJK characters count one each), tool
calls per turn and median model seconds.

    .venv/bin/python benchmarks/statement_echo.py [--quick] [--statements N] [--tag NAME]
        [--passes shipped]
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import memory_qa
from memory_facts import FACTS, STATEMENTS, Statement, answer_matches

from agenvoy_desktop.agent import policy, turn_memory
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.paths import AppPaths

QUICK_STATEMENTS = 6
ECHO_WORDS = 4
ECHO_CJK_CHARS = 6
FIRST_PERSON = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "my", "me", "mine", "myself"}
    | {"we", "we're", "we've", "our", "ours", "us"}
)
PARROT_WORDS = 5
PARROT_CJK_CHARS = 8
_REFUSAL = re.compile(
    r"\bI(?:'|’| a)?m sorry\b(?! (?:to hear|for your|about your))|\bI apologi[sz]e\b"
    r"|\bcan(?:'|’|no)t (?:assist|help)\b|\bunable to\b"
    r"|\bnot able to\b|\bas an ai\b|抱歉(?!听到|聽到)|对不起|對不起|无法|無法",
    re.IGNORECASE,
)
"""A refusal or apology; sympathy ("I'm sorry to hear that") is not one."""
_THIRD_PERSON = re.compile(r"\bthe user\b|用户|用戶|ユーザー", re.IGNORECASE)
_PROMPT_WORDS = re.compile(
    r"\bagenvoy\b|personal assistant|\b(?:runs|running) entirely|this computer|own computer",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9']+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


# -- echo ------------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold().replace("’", "'"))


def _cjk_chars(text: str) -> str:
    return "".join(
        ch for ch in unicodedata.normalize("NFKC", text) if _CJK.match(ch) or ch.isdigit()
    )


def echoed(answer: str, said: str) -> str:
    """The first-person run of *said* that *answer* repeats word for word ("" if none)."""
    words = _words(said)
    answer_text = " " + " ".join(_words(answer)) + " "
    for start in range(len(words) - ECHO_WORDS + 1):
        run = words[start : start + ECHO_WORDS]
        if FIRST_PERSON.intersection(run) and f" {' '.join(run)} " in answer_text:
            return " ".join(run)
    chars, answer_chars = _cjk_chars(said), _cjk_chars(answer)
    for start in range(len(chars) - ECHO_CJK_CHARS + 1):
        piece = chars[start : start + ECHO_CJK_CHARS]
        if "我" in piece and piece in answer_chars:
            return piece
    return ""


def parroted(answer: str, said: str) -> bool:
    """The answer copies a run of the message: five words, or eight CJK characters."""
    words = _words(said)
    answer_text = " " + " ".join(_words(answer)) + " "
    for start in range(len(words) - PARROT_WORDS + 1):
        if f" {' '.join(words[start : start + PARROT_WORDS])} " in answer_text:
            return True
    chars, answer_chars = _cjk_chars(said), _cjk_chars(answer)
    return any(
        chars[i : i + PARROT_CJK_CHARS] in answer_chars
        for i in range(len(chars) - PARROT_CJK_CHARS + 1)
    )


def repeats_the_prompt(answer: str) -> bool:
    """The answer talks about the system prompt's identity line ("Dr. Okafor is a personal
    assistant running entirely on the user's own computer")."""
    return _PROMPT_WORDS.search(answer) is not None


def third_person(answer: str) -> bool:
    """The answer talks about "the user" instead of to them."""
    return _THIRD_PERSON.search(answer) is not None


def recalled_lines(recall_text: str) -> list[str]:
    """The remembered texts of a recall block (its header and labels do not count)."""
    return [line for line in recall_text.splitlines()[1:] if line.strip()]


def words_in(answer: str) -> int:
    """The answer's length in words, each CJK character counting as one."""
    return len(_words(answer)) + len(_cjk_chars(answer))


def refused(answer: str) -> bool:
    """The answer declines or apologises instead of replying ("I'm sorry, but I can't…")."""
    return _REFUSAL.search(answer) is not None


# -- the passes ------------------------------------------------------------------------------
@contextmanager
def statement_recall(_services: AppServices) -> Iterator[None]:
    """The ``statement-recall`` pass: recall runs for every message, as before the change."""
    original = turn_memory.__dict__["wants_recall"]

    def always(text: str, *, small_model: bool) -> bool:
        return True

    setattr(turn_memory, "wants_recall", always)  # noqa: B010 (the module does not export it)
    try:
        yield
    finally:
        setattr(turn_memory, "wants_recall", original)  # noqa: B010


SHORT_PROMPT = "You are Agenvoy. Reply briefly and concretely, in the language of the message."
"""A system prompt with no identity line for the starter to copy into its answers."""

SECOND_PERSON_PROMPT = (
    "You are Agenvoy, a personal assistant that runs entirely on this computer. "
    "Answer in the language of the message, briefly and concretely."
)
"""The default system prompt without "the user" (the starter speaks of "the user")."""


@contextmanager
def system_prompt(services: AppServices, prompt: str) -> Iterator[None]:
    """Run the pass with *prompt* as the default system prompt."""
    agent = services.agent
    assert agent is not None
    original = agent.config
    agent.config = dataclasses.replace(original, system_prompt=prompt)
    try:
        yield
    finally:
        agent.config = original


def second_person(services: AppServices) -> AbstractContextManager[None]:
    """The ``second-person`` pass: the system prompt says nothing of "the user"."""
    return system_prompt(services, SECOND_PERSON_PROMPT)


def short_prompt(services: AppServices) -> AbstractContextManager[None]:
    """The ``short-prompt`` pass: no identity line at all."""
    return system_prompt(services, SHORT_PROMPT)


def shipped(_services: AppServices) -> AbstractContextManager[None]:
    return nullcontext()


@contextmanager
def refusals_open(_services: AppServices) -> Iterator[None]:
    """The ``refusals-open`` pass: a statement's answer may open with a refusal (as before)."""
    policy.AVOID_REFUSALS = False
    try:
        yield
    finally:
        policy.AVOID_REFUSALS = True


PASSES: dict[str, Callable[[AppServices], AbstractContextManager[None]]] = {
    "statement-recall": statement_recall,
    "shipped": shipped,
    "second-person": second_person,
    "short-prompt": short_prompt,
    "refusals-open": refusals_open,
}


async def ask_all(
    services: AppServices,
    statements: Sequence[Statement],
    planted: dict[str, str],
    label: str,
) -> list[dict[str, Any]]:
    rows = []
    for index, statement in enumerate(statements):
        turn = await memory_qa.ask(services, statement.text)
        echo = echoed(turn.answer, statement.text)
        echo_recall = next(
            (e for line in recalled_lines(turn.recall_text) if (e := echoed(turn.answer, line))),
            "",
        )
        used = bool(statement.shows) and answer_matches(turn.answer, statement.shows)
        held = planted[statement.fact] in turn.recall_ids
        turn.extra = {
            "pass": label,
            "fact": statement.fact,
            "kind": statement.kind,
            "echo": echo,
            "echo_of_recall": echo_recall,
            "parrot": parroted(turn.answer, statement.text),
            "third_person": third_person(turn.answer),
            "prompt_words": repeats_the_prompt(turn.answer),
            "refused": refused(turn.answer),
            "answer_words": words_in(turn.answer),
            "used_memory": used,
            "fact_in_block": held,
            "other_lines_in_block": len(turn.recall_ids) - held,
            "load": memory_qa.load_text(),
        }
        verdict = "ECHO" if echo or echo_recall else ("USED" if used else "ok")
        memory_qa.progress(label, index, len(statements), turn, verdict)
        rows.append(turn.row())
    return rows


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    related = [r for r in rows if r["kind"] == "related"]
    return {
        "statements": n,
        "turns_with_recall_block": sum(1 for r in rows if r["recall_chars"]),
        "echoes": sum(1 for r in rows if r["echo"] or r["echo_of_recall"]),
        "echoes_of_the_message": sum(1 for r in rows if r["echo"]),
        "echoes_of_a_recalled_line": sum(1 for r in rows if r["echo_of_recall"]),
        "parrots_the_message": sum(1 for r in rows if r["parrot"]),
        "speaks_of_the_user": sum(1 for r in rows if r["third_person"]),
        "repeats_the_prompt": sum(1 for r in rows if r.get("prompt_words")),
        "refusals": sum(1 for r in rows if r.get("refused")),
        "median_answer_words": memory_qa.median([r.get("answer_words") for r in rows]),
        "related_using_memory": f"{sum(r['used_memory'] for r in related)}/{len(related)}",
        "fact_in_block": sum(1 for r in rows if r["fact_in_block"]),
        "blocks_without_the_fact": sum(
            1 for r in rows if r["recall_chars"] and not r["fact_in_block"]
        ),
        "tool_calls_per_turn": round(sum(r["tool_calls"] for r in rows) / n, 2),
        "median_model_s": memory_qa.median([r["model_s"] for r in rows]),
        "median_first_token_s": memory_qa.median([r["first_token_s"] for r in rows]),
    }


async def run(args: Any, paths: AppPaths) -> dict[str, Any]:
    count = args.statements or (QUICK_STATEMENTS if args.quick else len(STATEMENTS))
    statements = STATEMENTS[:count]
    keys = {s.fact for s in statements}
    facts = [f for f in FACTS if f.key in keys]
    seed = None if args.seed < 0 else args.seed
    services = await asyncio.to_thread(memory_qa.open_services, paths, seed)
    passes: dict[str, list[dict[str, Any]]] = {}
    try:
        planted, setup = await memory_qa.prepare(services, facts, seed)
        ids = {p.fact.key: p.message_id for p in planted}
        for label in args.passes.split(","):
            with PASSES[label](services):
                passes[label] = await ask_all(services, statements, ids, label)
    finally:
        await asyncio.to_thread(services.close)
    summary = {label: totals(rows) for label, rows in passes.items()}
    for label, total in summary.items():
        print(f"\n=== statements, pass {label}")
        for key, value in total.items():
            print(f"  {key:28s} {value}")
    return {
        "setup": setup,
        "totals": summary,
        "turns": passes,
    }


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument("--statements", type=int, default=0, help="send only the first N")
    ap.add_argument(
        "--passes",
        default="statement-recall,shipped",
        help=f"comma-separated, in order, from {', '.join(PASSES)}",
    )
    memory_qa.run_in_profile("statement_echo", ap.parse_args(), run)


if __name__ == "__main__":
    main()
