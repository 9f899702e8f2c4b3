"""The cross-process locks: reentrancy, shared vs exclusive, who is in the way."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agenvoy_desktop.core.locks import (
    LockUpgradeError,
    StoreBusyError,
    StoreLocks,
)
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import T0, StoreFactory, msg

HOLDER = """
import sys
from pathlib import Path
from agenvoy_desktop.core.locks import StoreLocks
locks = StoreLocks(Path(sys.argv[1]))
with locks.session("abc", "import"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _locks(tmp_path: Path) -> StoreLocks:
    return StoreLocks(tmp_path / "memory", wait_s=0.2)


def test_reentrant_within_one_store(tmp_path: Path) -> None:
    mine, other = _locks(tmp_path), _locks(tmp_path)
    with mine.session("abc", "append") as first:
        assert first
        with mine.session("abc", "compaction") as again:
            assert not again  # nested: the caches were checked already
        assert mine.holds_session("abc")  # the inner release did not unlock
        with pytest.raises(StoreBusyError), other.session("abc", "append", wait_s=0.0):
            pass
    assert not mine.holds_session("abc")
    with other.session("abc", "append") as first:
        assert first


def test_sessions_are_independent_but_the_profile_is_not(tmp_path: Path) -> None:
    mine, other = _locks(tmp_path), _locks(tmp_path)
    with mine.session("abc", "import"):
        with other.session("xyz", "append"):  # both hold the profile shared
            pass
        busy = pytest.raises(StoreBusyError, match="the profile is in use by another")
        with busy, other.profile("embedding model change", wait_s=0.0):
            pass
    with mine.profile("doctor --repair"):
        with mine.session("abc", "check") as first:  # exclusive covers shared
            assert first
        busy = pytest.raises(StoreBusyError, match=r"the profile is in use by .*doctor --repair")
        with busy, other.session("xyz", "append", wait_s=0.0):
            pass


def test_exclusive_inside_shared_is_refused(tmp_path: Path) -> None:
    locks = _locks(tmp_path)
    refused = pytest.raises(LockUpgradeError)
    with locks.session("abc", "append"), refused, locks.profile("embedding model change"):
        pass
    with locks.profile("doctor --repair"):  # and nothing was left held
        pass


def test_waiter_names_the_holder_then_gives_up(tmp_path: Path) -> None:
    mine, other = _locks(tmp_path), _locks(tmp_path)
    busy = pytest.raises(StoreBusyError)
    with mine.session("abc", "import"), busy as caught, other.session("abc", "reset"):
        pass
    text = str(caught.value)
    assert text.startswith("session abc is in use by ")
    assert f"import (pid {os.getpid()}, since " in text
    assert text.endswith("; try again when it finishes")
    assert "\n" not in text


def test_holder_in_another_process_and_its_death(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "memory")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "held"
            busy = pytest.raises(StoreBusyError, match=rf"python import \(pid {proc.pid}, since")
            with busy, _locks(tmp_path).session("abc", "reset"):
                pass
        finally:
            proc.kill()  # a dead holder's lock goes with it: nothing stale to break
            proc.wait()
    with _locks(tmp_path).session("abc", "reset") as first:
        assert first


def test_lock_files_are_private(tmp_path: Path) -> None:
    locks = _locks(tmp_path)
    with locks.session("abc", "append"):
        pass
    for path in (locks.folder / "session-abc.lock", locks.folder / "profile.lock"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- through the store ---------------------------------------------------------------
def test_store_write_waits_for_another_store_then_reports(open_store: StoreFactory) -> None:
    first, second = open_store(), open_store()
    sid = first.create_session(session_id="abc")
    second.locks.wait_s = 0.1
    with first.locked(sid, "import"), pytest.raises(StoreBusyError, match="import"):
        second.append(sid, [msg("user", "hello", T0)])
    second.append(sid, [msg("user", "hello", T0)])  # free again
    assert len(first.history(sid).messages) == 1


def test_a_store_sees_what_another_store_appended(open_store: StoreFactory) -> None:
    first, second = open_store(), open_store()
    sid = first.create_session(session_id="abc")
    first.append(sid, [msg("user", "one", T0)])
    second.append(sid, [msg("assistant", "two", T0 + 1)])
    first.append(sid, [msg("user", "three", T0 + 2)])  # its cached size is stale by now
    again = MemoryStore(first.paths)
    try:
        contents = [m.content for m in again.history(sid).messages]
    finally:
        again.close()
    assert contents == ["one", "two", "three"]
    assert [m.content for m in second.history(sid).messages] == contents  # reads re-read


def test_a_read_never_repairs_a_file_another_process_may_be_appending(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    sid = store.create_session(session_id="abc")
    store.append(sid, [msg("user", "one", T0)])
    path = store.folder(sid) / "history.json"
    torn = path.read_bytes()[:-3] + b',\n{"id": "half'
    store.drop_cached(sid)
    path.write_bytes(torn)
    assert [m.content for m in store.history(sid).messages] == ["one"]
    assert path.read_bytes() == torn  # untouched: maybe someone's append in progress
    store.append(sid, [msg("assistant", "two", T0 + 1)])  # under the lock: repaired first
    assert [m.content for m in open_store(reconcile=False).history(sid).messages] == [
        "one",
        "two",
    ]
