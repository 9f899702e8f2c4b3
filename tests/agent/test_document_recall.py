"""Passages of the user's documents in the prompt: only those that clearly match, cited."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenvoy_desktop.agent.document_recall import (
    AGREED_FLOOR,
    HEADER,
    KEYWORD_DEPTH,
    MAX_PASSAGES,
    PASSAGE_FLOOR,
    DocumentPassages,
    clears,
    format_passages,
    sources_used,
    with_sources,
)
from agenvoy_desktop.agent.document_tools import Passage
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.indexer import index_collection
from agenvoy_desktop.rag.registry import CollectionRegistry
from agenvoy_desktop.rag.search import DocumentHit
from tests.fakes import HashingEmbedder
from tests.rag.index_support import make_tree
from tests.scripted_chat import ScriptedChatModel


def _passage(cosine: float | None, keyword_rank: int | None, n: int = 1) -> Passage:
    hit = DocumentHit(
        "docs", f"notes/n{n}.md", 1, 3, None, "", f"text {n}", 0.0, f"notes/n{n}.md:1-3"
    )
    return Passage(hit, cosine, keyword_rank)


def test_the_floor_needs_meaning_or_meaning_and_words() -> None:
    assert clears(_passage(PASSAGE_FLOOR, None))
    assert not clears(_passage(PASSAGE_FLOOR - 0.01, None))
    assert clears(_passage(AGREED_FLOOR, 0))  # the keyword search agrees
    assert not clears(_passage(AGREED_FLOOR, KEYWORD_DEPTH))  # too far down the keyword list
    assert not clears(_passage(AGREED_FLOOR - 0.01, 0))
    assert not clears(_passage(None, 0))  # words alone never bring a passage


def test_the_block_cites_the_best_passages_first() -> None:
    passages = [
        _passage(0.45, None, 1),
        _passage(0.70, 0, 2),
        _passage(0.5, 1, 3),
        _passage(0.1, 0, 4),
    ]
    block = format_passages(passages)
    lines = block.text.splitlines()
    assert lines[0] == HEADER
    assert lines[1].startswith("[notes/n2.md:1-3] text 2")
    assert len(lines) == 1 + MAX_PASSAGES
    assert block.citations == ["notes/n2.md:1-3", "notes/n3.md:1-3"]
    assert format_passages([_passage(0.1, 0)]).text == ""


@pytest.fixture
def services(paths: AppPaths, tmp_path: Path) -> Iterator[AppServices]:
    root = tmp_path / "notes"
    make_tree(root)
    collection = CollectionRegistry(paths).add("docs", [root])
    index_collection(paths, collection, HashingEmbedder())
    opened = AppServices.open(
        paths, embedder=HashingEmbedder(), chat_model=ScriptedChatModel([["ok"]] * 3)
    )
    opened.settings.documents.enabled = True
    yield opened
    opened.close()


def _first_prompt(services: AppServices) -> str:
    model = services.agent.model if services.agent is not None else None
    assert isinstance(model, ScriptedChatModel)
    return str(model.seen[0].messages[0]["content"])


def test_a_matching_passage_is_in_the_prompt_and_the_timeline(services: AppServices) -> None:
    assert services.agent is not None
    services.agent.config.small_model = True
    sid = services.store.create_session("t")
    found = services.documents.passages("tomatoes full sun garden", 5)
    assert found, "the hashing embedder finds the garden note"
    best = max(found, key=lambda p: p.cosine or 0.0)
    assert clears(best), f"cosine {best.cosine}: the test text must clear the floor"
    result = asyncio.run(services.agent.run_turn(sid, "tomatoes full sun garden"))
    prompt = _first_prompt(services)
    assert HEADER in prompt
    assert best.hit.citation in prompt
    assert "search_rag" not in result.tools_offered  # the passage is already there
    events = [d for _t, kind, d in services.store.archive.events(sid) if kind == "recall"]
    assert events[-1]["citations"][0] == best.hit.citation


def test_nothing_is_added_when_documents_are_off(services: AppServices) -> None:
    assert services.agent is not None
    services.settings.documents.enabled = False
    sid = services.store.create_session("t")
    asyncio.run(services.agent.run_turn(sid, "tomatoes full sun garden"))
    assert HEADER not in _first_prompt(services)


def test_a_failing_document_search_only_leaves_the_passages_out(
    services: AppServices, caplog: pytest.LogCaptureFixture
) -> None:
    assert services.agent is not None

    def broken(_message: str) -> object:
        raise RuntimeError("index exploded")

    services.agent.documents = broken  # type: ignore[assignment]
    sid = services.store.create_session("t")
    result = asyncio.run(services.agent.run_turn(sid, "tomatoes full sun garden"))
    assert result.answer == "ok"
    assert HEADER not in _first_prompt(services)
    assert "document recall failed" in caplog.text


def _block(*pairs: tuple[str, str]) -> DocumentPassages:
    return DocumentPassages("block", [c for c, _ in pairs], [t for _, t in pairs])


def test_the_app_cites_a_passage_the_answer_draws_on() -> None:
    passages = _block(
        ("bike.md:6-7", "Front tyre pressure is 4.5 bar, rear tyre pressure is 5 bar."),
        ("soup.md:1-3", "Red lentils, one onion, two carrots, cumin."),
    )
    question = "What is the front tyre pressure of my bike?"
    cited = with_sources("The front tyre pressure is 4.5 bar.", question, passages)
    assert cited.endswith("\n\nSource: [bike.md:6-7]")
    # echoing the question's own words proves nothing
    assert with_sources("The front tyre pressure matters.", question, passages).endswith("matters.")
    # an answer that names its source keeps its own words
    named = "It is 4.5 bar [bike.md:6-7]."
    assert with_sources(named, question, passages) == named
    both = with_sources("4.5 bar; and soup: lentils, onion, carrots.", question, passages)
    assert both.endswith("Sources: [bike.md:6-7], [soup.md:1-3]")
    assert sources_used("Hello there!", question, passages) == []
