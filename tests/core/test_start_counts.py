"""The counts start-up and the sessions list take from the archive's indexes."""

from __future__ import annotations

from agenvoy_desktop.core.archive import Archive, vector_label
from agenvoy_desktop.core.reconcile import count_missing_vectors
from tests.conftest import StoreFactory, conversation


def test_vector_message_count_counts_messages_not_parts(archive: Archive) -> None:
    messages = conversation(["a long message in three parts", "short", "not embedded"])
    rowids = archive.add_messages("s1", messages, 0)
    blob = bytes(16)
    labels = [vector_label(rowids[0], part) for part in range(3)] + [vector_label(rowids[1])]
    archive.add_vectors("s1", "m", [(label, blob) for label in labels])
    assert archive.vector_message_count("s1") == len(archive.vector_rowids("s1")) == 2
    archive.delete_vectors([rowids[0]])
    assert archive.vector_message_count("s1") == len(archive.vector_rowids("s1")) == 1
    assert archive.vector_message_count("other") == 0


def test_missing_vectors_are_counted_per_session(open_store: StoreFactory) -> None:
    store = open_store()
    store.import_messages(conversation(["kyoto", "hotel", "rail", "pass"]), "a")
    store.import_messages(conversation(["one", "two"]), "b")
    rowids = store.archive.rowids_for(m.message.id for m in store.archive.messages("a"))
    store.vectors("a").remove(sorted(rowids.values())[:3])
    assert count_missing_vectors(store) == {"a": 3}
    recent, have = store.archive.recent_counts(), store.archive.vector_message_counts()
    assert count_missing_vectors(store) == {
        sid: n - have.get(sid, 0) for sid, n in recent.items() if n > have.get(sid, 0)
    }
