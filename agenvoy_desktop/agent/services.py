"""The composition root: every long-lived part of a running app, wired once.

The CLI's ``chat`` command and the window both build one :class:`AppServices`
from a profile's paths and settings.  Everything that touches disk runs on
the storage thread (:class:`Storage`), each model on its own worker thread;
the caller's event loop only awaits.  Tests pass doubles (a scripted chat
model, a hashing embedder, a fixed clock) through :meth:`AppServices.open`;
the real app uses :meth:`AppServices.start`, which prepares the models first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from agenvoy_desktop.agent.builtin_tools import file_tools, search_tool, time_tools
from agenvoy_desktop.agent.context import (
    DEFAULT_SYSTEM_PROMPT,
    SMALL_MODEL_SYSTEM_PROMPT,
    WINDOW_STEP,
)
from agenvoy_desktop.agent.document_recall import find_passages
from agenvoy_desktop.agent.document_recall import floor_for as document_floor_for
from agenvoy_desktop.agent.document_tools import DocumentLibrary, document_tools
from agenvoy_desktop.agent.error_tools import ErrorMemoryHints, error_tools
from agenvoy_desktop.agent.read_ahead import ForgetsPrompts, ForgetsTexts, PromptStart
from agenvoy_desktop.agent.recall import floor_for
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, EventSink, TurnResult
from agenvoy_desktop.agent.turn_memory import turn_withheld
from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.error_memory import ErrorMemory, error_db_path, open_error_memory
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatModel
from agenvoy_desktop.core.profile import check_profile
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import MemoryStore, OperationCancelledError
from agenvoy_desktop.core.summarizer import Summarizer, SummaryScheduler
from agenvoy_desktop.core.summary import prompt_text, session_facts
from agenvoy_desktop.core.timeutil import Clock, now_ns
from agenvoy_desktop.llm.catalogue import STARTER_NAME, ModelCatalogue, sampling_defaults
from agenvoy_desktop.llm.model_profile import CAPABLE, ModelProfile, profile_for_path
from agenvoy_desktop.paths import AppPaths, machine_cache_dir
from agenvoy_desktop.settings import (
    SamplingSettings,
    Settings,
    load_settings,
    resolve_sampling,
    save_settings,
)

log = logging.getLogger(__name__)

Progress = Callable[[float, str], None]
"""``progress(fraction, what)`` while models are prepared."""


@dataclass(frozen=True, slots=True)
class ChatModelProblem:
    """Why there is no chat model, in words for a banner, and what fixes it."""

    message: str
    fix: str


EMBED_SLICE = 16
"""Messages embedded per storage-thread job while catching up on missing vectors."""

PURGE_CHECK_S = 3600.0
"""How often the daily error-memory purge checks whether it is due."""

NO_CHAT_MODEL = ChatModelProblem(
    "No chat model is configured.", "Choose a model in Settings → Models."
)


class ModelSwitchError(KnownError, RuntimeError):
    """The chosen chat model could not be opened; the previous one is still in use."""


class WindowAgent(Agent):
    """An :class:`Agent` whose turns and drafts leave out what the window has in an undo
    window (a session being removed or reset, a message being deleted)."""

    def __init__(
        self, *args: Any, withheld: Callable[[], Withheld] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.withheld: Callable[[], Withheld] = withheld or (lambda: NOTHING_WITHHELD)
        """What the window has in an undo window: each turn's recall leaves it out."""

    async def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        on_event: EventSink | None = None,
        stop: asyncio.Event | None = None,
        asked: Message | None = None,
    ) -> TurnResult:
        token = turn_withheld.set(self.withheld)  # read by the turn's memory lookup
        try:
            return await super().run_turn(
                session_id, text, on_event=on_event, stop=stop, asked=asked
            )
        finally:
            turn_withheld.reset(token)

    async def _draft_prompt(self, session_id: str, draft: Message) -> PromptStart:
        """A draft's prompt is built as a turn's: what is in an undo window is left out."""
        token = turn_withheld.set(self.withheld)
        try:
            return await super()._draft_prompt(session_id, draft)
        finally:
            turn_withheld.reset(token)


