"""A turn's tool-call stage: the calls a model round asked for, run and stored.

A round that asks for tools is stored as an assistant message carrying the
calls (:meth:`ToolCallRunner.requested`); then each call runs through
``agent/tools.py`` and its result is stored as tool traffic, with the error
memory's advice for a failed call (:meth:`ToolCallRunner.run`).  Small
models repeat themselves, so a call the round already listed is dropped,
and one this turn already made is not run again: the model hears where its
result is, and the next round offers no tools (:attr:`ToolCallRunner.answer_now`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agenvoy_desktop.agent.policy import SEARCH_TOOL
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolOutcome, ToolRegistry
from agenvoy_desktop.agent.turn_events import (
    EventSink,
    ToolCallFinished,
    ToolCallStarted,
    TurnStatus,
)
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ToolCallRequest
from agenvoy_desktop.core.quoted_results import QUOTED_KEY
from agenvoy_desktop.core.search import NO_MATCHES
from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)


class HintSource(Protocol):
    """Looks up error-memory advice for a failed call (runs on the storage thread)."""

    def hint_for_failure(self, tool: str, error_text: str) -> tuple[str, list[int]]:
        """The hint text for the model ("" when nothing is known) and the record ids."""
        ...


class ToolCallRunner:
    """Runs the tool calls of one turn's rounds and stores each result as it comes."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        storage: Storage,
        tools: ToolRegistry,
        hints: HintSource | None,
        session_id: str,
        stop: asyncio.Event,
        emit: EventSink,
        saved: Callable[[Message], None],
    ) -> None:
        self.store = store
        self.storage = storage
        self.tools = tools
        self.hints = hints
        self.sid = session_id
        self.stop = stop
        self.emit = emit
        self.saved = saved
        """Told of each stored tool result (the turn keeps it and the UI hears of it)."""
        self.seen: dict[str, ToolOutcome] = {}
        """This turn's calls that ran, by name and arguments, with what they gave."""
        self.repeats: set[str] = set()
        self.answer_now = False
        """A call repeated one this turn already made: the next round offers no tools."""

    def requested(
        self, text: str, calls: Sequence[ToolCallRequest], limit: int | None
    ) -> tuple[Message, list[ToolCallRequest]]:
        """The round's message asking for *calls*, and the calls to run: each once (a small
        model repeats itself), at most *limit* of them (the turn's plan)."""
        chosen = list({_call_key(c): c for c in calls}.values())
        if limit is not None and len(chosen) > limit:
            log.info("%d tool calls in one round; running the first %d", len(chosen), limit)
            chosen = chosen[:limit]
        stored_calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in chosen
        ]
        return self.store.new_message("assistant", text, tool_calls=stored_calls), chosen

    async def run(self, calls: Sequence[ToolCallRequest], offered: Sequence[str]) -> int:
        """Run *calls* in order, storing each result; how many ran (a stop skips the rest)."""
        ran = 0
        for call in calls:
            if self.stop.is_set():
                outcome = ToolOutcome(call.name, call.arguments, "not run: the user stopped")
                await self._save_tool_result(call, outcome)
                continue
            self.emit(TurnStatus("tool", call.name))
            self.emit(ToolCallStarted(call.id, call.name, call.arguments))
            outcome = await self._outcome(call, offered)
            ran += 1
            await self._save_tool_result(call, outcome)
        return ran

    def search_found(self) -> bool:
        """This turn's history search found something."""
        return any(
            outcome.name == SEARCH_TOOL and not outcome.is_error and outcome.content != NO_MATCHES
            for outcome in self.seen.values()
        )

    def any_worked(self) -> bool:
        """A call of this turn gave a result (no error, not empty)."""
        return any(not outcome.failed for outcome in self.seen.values())

    async def _outcome(self, call: ToolCallRequest, offered: Sequence[str]) -> ToolOutcome:
        """What *call* gives: its result, or why it did not run."""
        key = _call_key(call)
        if call.error:
            return ToolOutcome(
                call.name, call.arguments, f"could not read the tool call: {call.error}", True
            )
        if key in self.seen:
            outcome = self._repeated(call, self.seen[key])
            self.repeats.add(call.id)
            return outcome
        outcome = await self.tools.call(call.name, call.arguments, offered)
        self.seen[key] = outcome
        return outcome

    def _repeated(self, call: ToolCallRequest, first: ToolOutcome) -> ToolOutcome:
        """A call identical to an earlier one in this turn is not run again.

        Small models loop on the same call; the second time they get a
        pointer to the first result and the next round offers no tools, so
        the model has to answer with what it has.
        """
        self.answer_now = True
        if first.failed:
            text = (
                f"this exact call already failed in this turn ({first.content[:200]}). "
                "Do not repeat it: answer the user with what you know."
            )
        else:
            text = "this exact call was already made in this turn; its result is above. Answer now."
        return ToolOutcome(call.name, call.arguments, text, is_error=first.failed)

    async def _save_tool_result(self, call: ToolCallRequest, outcome: ToolOutcome) -> None:
        """Look up error-memory advice, then store the result with it and log the hint.

        One storage job for all three: the lookup, the append and the
        ``error_hint`` event each used to be a thread hand-over of their own.
        """
        repeated = call.id in self.repeats
        message, hint = await self.storage.run(self._store_tool_result, call, outcome, repeated)
        self.saved(message)
        self.emit(ToolCallFinished(call.id, outcome, hint))

    def _store_tool_result(
        self, call: ToolCallRequest, outcome: ToolOutcome, repeated: bool
    ) -> tuple[Message, str]:
        """Storage thread: the work of :meth:`_save_tool_result`."""
        hint, hint_ids = self._hint(outcome)
        extra: dict[str, Any] = {
            "tool_call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "duration_s": round(outcome.duration_s, 4),
        }
        if outcome.is_error:
            extra["is_error"] = True
        if outcome.empty:
            extra["empty"] = True
        if hint:
            extra["error_hint"] = hint
            extra["error_hint_ids"] = hint_ids
        if repeated:
            extra["repeated"] = True
        if outcome.quoted:
            extra[QUOTED_KEY] = list(outcome.quoted)
        message = self.store.new_message("tool", outcome.content, **extra)
        self.store.append(self.sid, [message], embed=False)
        if hint:
            self._log_hint(call, hint_ids, message)
        return message, hint

    def _log_hint(self, call: ToolCallRequest, hint_ids: list[int], message: Message) -> None:
        """Storage thread: the timeline's mark that error-memory advice went with *message*."""
        detail = {"tool": call.name, "record_ids": hint_ids, "message_id": message.id}
        try:
            self.store.archive.add_event(self.sid, message.time_ns, "error_hint", detail)
        except Exception:  # the hint is in the stored message; the event only marks it
            log.warning("could not log the error-memory hint event", exc_info=True)

    def _hint(self, outcome: ToolOutcome) -> tuple[str, list[int]]:
        """Storage thread: error-memory advice for a failed call ("" when none or on error)."""
        source = self.hints
        if source is None or not outcome.failed:
            return "", []
        error_text = outcome.content if outcome.is_error else f"empty result: {outcome.content}"
        try:
            return source.hint_for_failure(outcome.name, error_text)
        except Exception:  # advice is optional; the turn goes on without it
            log.warning("error-memory lookup failed", exc_info=True)
            return "", []


def _call_key(call: ToolCallRequest) -> str:
    """A call's identity within a turn: its tool's name and its arguments."""
    return call.name + "\0" + json.dumps(call.arguments, sort_keys=True, default=str)
