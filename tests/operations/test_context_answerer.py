"""The Context tab's reading names who answers next and who wrote the last answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.llm.openai_chat import EndpointChatModel
from agenvoy_desktop.operations.context import ContextView, read_context
from agenvoy_desktop.paths import AppPaths
from tests.fakes import HashingEmbedder
from tests.loopback import allow_loopback, fake_server, free_port, ollama_routes
from tests.scripted_chat import ScriptedChatModel

__all__ = ["allow_loopback", "fake_server"]  # fixtures, used by name


@pytest.fixture
def services(paths: AppPaths) -> Iterator[AppServices]:
    opened = AppServices.open(
        paths, embedder=HashingEmbedder(), chat_model=ScriptedChatModel([["Hello!"]] * 3)
    )
    yield opened
    opened.close()


def _turn_then_read(services: AppServices, sid: str, swap: Any = None) -> ContextView:
    async def main() -> ContextView:
        assert services.agent is not None
        await services.agent.run_turn(sid, "hi")
        if swap is not None:
            services.set_chat_model(swap)
        return await read_context(services, sid)

    return asyncio.run(main())


def test_local_model_answered(services: AppServices) -> None:
    sid = services.store.create_session("t")
    view = _turn_then_read(services, sid)
    assert view.backend == "scripted-chat (llama.cpp, in-process)"
    assert view.answered_by == "scripted-chat (llama.cpp, in-process)"
    assert not view.remote
    assert view.count_problem == ""
    assert view.total_tokens is not None


def test_no_answer_yet_names_only_the_next_model(services: AppServices) -> None:
    sid = services.store.create_session("t")
    view = asyncio.run(read_context(services, sid))
    assert view.answered_by is None
    assert view.backend == "scripted-chat (llama.cpp, in-process)"


def test_endpoint_answers_next_with_its_address(services: AppServices, fake_server: Any) -> None:
    server = fake_server(ollama_routes("llama3.1:8b", 8192))
    sid = services.store.create_session("t")
    model = EndpointChatModel(base_url=server.base_url, model="llama3.1:8b", name="llama3.1:8b")
    try:
        view = _turn_then_read(services, sid, swap=model)
    finally:
        model.close()
    assert view.backend == f"llama3.1:8b at {server.root} (endpoint)"
    assert view.answered_by == "scripted-chat (llama.cpp, in-process)"  # the earlier answer
    assert not view.remote


def test_unreachable_endpoint_still_shows_the_messages(
    services: AppServices, allow_loopback: None
) -> None:
    sid = services.store.create_session("t")
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = EndpointChatModel(base_url=url, model="m", name="down", connect_timeout=1.0)
    try:
        view = _turn_then_read(services, sid, swap=model)
    finally:
        model.close()
    assert [m["role"] for m in view.messages] == ["system", "user", "assistant"]
    assert view.backend == f"down (m) at {url.removesuffix('/v1')} (endpoint)"
    assert "127.0.0.1" in view.count_problem
    assert "\n" not in view.count_problem
    assert view.tokens == []


class RemoteDouble(ScriptedChatModel):
    """Looks like an endpoint on another machine; counts tokens locally (no network)."""

    backend = "endpoint"
    base_url = "https://api.example.com/v1"
    model = "gpt-x"
    name = "far"


def test_remote_endpoint_is_flagged(services: AppServices) -> None:
    sid = services.store.create_session("t")
    view = _turn_then_read(services, sid, swap=RemoteDouble([]))
    assert view.remote
    assert view.backend == "far (gpt-x) at https://api.example.com (remote endpoint)"
