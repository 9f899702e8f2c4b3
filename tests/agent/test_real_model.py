"""One real turn with the starter model: a fact only search_chat_history can find.

Greedy decoding and a fixed clock make the prompt and the answer repeatable.
Slow (about a minute on 2 cores), and run in CI like every other test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.turn import ToolCallStarted, TurnEvent
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import Settings
from tests.conftest import SECOND, T0, FakeClock, conversation
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.slow


def test_answers_from_a_planted_fact_via_search(paths: AppPaths, starter_model: Path) -> None:
    engine = ChatEngine(starter_model, context_size=4096, threads=2, temperature=0.0, seed=0)
    clock = FakeClock(start=T0 + 30 * 86400 * SECOND)
    services = AppServices.open(
        paths, settings=Settings(), embedder=HashingEmbedder(), chat_model=engine, clock=clock
    )
    events: list[TurnEvent] = []
    try:
        store = services.store

        async def main() -> str:
            # fixed ids: session ids appear in the search result, so the prompt (and the
            # greedy answer) would otherwise change from run to run
            planted = await services.storage.run(store.create_session, "bike", "notes-1")
            facts = conversation(
                ["Note for later: my bike lock code is 4721.", "Got it, I'll remember that."]
            )
            await services.storage.run(store.append, planted, facts)
            sid = await services.storage.run(store.create_session, "today", "today-1")
            assert services.agent is not None
            result = await services.agent.run_turn(
                sid, "What is my bike lock code? Search the chat history.", on_event=events.append
            )
            return result.answer

        answer = asyncio.run(main())
    finally:
        services.close()
    called = [e.name for e in events if isinstance(e, ToolCallStarted)]
    assert "search_chat_history" in called
    assert "4721" in answer
