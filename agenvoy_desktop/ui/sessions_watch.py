"""The window's watch on the sessions folder: sessions another process adds or removes show up.

A profile has more writers than the window (``agenvoy-desktop import``,
``chat``, ``remove`` in a terminal; see ``core/locks.py``).  Their sessions
are in the archive and on disk at once, but the sessions list only reloads
when something broadcasts a change, and only the window's own writes did:
a conversation imported from a terminal stayed invisible until the window
was restarted.  A :class:`QFileSystemWatcher` on the sessions folder (inotify
on Linux, no polling) sees a session folder come or go; after a short quiet
time the watch broadcasts :data:`SESSIONS_LIST_CHANGED`, and the list
reloads as it does after any change (coalesced).  The window's own writes
trigger it too; that costs one more coalesced reload of the first page.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer

from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.ui.async_runner import AsyncRunner

SESSIONS_LIST_CHANGED = MemoryChanges(sessions=True)
QUIET_MS = 400
"""A remove renames then deletes, an import creates then fills: one reload after them."""


class SessionsWatch(QObject):
    """See the module docstring."""

    def __init__(
        self,
        sessions_dir: Path,
        runner: AsyncRunner,
        *,
        quiet_ms: int = QUIET_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.runner = runner
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(quiet_ms)
        self._timer.timeout.connect(lambda: self.runner.broadcast(SESSIONS_LIST_CHANGED))
        self._watcher = QFileSystemWatcher(self)
        self._watcher.directoryChanged.connect(lambda _path: self._timer.start())
        self.watching = self._watcher.addPath(str(sessions_dir))
        """False where the folder cannot be watched (then only the window's own writes show)."""

    def stop(self) -> None:
        """Watch nothing more; a pending reload is dropped."""
        self._timer.stop()
        for path in self._watcher.directories():
            self._watcher.removePath(path)
