"""The Context tab's reading: exactly what the model receives on a session's next turn.

The messages come from ``agent.context_messages`` — the same call a turn
makes — so the system prompt (with the rolling summary), the window (N
messages and up to ``window_step`` - 1 more: its start moves in steps) and
the turn note before its last user message (the current time, the recall
block) are the real thing, with the session's own persona and tools switch
(read once and handed to the agent, so the view and its labels agree).
Tokens are counted with the chat model's own tokenizer; without a chat model
the messages are still built (same functions, same settings) and only the
count is missing.

It also says which model will answer and which one answered last: each
stored answer records its model, backend and (for an endpoint) address, so
a conversation that moved between a local GGUF and a server shows which
one wrote what.  A server that cannot be reached for counting leaves the
count out with its reason, never the view.

The recall block of the session's last turn is shown as it was sent, less
the lines of remembered messages that are gone since: deleted, or in a
session removed or reset (undo window open or closed).  The view says how
many lines it left out (:attr:`ContextView.recall_left_out`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT, WINDOW_STEP, build_messages
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import KnownError, one_line
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.recall_record import without_lines
from agenvoy_desktop.core.search import Withheld
from agenvoy_desktop.core.session_settings import (
    DEFAULT_SETTINGS,
    SessionSettings,
    SettingsReading,
    read_settings_file,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import prompt_text
from agenvoy_desktop.llm.endpoints import answered_by, describe_answerer, is_loopback

MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers a chat template adds around each message (ChatML: ~4 tokens)."""


@dataclass(slots=True)
class ContextView:
    """One reading of the next turn's prompt, with its token accounting."""

    messages: list[ChatMessage]
    window_messages: int
    window_step: int = 0
    """The window's start moves this many messages at a time (0: every turn)."""
    model_name: str | None = None
    context_size: int | None = None
    answer_reserve: int = 0
    tokens: list[int] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    """Names of the tools offered with the prompt (their schemas go in too)."""
    tool_tokens: int = 0
    exact_total: int | None = None
    """The model's own count of the templated prompt, when it can give one."""
    small_model: bool = False
    """Tools are chosen per message (the small-model turn), so none are listed."""
    settings: SessionSettings = DEFAULT_SETTINGS
    """The session's persona and tools switch the messages were built with."""
    settings_problem: str = ""
    """Why the session's settings file could not be used ("" when it could)."""
    backend: str | None = None
    """Who answers next: ``qwen… (llama.cpp, in-process)`` or ``x at http://… (endpoint)``."""
    remote: bool = False
    """The model that answers next runs on another machine (text leaves this one)."""
    answered_by: str | None = None
    """Who wrote the session's last answer, in the same words (None: no answer recorded)."""
    count_problem: str = ""
    """Why tokens could not be counted although there is a model ("" when they were)."""
    recall_left_out: int = 0
    """Lines of the last turn's recall block left out: their messages are gone since."""

    @property
    def total_tokens(self) -> int | None:
        if self.exact_total is not None:
            return self.exact_total
        if not self.tokens:
            return None
        overhead = MESSAGE_OVERHEAD_TOKENS * len(self.tokens)
        return sum(self.tokens) + overhead + self.tool_tokens


def message_text(message: ChatMessage) -> str:
    """A message as the tokenizer sees most of it: content plus any tool calls."""
    text = message.get("content", "") or ""
    calls = message.get("tool_calls")
    if calls:
        text += "\n" + json.dumps(calls, ensure_ascii=False)
    return text


def _session_settings(store: MemoryStore, session_id: str) -> SettingsReading:
    """Storage thread: the session's settings file, read as a turn would."""
    return read_settings_file(store.folder(session_id))


def window_settings(services: AppServices) -> tuple[int, int]:
    """(messages, step) of the window the next turn takes."""
    if services.agent is not None:
        return services.agent.config.window_messages, services.agent.config.window_step
    return services.settings.memory.window_messages, WINDOW_STEP


