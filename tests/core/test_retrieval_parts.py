"""A message embedded in several parts ranks by its best part, less a little per part,
and keeps only a share of its hybrid score."""

from __future__ import annotations

import math

import pytest

from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.retrieval.fusion import HYBRID_WEIGHTS
from agenvoy_desktop.core.retrieval.parts import (
    FUSED_PART_DISCOUNT,
    PART_PENALTY,
    fused_share,
    part_penalty,
    ranking_score,
)
from agenvoy_desktop.core.search import (
    Hit,
    SearchQuery,
    asks_for_replies,
    discount_parts,
    fuse,
    search_chat_history,
    with_neighbours,
)
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import T0, StoreFactory, conversation, msg

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


def test_fused_share_is_whole_for_one_part_and_shrinks_with_more() -> None:
    assert fused_share(1) == 1.0
    assert fused_share(0) == 1.0
    assert fused_share(2) == pytest.approx(1 / (1 + FUSED_PART_DISCOUNT * math.log(2)))
    assert 0.0 < fused_share(8) < fused_share(2) < 1.0


def test_discount_parts_lets_the_short_turn_pass_the_long_reply(open_store: StoreFactory) -> None:
    store = open_store()
    sid, long_row, short_row = _seed(store)
    rows = {r.rowid: r for r in store.archive.messages(sid)}
    parts = store.vectors(sid).parts(long_row)
    hits = [Hit(rows[long_row], 1.0, bm25=2.0), Hit(rows[short_row], 0.8, cosine=0.5)]
    ranked = discount_parts(store, hits)
    assert [h.item.rowid for h in ranked] == [short_row, long_row]
    assert ranked[0].score == 0.8  # one part: unchanged
    assert ranked[1].score == pytest.approx(fused_share(parts))
    assert ranked[1].bm25 == 2.0  # the routes' evidence is kept
    assert ranked[0].cosine == 0.5


def test_a_message_without_vectors_is_counted_from_its_text(open_store: StoreFactory) -> None:
    """An archived message past history.json has no vectors; its text says how long it is."""
    store = open_store()
    sid, long_row, _short_row = _seed(store)
    parts = store.vectors(sid).parts(long_row)
    ghost = ArchivedMessage(long_row + 100, sid, 9, msg("assistant", LONG, T0))
    short_ghost = ArchivedMessage(long_row + 101, sid, 10, msg("user", SHORT, T0))
    ranked = discount_parts(store, [Hit(ghost, 1.0), Hit(short_ghost, 1.0)])
    assert [h.item.rowid for h in ranked] == [short_ghost.rowid, ghost.rowid]
    assert ranked[1].score == pytest.approx(fused_share(parts))
    # equal scores after the discount keep the order they came in
    twin = ArchivedMessage(long_row + 102, sid, 11, msg("assistant", SHORT, T0))
    pair = [Hit(short_ghost, 1.0), Hit(twin, 1.0)]
    assert discount_parts(store, pair) == pair
    assert discount_parts(store, pair[::-1]) == pair[::-1]


def test_asks_for_replies_reads_the_query() -> None:
    assert asks_for_replies("Can you remind me which tree you recommended?")
    assert asks_for_replies("In our previous conversation, what did you suggest?")
    assert not asks_for_replies("Which tree did I plant in the garden?")


@pytest.mark.parametrize(
    ("text", "discounted"),
    [
        ("which tree did we plant at the end of the garden path", True),
        ("remind me which tree you said we planted at the end of the garden path", False),
    ],
    ids=["about the user", "about a reply"],
)
def test_hybrid_discounts_long_messages_unless_a_reply_is_asked_for(
    open_store: StoreFactory, text: str, discounted: bool
) -> None:
    store = open_store()
    _seed(store)
    routes = [
        search_chat_history(store, SearchQuery(text, mode=mode, limit=40)).hits
        for mode in ("semantic", "keyword")
    ]
    query = SearchQuery(text, mode="hybrid")
    summed = with_neighbours(store, fuse(routes, weights=HYBRID_WEIGHTS), query, frozenset())
    expected = discount_parts(store, summed) if discounted else summed
    hits = search_chat_history(store, query).hits
    assert [(h.item.rowid, h.score) for h in hits] == [(h.item.rowid, h.score) for h in expected]
    assert (hits != summed) == discounted  # the long message's score differs only when discounted
