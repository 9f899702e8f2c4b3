"""One check that a session's three layers agree, shared by the message-action tests."""

from __future__ import annotations

import re
from collections.abc import Iterable

from agenvoy_desktop.agent.recall import recall_candidates
from agenvoy_desktop.core.archive import label_message
from agenvoy_desktop.core.reconcile import reconcile
from agenvoy_desktop.core.search import MODES, SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations.timeline import load_timeline


def assert_layers_agree(store: MemoryStore, sid: str) -> None:
    """history.json == live archive rows from the cut; vectors exactly for those rows.

    Also: the on-disk index holds the same labels, the FTS index counts one
    document per row, and a deep read-only reconciliation finds nothing.
    """
    meta = store.archive.session(sid)
    assert meta is not None
    history = [m.id for m in store.history(sid).messages]
    window = [r.message.id for r in store.archive.messages(sid, meta.cut_seq)]
    assert history == window
    if history:  # the cut sits on history's first message
        first = store.archive.message(sid, history[0])
        assert first is not None
        assert first.seq == meta.cut_seq
    live = set(store.archive.rowids_for(history).values())
    labels = store.archive.vector_labels(sid)
    if store.embedder is not None:
        assert {label_message(label) for label in labels} == live
        assert len(labels) == len(live)  # short messages: one vector each
    vectors = store.vectors(sid)
    vectors.drop_cache()  # read the index file again, as the next start would
    _index, on_disk = vectors._load_file()
    assert on_disk <= labels  # no vector of a message that left
    assert vectors.vector_count == len(labels)
    assert store.archive.fts_ok()
    _assert_fts_as_rebuilt(store, sid)
    findings = [f for f in reconcile(store, repair=False, deep=True) if f.session_id == sid]
    assert findings == []


def assert_never_found(store: MemoryStore, words: Iterable[str], gone: set[str]) -> None:
    """No search mode, excerpt or proactive recall returns any of the *gone* message ids."""
    for word in words:
        for mode in MODES:
            result = search_chat_history(store, SearchQuery(word, mode=mode, limit=50))
            found = {h.item.message.id for h in result.hits}
            found |= {r.message.id for e in result.excerpts for r in e.messages}
            assert not found & gone, (word, mode)
        for sid in store.session_ids():
            recalled = {item.message_id for item in recall_candidates(store, sid, word, 0)}
            assert not recalled & gone, (word, "recall")


def timeline_texts(store: MemoryStore, sid: str) -> list[str]:
    return [event.text for event in load_timeline(store, sid)]


def _assert_fts_as_rebuilt(store: MemoryStore, sid: str) -> None:
    """Keyword hits (with context) equal those after rebuilding the full-text index.

    A contentless FTS5 table cannot check its own entries against the rows:
    an entry deleted with the wrong values only shows as wrong hits.
    """
    text = " ".join(r.message.content for r in store.archive.messages(sid))
    words = sorted(set(re.findall(r"[a-z]{4,}", text.lower())))[:40]

    def hits() -> list[list[str]]:
        found = []
        for word in words:
            ranked = store.archive.keyword_search(word, limit=20, with_context=True)
            found.append(sorted(h.message.id for h, _ in ranked))
        return found

    before = hits()
    store.archive.rebuild_fts()
    assert hits() == before
