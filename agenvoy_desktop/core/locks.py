"""Cross-process locks for a profile's memory: one per session, one for the profile.

The window, the CLI and the summarizer may all write one profile at the same
time, each through its own :class:`~agenvoy_desktop.core.store.MemoryStore`.
A writer of a session holds that session's lock exclusively (and the
profile lock shared); operations that touch every session at once (a new
embedding model, finishing interrupted resets, ``doctor --repair``) hold the
profile lock exclusively.  Readers take no lock: SQLite's WAL and atomic
renames keep them safe.

The locks are advisory ``flock`` locks on files in ``<memory>/locks/``; the
operating system drops them when their process dies, so there is no stale
lock to break.  The exclusive holder writes who it is into the lock file,
so a process that gives up waiting can say who is in the way.  That note is
only trusted while the lock is actually held.  On Windows ``msvcrt`` byte
locks stand in, exclusive only.

Locks are reentrant within one :class:`StoreLocks` (one store): the
outermost acquisition locks the file, the outermost release unlocks it.  Two
stores in one process exclude each other like two processes do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.errors import KnownError

log = logging.getLogger(__name__)

DEFAULT_WAIT_S = 10.0
"""How long an operation waits for a busy lock before it reports who holds it."""
POLL_S = 0.05
LOCK_DIR = "locks"
PROFILE_LOCK = "profile.lock"
_INFO_AT = 1
"""The holder note starts after byte 0, the byte Windows locks (locked bytes cannot be read)."""
_POSIX = os.name == "posix"


class StoreBusyError(KnownError, RuntimeError):
    """Another process holds a lock this operation needs; ``str()`` says who."""


class LockUpgradeError(RuntimeError):
    """A shared lock cannot become exclusive in place: a programming error."""


def program_name() -> str:
    """What this process is, in words a user recognises (``agenvoy-desktop``, ``python``)."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else sys.executable
    name = Path(argv0).name
    return name.removesuffix(".exe").removesuffix(".py") or "python"


HOLDER_FIELDS: dict[str, type] = {
    "pid": int,
    "program": str,
    "operation": str,
    "host": str,
    "since_ns": int,
}
"""A holder file's keys and their JSON types, in :class:`Holder`'s field order."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds an exclusive lock, as its holder wrote it."""

    pid: int
    program: str
    operation: str
    host: str
    since_ns: int

    def describe(self) -> str:
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        when = datetime.fromtimestamp(self.since_ns / 1e9).strftime("%H:%M:%S")
        return f"{self.program} {self.operation} (pid {self.pid}{where}, since {when})"

    def to_bytes(self) -> bytes:
        data = {
            "pid": self.pid,
            "program": self.program,
            "operation": self.operation,
            "host": self.host,
            "since_ns": self.since_ns,
        }
        return json.dumps(data).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> Holder | None:
        try:
            data = json.loads(raw)
        except ValueError:
            return None  # being written, cleared, or not ours
        if not isinstance(data, dict):
            return None
        values: list[Any] = [data.get(key) for key in HOLDER_FIELDS]
        if any(type(v) is not kind for v, kind in zip(values, HOLDER_FIELDS.values(), strict=True)):
            return None  # the right keys with the wrong types: not ours either
        return cls(*values)


# -- the platform layer ----------------------------------------------------------------
def _try_lock(fd: int, shared: bool) -> bool:
    """One non-blocking attempt; True when the lock is now held."""
    if _POSIX:
        import fcntl

        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    import msvcrt  # pragma: no cover - Windows

    os.lseek(fd, 0, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
    except OSError:
        return False
    return True


def _unlock(fd: int) -> None:
    if _POSIX:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    import msvcrt  # pragma: no cover - Windows

    os.lseek(fd, 0, os.SEEK_SET)
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]


