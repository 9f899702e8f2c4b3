"""A message embedded in several parts ranks by its best part, less a little per part."""

from __future__ import annotations

import math

import pytest

from agenvoy_desktop.core.retrieval.parts import PART_PENALTY, part_penalty, ranking_score
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import T0, StoreFactory, conversation

SHORT = "we planted a persimmon tree in the garden"
LONG = (
    " ".join(f"The garden path number {i} is lined with roses." for i in range(60))
    + " At the very end we planted a persimmon tree."
)


def test_one_part_loses_nothing_and_more_parts_lose_more() -> None:
    assert part_penalty(1) == 0.0
    assert part_penalty(0) == 0.0  # a message without vectors is never ranked; no error
    assert part_penalty(2) == pytest.approx(PART_PENALTY * math.log(2))
    assert 0.0 < part_penalty(2) < part_penalty(8) < 0.2
    assert ranking_score(0.5, 1) == 0.5
    assert ranking_score(0.5, 8) == pytest.approx(0.5 - part_penalty(8))


def _seed(store: MemoryStore) -> tuple[str, int, int]:
    sid = store.create_session(session_id="garden")
    store.import_messages(conversation([LONG, SHORT]), sid)
    long_row, short_row = sorted(store.archive.vector_rowids(sid))
    return sid, long_row, short_row


def test_parts_counts_a_messages_vectors(open_store: StoreFactory) -> None:
    store = open_store()
    sid, long_row, short_row = _seed(store)
    vectors = store.vectors(sid)
    assert vectors.parts(long_row) == vectors.vector_count - 1 > 2
    assert vectors.parts(short_row) == 1
    assert vectors.parts(short_row + 100) == 0


@pytest.mark.parametrize("timed", [False, True], ids=["index", "time range"])
def test_semantic_hits_rank_by_the_penalised_score_and_keep_the_cosine(
    open_store: StoreFactory, timed: bool
) -> None:
    """The index and the exact time-range path agree; the cosine recall's floors read is
    the best part's, untouched."""
    store = open_store()
    sid, long_row, _short_row = _seed(store)
    parts = store.vectors(sid).parts(long_row)
    query = SearchQuery(
        "persimmon tree planted",
        mode="semantic",
        session_id=sid,
        time_from_ns=T0 if timed else None,
    )
    hits = search_chat_history(store, query).hits
    assert len(hits) == 2
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for hit in hits:
        assert hit.cosine is not None
        expected = parts if hit.item.rowid == long_row else 1
        assert hit.score == pytest.approx(hit.cosine - part_penalty(expected))