async def read_context(services: AppServices, session_id: str) -> ContextView:
    """Build the next turn's messages and count their tokens (no model call)."""
    window, step = window_settings(services)
    reading = await services.storage.run(_session_settings, services.store, session_id)
    settings = reading.settings
    left_out = 0
    if services.agent is not None:
        messages = await services.agent.context_messages(session_id, settings=settings)
        left_out = await _leave_out_gone_recall(services, session_id, messages)
    else:
        store = services.store
        recent = await services.storage.run(store.window, session_id, window, step)
        summary = await services.storage.run(prompt_text, store, session_id)
        messages = build_messages(
            base_prompt=settings.base_prompt(DEFAULT_SYSTEM_PROMPT),
            summary_text=summary,
            window=recent,
            now_ns=services.clock(),
        )
    view = ContextView(
        messages, window, step, answer_reserve=services.settings.models.max_answer_tokens
    )
    view.recall_left_out = left_out
    view.small_model = services.model_profile.small
    view.settings, view.settings_problem = settings, reading.problem
    specs = [] if view.small_model or not settings.tools else services.tools.specs()
    view.tools = [str(spec["function"]["name"]) for spec in specs]
    last = await services.storage.run(_last_answer, services.store, session_id, window)
    view.answered_by = describe_answerer(last.extra.get("answered_by")) if last else None
    model: Any = services.chat_model
    if model is None:
        return view
    view.model_name = str(model.name)
    view.backend = describe_answerer(answered_by(model))
    address = getattr(model, "base_url", None)
    view.remote = isinstance(address, str) and not is_loopback(address)
    try:
        await _count(view, model, specs)
    except KnownError as exc:  # a server that is down: show the messages, say why no count
        view.tokens, view.tool_tokens, view.exact_total = [], 0, None
        view.count_problem = one_line(exc)
    return view


async def _leave_out_gone_recall(
    services: AppServices, session_id: str, messages: list[ChatMessage]
) -> int:
    """Drop from *messages* the recalled lines whose messages are gone; how many went.

    The agent shows the last turn's block as it was stored; a line of it may
    quote a message deleted since, or one of a session removed or reset (in
    its undo window: ``services.withheld``).  The block is found in the
    prompt by its stored text and replaced by what is left of it.
    """
    sent, kept, gone = await services.storage.run(
        recall_without_gone, services.store, session_id, services.withheld()
    )
    if not gone:
        return 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and sent in content:
            message["content"] = content.replace(sent, kept, 1)
            return gone
    return 0


def recall_without_gone(
    store: MemoryStore, session_id: str, withheld: Withheld
) -> tuple[str, str, int]:
    """Storage thread: (the last recall block stored, the same without the lines of gone
    messages, how many lines went)."""
    event = store.archive.last_event(session_id, "recall")
    if event is None:
        return "", "", 0
    detail = event[1]
    text = str(detail.get("text", ""))
    ids = [str(i) for i in detail.get("ids") or []]
    gone = gone_messages(store, ids, withheld)
    if not text or not gone:
        return text, text, 0
    return text, without_lines(text, ids, gone), len(gone)


def gone_messages(store: MemoryStore, ids: Sequence[str], withheld: Withheld) -> set[str]:
    """Storage thread: those of *ids* no longer in the archive, or *withheld* (their
    delete, or their session's reset or remove, waits in its undo window)."""
    rowids = store.archive.rowids_for(ids)
    rows = store.archive.by_rowids(list(rowids.values()))
    session_of = {row.message.id: row.session_id for row in rows.values()}
    return {i for i in ids if i not in session_of or withheld.hides(session_of[i], i)}


async def _count(view: ContextView, model: Any, specs: list[dict[str, Any]]) -> None:
    """Fill in the token counts with *model*'s tokenizer (a server round trip for an endpoint)."""
    view.context_size = int(model.context_size)
    view.tokens = [int(await model.count_tokens(message_text(m))) for m in view.messages]
    if specs:
        view.tool_tokens = int(await model.count_tokens(json.dumps(specs, ensure_ascii=False)))
    exact = getattr(model, "count_prompt_tokens", None)
    if exact is not None:
        view.exact_total = int(await exact(view.messages, tools=specs or None))


def _last_answer(store: MemoryStore, session_id: str, window: int) -> Message | None:
    """Storage thread: the session's latest assistant answer (text, not only tool calls)."""
    recent = store.window(session_id, max(window, 2))
    return next(
        (m for m in reversed(recent) if m.role == "assistant" and not m.is_tool_traffic), None
    )
