"""Compaction: history.json trimmed to 80 % at a user boundary; the archive keeps all."""

from __future__ import annotations

import json

import pytest

from agenvoy_desktop.core.history import HistoryFile, encode_history
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import COMPACT_TO, MemoryStore, compaction_cut
from tests.conftest import SECOND, T0, StoreFactory, conversation, msg

LIMIT = 4000


def _long_conversation(count: int, start: int = T0) -> list[Message]:
    return conversation(
        [f"message {i} about topic{i} " + "lorem ipsum " * 10 for i in range(count)], start=start
    )


@pytest.fixture
def small(open_store: StoreFactory) -> MemoryStore:
    return open_store(max_history_bytes=LIMIT)


def _check_compacted(store: MemoryStore, sid: str, everything: list[Message]) -> None:
    hist = store.history(sid)
    kept = hist.messages
    path = store.folder(sid) / "history.json"
    size = path.stat().st_size
    assert size == hist.size_bytes
    assert size <= LIMIT * COMPACT_TO
    assert kept[0].role == "user"
    assert kept == everything[-len(kept) :]
    assert [m.id for m in HistoryFile(path, 0).messages] == [m.id for m in kept]
    meta = store.archive.session(sid)
    assert meta is not None
    assert meta.start_at_ns == kept[0].time_ns
    assert meta.cut_seq == len(everything) - len(kept)
    # The archive still holds every message, in order.
    assert [r.message.id for r in store.archive.messages(sid)] == [m.id for m in everything]
    # Vectors exist exactly for what history.json still holds.
    live = set(store.archive.rowids_for(m.id for m in kept).values())
    assert store.archive.vector_rowids(sid) == live
    assert store.vectors(sid).count == len(kept)
    events = [kind for _, kind, _ in store.archive.events(sid)]
    assert "compaction" in events


def test_import_over_the_limit_is_compacted(small: MemoryStore) -> None:
    everything = _long_conversation(60)
    small.import_messages(everything, "c")
    assert len(small.history("c").messages) < 60
    _check_compacted(small, "c", everything)


def test_appends_compact_repeatedly(small: MemoryStore) -> None:
    sid = small.create_session()
    everything: list[Message] = []
    for turn in range(40):
        pair = _long_conversation(2, start=T0 + turn * 10 * SECOND)
        small.append(sid, pair)
        everything += pair
        assert small.history(sid).size_bytes <= LIMIT
    _check_compacted(small, sid, everything)
    compactions = [k for _, k, _ in small.archive.events(sid) if k == "compaction"]
    assert len(compactions) >= 2


def test_keyword_results_have_no_duplicates_after_compaction(small: MemoryStore) -> None:
    everything = _long_conversation(60)
    small.import_messages(everything, "c")
    result = search_chat_history(small, SearchQuery("lorem ipsum", mode="keyword", limit=100))
    ids = [h.item.message.id for h in result.hits]
    assert len(ids) == len(set(ids)) == 60
    hybrid = search_chat_history(small, SearchQuery("lorem ipsum", mode="hybrid", limit=100))
    ids = [h.item.message.id for h in hybrid.hits]
    assert len(ids) == len(set(ids))
    # Old messages are found in the archive; semantic only sees what is kept.
    old = search_chat_history(small, SearchQuery("topic3", mode="keyword"))
    assert old.hits[0].item.message.id == everything[3].id
    kept = {m.id for m in small.history("c").messages}
    semantic = search_chat_history(small, SearchQuery("topic3", mode="semantic", limit=100))
    assert {h.item.message.id for h in semantic.hits} <= kept


def test_reopen_after_compaction_is_consistent(open_store: StoreFactory) -> None:
    from agenvoy_desktop.core.reconcile import reconcile

    store = open_store(max_history_bytes=LIMIT)
    everything = _long_conversation(60)
    store.import_messages(everything, "c")
    store.close()
    again = open_store(max_history_bytes=LIMIT)
    assert reconcile(again, repair=False, deep=True) == []


def test_cut_respects_tool_groups_and_pairs() -> None:
    messages = [
        msg("user", "u" * 200, T0),
        msg("assistant", "", T0, tool_calls=[{"id": "1"}]),
        msg("tool", "t" * 200, T0, tool_call_id="1"),
        msg("assistant", "a" * 200, T0),
        msg("user", "u" * 200, T0),
        msg("assistant", "a" * 200, T0),
        msg("user", "last", T0),
        msg("assistant", "reply", T0),
    ]
    for target in range(0, len(encode_history(messages)) + 10, 50):
        cut = compaction_cut(messages, target)
        assert cut in (0, 4, 6)
        assert len(encode_history(messages[cut:])) <= target or cut == 6
    assert compaction_cut(messages, 10**9) == 0
    assert compaction_cut(messages, 10) == 6  # the last exchange is always kept


def test_no_compaction_below_the_limit(open_store: StoreFactory) -> None:
    store = open_store(max_history_bytes=10**6)
    store.import_messages(_long_conversation(10), "c")
    assert len(store.history("c").messages) == 10
    meta = store.archive.session("c")
    assert meta is not None
    assert meta.start_at_ns == 0
    assert meta.cut_seq == 0
    raw = json.loads((store.folder("c") / "history.json").read_text("utf-8"))
    assert len(raw) == 10
