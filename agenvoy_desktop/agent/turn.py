"""One assistant turn: persist, recall, plan, model rounds, tool calls, check, finish.

The stages of a turn, in order, and where each lives:

1. **Store the message** (here, ``_Turn.run``): the user message is written
   to every memory layer first, so a crash or a cancel never loses what the
   user typed;
2. **Memory lookup** (``agent/turn_memory.py``: ``MemoryLookup.look``):
   proactive recall, a hybrid search of the message over all sessions
   (``agent/recall.py``), and the document passages, at the same time; what
   clears the relevance floor goes into a labelled block of dated lines,
   and the timeline records it; a question about time, a total or a
   difference gets the result worked out by code at the block's end
   (``agent/worked_out.py``);
3. **Plan** (``agent/policy.py``, applied in ``_Turn._prepare``): a small
   model is offered only the tools the message needs, for at most two tool
   rounds;
4. **Model rounds** (here, ``_Turn._rounds``): each round sees the head
   (system prompt + rolling summary), the window's history (a last-N window
   that moves in steps, so its prefix stays in the KV cache), then the turn
   note (clock, tool results, recall block) just before that user message
   and any tool traffic of this turn (``agent/context.py``); a small
   model's round that only "calls" made-up tools named like words of an
   answer is dropped and the model asked for the answer without tools;
5. **Tool calls** (``agent/turn_tools.py``: ``ToolCallRunner``): the calls
   and their results are persisted as tool traffic (the timeline shows
   them, search skips them by default); a failed call (error or empty
   result) looks up the error memory, and the hint is stored with the tool
   result and shown to the model next round;
6. **Answer check** (``agent/turn_check.py``: ``AnswerChecker.check``): the
   final answer is checked against what memory showed the model
   (``agent/answer_check.py``): a failure retracts what was streamed, asks
   once more with a sharper instruction, and else quotes the remembered line;
7. **Finish** (here, ``_Turn._save_answer``): the answer is persisted with
   its document sources; a cancelled answer is kept, marked interrupted.
   Off the user's path afterwards (``Agent.embed_later``) the turn's
   messages are embedded and its failed tool calls go to the error memory.

Events (``agent/turn_events.py``) go to ``on_event`` as they happen (the CLI
prints them, the window turns them into signals).  Stopping — the ``stop``
event or cancelling the task — always leaves a consistent history: every
user message is followed by an assistant message.
"""

from __future__ import annotations

