"""Which passages proactive document recall shows: agreement first, then meaning."""

from __future__ import annotations

from agenvoy_desktop.agent.document_recall import (
    AGREED_FLOOR,
    PASSAGE_FLOOR,
    DocumentFloor,
    agrees,
    choose_passages,
    format_passages,
)
from agenvoy_desktop.agent.document_tools import Passage
from agenvoy_desktop.rag.search import DocumentHit


def _passage(cosine: float | None, keyword_rank: int | None, n: int) -> Passage:
    path = f"notes/n{n}.md"
    return Passage(
        DocumentHit("docs", path, 1, 3, None, "", f"text {n}", 0.0, f"{path}:1-3"),
        cosine,
        keyword_rank,
    )


def _paths(passages: list[Passage]) -> list[str]:
    return [p.hit.path for p in passages]


def test_passages_both_searches_found_come_before_closer_ones_found_by_meaning_alone() -> None:
    close = _passage(PASSAGE_FLOOR + 0.2, None, 1)
    closer = _passage(PASSAGE_FLOOR + 0.3, None, 2)
    agreed = _passage(AGREED_FLOOR, 0, 3)
    assert agrees(agreed)
    assert not agrees(closer)
    assert _paths(choose_passages([close, closer, agreed])) == ["notes/n3.md", "notes/n2.md"]
    by_cosine = DocumentFloor(agreed_first=False)
    assert _paths(choose_passages([close, closer, agreed], by_cosine)) == [
        "notes/n2.md",
        "notes/n1.md",
    ]


def test_a_floor_value_changes_what_clears() -> None:
    weak = _passage(0.3, 0, 1)
    assert format_passages([weak]).citations == []
    loose = DocumentFloor(passage=0.6, agreed=0.25, keyword_depth=1)
    assert format_passages([weak], loose).citations == ["notes/n1.md:1-3"]
    assert DocumentFloor(keyword_depth=3, max_passages=2).search_depth == 5
