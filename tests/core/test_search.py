"""search_chat_history: routes, fusion, excerpts, filters, scope, window exclusion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.retrieval.fusion import HYBRID_WEIGHTS
from agenvoy_desktop.core.retrieval.neighbours import NeighbourWeights, neighbour_sum
from agenvoy_desktop.core.search import (
    MODES,
    Hit,
    SearchError,
    SearchQuery,
    Withheld,
    build_excerpts,
    discount_parts,
    fuse,
    search_chat_history,
    with_neighbours,
)
from agenvoy_desktop.core.store import MemoryStore, UnknownSessionError
from tests.conftest import SECOND, T0, StoreFactory, conversation, msg

TRIP = [
    "we should book a hotel in Kyoto near the station",  # 0
    "I found the Granvia hotel, it is next to Kyoto station",  # 1
    "what about food in Osaka",  # 2
    "Dotonbori has great street food",  # 3
    "remember to buy a rail pass",  # 4
    "the seven day rail pass is best",  # 5
    "decided: Granvia hotel booked for three nights",  # 6
    "great, the hotel booking is confirmed",  # 7
    "anything else for the trip",  # 8
    "pack an umbrella for rainy season",  # 9
]
WORK = [
    "the quarterly budget review is on Monday",
    "I will prepare the budget spreadsheet",
    "also invite the finance team",
    "done, invitations sent",
]


@pytest.fixture
def seeded(store: MemoryStore) -> tuple[MemoryStore, list[Message], list[Message]]:
    trip = conversation(TRIP, start=T0)
    work = conversation(WORK, start=T0 + 1000 * SECOND)
    store.import_messages(trip, "trip")
    store.import_messages(work, "work")
    return store, trip, work


def _contents(hits: list[Hit]) -> list[str]:
    return [h.item.message.content for h in hits]


def _item(rowid: int, seq: int = 0, session: str = "s") -> ArchivedMessage:
    return ArchivedMessage(rowid, session, seq, msg("user", str(rowid), T0 + seq))


def test_fuse_is_reciprocal_rank_fusion() -> None:
    a, b, c = _item(1), _item(2), _item(3)
    fused = fuse([[Hit(a, 9.0), Hit(b, 8.0)], [Hit(b, 0.5), Hit(c, 0.4)]], k=60)
    assert [h.item.rowid for h in fused] == [2, 1, 3]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61)
    assert fused[2].score == pytest.approx(1 / 62)
    assert fuse([]) == []
    # Ties keep first-seen order; k changes the weights.
    weighted = fuse([[Hit(a, 1.0)], [Hit(c, 1.0)]], k=1, weights=(0.75, 1.0))
    assert [h.item.rowid for h in weighted] == [3, 1]
    assert weighted[1].score == pytest.approx(0.75 / 2)
    tied = fuse([[Hit(a, 1)], [Hit(c, 1)]], k=1)
    assert [h.item.rowid for h in tied] == [1, 3]
    assert tied[0].score == pytest.approx(0.5)


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_modes_find_the_hotel(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, trip, _ = seeded
    result = search_chat_history(store, SearchQuery("Granvia hotel booked", mode=mode, limit=3))  # type: ignore[arg-type]
    assert result.hits
    if mode == "semantic":
        # The reply after it is embedded with it as context: either may lead.
        assert trip[6].id in {h.item.message.id for h in result.hits[:2]}
    else:
        assert result.hits[0].item.message.id == trip[6].id
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert len({h.item.message.id for h in result.hits}) == len(result.hits)


def test_hybrid_fuses_both_routes(seeded: tuple[MemoryStore, list[Message], list[Message]]) -> None:
    store, _, _ = seeded
    query = "budget review"
    semantic = search_chat_history(store, SearchQuery(query, mode="semantic", limit=40)).hits
    keyword = search_chat_history(store, SearchQuery(query, mode="keyword", limit=40)).hits
    hybrid_query = SearchQuery(query, mode="hybrid", limit=5)
    hybrid = search_chat_history(store, hybrid_query).hits
    fused = fuse([semantic, keyword], weights=HYBRID_WEIGHTS)
    expected = discount_parts(store, with_neighbours(store, fused, hybrid_query, frozenset()))[:5]
    assert [h.item.rowid for h in hybrid] == [h.item.rowid for h in expected]
    assert [h.score for h in hybrid] == pytest.approx([h.score for h in expected])
    # without the neighbour sum the order is the fusion's
    off = with_neighbours(store, fused, hybrid_query, frozenset(), NeighbourWeights(0, 0, 0))
    assert off == fused


def test_neighbour_sum_shares_scores_along_the_conversation() -> None:
    weights = NeighbourWeights(previous=0.25, next=0.5, two_away=0.1)
    summed = neighbour_sum([["a", "b", "c", "d", "e"], ["x", "y"]], {"c": 1.0, "y": 2.0}, weights)
    # "b" comes before the hit: it gains half of it; "d" after: a quarter
    assert summed == pytest.approx(
        {"a": 0.1, "b": 0.5, "c": 1.0, "d": 0.25, "e": 0.1, "x": 1.0, "y": 2.0}
    )
    assert neighbour_sum([["a", "b"]], {}, weights) == {}
    assert NeighbourWeights(0, 0, 0).reach == 0
    assert NeighbourWeights(0.25, 0.5, 0).reach == 1


def test_a_neighbour_joins_only_where_it_may_be_shown(store: MemoryStore) -> None:
    texts = ["what did the mechanic say", "the brake pads need replacing", "ok", "thanks"]
    store.import_messages(conversation(texts), "car")
    rows = store.archive.messages("car")
    hit = [Hit(rows[1], 1.0, bm25=3.0)]
    query = SearchQuery("brake pads", mode="hybrid")
    found = with_neighbours(store, hit, query, frozenset())
    assert [h.item.seq for h in found] == [1, 0, 2, 3]  # before the hit: half; after: a quarter
    assert found[0].bm25 == 3.0
    assert found[1].bm25 is None
    assert found[1].cosine is None
    excluded = frozenset({rows[0].message.id})
    assert [h.item.seq for h in with_neighbours(store, hit, query, excluded)] == [1, 2, 3]
    early = SearchQuery("brake pads", mode="hybrid", time_to_ns=rows[1].message.time_ns)
    assert [h.item.seq for h in with_neighbours(store, hit, early, frozenset())] == [1, 0]


def test_tool_traffic_does_not_part_neighbours(store: MemoryStore) -> None:
    messages = [
        msg("user", "which tyres did we pick", T0),
        msg("assistant", "", T0 + SECOND, tool_calls=[{"name": "read_file", "arguments": {}}]),
        msg("tool", "tyres.txt: winter tyres", T0 + 2 * SECOND, name="read_file"),
        msg("assistant", "the winter tyres from the list", T0 + 3 * SECOND),
    ]
    store.import_messages(messages, "car")
    rows = store.archive.messages("car")
    found = with_neighbours(store, [Hit(rows[3], 1.0)], SearchQuery("tyres"), frozenset())
    assert [h.item.seq for h in found] == [3, 0]


def test_excerpts_two_before_one_after_in_time_order(
    seeded: tuple[MemoryStore, list[Message], list[Message]],
) -> None:
    store, trip, work = seeded
    hits = [
        Hit(store.archive.messages("trip", 6, 7)[0], 1.0),
        Hit(store.archive.messages("work", 0, 1)[0], 0.9),
        Hit(store.archive.messages("trip", 1, 2)[0], 0.8),
    ]
    excerpts = build_excerpts(store, hits)
    spans = [[r.message.id for r in e.messages] for e in excerpts]
    assert (
        spans
        == [
            [m.id for m in trip[0:3]],  # hit seq 1: before clipped at 0, 1 after
            [m.id for m in trip[4:8]],  # hit seq 6: 2 before, 1 after
            [m.id for m in work[0:2]],
        ]
    )
    assert excerpts[0].hit_ids == {trip[1].id}
    # Touching spans (seq 0-2 and 3-6) become one excerpt.
    touching = build_excerpts(store, [hits[2], Hit(store.archive.messages("trip", 5, 6)[0], 1)])
    assert [[r.seq for r in e.messages] for e in touching] == [list(range(7))]


def test_overlapping_excerpts_are_merged(
    seeded: tuple[MemoryStore, list[Message], list[Message]],
) -> None:
    store, trip, _ = seeded
    rows = store.archive.messages("trip")
    excerpts = build_excerpts(store, [Hit(rows[6], 1.0), Hit(rows[4], 0.5)])
    assert len(excerpts) == 1
    assert [r.message.id for r in excerpts[0].messages] == [m.id for m in trip[2:8]]
    assert excerpts[0].hit_ids == {trip[4].id, trip[6].id}
    # The last message: nothing after it.
    tail = build_excerpts(store, [Hit(rows[9], 1.0)])
    assert [r.seq for r in tail[0].messages] == [7, 8, 9]


def test_search_returns_excerpts(seeded: tuple[MemoryStore, list[Message], list[Message]]) -> None:
    store, trip, _ = seeded
    result = search_chat_history(store, SearchQuery("Dotonbori", mode="keyword"))
    assert result.hits[0].item.message.id == trip[3].id
    # The message after it is found through its context (weaker), widening the excerpt.
    assert [h.item.message.id for h in result.hits] == [trip[3].id, trip[4].id]
    assert len(result.excerpts) == 1
    assert [r.message.id for r in result.excerpts[0].messages] == [m.id for m in trip[1:6]]


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_time_range_filter(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, trip, _ = seeded
    query = SearchQuery(
        "hotel",
        mode=mode,  # type: ignore[arg-type]
        limit=10,
        time_from_ns=trip[1].time_ns,
        time_to_ns=trip[6].time_ns,
    )
    hits = search_chat_history(store, query).hits
    assert hits
    for hit in hits:
        assert trip[1].time_ns <= hit.item.message.time_ns <= trip[6].time_ns
    ids = {h.item.message.id for h in hits}
    assert trip[0].id not in ids
    assert trip[7].id not in ids
    assert trip[6].id in ids or mode == "semantic"


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_scope_session_vs_all(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, _, work = seeded
    everywhere = search_chat_history(store, SearchQuery("budget", mode=mode, limit=20))  # type: ignore[arg-type]
    assert {h.item.session_id for h in everywhere.hits} >= {"work"}
    only_trip = search_chat_history(
        store,
        SearchQuery("budget", mode=mode, limit=20, session_id="trip"),  # type: ignore[arg-type]
    )
    assert {h.item.session_id for h in only_trip.hits} <= {"trip"}
    only_work = search_chat_history(
        store,
        SearchQuery("budget", mode=mode, limit=20, session_id="work"),  # type: ignore[arg-type]
    )
    assert work[0].id in {h.item.message.id for h in only_work.hits}


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_exclude_window_excludes_exactly_the_window(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, trip, _ = seeded
    window = {m.id for m in store.window("trip", 4)}
    assert window == {m.id for m in trip[6:]}
    query = SearchQuery("hotel", mode=mode, limit=20, session_id="trip", exclude_window=4)  # type: ignore[arg-type]
    result = search_chat_history(store, query)
    ids = {h.item.message.id for h in result.hits}
    assert not ids & window
    everything = search_chat_history(
        store,
        SearchQuery("hotel", mode=mode, limit=20, session_id="trip"),  # type: ignore[arg-type]
    )
    all_ids = {h.item.message.id for h in everything.hits}
    assert all_ids - window == ids
    assert all_ids & window  # the window does hold hotel messages
    for excerpt in result.excerpts:
        assert not {r.message.id for r in excerpt.messages} & window


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_exclude_window_with_a_step_excludes_the_stepped_window(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    """The window a prompt shows with ``window_step`` (N and up to step - 1 more) is left out."""
    store, trip, _ = seeded
    stepped = {m.id for m in store.window("trip", 4, 4)}
    assert stepped == {m.id for m in trip[4:]}  # 6 messages: more than the plain last 4
    query = SearchQuery("rail pass", mode=mode, limit=20, session_id="trip", exclude_window=4)  # type: ignore[arg-type]
    ids = {h.item.message.id for h in search_chat_history(store, query).hits}
    assert ids & {trip[4].id, trip[5].id}  # outside the plain window, inside the stepped one
    with_step = replace(query, window_step=4)
    stepped_ids = {h.item.message.id for h in search_chat_history(store, with_step).hits}
    assert not stepped_ids & stepped
    assert stepped_ids == ids - stepped


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_exclude_window_with_scope_all_only_hides_the_current_session(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, _, _ = seeded
    trip_window = {m.id for m in store.window("trip", 4)}
    work_window = {m.id for m in store.window("work", 4)}
    query = SearchQuery(
        "hotel budget",
        mode=mode,  # type: ignore[arg-type]
        limit=50,
        exclude_window=4,
        current_session="trip",
    )
    ids = {h.item.message.id for h in search_chat_history(store, query).hits}
    assert not ids & trip_window
    everything = search_chat_history(store, SearchQuery("hotel budget", mode=mode, limit=50))  # type: ignore[arg-type]
    all_ids = {h.item.message.id for h in everything.hits}
    assert all_ids & work_window <= ids  # the other session's recent messages stay findable


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_a_withheld_session_is_found_by_no_route(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    """A session in the window's undo window (removed or reset, not yet in the store)."""
    store, _, _ = seeded
    query = SearchQuery("hotel budget", mode=mode, limit=50)  # type: ignore[arg-type]
    assert "work" in {h.item.session_id for h in search_chat_history(store, query).hits}
    held = search_chat_history(store, replace(query, withheld=Withheld(frozenset({"work"}))))
    assert held.hits
    assert {h.item.session_id for h in held.hits} == {"trip"}
    assert {e.session_id for e in held.excerpts} == {"trip"}
    scoped = replace(query, session_id="work", withheld=Withheld(frozenset({"work"})))
    assert search_chat_history(store, scoped).hits == []