class AppServices:
    """Storage, memory, models, tools and the agent of one profile.

    Attributes the window and the CLI use: ``paths``, ``settings``,
    ``storage``, ``store``, ``errors`` (storage thread only), ``catalogue``,
    ``embedder``, ``chat_model`` (None → ``chat_problem`` says why),
    ``model_profile`` (size and abilities of the chat model), ``agent``,
    ``summarizer``, ``summary_scheduler``, ``tools``, ``documents`` (the
    collections the document tools search; :meth:`documents_status`).
    """

    def __init__(
        self,
        paths: AppPaths,
        settings: Settings,
        storage: Storage,
        store: MemoryStore,
        errors: ErrorMemory,
        *,
        embedder: TextEmbedder | None = None,
        chat_model: ChatModel | None = None,
        clock: Clock = now_ns,
        chat_problem: ChatModelProblem | None = None,
    ) -> None:
        self.paths = paths
        self.settings = settings
        self.storage = storage
        self.store = store
        self.errors = errors
        self.embedder = embedder
        self.clock = clock
        self.catalogue = ModelCatalogue(paths.models_dir)
        self.documents = DocumentLibrary(
            paths, lambda: self.settings.documents.enabled, lambda: self.embedder
        )
        """The document collections the ``list_rag``/``search_rag`` tools search (opt-in)."""
        self.withheld: Callable[[], Withheld] = lambda: NOTHING_WITHHELD
        """Sessions and messages in the window's undo window (removed, reset or deleted in
        the view, not yet in the store): recall and the search tool leave them out.  The
        window sets it; called on the event loop."""
        self.tools = self._build_tools()
        self.chat_model: ChatModel | None = None
        self.chat_problem = chat_problem
        self.model_profile: ModelProfile = CAPABLE
        self.agent: Agent | None = None
        self.summarizer: Summarizer | None = None
        self.summary_scheduler: SummaryScheduler | None = None
        self._closed = False
        self._purge_task: asyncio.Task[None] | None = None
        self.notices: list[str] = []
        """What opening repaired (a damaged store set aside and rebuilt), for the user."""
        self.chat_choice = settings.models.chat_model
        """The ``models.chat_model`` value the running chat model was opened for."""
        self.set_chat_model(chat_model, chat_problem)

    # -- construction --------------------------------------------------------------
    @classmethod
    def open(
        cls,
        paths: AppPaths,
        *,
        settings: Settings | None = None,
        embedder: TextEmbedder | None = None,
        chat_model: ChatModel | None = None,
        clock: Clock = now_ns,
        chat_problem: ChatModelProblem | None = None,
    ) -> AppServices:
        """Open the profile's stores on a fresh storage thread (blocking)."""
        paths = paths.ensure()
        check_profile(paths)  # a newer profile is refused before anything opens
        settings = settings or load_settings(paths.settings_file)
        storage = Storage()
        store: MemoryStore | None = None
        try:
            store = storage.run_sync(
                open_memory,
                paths,
                embedder,
                max_history_bytes=settings.memory.max_history_bytes,
                clock=clock,
            )
            errors, notice = storage.run_sync(
                open_error_memory, error_db_path(paths), embedder, clock=clock
            )
            storage.run_sync(errors.preload)
        except BaseException:
            if store is not None:
                storage.run_sync(store.close)
            storage.close()
            raise
        services = cls(
            paths,
            settings,
            storage,
            store,
            errors,
            embedder=embedder,
            chat_model=chat_model,
            clock=clock,
            chat_problem=chat_problem,
        )
        services.notices = [*store.notices, *([notice] if notice else [])]
        return services

    @classmethod
    def start(
        cls,
        paths: AppPaths,
        *,
        progress: Progress | None = None,
        cancelled: Callable[[], bool] | None = None,
        chat_progress: Progress | None = None,
        optional_progress: Progress | None = None,
    ) -> AppServices:
        """The real app: prepare the models (first start), then :meth:`open`.

        *chat_progress* and *optional_progress* receive the chat model's and the
        optional models' preparations (default: *progress*, which then also gets
        the embedding model's), so a caller can give each its own part of one bar.

        A missing embedding model leaves semantic recall off (keyword search
        still works); a missing chat model leaves the window usable with a
        banner that says how to fix it.  Neither stops the app.
        """
        from agenvoy_desktop.llm.model_prep import prepare_optional_models

        paths = paths.ensure()
        check_profile(paths)  # refused before the models are prepared into it
        settings = load_settings(paths.settings_file)
        # Before the embedder: an optional model chosen in Settings must exist to be opened.
        prepare_optional_models(paths.models_dir, optional_progress or progress)
        embedder = _open_embedder(paths, settings, progress)
        chat_model, problem = _open_chat_model(
            paths, settings, chat_progress or progress, cancelled
        )
        try:
            return cls.open(
                paths,
                settings=settings,
                embedder=embedder,
                chat_model=chat_model,
                chat_problem=problem,
            )
        except BaseException:
            _close_models(embedder, chat_model)
            raise

    # -- wiring ----------------------------------------------------------------------
    def _agent_config(self) -> AgentConfig:
        models = self.settings.models
        return AgentConfig(
            window_messages=self.settings.memory.window_messages,
            max_answer_tokens=models.max_answer_tokens,
            temperature=self.chat_sampling().temperature,
            small_model=self.model_profile.small,
            proactive_recall=self.settings.memory.proactive_recall,
            recall_floor=floor_for(self.store.model_name),
            read_ahead=models.read_ahead,
            system_prompt=SMALL_MODEL_SYSTEM_PROMPT
            if self.model_profile.small
            else DEFAULT_SYSTEM_PROMPT,
        )

    def _withheld_now(self) -> Withheld:
        """:attr:`withheld` as it is when asked (the window sets it after the tools are built)."""
        return self.withheld()

    def _build_tools(self) -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(
            search_tool(
                self.storage,
                self.store,
                lambda: self.settings.memory.window_messages,
                window_step=WINDOW_STEP,
                withheld=self._withheld_now,
            )
        )
        for tool in [
            *time_tools(self.clock),
            *file_tools(lambda: self.settings.allowed_folders),
            *error_tools(self.storage, self.errors, self.store),
            *document_tools(self.documents),
        ]:
            registry.register(tool)
        return registry

    def documents_status(self) -> str | None:
        """Why the document tools are left out of turns now, in one line (None: offered or off).

        Cheap enough for the window to ask on a timer: indexes are only
        re-read when their files changed.
        """
        return self.documents.problem()

    def set_chat_model(
        self, model: ChatModel | None, problem: ChatModelProblem | None = None
    ) -> None:
        """Use ``model`` from the next turn on (None: no chat; ``problem`` says why).

        The caller closes the previous model (it may still be streaming).
        """
        self.chat_model = model
        self.chat_problem = None if model is not None else (problem or NO_CHAT_MODEL)
        self.model_profile = model_profile_of(model)
        self._apply_sampling()
        if model is None:
            self.agent = None
            self.summarizer = None
            self.summary_scheduler = None
            return
        memory = self.settings.memory
        self.summarizer = Summarizer(
            self.store,
            model,
            window_messages=memory.window_messages,
            clock=self.clock,
            storage=self.storage,
        )
        self.summary_scheduler = SummaryScheduler(
            self.summarizer, idle_seconds=memory.summary_idle_seconds, clock=self.clock
        )
        error_memory = ErrorMemoryHints(self.errors)
        self.agent = WindowAgent(
            self.storage,
            self.store,
            model,
            self.tools,
            summary_text=functools.partial(prompt_text, self.store),
            summary_facts=functools.partial(session_facts, self.store),
            hints=error_memory,
            failures=error_memory,
            config=self._agent_config(),
            after_turn=self.summary_scheduler.after_turn,
            settle=self._checkpoint,
            documents=functools.partial(
                find_passages,
                self.documents,
                floor=document_floor_for(self.store.model_name),
            ),
            withheld=self._withheld_now,
        )
        self.summarizer.on_run(self._summary_running)

    def _summary_running(self, _session_id: str, folding: bool) -> None:
        """A summary pass changes the head the agent reads ahead: stop at its start, read
        again at its end, whichever session it summarised (loop thread; see
        :mod:`agent.read_ahead`)."""
        if self.agent is not None:
            self.agent.summary_running(folding)

    def forget_prompts(self) -> None:
        """A reset, a remove or a message delete has run: the chat model forgets every
        prompt it read (its KV cache and saved states, a read-ahead), and the embedding
        model the last text it embedded, so none of the text stays in memory.  Queued
        behind each model's running call; returns at once.  A model that keeps nothing
        of the kind (a server, a test double) is left alone.
        The next prompt's start, read from the store as it is now, is read ahead again
        behind the forgetting (it was part of what was forgotten), so the next turn does
        not read its whole prompt after Enter."""
        if isinstance(self.embedder, ForgetsTexts):
            self.embedder.forget_texts()
        model = self.chat_model
        if isinstance(model, ForgetsPrompts):
            model.forget_prompts()
            if self.agent is not None:
                self.agent.prompts_forgotten()

    def _checkpoint(self) -> None:
        """Storage thread, after each answer: fold both write-ahead logs into their files."""
        self.store.archive.checkpoint()
        self.errors.checkpoint()

    async def reload_chat_model(self) -> None:
        """Re-resolve the chat model from the settings (after a change in the UI).

        The new engine loads lazily on first use; the old one is closed, which
        ends a generation still running on it as cancelled.
        """
        old = self.chat_model
        running = self._purge_task is not None
        model, problem = await asyncio.to_thread(
            _open_chat_model, self.paths, self.settings, None, None
        )
        await self.stop_background()
        self.chat_choice = self.settings.models.chat_model
        self.set_chat_model(model, problem)
        if running:
            self.start_background()
        await asyncio.to_thread(_close_models, old)

    # -- switching models and their sampling ------------------------------------------------------
    def chat_model_name(self) -> str:
        """The catalogue name of the running chat model's choice (the starter for '')."""
        return self.chat_choice or STARTER_NAME

    def sampling_defaults(self) -> dict[str, Any] | None:
        """The running chat model's own sampling defaults (None: the global ones)."""
        return sampling_defaults(self.chat_model_name())

    def chat_sampling(self) -> SamplingSettings:
        """The running chat model's sampling: the user's changes over the model's defaults."""
        return resolve_sampling(self.settings, self.chat_model_name(), self.sampling_defaults())

    def _apply_sampling(self) -> None:
        """Hand the resolved sampling to an engine that takes it (test doubles may not)."""
        if self.chat_model is not None and hasattr(self.chat_model, "sampling"):
            cast(Any, self.chat_model).sampling = self.chat_sampling()

    async def switch_chat_model(self, choice: str) -> None:
        """Make *choice* (a catalogue name; '' = the starter) the chat model, without a restart.

        The new model is opened and loaded on its own worker while the old
        one keeps answering; then the choice is saved, new turns go to the
        new model, and the old one is closed once the turns still running on
        it have finished (both are in memory until then).  On failure
        (:class:`ModelSwitchError`, a load error, an unwritable settings file)
        nothing changes: the previous model stays in use.
        """
        if choice == self.chat_choice and self.chat_model is not None:
            return
        trial = dataclasses.replace(
            self.settings, models=dataclasses.replace(self.settings.models, chat_model=choice)
        )
        model, problem = await asyncio.to_thread(_open_chat_model, self.paths, trial, None, None)
        if model is None:
            problem = problem or NO_CHAT_MODEL
            raise ModelSwitchError(f"{problem.message} {problem.fix}")
        running = self._purge_task is not None
        try:
            load = getattr(model, "load", None)
            if load is not None:
                await load()
            await self.stop_background()
            save_settings(self.paths.settings_file, trial)
        except BaseException:
            await asyncio.to_thread(_close_models, model)
            if running:
                self.start_background()
            raise
        old, old_agent = self.chat_model, self.agent
        self.settings.models.chat_model = choice
        self.chat_choice = choice
        self.set_chat_model(model)
        if running:
            self.start_background()
        if old_agent is not None:
            await old_agent.turns_done()
        await asyncio.to_thread(_close_models, old)

    async def unload_chat_model(self) -> None:
        """Free the chat model's memory; a fresh engine loads again on the next use."""
        await self.reload_chat_model()

    def start_background(self) -> None:
        """Start timers (summary idle timer, error-memory purge); needs a running loop."""
        if self.summary_scheduler is not None:
            self.summary_scheduler.start()
        if self._purge_task is None or self._purge_task.done():
            self._purge_task = asyncio.get_running_loop().create_task(self._purge_daily())

    async def preload_chat_model(self) -> bool:
        """Load the local chat model now (``models.load_at_start``); True when it loaded.

        Loading takes ~0.5 s for the starter, and on a first start the engine
        also calibrates its prompt batch (~13 s on 2 cores): done while the
        person reads the window or types, the first answer does not wait for
        it.  A server model has nothing to load.  A failure is only logged:
        the turn that needs the model reports it where the person looks.
        """
        model = self.chat_model
        if model is None or not self.settings.models.load_at_start:
            return False
        if getattr(model, "loaded", True):  # loaded already, or a server's (nothing to load)
            return False
        try:
            await cast(Any, model).load()
        except Exception:  # the first turn says why, in the window
            log.warning("loading the chat model at start failed", exc_info=True)
            return False
        if self.agent is not None:  # the session opened meanwhile: its next prompt
            self.agent.read_ahead_later()
        return True

    async def _purge_daily(self) -> None:
        """Expired error records go at start (ErrorMemory opens with a purge) and daily."""
        while True:
            await asyncio.sleep(PURGE_CHECK_S)
            try:
                purged = await self.storage.run(self.errors.purge_if_due)
            except Exception:  # a failed purge is retried at the next check
                log.warning("error-memory purge failed", exc_info=True)
                continue
            if purged:
                log.info("purged %d expired error records", purged)

    def missing_vectors(self) -> int:
        """Messages start-up found without a vector (0 without an embedding model)."""
        if self.embedder is None:
            return 0
        return sum(self.store.missing_vectors.values())

    async def embed_missing(
        self,
        progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        *,
        sessions: Collection[str] | None = None,
    ) -> int:
        """Embed the messages start-up found without a vector, in small storage-thread batches.

        Each batch is one short storage job, so a turn's reads and writes
        wait at most one batch; *cancelled* stops between batches (what was
        embedded is kept, the rest is embedded at the next start).  *sessions*
        limits the work to those (an import's, counted by :func:`note_missing`).
        Returns how many messages were embedded.
        """
        if self.embedder is None:
            return 0
        todo = {
            sid: count
            for sid, count in self.store.missing_vectors.items()
            if sessions is None or sid in sessions
        }
        total, done = sum(todo.values()), 0
        for sid in todo:
            while not (cancelled is not None and cancelled()):
                embedded, left = await self.storage.run(embed_some, self.store, sid, EMBED_SLICE)
                done += embedded
                if progress is not None:
                    progress(min(done, total), total)
                if not embedded or not left:
                    self.store.missing_vectors.pop(sid, None)
                    break
            await self.storage.run(flush_vectors, self.store, sid)
        return done

    async def stop_background(self) -> None:
        if self.agent is not None:
            await self.agent.idle()
        if self.summary_scheduler is not None:
            await self.summary_scheduler.stop()
        if self._purge_task is not None:
            self._purge_task.cancel()
            await asyncio.gather(self._purge_task, return_exceptions=True)
            self._purge_task = None

    def save_settings(self) -> None:
        """Persist the settings and apply what can change while running."""
        save_settings(self.paths.settings_file, self.settings)
        memory = self.settings.memory
        self.store.max_history_bytes = memory.max_history_bytes
        if self.agent is not None:
            self.agent.config = self._agent_config()
            if not self.agent.config.read_ahead:
                self.agent.stop_reading_ahead()
        self._apply_sampling()
        if self.summarizer is not None:
            self.summarizer.window_messages = memory.window_messages
        if self.summary_scheduler is not None:
            self.summary_scheduler.idle_ns = int(memory.summary_idle_seconds * 1e9)

    def close(self) -> None:
        """Flush and release everything (safe to call twice)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.storage.run_sync(self.errors.close)
            self.storage.run_sync(self.store.close)
        finally:
            self.storage.close()
            _close_models(self.chat_model, self.embedder)


def embed_some(store: MemoryStore, session_id: str, limit: int) -> tuple[int, int]:
    """Storage thread: embed up to *limit* of a session's messages lacking a vector.

    Returns (embedded, still lacking).  Works from the session's current
    history, so a message removed or reset meanwhile is simply not there.
    """
    pending = store.pending_vectors(session_id)
    batch = pending[:limit]
    if batch:
        store.index_messages(session_id, [message for _, message in batch])
    return len(batch), len(pending) - len(batch)


def note_missing(store: MemoryStore, session_ids: Iterable[str]) -> int:
    """Storage thread: count the sessions' messages without a vector into ``missing_vectors``.

    An import stores its messages without vectors (everything is found by
    keyword at once); the window then embeds them through
    :meth:`AppServices.embed_missing`.  Returns how many messages lack one.
    """
    if store.embedder is None:
        return 0
    total = 0
    for sid in dict.fromkeys(session_ids):
        lacking = len(store.pending_vectors(sid)) if store.exists(sid) else 0
        if lacking:
            store.missing_vectors[sid] = lacking
        total += lacking
    return total


def flush_vectors(store: MemoryStore, session_id: str) -> None:
    """Storage thread: save the session's index file after a catch-up."""
    if store.exists(session_id):
        store.vectors(session_id).flush()


