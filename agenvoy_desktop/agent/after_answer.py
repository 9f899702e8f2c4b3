"""A finished turn's work off the user's path, and the background tasks it runs as.

After the answer (``Agent.embed_later``), on the storage thread
(:func:`after_answer`): the turn's messages are embedded, its failed tool
calls go to the error memory (:func:`remember_failures`), and the databases
checkpoint.  Embedding four messages costs tens of ms on a laptop CPU;
nothing in the turn needs the vectors (the window is never searched), so the
answer does not wait for them.  A crash before this runs is repaired by
start-up reconciliation, which embeds what lacks a vector.

That work, and the prompts read ahead between turns
(``agent/between_turns.py``), run as :class:`Background` tasks, which
shutdown and the tests await.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)

Failure = tuple[Message, dict[str, Any], dict[str, Any] | None]
"""A failed tool call's result, its arguments, and those of the call that fixed it (or None)."""


class FailureRecorder(Protocol):
    """Remembers a failed tool call in the error memory (runs on the storage thread)."""

    def record_failure(
        self,
        tool: str,
        error_text: str,
        arguments: dict[str, Any],
        session_id: str,
        resolution: dict[str, Any] | None = None,
    ) -> int | None:
        """Add or renew the record for this failure; its id (None when not recorded).

        *resolution*: the arguments of a later call of the same tool that worked.
        """
        ...


class Background:
    """Tasks that run off the turn's path (the work after an answer, reading ahead)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run *work* off the turn's path (awaited by :meth:`idle`)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("after-answer work failed (embedding is retried at start-up)", exc_info=exc)

    async def idle(self) -> None:
        """Wait until no task is left, also those started meanwhile (shutdown and tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def after_answer(
    store: MemoryStore,
    session_id: str,
    messages: list[Message],
    *,
    failures: FailureRecorder | None,
    settle: Callable[[], None] | None,
) -> None:
    """Storage thread: a finished turn's messages embedded, then its failed tool calls
    remembered, then *settle* (database checkpoints) — each whatever became of the one before."""
    try:
        store.index_messages(session_id, messages)
    finally:
        try:
            remember_failures(store, failures, session_id, messages)
        finally:
            if settle is not None:
                settle()


def remember_failures(
    store: MemoryStore,
    failures: FailureRecorder | None,
    session_id: str,
    messages: Sequence[Message],
) -> None:
    """Storage thread: every tool error of the turn goes to the error memory.

    Off the answer's path (an error record is embedded: milliseconds the
    user would wait for).  An error that a later call of the same tool
    in this turn got past is remembered as resolved, with that call as
    the fix; one that never recovered, as failed.  A repeated call adds
    nothing; a failure to record is logged and the next failure tries again.
    """
    if failures is None:
        return
    for message, args, fix in failures_and_fixes(messages):
        tool = str(message.extra.get("name", ""))
        try:
            if fix is None:  # without the keyword: a recorder need not know about fixes
                record_id = failures.record_failure(tool, message.content, args, session_id)
            else:
                record_id = failures.record_failure(
                    tool, message.content, args, session_id, resolution=fix
                )
        except Exception:
            log.warning("could not remember the failure of %s", tool, exc_info=True)
            continue
        if record_id is not None:
            outcome = "failed" if fix is None else "resolved"
            detail = {"record_id": record_id, "tool": tool, "outcome": outcome, "auto": True}
            store.archive.add_event(session_id, message.time_ns, "error_memory", detail)


def failures_and_fixes(messages: Sequence[Message]) -> list[Failure]:
    """Each tool error of a turn, its arguments, and those of the first later call
    of the same tool that worked (None when none did).

    Worked: no error, a non-empty result, and a call that really ran (not
    a repeat, not one skipped because the user stopped the turn).
    """

    def args_of(message: Message) -> dict[str, Any]:
        arguments = message.extra.get("arguments")
        return dict(arguments) if isinstance(arguments, dict) else {}

    def worked(message: Message) -> bool:
        extra = message.extra
        skipped = message.content.startswith("not run:")
        return not (extra.get("is_error") or extra.get("empty") or skipped)

    calls = [m for m in messages if m.role == "tool" and not m.extra.get("repeated")]
    found: list[Failure] = []
    for place, message in enumerate(calls):
        if not message.extra.get("is_error"):
            continue
        name = message.extra.get("name")
        later = (m for m in calls[place + 1 :] if m.extra.get("name") == name and worked(m))
        fix = next(later, None)
        found.append((message, args_of(message), None if fix is None else args_of(fix)))
    return found
