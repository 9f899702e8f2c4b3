"""The composition root: every long-lived part of a running app, wired once.

The CLI's ``chat`` command and the window both build one :class:`AppServices`
from a profile's paths and settings.  Everything that touches disk runs on
the storage thread (:class:`Storage`), each model on its own worker thread;
the caller's event loop only awaits.  Tests pass doubles (a scripted chat
model, a hashing embedder, a fixed clock) through the same constructor.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agenvoy_desktop.agent.builtin_tools import file_tools, search_tool, time_tools
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig
from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.model_api import ChatModel
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import Clock, now_ns
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import Settings, load_settings, save_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChatModelProblem:
    """Why there is no chat model, in words for a banner, and what fixes it."""

    message: str
    fix: str


class AppServices:
    """Storage, memory, models, tools and the agent of one profile.

    Build with :meth:`open` (blocking; call it off the UI thread or before
    the window exists) and release with :meth:`close`.
    """

    def __init__(
        self,
        paths: AppPaths,
        settings: Settings,
        storage: Storage,
        store: MemoryStore,
        chat_model: ChatModel | None,
        *,
        clock: Clock = now_ns,
        chat_problem: ChatModelProblem | None = None,
        extras: dict[str, Any] | None = None,
    ) -> None:
        self.paths = paths
        self.settings = settings
        self.storage = storage
        self.store = store
        self.chat_model = chat_model
        self.chat_problem = chat_problem
        self.clock = clock
        self.extras = extras or {}
        self.tools = self._build_tools()
        self.agent: Agent | None = None
        if chat_model is not None:
            self.agent = Agent(storage, store, chat_model, self.tools, config=self._agent_config())

    @classmethod
    def open(
        cls,
        paths: AppPaths,
        *,
        settings: Settings | None = None,
        embedder: TextEmbedder | None = None,
        chat_model: ChatModel | None = None,
        clock: Clock = now_ns,
    ) -> AppServices:
        """Open the profile's stores on a fresh storage thread."""
        paths = paths.ensure()
        settings = settings or load_settings(paths.settings_file)
        storage = Storage()
        try:
            store = storage.run_sync(
                MemoryStore,
                paths,
                embedder,
                max_history_bytes=settings.memory.max_history_bytes,
                clock=clock,
            )
        except BaseException:
            storage.close()
            raise
        problem = None
        if chat_model is None:
            problem = ChatModelProblem(
                "No chat model is configured.", "Choose a model in Settings → Models."
            )
        return cls(paths, settings, storage, store, chat_model, clock=clock, chat_problem=problem)

    # -- wiring ------------------------------------------------------------------
    def _agent_config(self) -> AgentConfig:
        models = self.settings.models
        return AgentConfig(
            window_messages=self.settings.memory.window_messages,
            max_answer_tokens=models.max_answer_tokens,
            temperature=models.temperature,
        )

    def _build_tools(self) -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(
            search_tool(self.storage, self.store, lambda: self.settings.memory.window_messages)
        )
        for tool in time_tools(self.clock):
            registry.register(tool)
        for tool in file_tools(lambda: self.settings.allowed_folders):
            registry.register(tool)
        return registry

    def save_settings(self) -> None:
        """Persist the settings and apply what can change while running."""
        save_settings(self.paths.settings_file, self.settings)
        if self.agent is not None:
            self.agent.config = self._agent_config()

    def close(self) -> None:
        """Flush and release everything (safe to call twice)."""
        try:
            self.storage.run_sync(self.store.close)
        finally:
            self.storage.close()
            close = getattr(self.chat_model, "close", None)
            if close is not None:
                close()