def model_profile_of(model: ChatModel | None) -> ModelProfile:
    """The GGUF profile of a llama.cpp model; a model without a file (a double) is capable."""
    if getattr(model, "backend", "llama.cpp") == "endpoint":
        from agenvoy_desktop.llm.endpoints import endpoint_profile

        served, weights = str(getattr(model, "model", "")), getattr(model, "parameters", None)
        return endpoint_profile(served, weights)
    path = getattr(model, "model_path", None)
    if model is None or not isinstance(path, Path):
        return CAPABLE
    return profile_for_path(path)


def _close_models(*models: object) -> None:
    """Close model workers that have a ``close`` (test doubles may not)."""
    for model in models:
        close = getattr(model, "close", None)
        if close is not None:
            close()


def _open_embedder(
    paths: AppPaths, settings: Settings, progress: Progress | None
) -> TextEmbedder | None:
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.llm.model_prep import ModelUnavailableError, prepare_embedding_model

    try:
        if settings.models.embedding_model:
            path = ModelCatalogue(paths.models_dir).resolve(
                settings.models.embedding_model, "embedding"
            )
        else:
            path = prepare_embedding_model(paths.models_dir, progress=progress)
        return Embedder(path, n_threads=settings.models.threads)
    except (ModelUnavailableError, OSError, ValueError) as exc:
        log.warning("semantic recall is off: %s", exc)
        return None


