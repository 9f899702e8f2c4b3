"""Which tools a turn offers, by model size and by what the message asks.

A capable model gets every available tool and decides itself.  A small
model (``llm/model_profile.py``) calls whatever it is shown — a greeting
triggered seven tool calls with the 0.5B starter — so its turn is shaped:

- no tool at all unless the message needs one: greetings and small talk go
  straight to an answer (and the prompt is shorter without the tool list),
  and so does a message that only tells something (no question, no
  request: :mod:`~agenvoy_desktop.agent.speech_act`), whatever words it uses;
- file tools only when the message names a file or a folder;
- time tools only when it asks about the time or a date ("what time…",
  "which day…", "how many days until…"), not when it merely says "date"
  or "days" ("write each as place: date", "list the three days"): offered
  tools, the starter answers as made-up calls;
- ``search_chat_history`` only when it asks about the past *and* proactive
  recall found nothing (otherwise the answer is already in the prompt);
- the error-memory tools never: the loop records and looks up failures
  itself, and a small model only loops on them;
- ``search_rag`` when the message names documents or notes, or asks an
  information question (what is, how does, explain …); ``list_rag`` when it
  asks about the collections themselves.  Both are offered only while the
  user's collections are enabled and readable (the tools' own availability
  check), so the cues cost nothing when there are none;
- at most two tool rounds, and at most two calls in each;
- no clock in the system prompt unless the message asks about the time or
  a date (:func:`clock_in_prompt`);
- an answer to a message that only tells never opens with a refusal or an
  apology ("I'm sorry, but I can't assist with that request." to "My bike
  lock code is 4417"): :data:`REFUSAL_OPENINGS`, banned by the sampler.

The cues are plain word lists, one set per language (``cues`` in
``agenvoy_desktop/language/data``) — cheap, predictable, and easy to
extend; a missed cue costs a tool the model could have used, never a wrong
answer from memory (recall still runs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agenvoy_desktop.agent.context import Clock
from agenvoy_desktop.agent.speech_act import only_tells
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.language.patterns import alternatives, compiled, cue, either, every, group

SEARCH_TOOL = "search_chat_history"
FILE_TOOLS = frozenset({"list_files", "read_text_file"})
TIME_TOOLS = frozenset({"current_time", "date_calc"})
ERROR_TOOLS = frozenset({"remember_error", "search_error_history", "read_error"})
DOCUMENT_SEARCH_TOOL = "search_rag"
DOCUMENT_LIST_TOOL = "list_rag"
SMALL_MODEL_TOOL_ROUNDS = 2
SMALL_MODEL_CALLS_PER_ROUND = 2
"""The starter once asked for eight searches in one answer (each with other
arguments, so the identical-call guard did not stop it); past two, more
calls in one round only add tool results for it to misread."""
AVOID_REFUSALS = True
"""Whether a small model's statement bans :data:`REFUSAL_OPENINGS` (benchmarks switch it)."""
REFUSAL_OPENINGS: tuple[str, ...] = tuple(dict.fromkeys(every("cues.refusal_openings")))
"""Openings an answer to a message that only tells may not have (``llm/openings.py``).

The starter refused 2 to 5 of 24 statements ("I'm sorry, but I can't assist
with that.") although the user asked for nothing.  Sympathy stays open:
"I'm sorry to hear that" completes none of these.  "As an AI language
model, I don't have…" is not banned: without it the starter wrote "As an
Agenvoy, I am committed to…", no better (``benchmarks/statement_echo.py``)."""


_FILE_CUE = compiled(
    r"(?:[~.]?/[\w.-]+|\\[\w.-]+|\b[\w-]+\.(?:txt|md|csv|json|log|py|ini|cfg|yaml|yml|toml|"
    r"html|xml|rst|conf)\b|" + cue("cues.files") + ")",
    re.IGNORECASE,
)
_SPANS = alternatives(every("cues.spans"))
"""Spans of time: a time cue only in a question about time ("how many days until…"),
not in "list the three days"."""
_TIME_CUE = compiled(
    either(
        cue("cues.time"),
        group(r"\b", every("cues.span_questions"), rf"\b[^?.!]*?\b(?:{_SPANS})\b"),
        group(rf"\b(?:{_SPANS})\s+", every("cues.span_after"), r"\b"),
        group(r"\b", every("cues.span_before"), rf"\s+\d+\s+(?:{_SPANS})\b"),
    ),
    re.IGNORECASE,
)
_PAST_CUE = compiled(cue("cues.past"), re.IGNORECASE)
_FIRST_PERSON = compiled(cue("cues.first_person"), re.IGNORECASE)
_DOCUMENT_CUE = compiled(cue("cues.documents"), re.IGNORECASE)
_QUESTION_CUE = compiled(cue("cues.questions"), re.IGNORECASE)
_SMALL_TALK = compiled(cue("cues.small_talk"), re.IGNORECASE)
_COLLECTION_CUE = compiled(cue("cues.collections"), re.IGNORECASE)