def test_a_withheld_session_leaves_the_keyword_route_enough_hits(store: MemoryStore) -> None:
    """The keyword route asks the archive again when the withheld session took every hit."""
    store.import_messages(conversation([f"pelican note {i}" for i in range(12)]), "many")
    store.import_messages(conversation(["a pelican flew by", "nice"], T0 + 100 * SECOND), "few")
    query = SearchQuery("pelican", mode="keyword", limit=2)
    assert {h.item.session_id for h in search_chat_history(store, query).hits} == {"many"}
    held = replace(query, withheld=Withheld(frozenset({"many"})))
    hits = search_chat_history(store, held).hits
    assert hits[0].item.message.content == "a pelican flew by"
    assert {h.item.session_id for h in hits} == {"few"}


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_a_withheld_message_is_neither_hit_nor_context(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, trip, _ = seeded
    gone = trip[6].id  # "decided: Granvia hotel booked for three nights"
    query = SearchQuery("Granvia hotel", mode=mode, limit=20, session_id="trip")  # type: ignore[arg-type]
    assert gone in {h.item.message.id for h in search_chat_history(store, query).hits}
    result = search_chat_history(
        store, replace(query, withheld=Withheld(messages=frozenset({gone})))
    )
    assert result.hits
    assert gone not in {h.item.message.id for h in result.hits}
    assert gone not in {r.message.id for e in result.excerpts for r in e.messages}


def test_empty_query_and_bad_parameters(store: MemoryStore) -> None:
    for text in ("", "   ", "\n\t"):
        with pytest.raises(SearchError, match="empty"):
            search_chat_history(store, SearchQuery(text))
    with pytest.raises(SearchError, match="mode"):
        search_chat_history(store, SearchQuery("x", mode="fuzzy"))  # type: ignore[arg-type]
    with pytest.raises(SearchError, match="limit"):
        search_chat_history(store, SearchQuery("x", limit=0))
    with pytest.raises(UnknownSessionError):
        search_chat_history(store, SearchQuery("x", session_id="nope"))


def test_semantic_without_model_is_a_search_error(open_store: StoreFactory) -> None:
    store = open_store(embedder=None)
    store.import_messages(conversation(["hello"]), "s")
    with pytest.raises(SearchError, match="embedding model"):
        search_chat_history(store, SearchQuery("hello", mode="semantic"))
    assert search_chat_history(store, SearchQuery("hello", mode="keyword")).hits


def test_empty_profile_returns_nothing(store: MemoryStore) -> None:
    for mode in MODES:
        result = search_chat_history(store, SearchQuery("anything", mode=mode))
        assert result.hits == []
        assert result.excerpts == []


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_tool_traffic_skipped_by_default(store: MemoryStore, mode: str) -> None:
    messages = [
        msg("user", "list the files in the kyoto folder", T0),
        msg("assistant", "", T0 + 1, tool_calls=[{"id": "c1", "function": {"name": "ls"}}]),
        msg("tool", "kyoto_hotel.pdf kyoto_map.png", T0 + 2, tool_call_id="c1"),
        msg("assistant", "there are two kyoto files", T0 + 3),
    ]
    store.import_messages(messages, "tools")
    plain = search_chat_history(store, SearchQuery("kyoto_hotel.pdf kyoto", mode=mode, limit=10))  # type: ignore[arg-type]
    assert messages[2].id not in {h.item.message.id for h in plain.hits}
    assert all(not h.item.message.is_tool_traffic for h in plain.hits)
    assert plain.hits
    with_tool = search_chat_history(
        store,
        SearchQuery("kyoto_hotel.pdf kyoto", mode=mode, limit=10, include_tool=True),  # type: ignore[arg-type]
    )
    assert messages[2].id in {h.item.message.id for h in with_tool.hits}


def test_results_survive_compaction(open_store: StoreFactory) -> None:
    store = open_store(max_history_bytes=3000)
    texts = [f"filler message {i} " + "x" * 100 for i in range(40)]
    texts[2] = "the secret password is swordfish"
    store.import_messages(conversation(texts), "c")
    assert len(store.history("c").messages) < 40
    keyword = search_chat_history(store, SearchQuery("swordfish", mode="keyword")).hits
    # The message itself first; the one after it matches through its context.
    assert [h.item.message.content for h in keyword] == [texts[2], texts[3]]
    assert keyword[0].score > keyword[1].score


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_hits_carry_route_evidence(
    seeded: tuple[MemoryStore, list[Message], list[Message]], mode: str
) -> None:
    store, trip, _ = seeded
    query = SearchQuery("Granvia hotel booked", mode=mode, limit=5, session_id="trip")  # type: ignore[arg-type]
    hits = search_chat_history(store, query).hits
    assert hits
    for hit in hits:
        if mode != "keyword":
            assert hit.cosine is not None
            assert -1.0 <= hit.cosine <= 1.0 + 1e-6
        if mode != "semantic":
            assert hit.bm25 is not None or mode == "hybrid"
    if mode == "keyword":
        assert all(h.cosine is None and h.bm25 == h.score for h in hits)
    if mode == "semantic":
        assert all(h.bm25 is None and h.cosine == h.score for h in hits)
    if mode == "hybrid":
        top = next(h for h in hits if h.item.message.id == trip[6].id)
        assert top.cosine is not None
        assert top.bm25 is not None


def test_fuse_keeps_each_routes_evidence() -> None:
    a, b = _item(1), _item(2)
    fused = fuse([[Hit(a, 0.9, cosine=0.9), Hit(b, 0.2, cosine=0.2)], [Hit(b, 7.0, bm25=7.0)]])
    by_id = {h.item.rowid: h for h in fused}
    assert (by_id[1].cosine, by_id[1].bm25) == (0.9, None)
    assert (by_id[2].cosine, by_id[2].bm25) == (0.2, 7.0)


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_tool_stubs_and_empty_messages_never_show(store: MemoryStore, mode: str) -> None:
    messages = [
        msg("user", "what is in the kyoto folder", T0),
        msg("assistant", "", T0 + 1, tool_calls=[{"id": "c1", "function": {"name": "ls"}}]),
        msg("tool", "kyoto_hotel.pdf", T0 + 2, tool_call_id="c1"),
        msg("assistant", "", T0 + 3),
        msg("assistant", "  \n", T0 + 4),
        msg("assistant", "the kyoto folder holds a hotel booking", T0 + 5),
        msg("user", "thanks", T0 + 6),
    ]
    store.import_messages(messages, "tools")
    result = search_chat_history(store, SearchQuery("kyoto folder", mode=mode, limit=10))  # type: ignore[arg-type]
    assert result.hits
    shown = [r.message for e in result.excerpts for r in e.messages]
    for message in [h.item.message for h in result.hits] + shown:
        assert message.content.strip()
        assert not message.is_tool_traffic
    # The excerpt reaches past the unreadable messages for its context.
    answer = next(
        e for e in result.excerpts if messages[5].id in {r.message.id for r in e.messages}
    )
    assert [r.message.id for r in answer.messages][:2] == [messages[0].id, messages[5].id]
    with_tool = search_chat_history(
        store,
        SearchQuery("kyoto folder", mode=mode, limit=10, include_tool=True),  # type: ignore[arg-type]
    )
    shown = [r.message for e in with_tool.excerpts for r in e.messages]
    assert any(m.is_tool_traffic for m in shown)


DAY = 86_400 * SECOND


def test_a_query_that_points_at_a_time_ranks_what_was_said_then_first(store: MemoryStore) -> None:
    """Ten sessions a day apart, each naming Rachel; only the day pointed at wins."""
    for day in range(10):
        texts = [f"I saw Rachel again and we talked about plan {day}", "nice", "ok", "sure"]
        store.import_messages(conversation(texts, start=T0 + day * DAY), f"d{day}")
    plain = SearchQuery("what did I do with Rachel", mode="hybrid", limit=3)
    then = (T0 + 7 * DAY, T0 + 7 * DAY + DAY - 1)
    pointed = replace(plain, points_at=then)
    top = search_chat_history(store, pointed).hits[0].item
    assert top.session_id == "d7"
    # a query with its own range ignores where it points
    ranged = replace(pointed, time_from_ns=T0, time_to_ns=T0 + DAY - 1)
    assert {h.item.session_id for h in search_chat_history(store, ranged).hits} == {"d0"}
    # nothing said then: the ordinary ranking, nothing fails
    empty = replace(plain, points_at=(T0 - 5 * DAY, T0 - 4 * DAY))
    assert search_chat_history(store, empty).hits


def test_vectors_and_sessions_between_read_only_the_range(store: MemoryStore) -> None:
    store.import_messages(conversation(["alpha one", "beta two"], start=T0), "a")
    store.import_messages(conversation(["gamma three"], start=T0 + 3 * DAY), "b")
    archive = store.archive
    assert archive.sessions_between(["a", "b"], T0 + DAY, T0 + 4 * DAY) == ["b"]
    assert len(archive.vectors_between("a", T0, T0)) == 1
    assert archive.vectors_between("a", T0 + DAY, T0 + 2 * DAY) == []


def test_run_search_tells_the_search_which_past_days_a_query_names(store: MemoryStore) -> None:
    import datetime as dt

    from agenvoy_desktop.operations.search import run_search

    store.import_messages(conversation(["I met Rachel", "nice"]), "s")
    today = dt.date(2023, 4, 1)
    asked = run_search(store, SearchQuery("Rachel two months ago", mode="hybrid"), today)
    assert asked.query.points_at is not None
    assert run_search(store, SearchQuery("Rachel", mode="hybrid"), today).query.points_at is None
    ranged = SearchQuery("Rachel two months ago", mode="hybrid", time_from_ns=T0)
    assert run_search(store, ranged, today).query.points_at is None