def _open_chat_model(
    paths: AppPaths,
    settings: Settings,
    progress: Progress | None,
    cancelled: Callable[[], bool] | None,
) -> tuple[ChatModel | None, ChatModelProblem | None]:
    from agenvoy_desktop.llm.buffer_probe import ensure_verdict
    from agenvoy_desktop.llm.engine import ChatEngine
    from agenvoy_desktop.llm.model_prep import ModelUnavailableError
    from agenvoy_desktop.llm.starter import prepare_starter_model, starter_model_path

    if settings.models.chat_model.startswith("endpoint:"):
        return _open_endpoint_chat_model(paths, settings.models.chat_model)
    try:
        if settings.models.chat_model:
            path = ModelCatalogue(paths.models_dir).resolve(settings.models.chat_model, "chat")
        else:
            path = prepare_starter_model(paths.models_dir, progress=progress, cancelled=cancelled)
    except OperationCancelledError:
        return None, ChatModelProblem(
            "Preparing the starter chat model was cancelled.",
            "Restart the app to prepare it, or choose a model in Settings → Models.",
        )
    except (ModelUnavailableError, OSError, ValueError) as exc:
        fix = (
            "Choose another model in Settings → Models."
            if settings.models.chat_model
            else "Run `make run` once (it installs the starter model) or add a GGUF model."
        )
        return None, ChatModelProblem(f"The chat model is not available: {exc}", fix)
    # Once per machine: may the fast kernels run?  The starter (Q4_K_M) is the probe when
    # it is there, whatever chat model is chosen: its kernels are the ones seen to fault.
    starter = starter_model_path(paths.models_dir)
    ensure_verdict(machine_cache_dir(), starter if starter.is_file() else Path(path))
    return ChatEngine.from_settings(Path(path), settings.models), None


def _open_endpoint_chat_model(
    paths: AppPaths, choice: str
) -> tuple[ChatModel | None, ChatModelProblem | None]:
    """The chat model of an ``endpoint:<name>`` choice (not connected yet: ``load()`` does).

    A remote endpoint the user never confirmed is refused here too, so a
    hand-edited endpoints.json cannot send conversation text away silently.
    """
    from agenvoy_desktop.llm.endpoints import EndpointRegistry, open_endpoint_model

    fix = "Choose another model in Settings → Models."
    try:
        endpoint = EndpointRegistry(paths.models_dir).get(choice)
        if endpoint.remote and not endpoint.remote_confirmed:
            return None, ChatModelProblem(
                f"The endpoint {endpoint.name!r} at {endpoint.base_url} is on another machine "
                "and sending conversation text there was never confirmed.",
                "Add it again in Settings → Models and confirm, or choose a local model.",
            )
        return open_endpoint_model(endpoint), None
    except KnownError as exc:
        return None, ChatModelProblem(f"The chat model is not available: {exc}", fix)
