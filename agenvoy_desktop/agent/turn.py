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
   and any tool traffic of this turn (``agent/context.py``, built by
   ``agent/session_prompt.py``); a small model's round that only "calls"
   made-up tools named like words of an answer is dropped and the model
   asked for the answer without tools (``agent/made_up_calls.py``);
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

Around its turns the agent (:class:`Agent`; settings: ``agent/agent_config.py``) does
what is no stage of one: after the answer, off the user's path, it embeds the turn's
messages and remembers its failed tool calls (``agent/after_answer.py``); between turns
it has a local model read the next prompt's start, or a draft's (``agent/between_turns.py``).

Events (``agent/turn_events.py``) go to ``on_event`` as they happen (the CLI
prints them, the window turns them into signals).  Stopping — the ``stop``
event or cancelling the task — always leaves a consistent history: every
user message is followed by an assistant message.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agenvoy_desktop.agent import answer_check, not_remembered
from agenvoy_desktop.agent.after_answer import Background, FailureRecorder, after_answer
from agenvoy_desktop.agent.agent_config import DEFAULT_MAX_ROUNDS, AgentConfig
from agenvoy_desktop.agent.answer_loops import LoopWatch
from agenvoy_desktop.agent.between_turns import ReadingAhead
from agenvoy_desktop.agent.context import Clock
from agenvoy_desktop.agent.document_recall import DocumentPassages, with_sources
from agenvoy_desktop.agent.made_up_calls import answer_in_disguise
from agenvoy_desktop.agent.not_remembered import (
    Example,
    asks_for_own_fact,
    example_for,
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
from agenvoy_desktop.agent.read_ahead import PromptStart
from agenvoy_desktop.agent.recall import (
    RecallBlock,
    asks_about_assistant,
    content_terms,
    gathers,
)
from agenvoy_desktop.agent.session_prompt import last_recall, next_messages
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

# The events (``agent/turn_events.py``), the error memory's hint source
# (``agent/turn_tools.py``) and failure recorder (``agent/after_answer.py``), the agent's
# settings (``agent/agent_config.py``) and the last turn's recall (``agent/session_prompt.py``)
# are named here too: the window, the CLI and the tools import them from the turn.
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

ROUNDS_EXHAUSTED = "(I stopped after {rounds} rounds of tool calls without reaching an answer.)"
FACT_ANSWER_TOKENS = 200
"""A small model's answer to a question about what the user told it, with the lines in its
prompt, needs a sentence or a short list; the starter wrote essays of 1,000 tokens around
"How many days did I spend at workshops?" (≈ 70 s on 2 cores) and lost the number in them."""
SECOND_TRY_TOKENS = 120
"""The second try after a failed check answers one line (``agent/answer_check.py``)."""

current_session: contextvars.ContextVar[str] = contextvars.ContextVar("current_session")
"""The session whose turn is running (tools such as search_chat_history read it)."""


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
        self._background = Background()
        self._turns_running = 0
        self._no_turns = asyncio.Event()
        self._no_turns.set()
        self._reading = ReadingAhead(
            self,
            later=self._background.later,
            turn_running=lambda: bool(self._turns_running),
            draft_prompt=self._draft_prompt,
        )
        """When the model reads the next prompt ahead (``agent/between_turns.py``)."""

    # -- public ------------------------------------------------------------
    def embed_later(self, session_id: str, messages: Sequence[Message]) -> None:
        """Embed a finished turn's messages and remember its failed tool calls on the storage
        thread, after the answer; then :attr:`settle` runs (``agent/after_answer.py``)."""
        if not messages:
            return
        self._background.later(
            self.storage.run(
                after_answer,
                self.store,
                session_id,
                list(messages),
                failures=self.failures,
                settle=self.settle,
            )
        )

    async def turns_done(self) -> None:
        """Return once no turn is running (a model switch closes the old model then, so a
        turn finishes on the model it started with)."""
        await self._no_turns.wait()

    async def idle(self) -> None:
        """Wait for background work of finished turns (embedding); for shutdown and tests."""
        await self._background.idle()

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
        """Exactly what the model would receive next: each round of a turn sends it, the
        inspector's Context tab shows it (``agent/session_prompt.py``)."""
        return await next_messages(
            self,
            session_id,
            upcoming=upcoming,
            inline_results=inline_results,
            offered=offered,
            recall=recall,
            example=example,
            settings=settings,
            clock=clock,
        )

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
        self._reading.turn_starts()
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
        self._reading.turn_answered(session_id, result.tools_offered)
        self.read_ahead_later(session_id)
        return result

    def read_ahead_later(self, session_id: str | None = None) -> None:
        """Let a local model read the next turn's prompt start of the session last talked in
        (*session_id* None), or a draft's (``ReadingAhead.read_later``)."""
        self._reading.read_later(session_id)

    def session_opened(self, session_id: str) -> None:
        """The window shows *session_id*: its prompt start is read now, unless it is the one
        last talked in (``ReadingAhead.opened``)."""
        if self._reading.opened(session_id):
            self.read_ahead_later(session_id)

    def draft_changed(self, session_id: str, text: str) -> None:
        """The person paused typing *text* as the next message of *session_id*: the first
        prompt it would get is read (``ReadingAhead.draft_changed``).  Returns at once."""
        if self._reading.draft_changed(session_id, text):
            self.read_ahead_later()

    def summary_running(self, running: bool) -> None:
        """A summary pass started (True) or ended: it rewrites the head, so a read is called
        off, and once no pass runs the next prompt is read (``ReadingAhead.summary_running``)."""
        self._reading.summary_running(running)
        if running:
            self.stop_reading_ahead()
        else:
            self.read_ahead_later()

    def stop_reading_ahead(self) -> None:
        """Call off a read-ahead; what it read stays in the cache (``ReadingAhead.stop``)."""
        self._reading.stop()

    def prompts_forgotten(self) -> None:
        """The model forgot every prompt it read (``AppServices.forget_prompts``): a read
        prepared before then is dropped, and the next prompt's start is read again from
        the store as it is now (``ReadingAhead.forgotten``)."""
        self._reading.forgotten()
        self.read_ahead_later()

    async def _draft_prompt(self, session_id: str, draft: Message) -> PromptStart:
        """The first prompt a turn would send for *draft*, prepared as the turn prepares it
        (reading ahead: :meth:`draft_changed`)."""
        token = current_session.set(session_id)
        try:
            turn = _Turn(self, session_id, _ignore, asyncio.Event(), drafting=True)
            return await turn.first_prompt(draft)
        finally:
            current_session.reset(token)

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
        """A small model's round that is only calls to tools it was never offered, under names
        that are words (``agent/made_up_calls.py``): dropped, and the next round offers none."""
        return self.agent.config.small_model and answer_in_disguise(
            text, calls, offered=self.offered, question=self.question
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
