"""Which sessions have a reply being written, across processes.

A turn writes a session many times (the user message, tool calls, the
answer) and holds the session's write lock only for each write, so the
write lock cannot tell a message action (delete, edit, regenerate, fork)
that a turn is half way: truncating the history under it would leave the
turn appending to a conversation that no longer exists.  A turn therefore
holds the session's *turn lock* shared for its whole length (two turns may
overlap, as before), and a message action takes it exclusively without
waiting: a running turn makes the action fail at once with a busy error the
window can show, and a turn that starts during a (short) action waits for it.

The lock files sit next to the write locks (``turn-<session>.lock``); the
operating system drops a lock when its process dies, so a crashed turn
leaves nothing to break.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from agenvoy_desktop.core.locks import (
    DEFAULT_WAIT_S,
    LOCK_DIR,
    FileLock,
    StoreBusyError,
    program_name,
)


class TurnRunningError(StoreBusyError):
    """A message action was refused because a reply is being written in the session."""


class TurnLocks:
    """The turn locks of one profile (see the module docstring)."""

    def __init__(self, memory_dir: Path) -> None:
        self.folder = memory_dir / LOCK_DIR
        self.program = program_name()

    def _lock(self, session_id: str) -> FileLock:
        return FileLock(
            self.folder / f"turn-{session_id}.lock", f"session {session_id}", self.program
        )

    @contextlib.contextmanager
    def turn(self, session_id: str, *, wait_s: float = DEFAULT_WAIT_S) -> Iterator[None]:
        """Held for a whole turn: message actions on the session are refused meanwhile."""
        lock = self._lock(session_id)
        lock.acquire("reply", shared=True, wait_s=wait_s)
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def quiet(self, session_id: str, operation: str) -> Iterator[None]:
        """Held for a message action; raises :class:`TurnRunningError` while a turn runs."""
        lock = self._lock(session_id)
        try:
            lock.acquire(operation, shared=False, wait_s=0.0)
        except StoreBusyError:
            raise TurnRunningError(
                f"a reply is being written in session {session_id}: "
                f"stop it or wait for it to finish, then {operation} again"
            ) from None
        try:
            yield
        finally:
            lock.release()
