"""The prompt a session's model call gets next: what each round sends, and the Context tab shows.

One function builds it for both (``Agent.context_messages``), so the tab
never shows a prompt the model did not get.  Its parts — the window, the
rolling summary, the session's settings and, for the tab, the recall block
and "I don't know" exchange sent with the session's last turn — are read in
one hop to the storage thread; ``agent/context.py`` lays them out.
"""

from __future__ import annotations

from collections.abc import Sequence

from agenvoy_desktop.agent.agent_config import AgentParts
from agenvoy_desktop.agent.context import (
    Clock,
    build_messages,
    tool_guidance,
    tool_results_note,
)
from agenvoy_desktop.agent.not_remembered import Example, example_from_json, example_messages
from agenvoy_desktop.agent.policy import clock_in_prompt, unplanned_tools
from agenvoy_desktop.core.history import take_window
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.session_settings import SessionSettings, session_settings
from agenvoy_desktop.core.store import MemoryStore


async def next_messages(
    agent: AgentParts,
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
    """Exactly what *agent*'s model would receive next in *session_id*.

    ``upcoming`` is a message not stored yet that ends the window (a draft's
    prompt, ``Agent.draft_changed``).  ``inline_results`` is this turn's tool
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
    window, summary, (last_recall_text, last_example), stored = await agent.storage.run(
        prompt_parts, agent, session_id, recall is None, upcoming
    )
    if recall is None:
        recall, example = last_recall_text, last_example
    settings = stored if settings is None else settings
    note = ""
    if inline_results:
        moved = {m.id for m in inline_results}
        window = [m for m in window if m.id not in moved]
        note = tool_results_note(inline_results)
    if offered is None:
        offered = (
            unplanned_tools(agent.tools, small_model=agent.config.small_model)
            if settings.tools
            else []
        )
    return build_messages(
        base_prompt=settings.base_prompt(agent.config.system_prompt),
        summary_text=summary,
        window=window,
        now_ns=agent.store.clock(),
        extra_system=note,
        guidance=tool_guidance(offered),
        recall=recall,
        examples=example_messages(example),
        clock=clock_in_prompt("", small_model=agent.config.small_model) if clock is None else clock,
    )


def prompt_parts(
    agent: AgentParts, session_id: str, with_last_recall: bool, upcoming: Message | None = None
) -> tuple[list[Message], str, tuple[str, Example | None], SessionSettings]:
    """Storage thread, one hop: window (ending with *upcoming*, if any), summary,
    (optionally) last recall, session settings."""
    store = agent.store
    size, step = agent.config.window_messages, agent.config.window_step
    if upcoming is None:
        window = store.window(session_id, size, step)
    else:
        window = take_window([*store.history(session_id).messages, upcoming], size, step)
    settings = session_settings(store, session_id)
    recall: tuple[str, Example | None] = ("", None)
    if with_last_recall and agent.config.proactive_recall and settings.tools:
        recall = last_recall(store, session_id, window)
    return window, agent.summary_text(session_id), recall, settings


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
