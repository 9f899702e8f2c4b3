"""Start-up reconciliation and doctor: the layers checked against each other."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from agenvoy_desktop.core.archive import ArchiveError
from agenvoy_desktop.core.history import HistoryFile
from agenvoy_desktop.core.reconcile import Finding, reconcile
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, StoreFactory, archive_counts, conversation, msg


def _seed(store: MemoryStore, sid: str = "s") -> list[str]:
    messages = conversation(["kyoto hotel", "booked", "rail pass", "bought"])
    store.import_messages(messages, sid)
    return [m.id for m in messages]


def _kinds(findings: list[Finding]) -> set[str]:
    return {f.kind for f in findings}


def test_clean_profile_has_no_findings(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    assert reconcile(store, repair=False, deep=True) == []
    assert reconcile(store, repair=True, deep=True) == []


def test_message_missing_from_archive_is_added(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    # Crash between the history.json write and the archive write.
    extra = msg("user", "lost in the crash: sapporo ramen", T0 + 100 * SECOND)
    store.history("s").append([extra])
    store.close()

    again = open_store()  # start-up reconciliation
    assert again.archive.count("s") == 5
    assert again.archive.messages("s")[-1].message == extra
    assert extra.id in {h.message.id for h, _ in again.archive.keyword_search("sapporo", limit=5)}
    rowid = again.archive.rowids_for([extra.id])[extra.id]
    assert rowid in again.archive.vector_rowids("s")  # and embedded


def test_doctor_reports_without_changing_then_repairs(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    store = open_store()
    _seed(store)
    extra = msg("user", "lost message", T0 + 100 * SECOND)
    store.history("s").append([extra])
    store.close()
    history = (paths.sessions_dir / "s" / "history.json").read_bytes()
    counts = archive_counts(paths)

    dry = open_store(reconcile=False)
    findings = reconcile(dry, repair=False, deep=True)
    assert findings
    assert not any(f.repaired for f in findings)
    assert "archive" in _kinds(findings)
    dry.close()
    assert (paths.sessions_dir / "s" / "history.json").read_bytes() == history
    assert archive_counts(paths) == counts

    fix = open_store(reconcile=False)
    repaired = reconcile(fix, repair=True, deep=True)
    assert all(f.repaired for f in repaired)
    assert reconcile(fix, repair=False, deep=True) == []


def test_missing_vector_is_reembedded(open_store: StoreFactory) -> None:
    store = open_store()
    ids = _seed(store)
    rowid = store.archive.rowids_for([ids[2]])[ids[2]]
    store.archive.delete_vectors([rowid])
    store.close()
    again = open_store()
    assert rowid in again.archive.vector_rowids("s")
    assert again.vectors("s").count == 4


def test_missing_vector_without_model_is_reported_not_repaired(open_store: StoreFactory) -> None:
    store = open_store()
    ids = _seed(store)
    rowid = store.archive.rowids_for([ids[0]])[ids[0]]
    store.archive.delete_vectors([rowid])
    store.close()
    no_model = open_store(embedder=None, reconcile=False)
    findings = reconcile(no_model, repair=True, deep=True)
    lacking = [f for f in findings if f.kind == "vectors"]
    assert lacking
    assert not lacking[0].repaired


def test_orphan_vector_is_dropped(open_store: StoreFactory) -> None:
    store = open_store()
    ids = _seed(store)
    # A vector whose message is no longer in history.json: a compaction that
    # rewrote the file but stopped before dropping the vectors of what it cut.
    store.history("s").rewrite(store.history("s").messages[2:])
    rowid = store.archive.rowids_for([ids[0]])[ids[0]]
    store.close()
    again = open_store(reconcile=False)
    findings = reconcile(again, repair=True, deep=True)
    assert any("orphan" in f.detail for f in findings)
    assert rowid not in again.archive.vector_rowids("s")
    assert again.vectors("s").count == 2
    assert again.archive.count("s") == 4  # the archive never loses a message


def test_broken_index_file_is_reported_and_rebuilt(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    store.close()
    (store.folder("s") / "vectors.hnsw").write_bytes(b"junk")
    again = open_store(reconcile=False)
    findings = reconcile(again, repair=True, deep=True)
    assert "vector index" in _kinds(findings)
    assert reconcile(again, repair=True, deep=True) == []


def test_torn_history_is_repaired_at_open(open_store: StoreFactory) -> None:
    store = open_store()
    ids = _seed(store)
    store.close()
    path = store.folder("s") / "history.json"
    path.write_bytes(path.read_bytes()[:-20])
    again = open_store()
    # The torn-off message is in the archive: history.json gets it back from there.
    assert [m.id for m in again.history("s").messages] == ids
    assert json.loads(path.read_bytes())  # valid again
    assert again.archive.count("s") == 4
    assert len(again.archive.vector_rowids("s")) == 4


def test_corrupt_history_is_moved_aside(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    store.close()
    path = store.folder("s") / "history.json"
    path.write_bytes(b"\x00\x01\x02")
    again = open_store(reconcile=False)
    findings = reconcile(again, repair=True, deep=True)
    assert any("moved" in f.detail for f in findings)
    assert list(path.parent.glob("history.json.corrupt-*"))
    assert again.archive.count("s") == 4
    # The recent messages come back from the archive; new ones follow them.
    again.append("s", conversation(["new beginning"], start=T0 + 500 * SECOND))
    contents = [m.content for m in HistoryFile(path, 0).messages]
    assert contents == ["kyoto hotel", "booked", "rail pass", "bought", "new beginning"]


def test_start_at_follows_history(open_store: StoreFactory) -> None:
    store = open_store()
    ids = _seed(store)
    store.archive.set_cut("s", 0, 0)
    # history.json lost its first pair (e.g. compaction crashed before set_cut).
    hist = store.history("s")
    hist.rewrite(hist.messages[2:])
    store.close()
    again = open_store()
    meta = again.archive.session("s")
    assert meta is not None
    assert meta.cut_seq == 2
    assert meta.start_at_ns == again.history("s").messages[0].time_ns
    assert again.history("s").messages[0].id == ids[2]


def test_history_folder_unknown_to_archive_is_backfilled(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    messages = conversation(["from another machine", "copied over"])
    HistoryFile(paths.sessions_dir / "copied" / "history.json", T0).rewrite(messages)
    store = open_store()
    assert [r.message for r in store.archive.messages("copied")] == messages
    assert store.archive.session("copied") is not None


def test_damaged_fts_index_is_rebuilt(open_store: StoreFactory, paths: AppPaths) -> None:
    store = open_store()
    _seed(store)
    store.close()
    db = sqlite3.connect(paths.archive_db)
    db.execute("DELETE FROM messages_fts_docsize WHERE id < 3")
    db.commit()
    db.close()
    again = open_store(reconcile=False)
    with pytest.raises(ArchiveError, match="damaged"):
        again.archive.keyword_search("kyoto", limit=5)
    findings = reconcile(again, repair=False, deep=True)
    assert "full-text index" in _kinds(findings)
    reconcile(again, repair=True, deep=True)
    assert again.archive.fts_ok()
    assert reconcile(again, repair=False, deep=True) == []
    assert len(again.archive.keyword_search("kyoto", limit=5)) == 1


def test_quick_pass_skips_consistent_sessions(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenvoy_desktop.core import reconcile as reconcile_mod

    store = open_store()
    _seed(store, "a")
    _seed(store, "b")
    store.close()
    checked: list[str] = []
    real = reconcile_mod._check_session

    def spy(store: MemoryStore, sid: str, *, repair: bool) -> list[Finding]:
        checked.append(sid)
        return real(store, sid, repair=repair)

    monkeypatch.setattr(reconcile_mod, "_check_session", spy)
    open_store()
    assert checked == []


def test_copied_session_folder_gets_its_own_ids(open_store: StoreFactory, paths: AppPaths) -> None:
    store = open_store()
    ids = _seed(store, "orig")
    store.close()
    shutil.copytree(paths.sessions_dir / "orig", paths.sessions_dir / "copy")
    again = open_store()  # used to fail: UNIQUE constraint failed: messages.msg_id
    copy = again.history("copy").messages
    assert [m.content for m in copy] == [m.content for m in again.history("orig").messages]
    assert not {m.id for m in copy} & set(ids)
    assert [r.message.id for r in again.archive.messages("copy")] == [m.id for m in copy]
    assert [r.message.id for r in again.archive.messages("orig")] == ids
    assert len(again.archive.vector_rowids("orig")) == 4
    assert len(again.archive.vector_rowids("copy")) == 4
    on_disk = json.loads((paths.sessions_dir / "copy" / "history.json").read_text("utf-8"))
    assert [m["id"] for m in on_disk] == [m.id for m in copy]
    assert reconcile(again, repair=False, deep=True) == []


def test_repeated_message_in_history_is_archived_twice(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    message = msg("user", "said twice", T0)
    HistoryFile(paths.sessions_dir / "dup" / "history.json", T0).rewrite([message, message])
    store = open_store()
    assert store.archive.count("dup") == 2
    assert len({m.id for m in store.history("dup").messages}) == 2


def test_unreadable_history_elements_are_reported(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    path = paths.sessions_dir / "odd" / "history.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps([{"role": "wizard", "content": "x"}, {"role": "user", "content": "y"}])
    )
    store = open_store(reconcile=False)
    findings = reconcile(store, repair=True, deep=True)
    [skipped] = [f for f in findings if "unreadable" in f.detail]
    assert "original is kept" in skipped.detail
    assert [m.content for m in store.history("odd").messages] == ["y"]
    assert len(list(path.parent.glob("history.json.orig-*"))) == 1
