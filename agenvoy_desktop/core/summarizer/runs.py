"""What a summary run reports and the knobs every part of it shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.summary import (
    SUMMARY_SCHEMA,
    HistoryStamp,
    PassRecord,
    answer_char_bound,
)

T = TypeVar("T")

StopReason = Literal["up_to_date", "mtime_gate", "done", "failed", "cancelled", "busy"]
PassListener = Callable[[str, PassRecord], None]
"""``listener(session_id, record)`` after every pass, failure and edit."""


@dataclass(frozen=True, slots=True)
class PassProgress:
    """How far a running summary pass is: what the window shows while it works.

    ``chunk`` messages are being folded now, after ``done`` of the run's
    ``total``; ``answer`` is the share of the model's answer written so far
    (estimated from the previous summary's length: the answer rewrites it).
    """

    chunk: int
    done: int
    total: int
    answer: float

    @property
    def fraction(self) -> float:
        """The whole run's share done, 0–1."""
        if self.total <= 0:
            return 0.0
        return min(1.0, (self.done + self.chunk * self.answer) / self.total)

    @property
    def text(self) -> str:
        """ "Summarizing 16 messages… 40 %"."""
        noun = "message" if self.chunk == 1 else "messages"
        return f"Summarizing {self.chunk} {noun}… {round(self.fraction * 100)} %"


ProgressListener = Callable[[str, PassProgress], None]
"""``listener(session_id, progress)`` while a pass writes its answer."""
RunListener = Callable[[str, bool], None]
"""``listener(session_id, folding)``: True when a run starts folding messages, False when
it ends (done, failed or stopped), whoever started it."""

LOCK_FILE = "summary.lock"
LOCK_STALE_NS = 10 * 60 * 1_000_000_000
SAFETY_TOKENS = 64
"""Room for the chat template's role markers and token-count drift."""
GROWTH_TOKENS = 256
"""With an explicit ``max_answer_tokens``: the answer may be this much longer than
the previous summary."""
ANSWER_TOKENS = answer_char_bound(SUMMARY_SCHEMA)
"""The longest answer the schema allows, in characters, hence tokens (the package docstring)."""
MIN_TRANSCRIPT_TOKENS = 48
PAGE = 256
TOKEN_CACHE_MAX = 50_000
"""Token counts the runner remembers before it starts afresh."""
MISSING_STAMP: HistoryStamp = (0, -1, 0)
"""The history stamp of a session without a history.json."""


class SummaryBusyError(KnownError, RuntimeError):
    """Another summary pass holds the session (in this or another process)."""


class StoreRunner(Protocol):
    """Runs blocking store work off the event loop (``agent.storage.Storage`` fits)."""

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


class InlineRunner:
    """Default runner: calls the store directly (CLI, tests)."""

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class SummaryRunResult:
    """What one :meth:`Summarizer.run` did; cursors are archive ``seq`` (-1 = none)."""

    session_id: str
    stopped: StopReason
    passes: int = 0
    folded: int = 0
    cursor_before: int = -1
    cursor_after: int = -1
    remaining: int = 0
    error: str | None = None
