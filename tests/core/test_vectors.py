"""The hnswlib index is a cache of the vectors in the archive: it always heals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agenvoy_desktop.core.embedding import EMBED_TEXT_VERSION
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.vectors import INDEX_FILE, META_FILE, SessionVectors, from_blobs, to_blob
from tests.conftest import SECOND, T0, StoreFactory, conversation
from tests.fakes import HashingEmbedder

TEXTS = [
    "the ryokan in Kyoto has an onsen",
    "ok",
    "train tickets from Tokyo to Osaka",
    "noted",
    "vegetarian ramen places in Sapporo",
    "sure",
]


def _seed(store: MemoryStore) -> str:
    sid = store.create_session("trip", "trip")
    store.import_messages(conversation(TEXTS), sid)
    return sid


def _top(store: MemoryStore, sid: str, text: str) -> str:
    result = search_chat_history(store, SearchQuery(text, mode="semantic", session_id=sid))
    return result.hits[0].item.message.content


def test_blob_round_trip() -> None:
    vectors = HashingEmbedder(256).embed(["a b", "c"])
    back = from_blobs([to_blob(v) for v in vectors], vectors.shape[1])
    assert np.array_equal(back, vectors)
    assert from_blobs([], 8).shape == (0, 8)


def test_index_file_written_and_used(open_store: StoreFactory) -> None:
    store = open_store()
    sid = _seed(store)
    folder = store.folder(sid)
    assert (folder / INDEX_FILE).exists()
    assert (folder / META_FILE).exists()
    store.close()
    again = open_store()
    vec = again.vectors(sid)
    assert vec.count == len(TEXTS)
    assert vec.healed is None
    assert _top(again, sid, "onsen in Kyoto") == TEXTS[0]


def test_deleted_index_file_is_rebuilt(open_store: StoreFactory) -> None:
    store = open_store()
    sid = _seed(store)
    store.close()
    (store.folder(sid) / INDEX_FILE).unlink()
    again = open_store()
    assert _top(again, sid, "ramen Sapporo") == TEXTS[4]
    assert again.vectors(sid).healed is not None
    again.close()
    assert (again.folder(sid) / INDEX_FILE).exists()


@pytest.mark.parametrize(
    "garbage",
    [b"", b"\x00" * 7, b"garbage" * 100, bytes(range(256)) * 64],
    ids=["empty", "short", "text", "binary"],
)
def test_corrupted_index_file_is_rebuilt_silently(open_store: StoreFactory, garbage: bytes) -> None:
    store = open_store()
    sid = _seed(store)
    store.close()
    (store.folder(sid) / INDEX_FILE).write_bytes(garbage)
    again = open_store()
    assert _top(again, sid, "train Tokyo Osaka") == TEXTS[2]
    assert again.vectors(sid).count == len(TEXTS)
    again.close()
    assert (again.folder(sid) / INDEX_FILE).read_bytes() != garbage


def test_corrupted_meta_file_is_rebuilt(open_store: StoreFactory) -> None:
    store = open_store()
    sid = _seed(store)
    store.close()
    (store.folder(sid) / META_FILE).write_text("{not json")
    again = open_store()
    assert _top(again, sid, "onsen Kyoto") == TEXTS[0]


def test_stale_index_file_is_topped_up(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    sid = _seed(store)
    folder = store.folder(sid)
    saved = tmp_path / "saved"
    saved.mkdir()
    for name in (INDEX_FILE, META_FILE):
        shutil.copy(folder / name, saved / name)
    store.append(sid, conversation(["sushi counter in Ginza", "yes"], start=T0 + 50 * SECOND))
    store.close()
    # As if the process died before the index file was saved again.
    for name in (INDEX_FILE, META_FILE):
        shutil.copy(saved / name, folder / name)
    again = open_store()
    vec = again.vectors(sid)
    assert vec.count == len(TEXTS) + 2
    assert vec.healed is not None
    assert "stale" in vec.healed
    assert _top(again, sid, "sushi Ginza") == "sushi counter in Ginza"


def test_vectors_never_flushed_are_found_from_the_archive(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    sid = _seed(store)
    with monkeypatch.context() as patch:
        patch.setattr(SessionVectors, "flush", lambda self: None)
        store.append(sid, conversation(["sushi counter in Ginza", "yes"], start=T0 + 50 * SECOND))
        store.close()  # flush is a no-op: the file is stale
    again = open_store()
    assert _top(again, sid, "sushi Ginza") == "sushi counter in Ginza"


def test_index_with_deleted_labels_is_rebuilt(open_store: StoreFactory) -> None:
    store = open_store()
    sid = _seed(store)
    victim = min(store.archive.vector_rowids(sid))
    store.archive.delete_vectors([victim])
    store.close()
    again = open_store(embedder=None)  # no re-embedding: only the index is checked
    vec = again.vectors(sid)
    assert vec.count == len(TEXTS) - 1
    hits = vec.search(HashingEmbedder(256).embed([TEXTS[0]])[0], 10)
    assert victim not in {rowid for rowid, _ in hits}


def test_compaction_removes_vectors_older_than_cut(open_store: StoreFactory) -> None:
    store = open_store()
    sid = _seed(store)
    rowids = sorted(store.archive.vector_rowids(sid))
    store.vectors(sid).remove(rowids[:2])
    assert store.archive.vector_rowids(sid) == set(rowids[2:])
    assert store.vectors(sid).count == len(rowids) - 2
    found = store.vectors(sid).search(HashingEmbedder(256).embed([TEXTS[0]])[0], 10)
    assert {r for r, _ in found} == set(rowids[2:])


def test_search_scores_are_cosine(store: MemoryStore) -> None:
    sid = _seed(store)
    query = HashingEmbedder(256).embed([TEXTS[2]])[0]
    hits = store.vectors(sid).search(query, 3)
    stored = dict(store.archive.vectors(sid))
    best = max(float(from_blobs([b], 256)[0] @ query) for b in stored.values())
    assert hits[0][1] == pytest.approx(best, abs=1e-4)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert store.vectors(sid).search(query, 0) == []


def test_index_grows_past_its_capacity(store: MemoryStore) -> None:
    sid = store.create_session()
    texts = [f"message number {i} word{i}" for i in range(300)]
    store.import_messages(conversation(texts), sid)
    assert store.vectors(sid).count == 300
    assert _top(store, sid, texts[217]) == texts[217]


def test_searching_a_session_without_vectors_writes_nothing(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    empty = store.create_session(session_id="empty")
    store.close()
    again = open_store()
    search_chat_history(again, SearchQuery("onsen", mode="semantic"))
    again.close()
    assert list(again.folder(empty).iterdir()) == []


def test_removing_the_last_vectors_replaces_the_file(store: MemoryStore) -> None:
    sid = _seed(store)
    store.vectors(sid).remove(sorted(store.archive.vector_rowids(sid)))
    meta = json.loads((store.folder(sid) / META_FILE).read_text())
    assert meta["count"] == 0


def test_changing_the_embedding_model_re_embeds_everything(open_store: StoreFactory) -> None:
    first = open_store()
    sid = _seed(first)
    first.close()
    # Same profile, a different model (another dimension): old vectors are dropped
    # and every history message is embedded again by the new model.
    second = open_store(embedder=HashingEmbedder(128), model_name="other-model")
    assert second.archive.get_meta("vector_model") == f"other-model:128:text{EMBED_TEXT_VERSION}"
    assert len(second.archive.vector_rowids(sid)) == len(TEXTS)
    blob = second.archive.vectors(sid)[0][1]
    assert len(blob) == 128 * 4
    assert _top(second, sid, "ramen in Sapporo") == TEXTS[4]


def test_a_long_message_gets_several_vectors_and_is_found_by_any_part(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    sid = store.create_session(session_id="long")
    head = " ".join(f"The garden path number {i} is lined with roses." for i in range(60))
    long_text = head + " At the very end we planted a persimmon tree."
    store.import_messages(conversation([long_text, "short reply about lunch"]), sid)
    rowid = min(store.archive.vector_rowids(sid))
    labels = store.archive.vector_labels(sid)
    assert len(labels) > 2  # the long message in parts, the reply in one
    vec = store.vectors(sid)
    assert vec.count == 2
    assert vec.vector_count == len(labels)
    hits = vec.search(HashingEmbedder(256).embed(["persimmon tree planted"])[0], 5)
    assert [r for r, _ in hits].count(rowid) == 1
    assert hits[0][0] == rowid
    store.close()
    again = open_store()
    assert again.vectors(sid).healed is None
    again.vectors(sid).remove([rowid])
    assert again.archive.vector_rowids(sid) == {rowid + 1}
    assert again.vectors(sid).vector_count == 1
