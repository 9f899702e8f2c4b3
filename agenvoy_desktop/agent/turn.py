"""One assistant turn: persist, assemble, stream, call tools, learn from failures.

Order of a turn (DESIGN.md §1, issue 4):

1. the user message is written to every memory layer first, so a crash or a
   cancel never loses what the user typed;
2. each model round sees system prompt + rolling summary + the last-N window
   (which now ends with that user message and any tool traffic of this turn);
3. tool calls and their results are persisted as tool traffic (the timeline
   shows them, search skips them by default);
4. a failed tool call (error or empty result) looks up the error memory, and
   the hint is stored with the tool result and shown to the model next round;
5. the answer is persisted; a cancelled answer is kept, marked interrupted.

Events go to ``on_event`` as they happen (the CLI prints them, the window
turns them into signals).  Stopping — the ``stop`` event or cancelling the
task — always leaves a consistent history: every user message is followed
by an assistant message.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agenvoy_desktop.agent.context import (
    DEFAULT_SYSTEM_PROMPT,
    build_messages,
    tool_results_note,
)
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolOutcome, ToolRegistry
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import (
    ChatFinished,
    ChatMessage,
    ChatModel,
    TextDelta,
    ToolCallRequest,
)
from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 5
ROUNDS_EXHAUSTED = "(I stopped after {rounds} rounds of tool calls without reaching an answer.)"

current_session: contextvars.ContextVar[str] = contextvars.ContextVar("current_session")
"""The session whose turn is running (tools such as search_chat_history read it)."""


class HintSource(Protocol):
    """Looks up error-memory advice for a failed call (runs on the storage thread)."""

    def hint_for_failure(self, tool: str, error_text: str) -> tuple[str, list[int]]:
        """The hint text for the model ("" when nothing is known) and the record ids."""
        ...


# -- events --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MessageSaved:
    """A message reached history.json and the archive."""

    message: Message


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    text: str


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
    saved: list[Message] = field(default_factory=list)


TurnEvent = MessageSaved | AnswerDelta | ToolCallStarted | ToolCallFinished | TurnResult
EventSink = Callable[[TurnEvent], None]


@dataclass(slots=True)
class AgentConfig:
    window_messages: int = 16
    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_answer_tokens: int | None = None
    temperature: float | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


class Agent:
    """Runs turns over one profile's memory with one chat model."""

    def __init__(
        self,
        storage: Storage,
        store: MemoryStore,
        model: ChatModel,
        tools: ToolRegistry,
        *,
        summary_text: Callable[[str], str] = lambda _sid: "",
        hints: HintSource | None = None,
        config: AgentConfig | None = None,
        after_turn: Callable[[str], None] | None = None,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.storage = storage
        self.store = store
        self.model = model
        self.tools = tools
        self.summary_text = summary_text
        self.hints = hints
        self.config = config or AgentConfig()
        self.after_turn = after_turn
        self.settle = settle
        """Storage-thread work after each answer (database checkpoints), off the turn's path."""
        self._background: set[asyncio.Task[None]] = set()

    # -- public ------------------------------------------------------------
    def embed_later(self, session_id: str, messages: Sequence[Message]) -> None:
        """Embed a finished turn's messages on the storage thread, after the answer.

        Embedding four messages costs tens of ms on a laptop CPU; nothing in
        the turn needs the vectors (the window is never searched), so the
        answer does not wait for them.  A crash before this runs is repaired
        by start-up reconciliation, which embeds what lacks a vector.  Then
        :attr:`settle` runs (database checkpoints), also while the user reads.
        """
        if not messages:
            return
        task = asyncio.get_running_loop().create_task(
            self.storage.run(self._after_answer, session_id, list(messages))
        )
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _after_answer(self, session_id: str, messages: list[Message]) -> None:
        """Storage thread: the work of :meth:`embed_later`."""
        try:
            self.store.index_messages(session_id, messages)
        finally:
            if self.settle is not None:
                self.settle()

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("after-answer work failed (embedding is retried at start-up)", exc_info=exc)

    async def idle(self) -> None:
        """Wait for background work of finished turns (embedding); for shutdown and tests."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    async def context_messages(
        self, session_id: str, *, inline_results: Sequence[Message] = ()
    ) -> list[ChatMessage]:
        """Exactly what the model would receive next (the inspector's Context tab).

        ``inline_results`` is this turn's tool traffic, moved from the message
        list into the system prompt for the answer round (see
        :func:`context.tool_results_note`).
        """
        window, summary = await self.storage.run(self._window_and_summary, session_id)
        note = ""
        if inline_results:
            moved = {m.id for m in inline_results}
            window = [m for m in window if m.id not in moved]
            note = tool_results_note(inline_results)
        return build_messages(
            base_prompt=self.config.system_prompt,
            summary_text=summary,
            window=window,
            now_ns=self.store.clock(),
            extra_system=note,
        )

    def _window_and_summary(self, session_id: str) -> tuple[list[Message], str]:
        """Storage thread: one hop for both (each hop costs a thread hand-over)."""
        window = self.store.window(session_id, self.config.window_messages)
        return window, self.summary_text(session_id)

    async def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        on_event: EventSink | None = None,
        stop: asyncio.Event | None = None,
    ) -> TurnResult:
        """Run one turn; see the module docstring."""
        turn = _Turn(self, session_id, on_event or (lambda _e: None), stop or asyncio.Event())
        token = current_session.set(session_id)
        try:
            result = await turn.run(text)
        finally:
            current_session.reset(token)
        if self.after_turn is not None:
            try:
                self.after_turn(session_id)
            except Exception:  # a summary trigger must never fail a finished turn
                log.warning("after-turn hook failed", exc_info=True)
        return result


def _call_key(call: ToolCallRequest) -> str:
    return call.name + "\0" + json.dumps(call.arguments, sort_keys=True, default=str)


class _Turn:
    """State of one running turn (kept apart so Agent stays reentrant)."""

    def __init__(self, agent: Agent, session_id: str, emit: EventSink, stop: asyncio.Event):
        self.agent = agent
        self.sid = session_id
        self.emit = emit
        self.stop = stop
        self.result = TurnResult(session_id)
        self.partial: list[str] = []
        self.offered: list[str] = []
        self.seen_calls: dict[str, ToolOutcome] = {}
        self.repeats: set[str] = set()
        self.force_answer = False
        self.answered = False

    async def run(self, text: str) -> TurnResult:
        started = time.perf_counter()
        store = self.agent.store
        await self._save(store.new_message("user", text))
        try:
            await self._rounds()
        except asyncio.CancelledError:
            await asyncio.shield(self._finish_interrupted())
            raise
        finally:
            self.result.total_s = time.perf_counter() - started
            self.agent.embed_later(self.sid, [*self.result.saved])
        self.emit(self.result)
        return self.result

    async def _rounds(self) -> None:
        config = self.agent.config
        for round_no in range(config.max_rounds):
            self.result.rounds = round_no + 1
            last_round = round_no == config.max_rounds - 1 or self.force_answer
            text, calls, finish = await self._model_round(tools=not last_round)
            if self.stop.is_set() or (finish is not None and finish.finish_reason == "cancelled"):
                await self._finish_interrupted()
                return
            if not calls or last_round:
                if calls and not text.strip():
                    text = ROUNDS_EXHAUSTED.format(rounds=self.result.rounds)
                await self._save_answer(text, interrupted=False)
                return
            await self._run_calls(text, calls)
            if self.stop.is_set():
                await self._finish_interrupted()
                return

    async def _model_round(
        self, *, tools: bool
    ) -> tuple[str, list[ToolCallRequest], ChatFinished | None]:
        agent = self.agent
        inline = [m for m in self.result.saved if m.is_tool_traffic] if not tools else []
        messages = await agent.context_messages(self.sid, inline_results=inline)
        specs = agent.tools.specs() if tools else []
        self.offered = [s["function"]["name"] for s in specs]
        calls: list[ToolCallRequest] = []
        finish: ChatFinished | None = None
        self.partial = []
        began = time.perf_counter()
        try:
            async for event in agent.model.chat(
                messages,
                tools=specs or None,
                max_tokens=agent.config.max_answer_tokens,
                temperature=agent.config.temperature,
                stop=self.stop,
            ):
                if isinstance(event, TextDelta):
                    self.partial.append(event.text)
                    self.emit(AnswerDelta(event.text))
                elif isinstance(event, ToolCallRequest):
                    calls.append(event)
                elif isinstance(event, ChatFinished):
                    finish = event
        finally:
            self.result.model_s += time.perf_counter() - began
        if finish is not None:
            self.result.trimmed_messages = max(
                self.result.trimmed_messages, finish.trimmed_messages
            )
        return "".join(self.partial), calls, finish

    async def _run_calls(self, text: str, calls: Sequence[ToolCallRequest]) -> None:
        store = self.agent.store
        calls = list({_call_key(c): c for c in calls}.values())  # a small model repeats itself
        stored_calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in calls
        ]
        await self._save(store.new_message("assistant", text, tool_calls=stored_calls))
        self.partial = []
        for call in calls:
            if self.stop.is_set():
                outcome = ToolOutcome(call.name, call.arguments, "not run: the user stopped")
                await self._save_tool_result(call, outcome)
                continue
            self.emit(ToolCallStarted(call.id, call.name, call.arguments))
            key = _call_key(call)
            if call.error:
                outcome = ToolOutcome(
                    call.name, call.arguments, f"could not read the tool call: {call.error}", True
                )
            elif key in self.seen_calls:
                outcome = self._repeated(call, self.seen_calls[key])
                self.repeats.add(call.id)
            else:
                outcome = await self.agent.tools.call(call.name, call.arguments, self.offered)
                self.seen_calls[key] = outcome
            self.result.tool_calls += 1
            await self._save_tool_result(call, outcome)

    def _repeated(self, call: ToolCallRequest, first: ToolOutcome) -> ToolOutcome:
        """A call identical to an earlier one in this turn is not run again.

        Small models loop on the same call; the second time they get a
        pointer to the first result and the next round offers no tools, so
        the model has to answer with what it has.
        """
        self.force_answer = True
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
        message, hint = await self.agent.storage.run(
            self._store_tool_result, call, outcome, repeated
        )
        self._saved(message)
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
        store = self.agent.store
        message = store.new_message("tool", outcome.content, **extra)
        store.append(self.sid, [message], embed=False)
        if hint:
            detail = {"tool": call.name, "record_ids": hint_ids, "message_id": message.id}
            try:
                store.archive.add_event(self.sid, message.time_ns, "error_hint", detail)
            except Exception:  # the hint is in the stored message; the event only marks it
                log.warning("could not log the error-memory hint event", exc_info=True)
        return message, hint

    def _hint(self, outcome: ToolOutcome) -> tuple[str, list[int]]:
        """Storage thread: error-memory advice for a failed call ("" when none or on error)."""
        source = self.agent.hints
        if source is None or not outcome.failed:
            return "", []
        error_text = outcome.content if outcome.is_error else f"empty result: {outcome.content}"
        try:
            return source.hint_for_failure(outcome.name, error_text)
        except Exception:  # advice is optional; the turn goes on without it
            log.warning("error-memory lookup failed", exc_info=True)
            return "", []

    async def _save_answer(self, text: str, *, interrupted: bool) -> None:
        extra: dict[str, Any] = {"interrupted": True} if interrupted else {}
        await self._save(self.agent.store.new_message("assistant", text, **extra))
        self.result.answer = text
        self.result.interrupted = interrupted
        self.answered = True

    async def _finish_interrupted(self) -> None:
        if not self.answered:
            await self._save_answer("".join(self.partial), interrupted=True)

    async def _save(self, message: Message) -> None:
        store = self.agent.store
        await self.agent.storage.run(store.append, self.sid, [message], embed=False)
        self._saved(message)

    def _saved(self, message: Message) -> None:
        """A message reached the store: part of this turn, and the UI hears of it."""
        self.result.saved.append(message)
        self.emit(MessageSaved(message))
