"""How the agent is set up: its settings, and the parts its helpers between turns read.

Its own module so that what works for the agent outside a turn — reading
ahead (``agent/between_turns.py``), the prompt a session gets next
(``agent/session_prompt.py``) — can read the agent's settings and parts
without importing the turn (``agent/turn.py`` names both too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT, WINDOW_STEP
from agenvoy_desktop.agent.recall import DEFAULT_FLOOR, RecallFloor
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.core.model_api import ChatModel
from agenvoy_desktop.core.store import MemoryStore

DEFAULT_MAX_ROUNDS = 5


@dataclass(slots=True)
class AgentConfig:
    """The agent's settings, read as each turn needs them: the app replaces them when the
    person changes its settings (``AppServices.save_settings``)."""

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
    prompt while idle (``agent/between_turns.py``); off, every turn reads its own."""


class AgentParts(Protocol):
    """The parts of an agent (``turn.Agent``) its helpers read, each time they read: the app
    replaces the settings, and tests the summary, while the agent lives."""

    model: ChatModel
    config: AgentConfig
    storage: Storage
    store: MemoryStore
    tools: ToolRegistry
    summary_text: Callable[[str], str]