def _open(path: Path) -> int:
    """The lock file, created owner-only (its name says which session exists)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)


class FileLock:
    """One lock file, reentrant within this object (see the module docstring)."""

    def __init__(self, path: Path, what: str, operation_label: str) -> None:
        self.path = path
        self.what = what  # "session abc", "the profile": for messages
        self.program = operation_label
        self._fd: int | None = None
        self._depth = 0
        self._shared = False

    @property
    def held(self) -> bool:
        return self._depth > 0

    def acquire(self, operation: str, *, shared: bool, wait_s: float) -> bool:
        """Take the lock; True for the outermost acquisition.

        Raises StoreBusyError after *wait_s* seconds (0: a single try), and
        LockUpgradeError for exclusive inside shared.
        """
        if self._depth:
            if self._shared and not shared:
                raise LockUpgradeError(f"{self.what}: exclusive lock requested inside a shared one")
            self._depth += 1
            return False
        fd = _open(self.path)
        try:
            self._wait(fd, operation, shared=shared, wait_s=wait_s)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._depth, self._shared = fd, 1, shared
        if not shared:
            self._write_note(operation)
        return True

    def _wait(self, fd: int, operation: str, *, shared: bool, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while not _try_lock(fd, shared):
            if time.monotonic() >= deadline:
                raise StoreBusyError(self._busy_message(fd))
            time.sleep(POLL_S)
        log.debug("%s locked for %s", self.what, operation)

    def _busy_message(self, fd: int) -> str:
        holder = self._exclusive_holder(fd)
        who = holder.describe() if holder else "another Agenvoy Desktop process"
        return f"{self.what} is in use by {who}; try again when it finishes"

    def _exclusive_holder(self, fd: int) -> Holder | None:
        """The note of the current holder, when it is an exclusive one (else stale)."""
        if _POSIX and _try_lock(fd, shared=True):  # only shared holders: any note is old
            _unlock(fd)
            return None
        try:
            os.lseek(fd, _INFO_AT, os.SEEK_SET)
            raw = os.read(fd, 4096)
        except OSError:
            return None
        return Holder.from_bytes(raw)

    def _write_note(self, operation: str) -> None:
        """Say who holds the lock, for those who wait (best effort: it is only a note)."""
        assert self._fd is not None
        holder = Holder(os.getpid(), self.program, operation, socket.gethostname(), time.time_ns())
        with contextlib.suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_SET)
            os.write(self._fd, b"\n" + holder.to_bytes())
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_CUR))

    def release(self) -> None:
        if self._depth <= 0:
            raise RuntimeError(f"{self.what}: lock released more often than taken")
        self._depth -= 1
        if self._depth:
            return
        fd, self._fd = self._fd, None
        assert fd is not None
        try:
            if not self._shared:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)  # the note would be stale from now on
            _unlock(fd)
        finally:
            os.close(fd)


class StoreLocks:
    """The locks of one profile, as one store holds them."""

    def __init__(self, memory_dir: Path, *, wait_s: float = DEFAULT_WAIT_S) -> None:
        self.folder = memory_dir / LOCK_DIR
        self.wait_s = wait_s
        self.program = program_name()
        self._profile = FileLock(self.folder / PROFILE_LOCK, "the profile", self.program)
        self._sessions: dict[str, FileLock] = {}

    def _session_lock(self, session_id: str) -> FileLock:
        """The lock of *session_id*, shared by every spelling of it in upper and lower case.

        Two processes creating ``victim`` and ``Victim`` at once would each
        hold its own lock, both find no twin, and both create a session that
        Windows and macOS would keep in one folder; one lock for both makes
        the second wait and then see the first (``MemoryStore.refuse_case_twin``).
        """
        key = session_id.lower()
        lock = self._sessions.get(key)
        if lock is None:
            path = self.folder / f"session-{key}.lock"
            lock = FileLock(path, f"session {session_id}", self.program)
            self._sessions[key] = lock
        return lock

    def holds_session(self, session_id: str) -> bool:
        lock = self._sessions.get(session_id.lower())
        return lock is not None and lock.held

    @property
    def holds_profile(self) -> bool:
        return self._profile.held

    @contextlib.contextmanager
    def profile(self, operation: str, *, wait_s: float | None = None) -> Iterator[None]:
        """The profile lock, exclusive: nobody writes any session meanwhile."""
        self._profile.acquire(operation, shared=False, wait_s=self._wait(wait_s))
        try:
            yield
        finally:
            self._profile.release()

    @contextlib.contextmanager
    def session(
        self, session_id: str, operation: str, *, wait_s: float | None = None
    ) -> Iterator[bool]:
        """The profile lock shared, then the session's exclusively.

        Yields True for the outermost acquisition of the session lock: the
        moment to check whether another process changed the session.
        """
        wait = self._wait(wait_s)
        self._profile.acquire(operation, shared=True, wait_s=wait)
        try:
            lock = self._session_lock(session_id)
            first = lock.acquire(operation, shared=False, wait_s=wait)
            try:
                yield first
            finally:
                lock.release()
        finally:
            self._profile.release()

    def _wait(self, wait_s: float | None) -> float:
        return self.wait_s if wait_s is None else wait_s
