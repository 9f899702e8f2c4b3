"""Reset and remove, including a crash in the middle."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agenvoy_desktop.core import lifecycle
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore, UnknownSessionError
from agenvoy_desktop.core.vectors import INDEX_FILE
from agenvoy_desktop.paths import AppPaths
from tests.conftest import T0, StoreFactory, conversation

SUMMARY_FILES = {"summary.json": b'{"key_decisions": []}', "summary.meta.json": b'{"cursor": 1}'}


class Crash(Exception):
    """Stands in for the process dying."""


def _seed(store: MemoryStore) -> None:
    for sid, topic in (("doomed", "kyoto hotel"), ("bystander", "kyoto budget")):
        store.import_messages(conversation([f"{topic} question", f"{topic} answer"]), sid)
        for name, data in SUMMARY_FILES.items():
            (store.folder(sid) / name).write_bytes(data)
    store.archive.add_event("doomed", T0, "note", {})


def _snapshot(store: MemoryStore, sid: str) -> tuple[bytes, int, int, list[str]]:
    folder = store.folder(sid)
    return (
        (folder / "history.json").read_bytes(),
        store.archive.count(sid),
        len(store.archive.vector_rowids(sid)),
        sorted(p.name for p in folder.iterdir()),
    )


def _assert_reset(store: MemoryStore, sid: str = "doomed") -> None:
    folder = store.folder(sid)
    assert folder.is_dir()
    assert not (folder / "history.json").exists()
    assert not (folder / INDEX_FILE).exists()
    for name, data in SUMMARY_FILES.items():
        assert (folder / name).read_bytes() == data
    assert store.archive.count(sid) == 0
    assert store.archive.vector_rowids(sid) == set()
    assert sid in store.session_ids()
    meta = store.archive.session(sid)
    assert meta is not None
    assert meta.next_seq == 0
    assert meta.start_at_ns == 0
    assert store.history(sid).messages == []
    hits = search_chat_history(store, SearchQuery("hotel", mode="hybrid", limit=10)).hits
    assert {h.item.session_id for h in hits} <= {"bystander"}


def _assert_removed(store: MemoryStore, sid: str = "doomed") -> None:
    assert not store.folder(sid).exists()
    assert not list(store.paths.sessions_dir.glob(f"*{sid}*"))
    assert store.archive.count(sid) == 0
    assert store.archive.vector_rowids(sid) == set()
    assert store.archive.session(sid) is None
    assert store.archive.events(sid) == []
    assert sid not in store.session_ids()
    with pytest.raises(UnknownSessionError):
        store.info(sid)


def test_reset(store: MemoryStore) -> None:
    _seed(store)
    other = _snapshot(store, "bystander")
    lifecycle.reset_session(store, "doomed")
    _assert_reset(store)
    assert _snapshot(store, "bystander") == other
    assert not list(lifecycle.ops_dir(store).glob("*.json"))
    # The session keeps working after a reset.
    store.append("doomed", conversation(["kyoto again"]))
    assert store.archive.count("doomed") == 1
    assert store.history("doomed").messages[0].content == "kyoto again"
    assert store.archive.messages("doomed")[0].seq == 0


def test_remove(store: MemoryStore) -> None:
    _seed(store)
    other = _snapshot(store, "bystander")
    lifecycle.remove_session(store, "doomed")
    _assert_removed(store)
    assert _snapshot(store, "bystander") == other
    assert [s.session_id for s in store.sessions()] == ["bystander"]


def test_unknown_session(store: MemoryStore) -> None:
    with pytest.raises(UnknownSessionError, match="nope"):
        lifecycle.reset_session(store, "nope")
    with pytest.raises(UnknownSessionError):
        lifecycle.remove_session(store, "nope")


def test_state_survives_reopen(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    lifecycle.reset_session(store, "doomed")
    store.close()
    again = open_store()
    _assert_reset(again)
    lifecycle.remove_session(again, "doomed")
    again.close()
    _assert_removed(open_store())


def _crash_on(monkeypatch: pytest.MonkeyPatch, target: object, name: str) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise Crash(name)

    monkeypatch.setattr(target, name, boom)


RESET_STEPS = ["delete_session_rows", "ensure_session", "add_event", "fsync_dir"]


@pytest.mark.parametrize("step", RESET_STEPS)
def test_interrupted_reset_is_finished_at_next_open(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    store = open_store()
    _seed(store)
    other = _snapshot(store, "bystander")
    with monkeypatch.context() as patch:
        if step == "fsync_dir":
            _crash_on(patch, lifecycle, step)
        else:
            _crash_on(patch, Archive, step)
        with pytest.raises(Crash):
            lifecycle.reset_session(store, "doomed")
    assert list(lifecycle.ops_dir(store).glob("*.json"))
    store.archive.close()  # the process is gone; nothing is flushed
    again = open_store()
    _assert_reset(again)
    # history.json was not back-filled into the archive from the half-reset session.
    assert again.archive.count("doomed") == 0
    assert not list(lifecycle.ops_dir(again).glob("*.json"))
    assert _snapshot(again, "bystander") == other


REMOVE_STEPS = ["replace", "delete_session_rows", "rmtree"]


@pytest.mark.parametrize("step", REMOVE_STEPS)
def test_interrupted_remove_is_finished_at_next_open(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    store = open_store()
    _seed(store)
    other = _snapshot(store, "bystander")
    with monkeypatch.context() as patch:
        if step == "replace":
            _crash_on(patch, Path, "replace")
        elif step == "rmtree":
            _crash_on(patch, shutil, "rmtree")
        else:
            _crash_on(patch, Archive, step)
        with pytest.raises(Crash):
            lifecycle.remove_session(store, "doomed")
    store.archive.close()
    again = open_store()
    _assert_removed(again)
    assert not list(lifecycle.ops_dir(again).glob("*.json"))
    assert _snapshot(again, "bystander") == other


def test_crash_after_rows_deleted_leaves_no_half_removed_session(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, paths: AppPaths
) -> None:
    """Between the archive delete and the folder delete: the folder is already hidden."""
    store = open_store()
    _seed(store)
    real = shutil.rmtree
    calls: list[str] = []

    def rmtree_crash(path: object, *args: object, **kwargs: object) -> None:
        calls.append(str(path))
        raise Crash("rmtree")

    monkeypatch.setattr(shutil, "rmtree", rmtree_crash)
    with pytest.raises(Crash):
        lifecycle.remove_session(store, "doomed")
    monkeypatch.setattr(shutil, "rmtree", real)
    # Even before the next start, the session is not listed half-removed.
    assert "doomed" not in store.session_ids()
    assert calls
    assert lifecycle.TRASH_PREFIX in calls[0]
    store.archive.close()
    again = open_store()
    _assert_removed(again)
    assert not list(paths.sessions_dir.glob(lifecycle.TRASH_PREFIX + "*"))


def test_unreadable_journal_is_set_aside(open_store: StoreFactory) -> None:
    store = open_store()
    _seed(store)
    ops = lifecycle.ops_dir(store)
    ops.mkdir(parents=True, exist_ok=True)
    (ops / "doomed.json").write_text("{broken")
    store.close()
    again = open_store()
    assert (ops / "doomed.bad").exists()
    assert again.archive.count("doomed") == 2


def test_pending_operation_reported_by_doctor_without_repair(open_store: StoreFactory) -> None:
    from agenvoy_desktop.core.reconcile import reconcile

    store = open_store()
    _seed(store)
    ops = lifecycle.ops_dir(store)
    ops.mkdir(parents=True, exist_ok=True)
    (ops / "doomed.json").write_text('{"op": "reset", "session_id": "doomed", "time_ns": 1}')
    findings = reconcile(store, repair=False, deep=True)
    assert any(f.kind == "interrupted operation" and not f.repaired for f in findings)
    assert store.archive.count("doomed") == 2
    findings = reconcile(store, repair=True, deep=True)
    assert any(f.kind == "interrupted operation" and f.repaired for f in findings)
    _assert_reset(store)