def is_personal(text: str) -> bool:
    """The message is about the user (first person) or about something said before.

    Such a message likely needs memory, so proactive recall applies its
    lower floor (``RecallFloor.personal_*``).
    """
    return _FIRST_PERSON.search(text) is not None or asks_about_the_past(text)


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """What one turn offers the model."""

    tools: frozenset[str] | None
    """Tool names allowed this turn (None: every available tool)."""
    max_tool_rounds: int | None
    """Rounds that may call tools before the model must answer (None: the agent's limit)."""
    max_calls_per_round: int | None = None
    """Calls run per round, in the order asked; the rest are dropped (None: all)."""
    avoid_openings: tuple[str, ...] = ()
    """Openings the answer may not have (:data:`REFUSAL_OPENINGS` for a statement)."""


FULL = TurnPlan(tools=None, max_tool_rounds=None)


def plan_turn(text: str, *, small_model: bool, recalled: bool) -> TurnPlan:
    """The turn's plan; see the module docstring."""
    if not small_model:
        return FULL
    if only_tells(text):
        return TurnPlan(
            tools=frozenset(),
            max_tool_rounds=0,
            avoid_openings=REFUSAL_OPENINGS if AVOID_REFUSALS else (),
        )
    tools = needed_tools(text, recalled=recalled) | document_tools_needed(text)
    return TurnPlan(
        tools=tools,
        max_tool_rounds=SMALL_MODEL_TOOL_ROUNDS,
        max_calls_per_round=SMALL_MODEL_CALLS_PER_ROUND,
    )


def wants_recall(text: str, *, small_model: bool) -> bool:
    """Whether proactive recall runs for this message (the setting aside).

    Not for a small model's statement: measured with the starter on 24
    statements touching remembered facts (benchmarks/statement_echo.py),
    with a recall block 9 answers spoke of "the user" in the third person
    (1 without), 12 copied five or more words of the message (6 without),
    3 repeated a remembered line as if the user had just said it (0), and
    the remembered fact showed in 3 of 16 answers where it could help (1);
    the first token came 0.6 s later.  A question, or a statement with a
    question, still gets its block.
    """
    return not (small_model and only_tells(text))


def clock_in_prompt(text: str, *, small_model: bool) -> Clock:
    """How much of the clock the system prompt carries for this message.

    A capable model gets the local time with its zone on every turn.  The
    starter, given "Current local time: … UTC+00:00" with every message,
    talked about it unasked ("The current local time is 2026-12-01 15:05.
    The shoe size you mentioned…"), so a small model gets the clock only
    when the message asks about the time or a date (it is then also offered
    the time tools) — not for a statement that merely says "today" ("My
    landlord came by today." → "…arrived today at 20:24 PM, which translates
    to 17:24 UTC").  ``benchmarks/lab/clock_talk.py`` measured 3 of 76 answers
    talking about the clock unasked with the time on every turn, 5 with a
    "Today is …" line instead (copied as an answer), 0 with none.
    """
    if not small_model:
        return "time"
    if _TIME_CUE.search(text) and not only_tells(text):
        return "time"
    return "none"


def needed_tools(text: str, *, recalled: bool) -> frozenset[str]:
    """The tools a message needs, by its cues (empty for greetings and small talk)."""
    names: set[str] = set()
    if _FILE_CUE.search(text):
        names |= FILE_TOOLS
    if _TIME_CUE.search(text):
        names |= TIME_TOOLS
    if not recalled and asks_about_the_past(text):
        names.add(SEARCH_TOOL)
    return frozenset(names)


def document_tools_needed(text: str) -> frozenset[str]:
    """The document tools a message may use, by its cues (see the module docstring).

    Kept apart from :func:`needed_tools`: they are offered only where the
    user enabled collections, which the tools themselves check per turn.  A
    question about the time, about the conversation itself, or small talk is
    not an information question.
    """
    names: set[str] = set()
    if _COLLECTION_CUE.search(text):
        names.add(DOCUMENT_LIST_TOOL)
    if _DOCUMENT_CUE.search(text) or (
        _QUESTION_CUE.search(text)
        and not _SMALL_TALK.search(text)
        and not _TIME_CUE.search(text)
        and not asks_about_the_past(text)
    ):
        names.add(DOCUMENT_SEARCH_TOOL)
    return frozenset(names)


def asks_about_the_past(text: str) -> bool:
    """True when the message refers to something said or done before."""
    return _PAST_CUE.search(text) is not None


def filter_specs(specs: Sequence[dict[str, object]], plan: TurnPlan) -> list[dict[str, object]]:
    """The tool specs the plan allows, in registry order."""
    if plan.tools is None:
        return list(specs)
    return [s for s in specs if _name(s) in plan.tools]


def unplanned_tools(tools: ToolRegistry, *, small_model: bool) -> list[str]:
    """The tools a first round is offered before its message is known (the Context tab's
    prompt, the read-ahead of a session not talked in since the start): none for a small
    model (its tools depend on the message), every tool otherwise."""
    if small_model:
        return []
    return [str(spec["function"]["name"]) for spec in tools.specs()]


def _name(spec: dict[str, object]) -> str:
    function = spec.get("function")
    return str(function.get("name", "")) if isinstance(function, dict) else ""
