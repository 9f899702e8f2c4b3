"""The next turn's prompt start, read by a local model while the person reads the answer.

Every model call of a turn starts with the head (system prompt, rolling
summary, what the system prompt says about the tools offered) and the
window's history; only the turn note and the new message come after it
(``agent/context.py``).  So once a turn has ended, the start of the next
turn's first prompt is known, up to the tools that turn will be offered
(they depend on its message): taken to be those the last turn's first
round was offered, the most likely and, for a run of questions or of
small talk, the same.  A local engine that can (:class:`ReadsAhead`) reads
that start into its KV cache right away, giving way to every real call;
the next turn then evaluates its note and message only — also after the
window's start moved on or a summary pass rewrote the summary, the turns
that otherwise read their whole prompt again (``benchmarks/session_walk.py``).
Of the note, the opening of a recall block is read too (:func:`note_opening`),
a system message the engine's template closes where the real note goes on;
the cache keeps the tokens both share.

What is built here must be exactly the start of what :func:`build_messages`
builds for the next turn, but for the note's opening; a mismatch costs nothing
but the work done ahead.

The note and the message follow once the person pauses typing: the turn's
own preparation (``Agent.draft_changed``, ``_Turn.first_prompt``) builds the
whole first prompt the typed words would get, with a message that is not
stored (:data:`DRAFT_MESSAGE_ID`), and the engine reads that instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from agenvoy_desktop.agent.context import build_messages, tool_guidance
from agenvoy_desktop.agent.recall import block_opening
from agenvoy_desktop.core.history import take_window
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.session_settings import session_settings
from agenvoy_desktop.core.store import MemoryStore

__all__ = [
    "DRAFT_MESSAGE_ID",
    "ForgetsPrompts",
    "ForgetsTexts",
    "PromptStart",
    "ReadsAhead",
    "next_prompt_start",
    "note_opening",
]

NEXT_MESSAGE_ID = "read-ahead-next"
"""Stands for the message not yet typed while the next window is taken."""
DRAFT_MESSAGE_ID = "read-ahead-draft"
"""The message being typed, while the first prompt it would get is built."""


@runtime_checkable
class ReadsAhead(Protocol):
    """A model that can read the known start of its next prompt while idle (a local engine)."""

    def read_ahead(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> None: ...

    def stop_reading_ahead(self) -> None: ...


@runtime_checkable
class ForgetsPrompts(Protocol):
    """A model that keeps what it read of earlier prompts in memory (a local engine's KV
    cache and saved states) and can empty it: after a reset, a remove or a message
    delete (``AppServices.forget_prompts``).  Queues the work and returns at once."""

    def forget_prompts(self) -> object: ...


@runtime_checkable
class ForgetsTexts(Protocol):
    """An embedding model that keeps the last text it embedded in its cells and buffers
    (the local embedder) and can zero them, at the same moments as :class:`ForgetsPrompts`."""

    def forget_texts(self) -> object: ...


class PromptStart:
    """What the next turn's prompt starts with: its messages and the tools it is offered."""

    __slots__ = ("messages", "tools")

    def __init__(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.tools = tools


def next_prompt_start(
    store: MemoryStore,
    session_id: str,
    *,
    default_prompt: str,
    summary_text: Callable[[str], str],
    window: tuple[int, int],
    offered: Sequence[str],
    specs: Sequence[dict[str, Any]],
    recalls: bool = False,
) -> PromptStart | None:
    """Storage thread: the head and history the next turn's first prompt will start with.

    *window* is (messages, step) as the turn takes it; *offered* the tool
    names assumed for that turn, *specs* the registry's specs; *recalls*: a
    recall block opens the note when the turn has one (a small model's note
    carries no clock line), so that opening is read too.  None when the
    session has no history yet (the note would then join the head).
    """
    history = store.history(session_id).messages
    if not history:
        return None
    upcoming = Message(NEXT_MESSAGE_ID, "user", "", history[-1].time_ns)
    taken = take_window([*history, upcoming], *window)
    settings = session_settings(store, session_id)
    if not settings.tools:  # the session's tools are off: its turns are offered none
        offered = ()
    messages = build_messages(
        base_prompt=settings.base_prompt(default_prompt),
        summary_text=summary_text(session_id),
        window=taken,
        now_ns=upcoming.time_ns,
        guidance=tool_guidance(offered),
        clock="none",
    )
    if len(messages) < 3:  # the head and the upcoming message only: nothing known to read
        return None
    names = set(offered)
    tools = [s for s in specs if str(s.get("function", {}).get("name", "")) in names]
    start = messages[:-1]
    if recalls and settings.tools:  # the session's tools off: no recall
        start.append(note_opening(history))
    return PromptStart(start, tools)


def note_opening(history: Sequence[Message]) -> ChatMessage:
    """The start of the next turn's note, as far as it can be known: a recall block's
    opening in the language the person last wrote in (:func:`recall.block_opening`).

    The note follows the window; with a recall block, the most common note of
    a turn deep in a session, it starts with these ~26 tokens, which the
    turn then does not evaluate before its first token.
    """
    said = next((m.content for m in reversed(history) if m.role == "user"), "")
    return {"role": "system", "content": block_opening(said)}
