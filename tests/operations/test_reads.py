"""What the window shows, read without Qt: pages, timeline, titles, search, summary."""

from __future__ import annotations

from agenvoy_desktop.core.archive import TITLE_CHARS
from agenvoy_desktop.core.search import SearchQuery
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import SUMMARY_FILE
from agenvoy_desktop.operations.chat import load_page, seq_of
from agenvoy_desktop.operations.search import index_stats, run_search
from agenvoy_desktop.operations.sessions import auto_title, content_matches
from agenvoy_desktop.operations.summary import plus_decision, read_snapshot, without_decision
from agenvoy_desktop.operations.timeline import load_timeline
from tests.conftest import T0, conversation


def _filled(store: MemoryStore, texts: list[str], title: str | None = None) -> str:
    sid = store.create_session(title)
    store.append(sid, conversation(texts))
    return sid


def test_pages_walk_back_through_the_archive(store: MemoryStore) -> None:
    sid = _filled(store, [f"message {i}" for i in range(7)])
    newest = load_page(store, sid, None, 3)
    assert [m.content for m in newest.messages] == ["message 4", "message 5", "message 6"]
    assert newest.has_earlier
    older = load_page(store, sid, newest.first_seq, 5)
    assert [m.content for m in older.messages][-1] == "message 3"
    assert not older.has_earlier
    assert seq_of(store, newest.messages[0].id) == newest.first_seq
    assert seq_of(store, "no-such-id") is None


def test_timeline_lists_messages_in_order(store: MemoryStore) -> None:
    sid = _filled(store, ["hello there", "hi, how can I help?"])
    events = load_timeline(store, sid)
    assert [e.kind for e in events] == ["message", "message"]
    assert events[0].text.startswith("You: hello")
    assert load_timeline(store, "unknown") == []


def test_auto_title_takes_the_first_user_words_once(store: MemoryStore) -> None:
    sid = _filled(store, ["Plan the Kyoto trip " + "in detail " * 10, "Sure."])
    titled = auto_title(store, sid)
    assert titled.value is not None
    assert titled.value.startswith("Plan the Kyoto trip")
    assert len(titled.value) <= TITLE_CHARS
    assert titled.changes.sessions
    assert titled.changes.session_id == sid
    again = auto_title(store, sid)  # titled now: left alone
    assert again.value is None
    assert again.changes.empty


def test_search_and_counts(store: MemoryStore) -> None:
    sid = _filled(store, ["my bike lock code is 4721", "noted"], title="Bikes")
    _filled(store, ["the weather is nice", "indeed"])
    answer = run_search(store, SearchQuery(text="bike lock", mode="keyword", limit=5))
    assert answer.result.hits
    assert answer.titles[sid] == "Bikes"
    assert content_matches(store, "bike") == {sid: 1}
    stats = index_stats(store, None)
    assert stats.sessions == 2
    assert stats.archived == 4
    assert index_stats(store, sid).archived == 2


def test_summary_snapshot_reports_a_damaged_file(store: MemoryStore) -> None:
    sid = _filled(store, ["a", "b"])
    empty = read_snapshot(store, sid)
    assert empty.summary is None
    assert empty.problems == []
    (store.folder(sid) / SUMMARY_FILE).write_text("{not json", "utf-8")
    damaged = read_snapshot(store, sid)
    assert damaged.summary is None
    assert damaged.raw == "{not json"
    assert len(damaged.problems) == 1


def test_decision_edits_are_pure() -> None:
    from agenvoy_desktop.core.summary import Summary

    base = Summary()
    added = plus_decision(base, "  use SQLite  ")
    assert [d.decision for d in added.key_decisions] == ["use SQLite"]
    assert added.key_decisions[0].by_user
    assert without_decision(added, 0).key_decisions == ()
    assert base.key_decisions == ()


def test_the_timeline_says_what_recall_brought_from_documents(store: MemoryStore) -> None:
    sid = _filled(store, ["what is my rear tyre pressure?", "5 bar"])
    detail = {
        "message_id": "m1",
        "text": "Passages from the user's documents...\n[notes/bike.md:6-7] Rear tyre: 5 bar.",
        "ids": [],
        "citations": ["notes/bike.md:6-7"],
    }
    store.archive.add_event(sid, T0 + 5, "recall", detail)
    (event,) = [e for e in load_timeline(store, sid) if e.kind == "recall"]
    assert event.text.startswith("1 passage from documents: [notes/bike.md:6-7] Rear tyre")
