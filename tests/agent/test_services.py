"""AppServices: wiring, settings applied while running, background purge, close twice."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent import document_recall
from agenvoy_desktop.agent import services as services_module
from agenvoy_desktop.agent.recall import DEFAULT_FLOOR, E5_FLOOR
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, conversation
from tests.fakes import HashingEmbedder
from tests.scripted_chat import ScriptedChatModel

DAY = 86_400 * SECOND


class MovableClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1000
        return self.now


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
def services(paths: AppPaths, clock: MovableClock) -> Iterator[AppServices]:
    opened = AppServices.open(
        paths, embedder=HashingEmbedder(), chat_model=ScriptedChatModel([]), clock=clock
    )
    yield opened
    opened.close()


def test_tools_and_parts_are_wired(services: AppServices) -> None:
    names = {spec["function"]["name"] for spec in services.tools.specs()}
    assert names == {
        "search_chat_history",
        "current_time",
        "date_calc",
        "remember_error",
        "search_error_history",
        "read_error",
    }  # file tools appear only once a folder is allowed
    services.settings.allowed_folders = [str(services.paths.config_dir)]
    assert {"list_files", "read_text_file"} <= {
        s["function"]["name"] for s in services.tools.specs()
    }
    assert services.agent is not None
    assert services.summarizer is not None
    assert services.chat_problem is None


def test_no_chat_model_has_a_problem_to_show(paths: AppPaths) -> None:
    opened = AppServices.open(paths, embedder=HashingEmbedder())
    try:
        assert opened.agent is None
        assert opened.chat_problem is not None
        assert "No chat model" in opened.chat_problem.message
    finally:
        opened.close()


class _E5Named(HashingEmbedder):
    model_name = "multilingual-e5-small"


def test_the_recall_floor_follows_the_embedding_model(paths: AppPaths) -> None:
    # A cosine floor belongs to the model that made the vectors (agent.recall.floor_for).
    cases = (
        (_E5Named(), E5_FLOOR, document_recall.E5_FLOOR),
        (HashingEmbedder(), DEFAULT_FLOOR, document_recall.SHIPPED),
    )
    for embedder, floor, passages in cases:
        opened = AppServices.open(paths, embedder=embedder, chat_model=ScriptedChatModel([]))
        try:
            assert opened.agent is not None
            assert opened.agent.config.recall_floor == floor
            documents = opened.agent.documents
            assert isinstance(documents, functools.partial)
            assert documents.keywords["floor"] == passages
        finally:
            opened.close()


def test_settings_apply_while_running(services: AppServices) -> None:
    services.settings.memory.window_messages = 4
    services.settings.memory.max_history_bytes = 123_456
    services.save_settings()
    assert services.agent is not None
    assert services.agent.config.window_messages == 4
    assert services.store.max_history_bytes == 123_456
    assert services.summarizer is not None
    assert services.summarizer.window_messages == 4
    assert services.paths.settings_file.is_file()


def test_expired_error_records_are_purged_daily(
    services: AppServices, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services_module, "PURGE_CHECK_S", 0.01)
    errors = services.errors
    services.storage.run_sync(errors.add, "read_file", "no such file", outcome="failed")
    clock.now += 91 * DAY

    async def main() -> None:
        services.start_background()
        for _ in range(200):
            if services.storage.run_sync(errors.count, include_expired=True) == 0:
                break
            await asyncio.sleep(0.01)
        await services.stop_background()

    asyncio.run(main())
    assert services.storage.run_sync(errors.count, include_expired=True) == 0


def test_close_twice_is_harmless(services: AppServices) -> None:
    services.close()
    services.close()


def test_reload_switches_to_the_configured_model(services: AppServices, tmp_path: Path) -> None:
    from agenvoy_desktop.llm.engine import ChatEngine
    from tests.tiny_gguf import write_tiny_llama

    tiny = write_tiny_llama(tmp_path / "tiny.gguf")
    services.settings.models.chat_model = str(tiny)
    old_agent = services.agent

    async def main() -> None:
        services.start_background()
        await services.reload_chat_model()
        assert isinstance(services.chat_model, ChatEngine)
        assert not services.chat_model.loaded
        await services.unload_chat_model()  # a fresh, unloaded engine again
        await services.stop_background()

    asyncio.run(main())
    assert isinstance(services.chat_model, ChatEngine)
    assert services.chat_model.model_path == tiny
    assert services.agent is not None
    assert services.agent is not old_agent
    assert services.agent.model is services.chat_model


class _LoadableModel(ScriptedChatModel):
    """A scripted model that, like the engine, loads on request (and may fail to)."""

    def __init__(self, fails: bool = False) -> None:
        super().__init__([])
        self.loaded = False
        self.loads = 0
        self.fails = fails

    async def load(self) -> None:
        self.loads += 1
        if self.fails:
            raise RuntimeError("model file is damaged")
        self.loaded = True


def test_the_chat_model_loads_at_start_unless_turned_off(services: AppServices) -> None:
    model = _LoadableModel()
    services.set_chat_model(model)
    assert asyncio.run(services.preload_chat_model()) is True
    assert model.loads == 1
    assert asyncio.run(services.preload_chat_model()) is False  # loaded already
    assert model.loads == 1

    idle = _LoadableModel()
    services.set_chat_model(idle)
    services.settings.models.load_at_start = False
    assert asyncio.run(services.preload_chat_model()) is False
    assert idle.loads == 0


class _LoadableReader(_LoadableModel):
    """A loadable model that reads ahead only once loaded, as the engine does."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[list[ChatMessage]] = []

    def read_ahead(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> None:
        if self.loaded:
            self.read.append(list(messages))

    def stop_reading_ahead(self) -> None:
        pass


def test_the_session_opened_while_the_model_loads_is_read_once_it_has(
    services: AppServices,
) -> None:
    sid = services.store.create_session("today")
    services.store.append(sid, conversation(["Good morning", "Morning!"]))
    model = _LoadableReader()
    services.set_chat_model(model)
    assert services.agent is not None
    agent = services.agent

    async def main() -> None:
        agent.session_opened(sid)  # the window shows it before the model has loaded
        await agent.idle()
        assert model.read == []
        assert await services.preload_chat_model()
        await agent.idle()

    asyncio.run(main())
    assert len(model.read) == 1
    assert "Morning!" in [m["content"] for m in model.read[0]]


def test_a_model_without_loading_or_failing_to_load_is_left_to_the_first_turn(
    services: AppServices, caplog: pytest.LogCaptureFixture
) -> None:
    assert asyncio.run(services.preload_chat_model()) is False  # scripted: nothing to load
    broken = _LoadableModel(fails=True)
    services.set_chat_model(broken)
    assert asyncio.run(services.preload_chat_model()) is False
    assert broken.loads == 1
    assert "loading the chat model at start failed" in caplog.text


class _ForgettingModel(ScriptedChatModel):
    def __init__(self) -> None:
        super().__init__([])
        self.forgets = 0

    def forget_prompts(self) -> None:
        self.forgets += 1


def test_forget_prompts_asks_a_model_that_can_and_leaves_others_alone(
    services: AppServices,
) -> None:
    services.forget_prompts()  # scripted: keeps no prompts, has nothing to forget
    model = _ForgettingModel()
    services.set_chat_model(model)
    services.forget_prompts()
    assert model.forgets == 1
    services.set_chat_model(None)
    services.forget_prompts()  # no chat model
    assert model.forgets == 1


class _ForgettingEmbedder:
    def __init__(self) -> None:
        self.forgets = 0

    def forget_texts(self) -> None:
        self.forgets += 1


def test_forget_prompts_asks_the_embedding_model_too(services: AppServices) -> None:
    embedder = _ForgettingEmbedder()
    services.embedder = embedder  # type: ignore[assignment]
    services.forget_prompts()
    assert embedder.forgets == 1


def test_what_was_forgotten_is_read_ahead_again_from_the_store_as_it_is(
    services: AppServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _ForgettingModel()
    services.set_chat_model(model)
    assert services.agent is not None
    asked: list[str | None] = []
    monkeypatch.setattr(services.agent, "read_ahead_later", lambda sid=None: asked.append(sid))
    services.forget_prompts()
    assert model.forgets == 1
    assert asked == [None]  # the session last talked in or opened, read after the forgetting
