"""The summary lock file: one summary pass per session across processes."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from pathlib import Path

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.summarizer.runs import LOCK_FILE, LOCK_STALE_NS
from agenvoy_desktop.core.timeutil import Clock

log = logging.getLogger(__name__)


_held: set[Path] = set()
_held_guard = threading.Lock()


def _pid_alive(pid: int) -> bool:
    """Whether a process exists (never signals it: os.kill on Windows would kill)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":
        import ctypes

        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x1000, False, pid)  # QUERY_LIMITED_INFORMATION
        if not handle:
            return bool(ctypes.GetLastError() == 5)  # access denied: it exists
        try:
            code = ctypes.c_ulong()
            if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
                return True
            return code.value == 259  # STILL_ACTIVE
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class SessionLock:
    """``summary.lock`` in a session folder; see the module docstring."""

    def __init__(self, path: Path, token: str, clock: Clock) -> None:
        self.path = path
        self.token = token
        self.clock = clock

    def _content(self) -> str:
        return json.dumps({"pid": os.getpid(), "time_ns": self.clock(), "token": self.token})

    @classmethod
    def acquire(cls, folder: Path, clock: Clock) -> SessionLock | None:
        """The lock, or None when a live holder has it."""
        lock = cls(folder / LOCK_FILE, uuid.uuid4().hex, clock)
        for _ in range(3):
            with _held_guard:
                if lock.path in _held:
                    return None
                if lock._create():
                    _held.add(lock.path)
                    return lock
            if not _break_if_stale(lock.path, clock()):
                return None
        return None

    def _create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, self._content().encode("utf-8"))
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise
        os.close(fd)
        return True

    def refresh(self) -> None:
        """Renew the time so a long catch-up is never mistaken for a stale lock."""
        atomic_write_text(self.path, self._content())

    def release(self) -> None:
        with _held_guard:
            _held.discard(self.path)
            try:
                mine = json.loads(self.path.read_text("utf-8")).get("token") == self.token
            except (OSError, ValueError, AttributeError):
                mine = False
            if mine:
                self.path.unlink(missing_ok=True)


def _break_if_stale(path: Path, now: int) -> bool:
    """Remove a stale lock file; True when the caller may try to create it again."""
    try:
        raw = path.read_bytes()
        info = json.loads(raw)
        pid, stamp = int(info["pid"]), int(info["time_ns"])
    except FileNotFoundError:
        return True
    except (OSError, ValueError, KeyError, TypeError):  # half-written or garbage
        try:
            raw, age = b"", time.time_ns() - path.stat().st_mtime_ns
        except FileNotFoundError:
            return True
        stale = age > LOCK_STALE_NS
    else:
        ours_leftover = pid == os.getpid() and path not in _held  # pid reused after a crash
        stale = ours_leftover or not _pid_alive(pid) or now - stamp > LOCK_STALE_NS
    if not stale:
        return False
    aside = path.with_name(f"{path.name}.stale-{uuid.uuid4().hex[:8]}")
    try:
        path.rename(aside)
    except FileNotFoundError:
        return True
    if raw and aside.read_bytes() != raw:  # replaced by a fresh holder meanwhile: give back
        with contextlib.suppress(OSError):
            if not path.exists():
                aside.rename(path)
        return False
    aside.unlink(missing_ok=True)
    log.warning("took over stale summary lock %s", path)
    return True
