"""What a running turn tells its listener, as it happens, and what it did in the end.

The chat window turns these events into signals, the CLI prints them, and
benchmarks read :class:`TurnResult`.  They live apart from ``agent/turn.py``
so that each of the turn's stages (``agent/turn_check.py``,
``agent/turn_tools.py``) can say what it does without importing the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.agent.tools import ToolOutcome
from agenvoy_desktop.core.messages import Message


@dataclass(frozen=True, slots=True)
class MessageSaved:
    """A message reached history.json and the archive."""

    message: Message


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    text: str


@dataclass(frozen=True, slots=True)
class RecallInjected:
    """Proactive recall put remembered messages (and document passages) into the prompt."""

    text: str
    """The block exactly as sent."""
    message_ids: list[str]
    citations: list[str] = field(default_factory=list)
    """Where the document passages come from (``path:lines``)."""


@dataclass(frozen=True, slots=True)
class AnswerRetracted:
    """The answer written so far failed its check (``agent/answer_check.py``) and is replaced:
    a second try streams next, or the quoted line.  A view clears what it showed of it."""

    problem: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call_id: str
    outcome: ToolOutcome
    hint: str
    """Error-memory hint injected for the next round ("" when none)."""


@dataclass(frozen=True, slots=True)
class TurnStatus:
    """What the turn is doing now, for a status line.

    ``phase`` is ``recall`` (searching memory), ``loading`` (the model is not
    loaded yet: it loads, then reads the prompt), ``thinking`` (the model reads
    the prompt; ``detail``, when set, the percent of a long prompt read so far),
    ``tool`` (``detail``: the tool's name) or ``writing`` (the first answer
    text arrived).
    """

    phase: str
    detail: str = ""


@dataclass(slots=True)
class TurnResult:
    """What a finished turn did (also the last event)."""

    session_id: str
    answer: str = ""
    interrupted: bool = False
    rounds: int = 0
    tool_calls: int = 0
    trimmed_messages: int = 0
    model_s: float = 0.0
    """Time spent inside the model's stream (the rest is the loop's overhead)."""
    total_s: float = 0.0
    first_token_s: float | None = None
    """Seconds from the turn's start to the first answer text (None: no text)."""
    recall_s: float = 0.0
    """Time spent in proactive recall (the search before the first round)."""
    recall_text: str = ""
    """The proactive-recall block as sent ("" when nothing cleared the floor)."""
    recall_ids: list[str] = field(default_factory=list)
    searched_as: str = ""
    """The translation recall searched with (``agent/query_translation.py``)."""
    searched_in: str = ""
    """The language of :attr:`searched_as` (``en``, ``zh``, ``ja``, ``de``)."""
    not_remembered: bool = False
    """The model was shown how to say it does not know (``agent/not_remembered.py``)."""
    tools_offered: list[str] = field(default_factory=list)
    """Tool names offered in the first round."""
    saved: list[Message] = field(default_factory=list)
    answer_tokens: int = 0
    """Tokens the model generated in the answer round (the stream's own count)."""
    prompt_tokens: int = 0
    """Tokens of the answer round's prompt."""
    answer_s: float = 0.0
    """Seconds from the answer round's first text to the end of its stream."""
    ended_at_loop: bool = False
    """A small model's answer began to repeat itself and was ended there
    (``agent/answer_loops.py``)."""
    checked: str = ""
    """What the check found wrong with the model's first answer ("" when nothing:
    ``agent/answer_check.py``)."""
    answer_from: str = "model"
    """``model``, ``second try`` (after a failed check), ``quote`` (the remembered line or
    the worked-out result) or ``not known`` (what memory does not hold, said so)."""
    replaced: list[str] = field(default_factory=list)
    """The answers the check retracted, in order (logs and benchmarks read them)."""


TurnEvent = (
    MessageSaved
    | AnswerDelta
    | AnswerRetracted
    | RecallInjected
    | ToolCallStarted
    | ToolCallFinished
    | TurnResult
    | TurnStatus
)
EventSink = Callable[[TurnEvent], None]
