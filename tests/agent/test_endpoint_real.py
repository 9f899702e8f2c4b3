"""Endpoints against a real llama_cpp.server on 127.0.0.1: probe, a killed answer, the summary.

The server runs the tiny test GGUF (or the starter, in the slow test), so
what it says is noise; these tests check the plumbing: the registry's probe
reads the real model list, a server killed mid-answer leaves the user's
message and the partial answer (marked interrupted) in the history with one
clear error, and a summary pass runs through ``complete_json`` over HTTP.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, AnswerDelta, TurnEvent
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer, SummaryRunResult
from agenvoy_desktop.core.summary import load_summary, validate_summary
from agenvoy_desktop.llm.endpoints import EndpointRegistry, describe_answerer, open_endpoint_model
from agenvoy_desktop.llm.endpoints import probe as probe_models
from agenvoy_desktop.llm.openai_chat import EndpointChatModel, EndpointError
from tests.conftest import conversation
from tests.endpoint_server import EndpointServer, loopback_only, start_server
from tests.tiny_gguf import write_tiny_llama

pytestmark = pytest.mark.usefixtures("utc")

_LETTERS = {byte + 3 for byte in b" abcdefghijklmnopqrstuvwxyz"}
LETTERS_ONLY = {"logit_bias": {str(i): -100.0 for i in range(259) if i not in _LETTERS}}
"""The tiny model's tokens are bytes (id = byte + 3; 2 is the end): allowing only letters keeps
the answer going and streaming (a lone non-ASCII byte would be held back until it completes)."""


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    yield from loopback_only()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-chat.gguf")


@pytest.fixture(scope="module")
def server(tiny_gguf: Path) -> Iterator[EndpointServer]:
    running = start_server(tiny_gguf, tiny_gguf.parent, n_ctx=4096)
    yield running
    running.stop()


@pytest.fixture
def storage(store: MemoryStore) -> Iterator[Storage]:
    """The storage thread, closed (its jobs finished) before the store it writes to."""
    opened = Storage()
    yield opened
    opened.close()


def test_probe_and_open_through_the_registry(server: EndpointServer, tmp_path: Path) -> None:
    found = probe_models(server.base_url, timeout=10)
    assert [(m.id, m.context_size) for m in found] == [(server.alias, None)]  # no /props here
    endpoint = EndpointRegistry(tmp_path).add(server.base_url, found[0].id, name="local-tiny")
    model = open_endpoint_model(endpoint)
    try:
        asyncio.run(model.load())
        assert (model.name, model.model) == ("local-tiny", server.alias)
    finally:
        model.close()


def test_server_killed_mid_answer_keeps_question_and_partial(
    tiny_gguf: Path, store: MemoryStore, storage: Storage, tmp_path: Path
) -> None:
    doomed = start_server(tiny_gguf, tmp_path, n_ctx=4096)
    model = EndpointChatModel(base_url=doomed.base_url, model=doomed.alias, name="doomed")
    model.extra_body = dict(LETTERS_ONLY)
    config = AgentConfig(window_messages=6, max_answer_tokens=3000, proactive_recall=False)
    agent = Agent(storage, store, model, ToolRegistry([]), config=config)
    sid = store.create_session("t")
    events: list[TurnEvent] = []

    def on_event(event: TurnEvent) -> None:
        events.append(event)
        if isinstance(event, AnswerDelta) and doomed.process.poll() is None:
            doomed.kill()  # the server dies with its socket, mid-answer

    async def main() -> None:
        try:
            await agent.run_turn(sid, "Write a long story.", on_event=on_event)
        finally:
            await agent.idle()

    try:
        with pytest.raises(EndpointError) as caught:
            asyncio.run(main())
    finally:
        doomed.stop()
        model.close()
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.kind in ("stream", "refused", "http", "malformed")
    user, answer = store.history(sid).messages
    assert (user.role, user.content) == ("user", "Write a long story.")
    assert answer.role == "assistant"
    assert answer.extra.get("interrupted") is True
    streamed = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    assert streamed
    assert answer.content == streamed
    assert describe_answerer(answer.extra.get("answered_by")) == (
        f"doomed ({doomed.alias}) at {doomed.base_url.removesuffix('/v1')} (endpoint)"
    )


def _summarize(
    store: MemoryStore, model: Any, sid: str, window: int, max_tokens: int | None = None
) -> SummaryRunResult:
    async def main() -> SummaryRunResult:
        summarizer = Summarizer(store, model, window_messages=window, max_answer_tokens=max_tokens)
        return await summarizer.run(sid)

    return asyncio.run(main())


def test_a_summary_pass_runs_through_the_server(server: EndpointServer, store: MemoryStore) -> None:
    """The tiny model's JSON is noise that follows the schema: the pass reaches the server."""
    sid = store.create_session("t")
    store.append(sid, conversation([f"message {i} about the trip" for i in range(8)]))
    model = EndpointChatModel(base_url=server.base_url, model=server.alias, name="tiny")
    try:
        result = _summarize(store, model, sid, window=2, max_tokens=120)  # noise runs long
    finally:
        model.close()
    if result.stopped == "done":
        assert result.passes >= 1
        summary = load_summary(store.folder(sid))
        assert summary is not None
        validate_summary(summary)
    else:  # the server answered with noise the summary checks refuse, never a transport error
        assert result.error is not None
        assert "EndpointError" not in result.error
        assert "tiny:" in result.error  # the model's own complaint about its answer


NO_EXTRA_BUFFERS = """\
import llama_cpp.llama_cpp as _lib

_defaults = _lib.llama_model_default_params


def _without_extra_buffers():
    params = _defaults()
    params.use_extra_bufts = False
    return params


_lib.llama_model_default_params = _without_extra_buffers
"""
"""A ``sitecustomize`` for the server process: llama_cpp.server has no switch for llama.cpp's
extra CPU buffers, which crash the starter's kernels on some CPUs (the app probes them and
turns them off in-process; ``--version`` says so).  The test is about the HTTP path."""


@pytest.mark.slow
def test_the_starter_summarises_through_the_server(
    starter_model: Path, store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The starter behind llama_cpp.server lands a valid summary, like it does in-process."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_EXTRA_BUFFERS, encoding="utf-8")
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    running = start_server(starter_model, tmp_path, alias="starter", n_ctx=4096)
    sid = store.create_session("expenses")
    messages = conversation(
        [
            "I need a database for the expense tracker app. SQLite or PostgreSQL?",
            "For a single-user desktop app SQLite is simpler: one file, no server to run.",
            "Good point. Decision: we will use SQLite for the expense tracker database.",
            "Noted: SQLite it is. Next we could design the expenses table.",
            "Let's do that tomorrow. What about the currency format?",
            "Store amounts as integer cents and the ISO currency code next to them.",
        ]
    )
    store.append(sid, messages)
    model = EndpointChatModel(base_url=running.base_url, model="starter", name="starter")
    try:
        result = _summarize(store, model, sid, window=2)
    finally:
        model.close()
        running.stop()
    assert result.stopped == "done", result.error
    assert result.folded == 4
    summary = load_summary(store.folder(sid))
    assert summary is not None
    validate_summary(summary)
    ids = {m.id for m in messages}
    assert all(decision.source in ids for decision in summary.key_decisions)
