"""Watching a collection's folders with the real watchdog observer on a tmp folder.

Waits are on conditions (with a generous limit), never on a sleep of a
guessed length; "no call" is shown by a later wanted change whose call
reports only that change's path.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers.api import ObservedWatch
from watchdog.observers.polling import PollingObserver

from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.watch import CollectionWatcher, WatchSet, _Scope
from tests.rag.index_support import write

QUIET_S = 1.0
"""Long enough that a burst written by a test on a loaded machine stays one burst."""
LIMIT_S = 20.0


def wait_until(condition: Callable[[], object], limit_s: float = LIMIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition was not met in time")
        time.sleep(0.02)


def watch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t is not threading.current_thread()}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(root / "old.md", "# Old\n")
    (root / "sub").mkdir()
    return root


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def started(folder: Path, calls: list[str], tmp_path: Path) -> Iterator[CollectionWatcher]:
    collection = Collection("notes", (folder,), exclude=("drafts/**", "*.log"), watch=True)
    before = watch_threads()
    watcher = CollectionWatcher(
        collection, calls.append, quiet_s=QUIET_S, skip_dirs=(folder / "profile",)
    )
    watcher.start()
    yield watcher
    watcher.stop()
    assert not watcher.alive
    left = watch_threads() - before
    assert not left, f"threads left running: {[t.name for t in left]}"


def test_a_burst_of_changes_is_one_call_after_the_quiet(
    started: CollectionWatcher, folder: Path, calls: list[str]
) -> None:
    note = folder / "sub" / "new.md"
    note.write_text("# New\n")
    note.write_text("# New\n\nmore\n")
    (folder / "old.md").write_text("# Old, edited\n")
    note.unlink()
    wait_until(lambda: calls)
    wait_until(lambda: started.idle)
    assert calls == ["notes"]
    assert started.last_batch == {str(note), str(folder / "old.md")}


def test_files_the_index_would_not_read_make_no_call(
    started: CollectionWatcher, folder: Path, calls: list[str]
) -> None:
    write(folder / "drafts" / "plan.md", "excluded by drafts/**\n")
    write(folder / "run.log", "excluded by *.log\n")
    (folder / "photo.bin").write_bytes(b"\x00\x01 not a format the index reads")
    write(folder / ".hidden.md", "hidden files are skipped\n")
    write(folder / "profile" / "documents" / "x.md", "the app's own profile\n")
    (folder / "old.md").read_text()  # reading (as the indexer does) is not a change
    wanted = write(folder / "sub" / "wanted.txt", "this one counts\n")
    wait_until(lambda: calls)
    wait_until(lambda: started.idle)
    assert calls == ["notes"]
    assert started.last_batch == {str(wanted)}


def test_a_folder_moved_in_counts(
    started: CollectionWatcher, folder: Path, calls: list[str], tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write(outside / "moved.md", "# Moved in\n")
    outside.rename(folder / "moved")
    wait_until(lambda: calls)
    assert str(folder / "moved") in started.last_batch


def test_a_single_file_root_watches_only_that_file(tmp_path: Path) -> None:
    file = write(tmp_path / "docs" / "one.md", "# One\n")
    calls: list[str] = []
    watcher = CollectionWatcher(Collection("one", (file,)), calls.append, quiet_s=QUIET_S)
    watcher.start()
    try:
        write(tmp_path / "docs" / "sibling.md", "not in the collection\n")
        file.write_text("# One, edited\n")
        wait_until(lambda: calls)
        assert watcher.last_batch == {str(file)}
    finally:
        watcher.stop()


def test_a_missing_root_is_listed_and_the_rest_is_watched(tmp_path: Path) -> None:
    present = tmp_path / "present"
    present.mkdir()
    gone = tmp_path / "unplugged"
    calls: list[str] = []
    watcher = CollectionWatcher(Collection("two", (present, gone)), calls.append, quiet_s=QUIET_S)
    watcher.start()
    try:
        assert watcher.missing == [gone]
        write(present / "a.md", "# A\n")
        wait_until(lambda: calls)
    finally:
        watcher.stop()


def test_the_scope_follows_the_patterns() -> None:
    root = Path("/r")
    scope = _Scope((root,), Collection("x", (root,), include=("docs/**",)).path_filter())
    assert scope.wants("/r/docs/a.md", is_directory=False)
    assert not scope.wants("/r/other/a.md", is_directory=False)
    assert not scope.wants("/r/docs/a.exe", is_directory=False)
    assert not scope.wants("/elsewhere/docs/a.md", is_directory=False)
    assert scope.wants("/r/docs", is_directory=True)
    pruned = _Scope((root,), Collection("x", (root,), exclude=("build",)).path_filter())
    assert not pruned.wants("/r/build/a.md", is_directory=False)
    assert not pruned.wants("/r/build", is_directory=True)


def test_a_watch_set_follows_the_collections(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    calls: list[str] = []
    before = watch_threads()
    watches = WatchSet(calls.append, quiet_s=QUIET_S)
    first = Collection("a", (a,), watch=True)
    result = watches.sync([first, Collection("b", (b,))])
    assert result.started == ["a"]
    assert set(watches.names) == {"a"}
    assert watches.sync([first]).started == []  # unchanged: left running
    moved = Collection("a", (b,), watch=True)
    assert watches.sync([moved]).started == ["a"]  # other folders: watched anew
    watcher = watches.watcher("a")
    assert watcher is not None
    assert watcher.collection == moved
    write(b / "x.md", "# X\n")
    wait_until(lambda: calls == ["a"])
    assert watches.sync([Collection("a", (b,), watch=False)]).started == []
    assert watches.names == set()
    watches.sync([moved])
    watches.close()
    assert watches.sync([moved]).started == []  # closed: nothing starts again
    assert not watch_threads() - before


class _RefusingObserver(PollingObserver):
    """An observer on a system out of watches (inotify's ENOSPC)."""

    def schedule(self, *args: Any, **kwargs: Any) -> ObservedWatch:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_refused_watch_is_reported_once_and_retried_when_the_collection_changes(
    tmp_path: Path,
) -> None:
    watches = WatchSet(lambda _name: None, quiet_s=QUIET_S, observer_factory=_RefusingObserver)
    collection = Collection("big", (tmp_path,), watch=True)
    result = watches.sync([collection])
    assert result.started == []
    assert "limit on watched folders" in result.failed["big"]
    assert "Re-index" in result.failed["big"]
    assert watches.sync([collection]).failed == {}  # said once, not at every change
    changed = Collection("big", (tmp_path,), exclude=("*.log",), watch=True)
    assert "big" in watches.sync([changed]).failed
    watches.close()
