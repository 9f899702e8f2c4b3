"""The starter model summarises a short fixed conversation (slow, run in CI).

Checks what matters to a user: the answer fits the schema, and a decision
stated in the conversation lands in ``key_decisions``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import load_summary, validate_summary
from agenvoy_desktop.llm.engine import ChatEngine
from tests.conftest import conversation

pytestmark = pytest.mark.slow

CONVERSATION = [
    "I need a database for the expense tracker app. Should it be SQLite or PostgreSQL?",
    "For a single-user desktop app SQLite is simpler: one file, no server to run.",
    "Good point. Decision: we will use SQLite for the expense tracker database.",
    "Noted: SQLite it is. Next we could design the expenses table.",
    "Let's do that tomorrow. What about the currency format?",
    "Store amounts as integer cents and the ISO currency code next to them.",
]


def test_starter_model_summary_keeps_the_decision(store: MemoryStore, starter_model: Path) -> None:
    sid = store.create_session("expenses")
    store.append(sid, conversation(CONVERSATION))

    async def main() -> None:
        with ChatEngine(starter_model, context_size=4096, threads=2, temperature=0.0) as model:
            result = await Summarizer(store, model, window_messages=2).run(sid)
        assert result.stopped == "done", result.error
        assert result.folded == 4

    asyncio.run(main())
    summary = load_summary(store.folder(sid))
    assert summary is not None
    validate_summary(summary)
    decisions = " ".join(d.decision for d in summary.key_decisions).lower()
    assert "sqlite" in decisions
