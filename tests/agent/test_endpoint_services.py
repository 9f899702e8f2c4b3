"""AppServices with an ``endpoint:<name>`` chat model: opening, refusing, switching."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT, SMALL_MODEL_SYSTEM_PROMPT
from agenvoy_desktop.agent.services import AppServices, _open_chat_model, model_profile_of
from agenvoy_desktop.llm.endpoints import EndpointRegistry
from agenvoy_desktop.llm.model_profile import CAPABLE, ModelProfile
from agenvoy_desktop.llm.openai_chat import EndpointChatModel, EndpointError
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import Settings, load_settings
from tests.fakes import HashingEmbedder
from tests.loopback import allow_loopback, fake_server, free_port, ollama_routes
from tests.scripted_chat import ScriptedChatModel

__all__ = ["allow_loopback", "fake_server"]  # fixtures, used by name


@pytest.fixture
def services(paths: AppPaths) -> Iterator[AppServices]:
    opened = AppServices.open(paths, embedder=HashingEmbedder(), chat_model=ScriptedChatModel([]))
    yield opened
    opened.close()


def _choosing(choice: str) -> Settings:
    settings = Settings()
    settings.models.chat_model = choice
    return settings


def test_an_endpoint_choice_opens_without_contacting_it(paths: AppPaths) -> None:
    EndpointRegistry(paths.models_dir).add("127.0.0.1:9", "llama3.1:8b", name="big")
    model, problem = _open_chat_model(paths, _choosing("endpoint:big"), None, None)
    assert problem is None
    assert isinstance(model, EndpointChatModel)
    assert (model.name, model.model, model.base_url) == (
        "big",
        "llama3.1:8b",
        "http://127.0.0.1:9/v1",
    )
    model.close()


def test_unknown_endpoint_is_a_problem_to_show(paths: AppPaths) -> None:
    model, problem = _open_chat_model(paths, _choosing("endpoint:gone"), None, None)
    assert model is None
    assert problem is not None
    assert "no endpoint named 'gone'" in problem.message
    assert "Settings → Models" in problem.fix


def test_unconfirmed_remote_endpoint_is_refused(paths: AppPaths) -> None:
    """A hand-edited endpoints.json cannot send text away without the user's yes."""
    paths.models_dir.mkdir(parents=True, exist_ok=True)
    entry = {
        "name": "far",
        "base_url": "https://api.example.com/v1",
        "model": "m",
        "context_size": None,
        "api_key_env": None,
        "keyring": False,
        "remote_confirmed": False,
        "preset": None,
    }
    (paths.models_dir / "endpoints.json").write_text(
        json.dumps({"version": 1, "entries": [entry]}), encoding="utf-8"
    )
    model, problem = _open_chat_model(paths, _choosing("endpoint:far"), None, None)
    assert model is None
    assert problem is not None
    assert "never confirmed" in problem.message


def test_missing_key_is_a_problem_to_show(paths: AppPaths) -> None:
    EndpointRegistry(paths.models_dir).add(
        "127.0.0.1:9", "m", name="keyed", api_key_env="NO_SUCH_TEST_KEY_VAR"
    )
    model, problem = _open_chat_model(paths, _choosing("endpoint:keyed"), None, None)
    assert model is None
    assert problem is not None
    assert "NO_SUCH_TEST_KEY_VAR" in problem.message


@pytest.mark.parametrize(
    ("model_id", "small"),
    [("gpt-4o", False), ("llama3.1:70b", False), ("llama3.2:1b", True)],
)
def test_profile_of_an_endpoint_model(model_id: str, small: bool) -> None:
    model = EndpointChatModel(base_url="http://127.0.0.1:9/v1", model=model_id, name="x")
    try:
        assert model_profile_of(model).small is small
        if model_id == "gpt-4o":
            assert model_profile_of(model) == CAPABLE
    finally:
        model.close()


def test_profile_follows_the_size_the_server_reported() -> None:
    """An alias that names no size ("qwen-starter") still gets the small-model turn."""
    model = EndpointChatModel(base_url="http://127.0.0.1:9/v1", model="qwen-starter", name="x")
    try:
        assert not model_profile_of(model).small  # nothing known: the full tool set
        model.parameters = 494_032_768
        assert model_profile_of(model).small
    finally:
        model.close()


def test_switch_to_a_running_endpoint_and_back(
    services: AppServices, paths: AppPaths, fake_server: Any
) -> None:
    server = fake_server(ollama_routes("llama3.1:8b", 8192))
    EndpointRegistry(paths.models_dir).add(server.root, "llama3.1:8b", name="ollama")
    old = services.chat_model

    async def main() -> None:
        await services.switch_chat_model("endpoint:ollama")

    asyncio.run(main())
    model: Any = services.chat_model
    assert isinstance(model, EndpointChatModel)
    assert model is not old
    assert services.agent is not None
    assert services.agent.model is model
    assert not services.model_profile.small
    assert services.chat_choice == "endpoint:ollama"
    assert load_settings(paths.settings_file).models.chat_model == "endpoint:ollama"
    assert ("GET", "/v1/models") in [s[:2] for s in server.seen]


def test_switch_to_a_stopped_endpoint_keeps_the_old_model(
    services: AppServices, paths: AppPaths, allow_loopback: None
) -> None:
    EndpointRegistry(paths.models_dir).add(f"127.0.0.1:{free_port()}", "m", name="down")
    old = services.chat_model

    async def main() -> None:
        await services.switch_chat_model("endpoint:down")

    with pytest.raises(EndpointError) as caught:
        asyncio.run(main())
    assert caught.value.kind in ("refused", "timeout")
    assert "\n" not in str(caught.value)
    assert services.chat_model is old
    assert not paths.settings_file.exists() or (
        load_settings(paths.settings_file).models.chat_model == ""
    )


def test_a_small_model_gets_the_short_system_prompt(services: AppServices) -> None:
    """The starter copied the long prompt's identity line into its answers (statement_echo)."""
    assert services._agent_config().system_prompt == DEFAULT_SYSTEM_PROMPT
    services.model_profile = ModelProfile(parameters=494_000_000, template_tools=True)
    assert services._agent_config().system_prompt == SMALL_MODEL_SYSTEM_PROMPT
    assert "user" not in SMALL_MODEL_SYSTEM_PROMPT
