"""Start-up stamps: an untouched history.json costs one stat, any change a full check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agenvoy_desktop.core import history_stamps
from agenvoy_desktop.core.history import HistoryFile
from agenvoy_desktop.core.history_stamps import STAMPS_FILE, HistoryStamps
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, StoreFactory, conversation, msg

HOUR_NS = 3600 * SECOND


@pytest.fixture(autouse=True)
def _no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by a test are seconds old: stamp them anyway (the window has its own test)."""
    monkeypatch.setattr(history_stamps, "RACY_NS", 0)


@pytest.fixture
def history_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every read of a history.json (whole-file reads and opens), in order."""
    reads: list[Path] = []
    read_bytes, opened = Path.read_bytes, Path.open

    def counting_read_bytes(self: Path) -> bytes:
        if self.name == "history.json":
            reads.append(self)
        return read_bytes(self)

    def counting_open(self: Path, *args: object, **kwargs: object) -> object:
        if self.name == "history.json":
            reads.append(self)
        return opened(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "read_bytes", counting_read_bytes)
    monkeypatch.setattr(Path, "open", counting_open)
    return reads


def _seed(store: MemoryStore, sids: tuple[str, ...] = ("a", "b")) -> None:
    for number, sid in enumerate(sids):
        texts = [f"{sid} kyoto hotel", "booked", f"{sid} rail pass", "bought"]
        store.import_messages(conversation(texts, start=T0 + number * HOUR_NS), sid)


def _history(paths: AppPaths, sid: str) -> Path:
    return paths.sessions_dir / sid / "history.json"


def _stamped(open_store: StoreFactory) -> None:
    """Seed two sessions, then open once more: that start stamps them."""
    store = open_store()
    _seed(store)
    store.close()
    open_store().close()


def test_an_untouched_profile_reads_no_history_at_start(
    open_store: StoreFactory, paths: AppPaths, history_reads: list[Path]
) -> None:
    _stamped(open_store)
    history_reads.clear()
    store = open_store()
    assert history_reads == []
    assert store.findings == []
    assert {i.session_id: i.history_messages for i in store.sessions()} == {"a": 4, "b": 4}
    assert history_reads == []  # the list takes its counts from the stamps too


def test_a_session_written_in_this_run_is_stamped_at_close(
    open_store: StoreFactory, paths: AppPaths, history_reads: list[Path]
) -> None:
    _stamped(open_store)
    store = open_store()
    store.append("a", [msg("user", "one more", T0 + 50 * SECOND)])
    store.close()
    history_reads.clear()
    store = open_store()
    assert history_reads == []
    assert {i.session_id: i.history_messages for i in store.sessions()}["a"] == 5


def test_a_history_written_by_another_writer_is_read_and_reconciled(
    open_store: StoreFactory, paths: AppPaths, history_reads: list[Path]
) -> None:
    """A crash between history.json and the archive: only that session is read, and repaired."""
    _stamped(open_store)
    extra = msg("user", "lost in the crash", T0 + 50 * SECOND)
    HistoryFile(_history(paths, "a"), T0).append([extra])
    history_reads.clear()
    store = open_store()
    assert set(history_reads) == {_history(paths, "a")}
    assert store.archive.messages("a")[-1].message == extra


def test_mtime_changed_means_a_full_read(
    open_store: StoreFactory, paths: AppPaths, history_reads: list[Path]
) -> None:
    _stamped(open_store)
    path = _history(paths, "b")
    os.utime(path, ns=(T0, T0))
    history_reads.clear()
    open_store()
    assert set(history_reads) == {path}


def test_an_outside_edit_with_size_and_mtime_put_back_is_still_found(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    """The same size and mtime, another content: the change time tells."""
    _stamped(open_store)
    path = _history(paths, "b")
    before = path.stat()
    raw = path.read_bytes().replace(b'"bought"', b'"BOUGHT"')  # same length, so same size
    assert len(raw) == before.st_size
    path.write_bytes(raw)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    store = open_store()
    assert store.history("b").messages[-1].content == "BOUGHT"
    assert store.history_tail("b") == ((4, store.history("b").messages[-1].id), before.st_size)


def test_a_truncated_history_is_still_restored(open_store: StoreFactory, paths: AppPaths) -> None:
    _stamped(open_store)
    path = _history(paths, "a")
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:3], b"]", b""]))  # cut to two messages by hand
    store = open_store()
    assert len(store.history("a").messages) == 4
    assert any("restored" in f.detail for f in store.findings)


def test_a_torn_append_is_still_cut_back(open_store: StoreFactory, paths: AppPaths) -> None:
    _stamped(open_store)
    path = _history(paths, "a")
    raw = path.read_bytes()
    path.write_bytes(raw[:-3] + b',\n{"id": "torn-in-the-mid')  # a crash mid-append
    store = open_store()
    assert path.read_bytes() == raw
    assert len(store.history("a").messages) == 4
    assert any("torn" in f.detail for f in store.findings)


@pytest.mark.parametrize(
    "content",
    [None, "", "{not json", '{"version": 99, "sessions": {}}', '{"version": 1, "sessions": []}'],
    ids=["missing", "empty", "corrupt", "newer-version", "wrong-shape"],
)
def test_a_missing_or_bad_stamp_file_means_full_reads(
    open_store: StoreFactory, paths: AppPaths, history_reads: list[Path], content: str | None
) -> None:
    _stamped(open_store)
    stamps = paths.memory_dir / STAMPS_FILE
    if content is None:
        stamps.unlink()
    else:
        stamps.write_text(content, "utf-8")
    history_reads.clear()
    store = open_store()
    assert set(history_reads) == {_history(paths, "a"), _history(paths, "b")}
    assert store.findings == []
    history_reads.clear()
    open_store()  # and stamped again
    assert history_reads == []


def test_a_malformed_entry_is_only_that_session_read(
    open_store: StoreFactory, paths: AppPaths, history_reads: list[Path]
) -> None:
    _stamped(open_store)
    stamps = paths.memory_dir / STAMPS_FILE
    data = json.loads(stamps.read_text("utf-8"))
    data["sessions"]["a"] = ["x", 1]
    stamps.write_text(json.dumps(data), "utf-8")
    history_reads.clear()
    open_store()
    assert set(history_reads) == {_history(paths, "a")}


def test_a_lying_stamp_for_a_file_of_another_signature_is_not_believed(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    _stamped(open_store)
    stamps = paths.memory_dir / STAMPS_FILE
    data = json.loads(stamps.read_text("utf-8"))
    data["sessions"]["a"][1] += 1  # another size: another file
    data["sessions"]["a"][4] = 99
    stamps.write_text(json.dumps(data), "utf-8")
    store = open_store()
    assert store.findings == []
    assert store.history_tail("a") is not None
    assert store.history_tail("a")[0][0] == 4  # type: ignore[index]


def test_a_removed_session_loses_its_stamp(open_store: StoreFactory, paths: AppPaths) -> None:
    from agenvoy_desktop.operations.sessions import remove_session

    _stamped(open_store)
    store = open_store()
    remove_session(store, "b")
    store.close()
    open_store().close()
    data = json.loads((paths.memory_dir / STAMPS_FILE).read_text("utf-8"))
    assert set(data["sessions"]) == {"a"}


def test_a_file_written_within_the_racy_window_is_not_stamped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second write within the file system's clock tick could keep size and times."""
    monkeypatch.setattr(history_stamps, "RACY_NS", 3600 * SECOND)
    history = tmp_path / "history.json"
    history.write_bytes(b"[\n]\n")
    stamps = HistoryStamps(tmp_path / STAMPS_FILE)
    _, signature = stamps.tail("s", history)
    stamps.record("s", signature, (0, None))
    stamps.save()
    assert not (tmp_path / STAMPS_FILE).exists()
    assert stamps.tail("s", history)[0] is None


def test_a_check_that_only_reports_writes_no_stamps(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    from agenvoy_desktop.core.reconcile import reconcile

    store = open_store()
    _seed(store)
    stamps = paths.memory_dir / STAMPS_FILE
    stamps.unlink(missing_ok=True)
    assert reconcile(store, repair=False, deep=True) == []
    assert not stamps.exists()