import asyncio
import contextvars
import difflib
import logging
import re
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agenvoy_desktop.agent import answer_check, not_remembered
from agenvoy_desktop.agent.answer_loops import LoopWatch
from agenvoy_desktop.agent.context import (
    DEFAULT_SYSTEM_PROMPT,
    WINDOW_STEP,
    Clock,
    build_messages,
    tool_guidance,
    tool_results_note,
)
from agenvoy_desktop.agent.document_recall import DocumentPassages, with_sources
from agenvoy_desktop.agent.not_remembered import (
    Example,
    asks_for_own_fact,
    example_for,
    example_from_json,
    example_messages,
    example_to_json,
    window_may_answer,
)
from agenvoy_desktop.agent.policy import (
    DOCUMENT_SEARCH_TOOL,
    FULL,
    TIME_TOOLS,
    TurnPlan,
    clock_in_prompt,
    filter_specs,
    plan_turn,
)
from agenvoy_desktop.agent.read_ahead import (
    DRAFT_MESSAGE_ID,
    PromptStart,
    ReadsAhead,
    next_prompt_start,
)
from agenvoy_desktop.agent.recall import (
    DEFAULT_FLOOR,
    RecallBlock,
    RecallFloor,
    asks_about_assistant,
    content_terms,
    gathers,
)
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.told_in_window import told_in_window
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn_check import AnswerChecker, Shown
from agenvoy_desktop.agent.turn_events import (
    AnswerDelta,
    AnswerRetracted,
    EventSink,
    MessageSaved,
    RecallInjected,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
    TurnResult,
    TurnStatus,
)
from agenvoy_desktop.agent.turn_memory import LookupSettings, MemoryLookup
from agenvoy_desktop.agent.turn_tools import HintSource, ToolCallRunner
from agenvoy_desktop.agent.voice import Voice, VoiceStream
from agenvoy_desktop.agent.worked_out import WorkedOut
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.history import take_window
from agenvoy_desktop.core.message_edit import question_to_answer
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import (
    ChatFinished,
    ChatMessage,
    ChatModel,
    PromptRead,
    TextDelta,
    ToolCallRequest,
)
from agenvoy_desktop.core.session_settings import (
    DEFAULT_SETTINGS,
    SessionSettings,
    session_settings,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary_facts import Fact
from agenvoy_desktop.llm.endpoints import answered_by

# The events (``agent/turn_events.py``) and the error memory's hint source
# (``agent/turn_tools.py``) are named here too: the window, the CLI and the tools import
# them from the turn.
__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "FACT_ANSWER_TOKENS",
    "ROUNDS_EXHAUSTED",
    "SECOND_TRY_TOKENS",
    "Agent",
    "AgentConfig",
    "AnswerDelta",
    "AnswerRetracted",
    "EventSink",
    "FailureRecorder",
    "HintSource",
    "MessageSaved",
    "RecallInjected",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnEvent",
    "TurnResult",
    "TurnStatus",
    "current_session",
    "last_recall",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 5
ROUNDS_EXHAUSTED = "(I stopped after {rounds} rounds of tool calls without reaching an answer.)"
FACT_ANSWER_TOKENS = 200
"""A small model's answer to a question about what the user told it, with the lines in its
prompt, needs a sentence or a short list; the starter wrote essays of 1,000 tokens around
"How many days did I spend at workshops?" (≈ 70 s on 2 cores) and lost the number in them."""
SECOND_TRY_TOKENS = 120
"""The second try after a failed check answers one line (``agent/answer_check.py``)."""

current_session: contextvars.ContextVar[str] = contextvars.ContextVar("current_session")
"""The session whose turn is running (tools such as search_chat_history read it)."""


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


@dataclass(slots=True)
class AgentConfig:
    window_messages: int = 16
    window_step: int = WINDOW_STEP
    """The window's start moves this many messages at a time (``take_window``; 0: every turn)."""
    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_answer_tokens: int | None = None
    temperature: float | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    small_model: bool = False
    """Shape turns for a small model (``agent/policy.py``); from the model's GGUF profile."""
    proactive_recall: bool = True
    recall_floor: RecallFloor = DEFAULT_FLOOR
    read_ahead: bool = True
    """A local model reads the next prompt's start after an answer and a typed message's
    prompt while idle (:meth:`Agent.read_ahead_later`); off, every turn reads its own."""


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
        summary_facts: Callable[[str], Sequence[Fact]] = lambda _sid: (),
        hints: HintSource | None = None,
        failures: FailureRecorder | None = None,
        config: AgentConfig | None = None,
        after_turn: Callable[[str], None] | None = None,
        settle: Callable[[], None] | None = None,
        documents: Callable[[str], DocumentPassages] | None = None,
    ) -> None:
        self.storage = storage
        self.store = store
        self.model = model
        self.tools = tools
        self.summary_text = summary_text
        self.summary_facts = summary_facts
        """The summary's facts of a session (storage thread): lines the answer is checked
        against, as remembered lines are (a fact folded away is still a fact)."""
        self.hints = hints
        self.failures = failures
        """Records this turn's failed tool calls after the answer: a small model is not
        offered ``remember_error``, so the loop remembers for it."""
        self.config = config or AgentConfig()
        self.after_turn = after_turn
        self.settle = settle
        """Storage-thread work after each answer (database checkpoints), off the turn's path."""
        self.documents = documents
        """Passages of the user's documents for a message (worker thread; see
        :mod:`agent.document_recall`), or None without collections."""
        self._background: set[asyncio.Task[None]] = set()
        self._offered: dict[str, list[str]] = {}
        """The tools each session's last turn was first offered (assumed for its next)."""
        self._last_session: str | None = None
        """The session whose next prompt is read ahead: the one last talked in or opened."""
        self._turns_running = 0
        self._no_turns = asyncio.Event()
        self._no_turns.set()
        self._draft: tuple[str, str] | None = None
        """The session and message being typed (:meth:`draft_changed`), until a turn starts."""
        self._draft_seq = 0
        """Bumped by every draft and turn: a draft's prompt read for an older one is dropped."""
        self._passes = 0
        """Summary passes running (:meth:`summary_running`): nothing is read ahead meanwhile."""

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
        """Storage thread: the work of :meth:`embed_later`, then failures are remembered."""
        try:
            self.store.index_messages(session_id, messages)
        finally:
            try:
                self._remember_failures(session_id, messages)
            finally:
                if self.settle is not None:
                    self.settle()

    def _remember_failures(self, session_id: str, messages: Sequence[Message]) -> None:
        """Storage thread: every tool error of the turn goes to the error memory.

        Off the answer's path (an error record is embedded: milliseconds the
        user would wait for).  An error that a later call of the same tool
        in this turn got past is remembered as resolved, with that call as
        the fix; one that never recovered, as failed.  A repeated call adds
        nothing; a failure to record is logged and the next failure tries again.
        """
        if self.failures is None:
            return
        for message, args, fix in self._failures_and_fixes(messages):
            tool = str(message.extra.get("name", ""))
            try:
                if fix is None:  # without the keyword: a recorder need not know about fixes
                    record_id = self.failures.record_failure(
                        tool, message.content, args, session_id
                    )
                else:
                    record_id = self.failures.record_failure(
                        tool, message.content, args, session_id, resolution=fix
                    )
            except Exception:
                log.warning("could not remember the failure of %s", tool, exc_info=True)
                continue
            if record_id is not None:
                outcome = "failed" if fix is None else "resolved"
                detail = {"record_id": record_id, "tool": tool, "outcome": outcome, "auto": True}
                self.store.archive.add_event(session_id, message.time_ns, "error_memory", detail)

    @staticmethod
    def _failures_and_fixes(
        messages: Sequence[Message],
    ) -> list[tuple[Message, dict[str, Any], dict[str, Any] | None]]:
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
        found: list[tuple[Message, dict[str, Any], dict[str, Any] | None]] = []
        for place, message in enumerate(calls):
            if not message.extra.get("is_error"):
                continue
            name = message.extra.get("name")
            later = (m for m in calls[place + 1 :] if m.extra.get("name") == name and worked(m))
            fix = next(later, None)
            found.append((message, args_of(message), None if fix is None else args_of(fix)))
        return found

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("after-answer work failed (embedding is retried at start-up)", exc_info=exc)

    async def turns_done(self) -> None:
        """Return once no turn is running (a model switch closes the old model then, so a
        turn finishes on the model it started with)."""
        await self._no_turns.wait()

    async def idle(self) -> None:
        """Wait for background work of finished turns (embedding); for shutdown and tests."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    async def context_messages(
        self,
        session_id: str,
        *,
        upcoming: Message | None = None,
        inline_results: Sequence[Message] = (),
        offered: Sequence[str] | None = None,
        recall: str | None = None,
        example: Example | None = None,
        settings: SessionSettings | None = None,
        clock: Clock | None = None,
    ) -> list[ChatMessage]:
        """Exactly what the model would receive next (the inspector's Context tab).

        ``upcoming`` is a message not stored yet that ends the window (a draft's
        prompt, :meth:`draft_changed`).  ``inline_results`` is this turn's tool
        traffic, moved from the message list into the turn note for the answer round (see
        :func:`context.tool_results_note`; the layout: :mod:`agent.context`).
        ``offered`` names the tools of this round (None: every available tool,
        or none for a small model, whose tools are chosen per message).
        ``recall`` is this turn's recall block and ``example`` its made-up
        exchange (:mod:`agent.not_remembered`); a None recall shows the block
        and the exchange sent with the session's last turn while that turn is
        still in the window.  ``settings`` are the session's own (persona,
        tools on or off); None reads them in the same storage hop.  ``clock``
        is this turn's (:func:`~agenvoy_desktop.agent.policy.clock_in_prompt`);
        None shows what a message without a time cue would get.
        """
        window, summary, (last_recall, last_example), stored = await self.storage.run(
            self._prompt_parts, session_id, recall is None, upcoming
        )
        if recall is None:
            recall, example = last_recall, last_example
        settings = stored if settings is None else settings
        note = ""
        if inline_results:
            moved = {m.id for m in inline_results}
            window = [m for m in window if m.id not in moved]
            note = tool_results_note(inline_results)
        if offered is None:
            offered = self._unplanned_tools() if settings.tools else []
        return build_messages(
            base_prompt=settings.base_prompt(self.config.system_prompt),
            summary_text=summary,
            window=window,
            now_ns=self.store.clock(),
            extra_system=note,
            guidance=tool_guidance(offered),
            recall=recall,
            examples=example_messages(example),
            clock=clock_in_prompt("", small_model=self.config.small_model)
            if clock is None
            else clock,
        )

    def _prompt_parts(
        self, session_id: str, with_last_recall: bool, upcoming: Message | None = None
    ) -> tuple[list[Message], str, tuple[str, Example | None], SessionSettings]:
        """Storage thread, one hop: window (ending with *upcoming*, if any), summary,
        (optionally) last recall, session settings."""
        size, step = self.config.window_messages, self.config.window_step
        if upcoming is None:
            window = self.store.window(session_id, size, step)
        else:
            window = take_window([*self.store.history(session_id).messages, upcoming], size, step)
        settings = session_settings(self.store, session_id)
        recall: tuple[str, Example | None] = ("", None)
        if with_last_recall and self.config.proactive_recall and settings.tools:
            recall = last_recall(self.store, session_id, window)
        return window, self.summary_text(session_id), recall, settings

    async def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        on_event: EventSink | None = None,
        stop: asyncio.Event | None = None,
        asked: Message | None = None,
    ) -> TurnResult:
        """Run one turn; see the module docstring.

        *asked*: answer this stored user message instead of saving *text* as a
        new one (see :meth:`regenerate`).  Message actions on the session are
        refused while the turn runs (the store's turn lock).
        """
        turn = _Turn(self, session_id, on_event or _ignore, stop or asyncio.Event())
        token = current_session.set(session_id)
        self._turns_running += 1
        self._no_turns.clear()
        self._draft, self._draft_seq = None, self._draft_seq + 1
        self.stop_reading_ahead()  # what it read stays; it must not resume between rounds
        try:
            with self.store.turns.turn(session_id):
                result = await turn.run(text, asked)
        finally:
            self._turns_running -= 1
            if not self._turns_running:
                self._no_turns.set()
            current_session.reset(token)
        if self.after_turn is not None:
            try:
                self.after_turn(session_id)
            except Exception:  # a summary trigger must never fail a finished turn
                log.warning("after-turn hook failed", exc_info=True)
        self._offered[session_id] = list(result.tools_offered)
        self._last_session = session_id
        self.read_ahead_later(session_id)
        return result

    def read_ahead_later(self, session_id: str | None = None) -> None:
        """Let a local model read the next turn's prompt start of the session last talked in.

        Called after each turn and after each summary pass (which changes the
        head); *session_id* None means the last one talked in, any other is
        left alone.  A draft being typed (:meth:`draft_changed`) is read
        instead, in its own session; nothing while a turn or a summary pass
        runs.  See :mod:`agent.read_ahead`.  Returns at once; a model that
        cannot read ahead (a server, a test double) is left alone.
        """
        if not isinstance(self.model, ReadsAhead) or self._turns_running or self._passes:
            return
        if not self.config.read_ahead:
            return
        if self._draft is not None:  # what is being typed: its prompt starts with the head
            self._later(self._read_draft(*self._draft, self._draft_seq))
            return
        session_id = session_id or self._last_session
        if session_id is None or session_id != self._last_session:
            return
        self._later(self._read_ahead(session_id, self.model))

    def session_opened(self, session_id: str) -> None:
        """The person opened *session_id* (the window shows it): its next turn is the likely
        one, so its prompt start is read now — at the app's start and after a switch, the
        first turn there would otherwise read its whole prompt (600–1,000 tokens deep in a
        session, 6–10 s on 2 cores without AVX-512) before its first token.  A model still
        loading reads nothing; :meth:`read_ahead_later` once it has loaded does.  The
        session last talked in was read after its turn (the window shows it again then)."""
        if session_id == self._last_session:
            return
        self._last_session = session_id
        self.read_ahead_later(session_id)

    def draft_changed(self, session_id: str, text: str) -> None:
        """The person paused typing *text* (empty: nothing) as the next message of *session_id*.

        A local model reads the first prompt that message would get now —
        head, history, turn note with what recall finds for it, the message
        itself — so a turn sent with these words evaluates only the answer's
        opening, and one sent with more words only what changed: the note and
        message that stay after a read-ahead (150-250 tokens, ~2 s on 2 cores
        without AVX-512) are read while the person types.  Nothing is stored,
        shown or asked of the model but the reading, which gives way to every
        real call; none starts while a turn runs (the turn's end reads the
        draft then).  Returns at once.
        """
        text = text.strip()
        self._draft = (session_id, text) if text else None
        self._draft_seq += 1
        if self._draft is not None:
            self.read_ahead_later()

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run *work* off the turn's path (awaited by :meth:`idle`)."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def summary_running(self, running: bool) -> None:
        """A summary pass started (True) or ended: it rewrites the head every prompt starts
        with, so nothing is read meanwhile (a draft typed then would be read with the old
        head, between the pass's own calls); once no pass runs, the next prompt is read."""
        self._passes = max(0, self._passes + (1 if running else -1))
        if running:
            self.stop_reading_ahead()
        else:
            self.read_ahead_later()

    def stop_reading_ahead(self) -> None:
        """Call off a read-ahead (a turn starts, or a summary pass is about to change the head
        it reads); what it read stays in the cache."""
        if isinstance(self.model, ReadsAhead):
            self.model.stop_reading_ahead()

    def _unplanned_tools(self) -> list[str]:
        """The tools a first round is offered before its message is known: none for a small
        model (its tools depend on the message), every tool otherwise."""
        if self.config.small_model:
            return []
        return [str(spec["function"]["name"]) for spec in self.tools.specs()]

    async def _read_ahead(self, session_id: str, model: ReadsAhead) -> None:
        offered = self._offered.get(session_id)
        if offered is None:  # not talked in since the start (the session's tools off: none)
            offered = self._unplanned_tools()
        start = await self.storage.run(
            next_prompt_start,
            self.store,
            session_id,
            default_prompt=self.config.system_prompt,
            summary_text=self.summary_text,
            window=(self.config.window_messages, self.config.window_step),
            offered=offered,
            specs=self.tools.specs(),
            recalls=self.config.small_model and self.config.proactive_recall,
        )
        if start is None or session_id != self._last_session:
            return
        if self._draft is None and not (self._turns_running or self._passes):  # else read later
            model.read_ahead(start.messages, tools=start.tools or None)

    async def _read_draft(self, session_id: str, text: str, seq: int) -> None:
        """Read the first prompt a turn would send for *text* (see :meth:`draft_changed`)."""
        model = self.model
        if not isinstance(model, ReadsAhead):
            return
        draft = Message(DRAFT_MESSAGE_ID, "user", text, self.store.clock())
        token = current_session.set(session_id)
        try:
            turn = _Turn(self, session_id, _ignore, asyncio.Event(), drafting=True)
            start = await turn.first_prompt(draft)
        except Exception:  # reading ahead is a saving, never a condition
            log.debug("could not prepare the prompt of a draft", exc_info=True)
            return
        finally:
            current_session.reset(token)
        if seq == self._draft_seq and not (self._turns_running or self._passes):
            model.read_ahead(start.messages, tools=start.tools or None)

    async def regenerate(
        self,
        session_id: str,
        user_message_id: str,
        *,
        on_event: EventSink | None = None,
        stop: asyncio.Event | None = None,
    ) -> TurnResult:
        """Answer an existing user message again (after ``regenerate_truncate``).

        No new user message is saved; otherwise exactly :meth:`run_turn`.  The
        message must end the session's history (else a readable error).
        """
        user = await self.storage.run(question_to_answer, self.store, session_id, user_message_id)
        return await self.run_turn(
            session_id, user.content, on_event=on_event, stop=stop, asked=user
        )


def last_recall(
    store: MemoryStore, session_id: str, window: Sequence[Message]
) -> tuple[str, Example | None]:
    """Storage thread: the newest turn's recall block and example, if its message is in *window*."""
    event = store.archive.last_event(session_id, "recall")
    if event is None:
        return "", None
    detail = event[1]
    if detail.get("message_id") not in {m.id for m in window}:
        return "", None
    shown = example_from_json(detail.get("example"))
    return str(detail.get("text", "")), shown


_TOOL_LIKE = re.compile(r"[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)+")
"""A name shaped like a tool's (``read_file``), not like words of an answer ("Sintra")."""
_NAME_PART = re.compile(r"[_.-]")
_WORD = re.compile(r"[^\W\d_]+")


def named_after_message(name: str, message: str, offered: Sequence[str]) -> bool:
    """A made-up tool *name* is the topic of the user's *message*, not a misspelt tool: at
    least half of its parts of four letters or more are words of the message, and no
    *offered* tool is spelt close to it (``search_history`` is a misspelt
    ``search_chat_history`` even when the message says "search my history")."""
    parts = [p for p in _NAME_PART.split(name.casefold()) if len(p) >= 4]
    if not parts or difflib.get_close_matches(name, offered, n=1, cutoff=0.6):
        return False
    said = {w.casefold() for w in _WORD.findall(message)}
    return 2 * sum(p in said for p in parts) >= len(parts)


_SENTENCE_END = re.compile(r"[.!?。！？](?=\s|$)|\n")


def _to_last_sentence(text: str) -> str:
    """*text* up to its last sentence end, if that keeps most of it (else *text*)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    cut = ends[-1] if ends else 0
    return text[:cut].rstrip() if cut >= len(text) * 0.4 else text


def _asks_for_a_fact(text: str) -> bool:
    """A question for something the user told (or the assistant said), not for advice."""
    return (
        asks_for_own_fact(text)
        or answer_check.asks_yes_no(text)
        or asks_about_assistant(text)
        or gathers(text)
    )


def _writing_seconds(finish: ChatFinished, first_text_at: float | None) -> float:
    """How long the model spent writing its answer (the tokens/s under it).

    The model's own clock where it has one: from its first token to the
    end.  The window's first text can come much later — an answer that
    starts like a tool call is held back until it is clearly text — and
    timing from there once showed "508 tokens/s" on a 2-core machine.
    """
    if finish.first_token_s is not None and finish.duration_s > finish.first_token_s:
        return finish.duration_s - finish.first_token_s
    return time.perf_counter() - first_text_at if first_text_at is not None else 0.0


class _Turn:
    """State of one running turn (kept apart so Agent stays reentrant)."""

    def __init__(
        self,
        agent: Agent,
        session_id: str,
        emit: EventSink,
        stop: asyncio.Event,
        *,
        drafting: bool = False,
    ) -> None:
        self.agent = agent
        self.sid = session_id
        self.draft: Message | None = None
        """The message being typed whose first prompt is read ahead (:meth:`first_prompt`):
        not stored, so the window is taken with it; nothing is logged or asked of the model."""
        self.emit = emit
        self.stop = stop
        self.result = TurnResult(session_id)
        self.partial: list[str] = []
        self.loop_cut: int | None = None
        """Where the round's answer began to repeat itself (``agent/answer_loops.py``)."""
        self.offered: list[str] = []
        self.force_answer = False
        """A round only "called" made-up tools: the next one offers none."""
        self.answered = False
        self.recall = RecallBlock()
        self.passages = DocumentPassages()
        self.facts: tuple[Fact, ...] = ()
        """The summary's facts (read before the first round): checked like remembered lines."""
        self.never_said: list[str] = []
        """Words of the question the user never said (``agent/never_said.py``)."""
        self.voice: Voice | None = None
        """How the answer is turned to face the user (``agent/voice.py``); set with recall."""
        self.worked: WorkedOut | None = None
        """The result code worked out for a question about time (``agent/date_answers.py``)."""
        self.example: Example | None = None
        """The "I don't know" exchange this turn shows the model (``agent/not_remembered.py``)."""
        self.question = ""
        self.asked_id = ""
        """The id of the message this turn answers."""
        self.plan: TurnPlan = FULL
        self.clock: Clock = "time"
        self.settings: SessionSettings = DEFAULT_SETTINGS
        """The session's own settings, read once before the first round."""
        self.started = time.perf_counter()
        config = agent.config
        self.lookup = MemoryLookup(
            store=agent.store,
            storage=agent.storage,
            model=agent.model,
            documents=agent.documents,
            settings=LookupSettings(
                config.small_model, config.recall_floor, config.window_messages, config.window_step
            ),
            session_id=session_id,
            stop=stop,
            translate=not drafting,
        )
        """The turn's first stage: what memory holds for the message (``agent/turn_memory``)."""
        self.tool_calls = ToolCallRunner(
            store=agent.store,
            storage=agent.storage,
            tools=agent.tools,
            hints=agent.hints,
            session_id=session_id,
            stop=stop,
            emit=emit,
            saved=self._saved,
        )
        """The rounds' tool calls, run and stored (``agent/turn_tools``)."""

    async def run(self, text: str, asked: Message | None = None) -> TurnResult:
        self.started = started = time.perf_counter()
        store = self.agent.store
        self.question = text
        user = asked if asked is not None else store.new_message("user", text)
        self.asked_id = user.id
        if asked is None:  # a regeneration answers a message already stored
            await self._save(user)
        try:
            await self._prepare(user)
            await self._rounds()
        except asyncio.CancelledError:
            await asyncio.shield(self._finish_interrupted())
            raise
        finally:
            self.result.total_s = time.perf_counter() - started
            self.agent.embed_later(self.sid, [*self.result.saved])
        self.emit(self.result)
        return self.result

    async def first_prompt(self, draft: Message) -> PromptStart:
        """The first round's prompt and tools for *draft*, as :meth:`run` would send them."""
        self.draft, self.question = draft, draft.content
        await self._prepare(draft)
        specs = self._round_specs(0, self._tool_rounds())
        self.offered = [str(s["function"]["name"]) for s in specs]
        return PromptStart(await self._round_messages(bool(specs), None), specs)

    async def _prepare(self, user: Message) -> None:
        """Before the first round: proactive recall, then the turn's plan (tools, rounds).

        The conversation memory (storage thread) and the documents (a worker
        thread) are searched at the same time.
        """
        config = self.agent.config
        self.settings = await self.agent.storage.run(session_settings, self.agent.store, self.sid)
        self.facts = tuple(await self.agent.storage.run(self.agent.summary_facts, self.sid))
        if config.proactive_recall and self.settings.tools:
            if self.lookup.wants_recall(user):  # "Looking through your memory…" only then
                self.emit(TurnStatus("recall"))
            began = time.perf_counter()
            found = await self.lookup.look(user)
            self.result.recall_s = time.perf_counter() - began
            self.recall, self.passages = found.recall, found.passages
            self.worked, self.never_said = found.worked, found.never_said
            self.result.searched_as, self.result.searched_in = found.searched_as, found.searched_in
        self.plan = plan_turn(
            user.content, small_model=config.small_model, recalled=bool(self.recall.items)
        )
        text = self.recall_text
        if not text and await self._shows_not_remembered(user):
            self.example = example_for(user.content)
            self.result.not_remembered = True
        if (text or self.example is not None) and self.draft is None:
            await self.agent.storage.run(self._log_recall, user, text)
        if self.recall.items or self.facts:
            self.voice = self._voice_for(user.content)
        if text:
            self.result.recall_text = text
            self.result.recall_ids = self.recall.message_ids
            self.emit(RecallInjected(text, self.recall.message_ids, self.passages.citations))
        self.clock = clock_in_prompt(user.content, small_model=config.small_model)
        if self.passages.text and self.plan.tools is not None:  # the passages are in the prompt
            self.plan = replace(self.plan, tools=self.plan.tools - {DOCUMENT_SEARCH_TOOL})
        worked = self.worked
        if worked is not None and (worked.values or worked.words) and self.plan.tools is not None:
            # the block ends with the result: asked again, the starter fed date_calc
            # "December 17th" and spent a minute on calls that failed
            self.plan = replace(self.plan, tools=self.plan.tools - TIME_TOOLS)
        if not self.settings.tools:  # plain chat: the one round answers, with no tools
            self.plan = replace(self.plan, tools=frozenset(), max_tool_rounds=0)

    def _voice_for(self, question: str) -> Voice:
        said = [item.text for item in self.recall.items if item.role == "user"]
        said += [n.text for item in self.recall.items for n in item.neighbours if n.role == "user"]
        said += [fact.text for fact in self.facts if fact.role == "user"]
        return Voice.for_turn(question, said, about_assistant=asks_about_assistant(question))

    def _in_voice(self, text: str) -> str:
        """A model's answer as said to the user ("you", not "the user"; ``agent/voice.py``)."""
        return text if self.voice is None else self.voice.rewrite(text)

    @property
    def recall_text(self) -> str:
        """What proactive recall adds to the system prompt: remembered messages, then passages."""
        return "\n\n".join(t for t in (self.recall.text, self.passages.text) if t)

    async def _shows_not_remembered(self, user: Message) -> bool:
        """Whether this turn shows the model how to say "I don't know" (see the module).

        Called once recall found nothing; the window is read only for a
        question about the user's own life.
        """
        config = self.agent.config
        if not (config.small_model and config.proactive_recall and self.settings.tools):
            return False
        if not not_remembered.SHOW_EXAMPLE:
            return False
        if self.plan.tools is None:
            return False
        if not asks_for_own_fact(user.content):
            return False
        window = await self.agent.storage.run(
            self.agent.store.window, self.sid, config.window_messages, config.window_step
        )
        return not window_may_answer(content_terms(user.content), window)

    def _log_recall(self, user: Message, text: str) -> None:
        """Storage thread: the timeline's record of what recall put in the prompt."""
        detail: dict[str, object] = {
            "message_id": user.id,
            "text": text,
            "ids": self.recall.message_ids,
            "citations": self.passages.citations,
        }
        if self.example is not None:
            detail["example"] = example_to_json(self.example)
        if self.result.searched_as:
            detail["searched_as"] = self.result.searched_as
            detail["searched_in"] = self.result.searched_in
        try:
            self.agent.store.archive.add_event(self.sid, user.time_ns, "recall", detail)
        except Exception:  # the block is still sent; only the record of it is missing
            log.warning("could not log the recall event", exc_info=True)

    def _tool_rounds(self) -> int:
        """Rounds that may call tools; one more round always remains to answer."""
        rounds = self.agent.config.max_rounds - 1
        if self.plan.max_tool_rounds is not None:
            rounds = min(rounds, self.plan.max_tool_rounds)
        return max(rounds, 0)

    async def _rounds(self) -> None:
        """The model rounds: tool rounds while the plan allows, then the answer, checked,
        cited and stored."""
        tool_rounds = self._tool_rounds()
        for round_no in range(tool_rounds + 1):
            self.result.rounds = round_no + 1
            specs = self._round_specs(round_no, tool_rounds)
            last_round = not specs
            text, calls, finish = await self._model_round(specs, first=round_no == 0)
            cancelled = finish is not None and finish.finish_reason == "cancelled"
            if self.stop.is_set() or (cancelled and self.loop_cut is None):
                await self._finish_interrupted()
                return
            if calls and not last_round and self._answer_in_disguise(text, calls):
                log.info(
                    "small model called tools it was not offered %s; asking for the answer",
                    [c.name for c in calls],
                )
                self.force_answer = True  # nothing of the round is kept: it said nothing
                continue
            if not calls or last_round:
                if calls and not text.strip():
                    text = ROUNDS_EXHAUSTED.format(rounds=self.result.rounds)
                else:
                    text = await self._checked(text)
                    if self.stop.is_set():
                        await self._finish_interrupted()
                        return
                    text = self._cited(text)
                await self._save_answer(text, interrupted=False)
                return
            await self._run_calls(text, calls)
            if self.stop.is_set():
                await self._finish_interrupted()
                return

    def _round_specs(self, round_no: int, tool_rounds: int) -> list[dict[str, Any]]:
        """The tools round *round_no* offers: none once the rounds that may call are over."""
        may_call = round_no < tool_rounds and not self._answer_now()
        return filter_specs(self.agent.tools.specs(), self.plan) if may_call else []

    def _answer_now(self) -> bool:
        """The next round offers no tools: a round of made-up calls, or a call repeated
        within this turn (``agent/turn_tools.py``)."""
        return self.force_answer or self.tool_calls.answer_now

    async def _run_calls(self, text: str, calls: Sequence[ToolCallRequest]) -> None:
        """The tool-call stage (``agent/turn_tools.py``): the round's text is stored with the
        calls it asks for, so a stop from here on keeps none of it as the answer."""
        request, chosen = self.tool_calls.requested(text, calls, self.plan.max_calls_per_round)
        await self._save(request)
        self.partial = []
        ran = await self.tool_calls.run(chosen, self.offered)
        self.result.tool_calls += ran

    async def _checked(self, text: str) -> str:
        """The answer-check stage (``agent/turn_check.py``): the answer the turn keeps."""
        config = self.agent.config
        window = await self.agent.storage.run(
            self.agent.store.window, self.sid, config.window_messages, config.window_step
        )
        checker = AnswerChecker(
            self._shown(told_in_window(window, self.asked_id)),
            tool_names=self.agent.tools.names(),
            in_voice=self._in_voice,
            ask_again=self._ask_again,
            emit=self.emit,
            stop=self.stop,
        )
        checked = await checker.check(text)
        self.result.checked = checked.problem
        self.result.replaced += checked.replaced
        self.result.answer_from = checked.answer_from
        return checked.answer

    def _shown(self, window: Sequence[answer_check.Evidence]) -> Shown:
        """What this turn showed the model, for the answer check; *window*: what the user
        told in the conversation's window."""
        return Shown(
            self.question,
            self.recall,
            self.passages,
            self.facts,
            self.worked,
            self.never_said,
            example=self.example is not None,
            search_found=self.tool_calls.search_found(),
            tool_results=self.tool_calls.any_worked(),
            window=tuple(window),
        )

    async def _ask_again(self, verdict: answer_check.Verdict) -> tuple[str, bool]:
        """A second round after a failed check: no tools, the verdict's instruction."""
        second, calls, _finish = await self._model_round([], first=False, instruction=verdict)
        return second, bool(calls)

    async def _model_round(
        self,
        specs: Sequence[dict[str, Any]],
        *,
        first: bool,
        instruction: answer_check.Verdict | None = None,
    ) -> tuple[str, list[ToolCallRequest], ChatFinished | None]:
        agent = self.agent
        self.offered = [str(s["function"]["name"]) for s in specs]
        if first:
            self.result.tools_offered = list(self.offered)
        messages = await self._round_messages(bool(specs), instruction)
        calls: list[ToolCallRequest] = []
        finish: ChatFinished | None = None
        self.partial = []
        self.loop_cut = None
        # A small model's answer that starts over is ended where it does: the model gets
        # its own stop, which the user's Stop also sets.
        loops = LoopWatch() if agent.config.small_model else None
        round_stop = asyncio.Event()
        relay = asyncio.ensure_future(_relay(self.stop, round_stop))
        began = time.perf_counter()
        wrote: float | None = None
        voiced = VoiceStream(self.voice)  # what the user sees is said to them
        # A model still loading (at start, or for the first time on this machine, when it
        # also calibrates for ~13 s) says so, rather than "Thinking…" all that while.
        self.emit(TurnStatus("thinking" if getattr(agent.model, "loaded", True) else "loading"))
        try:
            async for event in agent.model.chat(
                messages,
                tools=list(specs) or None,
                max_tokens=self._answer_tokens(second_try=instruction is not None),
                temperature=agent.config.temperature,
                stop=round_stop,
                avoid_openings=self.plan.avoid_openings,
            ):
                if isinstance(event, TextDelta):
                    if wrote is None:
                        wrote = time.perf_counter()
                        self.emit(TurnStatus("writing"))
                    self._take_text(event.text, voiced, loops, round_stop)
                elif isinstance(event, ToolCallRequest):
                    calls.append(event)
                elif isinstance(event, ChatFinished):
                    finish = event
                elif isinstance(event, PromptRead) and wrote is None and event.total > 0:
                    self.emit(TurnStatus("thinking", str(round(100 * event.done / event.total))))
            if held := voiced.flush():
                self.emit(AnswerDelta(held))
        except KnownError:
            # The model failed mid-answer (a server gone, a dropped stream): keep what it
            # wrote, marked interrupted, then let the caller show the one-line reason.
            if self.partial:
                await asyncio.shield(self._finish_interrupted(failed=True))
            raise
        finally:
            relay.cancel()
            self.result.model_s += time.perf_counter() - began
        if finish is not None:
            self._counted(finish, wrote)
        return self._round_text(finish), calls, finish

    def _take_text(
        self, text: str, voiced: VoiceStream, loops: LoopWatch | None, round_stop: asyncio.Event
    ) -> None:
        """A piece of the round's answer: kept, shown (in the user's voice), watched for loops."""
        if self.result.first_token_s is None:
            self.result.first_token_s = time.perf_counter() - self.started
        self.partial.append(text)
        if shown := voiced.feed(text):
            self.emit(AnswerDelta(shown))
        if loops is not None and (cut := loops.feed(text)) is not None:
            self.loop_cut = cut
            round_stop.set()

    def _answer_tokens(self, *, second_try: bool) -> int | None:
        """The round's answer limit: the app's, or less for a small model's answer to a
        question about what the user told it (see :data:`FACT_ANSWER_TOKENS`)."""
        limit = self.agent.config.max_answer_tokens
        if not self.agent.config.small_model:
            return limit
        if second_try:
            cap = SECOND_TRY_TOKENS
        elif self.recall.items and _asks_for_a_fact(self.question):
            cap = FACT_ANSWER_TOKENS
        else:
            return limit
        return cap if limit is None else min(limit, cap)

    async def _round_messages(
        self, with_tools: bool, instruction: answer_check.Verdict | None
    ) -> list[ChatMessage]:
        """The round's prompt: the answer round gets this turn's tool results inline, a
        second try after a failed check its sharper instruction after the recall block."""
        inline = [m for m in self.result.saved if m.is_tool_traffic] if not with_tools else []
        recall = self.recall_text
        if instruction is not None and instruction.instruction:
            recall = f"{recall}\n\n{instruction.instruction}".strip()
        return await self.agent.context_messages(
            self.sid,
            upcoming=self.draft,
            inline_results=inline,
            offered=self.offered,
            recall=recall,
            example=None if self.tool_calls.search_found() else self.example,
            settings=self.settings,
            clock=self.clock,
        )

    def _counted(self, finish: ChatFinished, wrote: float | None) -> None:
        """The round's token counts and times, from the stream's end."""
        self.result.answer_tokens = finish.completion_tokens
        self.result.prompt_tokens = finish.prompt_tokens
        self.result.answer_s = _writing_seconds(finish, wrote)
        self.result.trimmed_messages = max(self.result.trimmed_messages, finish.trimmed_messages)

    def _round_text(self, finish: ChatFinished | None = None) -> str:
        """What the round wrote, up to where it began to repeat itself; a small model's
        answer cut by its token limit ends at its last whole sentence."""
        text = "".join(self.partial)
        if (
            finish is not None
            and finish.finish_reason == "length"
            and self.agent.config.small_model
        ):
            return _to_last_sentence(text)
        if self.loop_cut is None:
            return text
        log.info("the answer began to repeat itself: ended after %d characters", self.loop_cut)
        self.result.ended_at_loop = True
        return text[: self.loop_cut].rstrip()

    def _answer_in_disguise(self, text: str, calls: Sequence[ToolCallRequest]) -> bool:
        """A small model's round that is only calls to tools it was never offered.

        The starter writes its answer as a call to a made-up tool
        (``{"name": "Our Lisbon plan", "arguments": {"date": …}}``); told
        "unknown tool", it wrote the error back as JSON, and that became the
        answer.  Such a round is dropped and the next one offers no tools,
        so the model answers in words from the same context (nothing of the
        dropped round is stored or shown).  A misspelt tool (``read_clock``:
        a snake_case name) is not a disguise: it hears "unknown tool …;
        available tools: …" and may call the right one — unless it is named
        after the user's own words and like no tool offered
        (``theme_park_weekend`` for "I am planning another theme park
        weekend…": told "unknown tool", the starter called it again and then
        the clock, three rounds and 60–98 s on an AMD EPYC).
        """
        return (
            self.agent.config.small_model
            and not text.strip()
            and all(
                call.name not in self.offered
                and (
                    not _TOOL_LIKE.fullmatch(call.name)
                    or named_after_message(call.name, self.question, self.offered)
                )
                for call in calls
            )
        )

    def _cited(self, text: str) -> str:
        """The answer with the document sources it drew on; the added line streams too."""
        cited = with_sources(text, self.question, self.passages)
        if cited != text and cited.startswith(text):
            self.emit(AnswerDelta(cited[len(text) :]))
        return cited

    async def _save_answer(self, text: str, *, interrupted: bool, failed: bool = False) -> None:
        extra: dict[str, Any] = {"interrupted": True} if interrupted else {}
        if failed:  # cut off by a model error, not by the user (the next prompt says which)
            extra["interrupted_by"] = "error"
        extra["answered_by"] = answered_by(self.agent.model)  # the Context tab names it
        await self._save(self.agent.store.new_message("assistant", text, **extra))
        self.result.answer = text
        self.result.interrupted = interrupted
        self.answered = True

    async def _finish_interrupted(self, *, failed: bool = False) -> None:
        if not self.answered:
            text = self._in_voice("".join(self.partial))
            await self._save_answer(text, interrupted=True, failed=failed)

    async def _save(self, message: Message) -> None:
        store = self.agent.store
        await self.agent.storage.run(store.append, self.sid, [message], embed=False)
        self._saved(message)

    def _saved(self, message: Message) -> None:
        """A message reached the store: part of this turn, and the UI hears of it."""
        self.result.saved.append(message)
        self.emit(MessageSaved(message))


def _ignore(_event: TurnEvent) -> None:
    """The event sink of a turn nobody watches (a draft's, or one run without a sink)."""


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    """Set *target* once *source* is set (until cancelled)."""
    await source.wait()
    target.set()
