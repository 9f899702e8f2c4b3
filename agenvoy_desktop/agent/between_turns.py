"""Reading ahead between turns: when a local model reads the start of the next prompt.

What is read is worked out elsewhere: the next turn's prompt start by
``agent/read_ahead.py``, a typed draft's first prompt by the turn's own
preparation (``_Turn.first_prompt``).  :class:`ReadingAhead` keeps what
decides when: the session read for (the one last talked in or opened), the
draft being typed, the summary passes running, and the tools each session's
last turn was first offered.  The agent asks for a read
(``Agent.read_ahead_later``) after each answer and each summary pass, when
the window shows another session and when the person pauses typing; none
starts while a turn runs or a summary pass rewrites the head.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from agenvoy_desktop.agent.agent_config import AgentParts
from agenvoy_desktop.agent.policy import unplanned_tools
from agenvoy_desktop.agent.read_ahead import (
    DRAFT_MESSAGE_ID,
    PromptStart,
    ReadsAhead,
    next_prompt_start,
)
from agenvoy_desktop.core.messages import Message

log = logging.getLogger(__name__)


class ReadingAhead:
    """When one agent's local model reads ahead, and what it was last told to read for."""

    def __init__(
        self,
        agent: AgentParts,
        *,
        later: Callable[[Coroutine[Any, Any, None]], None],
        turn_running: Callable[[], bool],
        draft_prompt: Callable[[str, Message], Awaitable[PromptStart]],
    ) -> None:
        self.agent = agent
        self._later = later
        """Runs a read off the turn's path (the agent's background tasks)."""
        self._turn_running = turn_running
        self._draft_prompt = draft_prompt
        """The first prompt a turn would send for a draft (``_Turn.first_prompt``); raises
        when it cannot be built."""
        self._offered: dict[str, list[str]] = {}
        """The tools each session's last turn was first offered (assumed for its next)."""
        self._last_session: str | None = None
        """The session whose next prompt is read ahead: the one last talked in or opened."""
        self._draft: tuple[str, str] | None = None
        """The session and message being typed (:meth:`draft_changed`), until a turn starts."""
        self._draft_seq = 0
        """Bumped by every draft, turn and forgetting (:meth:`forgotten`): a prompt prepared
        before the latest of them is dropped, not read."""
        self._passes = 0
        """Summary passes running (:meth:`summary_running`): nothing is read ahead meanwhile."""

    def read_later(self, session_id: str | None = None) -> None:
        """Let a local model read the next turn's prompt start of the session last talked in.

        Asked for (``Agent.read_ahead_later``) after each turn and after each
        summary pass (which changes the head); *session_id* None means the
        last one talked in, any other is left alone.  A draft being typed
        (:meth:`draft_changed`) is read instead, in its own session; nothing
        while a turn or a summary pass runs.  See :mod:`agent.read_ahead`.
        Returns at once; a model that cannot read ahead (a server, a test
        double) is left alone.
        """
        model = self.agent.model
        if not isinstance(model, ReadsAhead) or self._busy():
            return
        if not self.agent.config.read_ahead:
            return
        if self._draft is not None:  # what is being typed: its prompt starts with the head
            self._later(self._read_draft(*self._draft, self._draft_seq))
            return
        session_id = session_id or self._last_session
        if session_id is None or session_id != self._last_session:
            return
        self._later(self._read_next(session_id, model, self._draft_seq))

    def opened(self, session_id: str) -> bool:
        """The person opened *session_id* (the window shows it); whether to read its prompt
        start now.

        Its next turn is the likely one: at the app's start and after a switch,
        the first turn there would otherwise read its whole prompt (600–1,000
        tokens deep in a session, 6–10 s on 2 cores without AVX-512) before its
        first token.  A model still loading reads nothing; a read asked for once
        it has loaded does.  The session last talked in was read after its turn
        (the window shows it again then): False.
        """
        if session_id == self._last_session:
            return False
        self._last_session = session_id
        return True

    def draft_changed(self, session_id: str, text: str) -> bool:
        """The person paused typing *text* (empty: nothing) as the next message of
        *session_id*; whether there is a draft to read now.

        A local model reads the first prompt that message would get —
        head, history, turn note with what recall finds for it, the message
        itself — so a turn sent with these words evaluates only the answer's
        opening, and one sent with more words only what changed: the note and
        message that stay after a read-ahead (150-250 tokens, ~2 s on 2 cores
        without AVX-512) are read while the person types.  Nothing is stored,
        shown or asked of the model but the reading, which gives way to every
        real call; none starts while a turn runs (the turn's end reads the
        draft then).
        """
        text = text.strip()
        self._draft = (session_id, text) if text else None
        self._draft_seq += 1
        return self._draft is not None

    def summary_running(self, running: bool) -> None:
        """A summary pass started (True) or ended: it rewrites the head every prompt starts
        with, so nothing is read while one runs (a draft typed then would be read with the
        old head, between the pass's own calls)."""
        self._passes = max(0, self._passes + (1 if running else -1))

    def stop(self) -> None:
        """Call off a read-ahead (a turn starts, or a summary pass is about to change the head
        it reads); what it read stays in the cache."""
        model = self.agent.model
        if isinstance(model, ReadsAhead):
            model.stop_reading_ahead()

    def forgotten(self) -> None:
        """The model forgot every prompt it read (a reset, a remove or a message delete
        ran): a prompt prepared from the store before then may hold the words that went,
        so it is dropped; the next read prepares its prompt again."""
        self._draft_seq += 1

    def turn_starts(self) -> None:
        """A turn starts: the draft being typed was sent (a read of it now is dropped)."""
        self._draft, self._draft_seq = None, self._draft_seq + 1

    def turn_answered(self, session_id: str, offered: Sequence[str]) -> None:
        """A turn in *session_id* answered, its first round offered *offered*: that session's
        next prompt is the one to read, assumed to be offered the same tools."""
        self._offered[session_id] = list(offered)
        self._last_session = session_id

    def _busy(self) -> bool:
        """A turn or a summary pass runs: what would be read may change under it."""
        return self._turn_running() or bool(self._passes)

    async def _read_next(self, session_id: str, model: ReadsAhead, seq: int) -> None:
        """Read *session_id*'s next prompt start (``read_ahead.next_prompt_start``), unless a
        draft, a turn or a summary pass came meanwhile, or another session was opened."""
        agent = self.agent
        config = agent.config
        offered = self._offered.get(session_id)
        if offered is None:  # not talked in since the start (the session's tools off: none)
            offered = unplanned_tools(agent.tools, small_model=config.small_model)
        start = await agent.storage.run(
            next_prompt_start,
            agent.store,
            session_id,
            default_prompt=config.system_prompt,
            summary_text=agent.summary_text,
            window=(config.window_messages, config.window_step),
            offered=offered,
            specs=agent.tools.specs(),
            recalls=config.small_model and config.proactive_recall,
        )
        if start is None or session_id != self._last_session or seq != self._draft_seq:
            return  # nothing to read, another session opened, or prepared before a change
        if self._draft is None and not self._busy():  # else read later
            model.read_ahead(start.messages, tools=start.tools or None)

    async def _read_draft(self, session_id: str, text: str, seq: int) -> None:
        """Read the first prompt a turn would send for *text* (see :meth:`draft_changed`)."""
        model = self.agent.model
        if not isinstance(model, ReadsAhead):
            return
        draft = Message(DRAFT_MESSAGE_ID, "user", text, self.agent.store.clock())
        try:
            start = await self._draft_prompt(session_id, draft)
        except Exception:  # reading ahead is a saving, never a condition
            log.debug("could not prepare the prompt of a draft", exc_info=True)
            return
        if seq == self._draft_seq and not self._busy():
            model.read_ahead(start.messages, tools=start.tools or None)
