"""The window's watch on document folders: a change to a watched collection's files re-indexes it.

:class:`DocumentWatch` keeps one :class:`~agenvoy_desktop.rag.watch.CollectionWatcher`
per collection with ``watch`` on, while document collections are on in
Settings, and brings that set in line whenever the collections or the
settings change (the runner's ``memory_changed`` broadcast).  A watcher's
debounced change comes back here on the GUI thread and asks the Documents
tab for an incremental index run (:meth:`DocumentsTab.queue_index`: one
run at a time; a change during a run of the same collection makes one more
pass after it).  A collection that starts being watched (at window start,
when it is added or edited) gets one catch-up pass, for the changes made
while nobody was watching.

Starting a watch walks the folder tree, so it runs on a worker thread of
its own (a plain Python thread: watchdog makes ``threading`` threads, which
must not be born on one of the loop's Qt threads); :meth:`DocumentWatch.stop`
stops and joins every watcher and that worker, so the window closes
without waiting on them.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from PySide6.QtCore import QObject, Signal

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations import documents as ops
from agenvoy_desktop.operations.changes import MemoryChanges
from agenvoy_desktop.rag.watch import QUIET_S, SyncResult, WatchSet
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.inspector.documents_tab import DocumentsTab, shiboken_ok


class DocumentWatch(QObject):
    """See the module docstring."""

    changed = Signal(str)
    """A watched collection's files changed (emitted on a watcher's thread, handled here)."""

    def __init__(
        self,
        services: AppServices,
        runner: AsyncRunner,
        tab: DocumentsTab,
        *,
        quiet_s: float = QUIET_S,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.tab = tab
        paths = services.paths
        self.watches = WatchSet(
            self.changed.emit, quiet_s=quiet_s, skip_dirs=(paths.config_dir, paths.data_dir)
        )
        self.changed.connect(self._on_change)
        self._executor: ThreadPoolExecutor | None = None
        self._sync_op: Operation | None = None
        self._again = False
        self._running = False

    @property
    def names(self) -> frozenset[str]:
        """The collections watched now."""
        return self.watches.names

    def start(self) -> None:
        """Watch the watched collections (each gets a catch-up pass) and follow their changes."""
        if self._running:
            return
        self._running = True
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="agenvoy-watch-sync")
        self.runner.memory_changed.connect(self._memory_changed)
        self.retarget()

    def stop(self) -> None:
        """Stop every watcher and join its threads; nothing is watched or queued afterwards."""
        if self._running:
            self._running = False
            self.runner.memory_changed.disconnect(self._memory_changed)
        self.watches.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _memory_changed(self, changes: MemoryChanges) -> None:
        """Collections added, edited or removed, or Settings saved (documents on or off)."""
        if changes.any_of("documents", "models"):
            self.retarget()

    def retarget(self) -> None:
        """Bring the watchers in line with the collections (on a worker thread, one at a time)."""
        executor = self._executor
        if not self._running or executor is None:
            return
        if self._sync_op is not None and not self._sync_op.done:
            self._again = True
            return
        paths, watches = self.services.paths, self.watches
        enabled = bool(self.services.settings.documents.enabled)

        async def work(_op: Operation) -> SyncResult:
            def sync() -> SyncResult:
                return watches.sync(ops.watched_collections(paths) if enabled else [])

            return await asyncio.get_running_loop().run_in_executor(executor, sync)

        self._sync_op = self.runner.run(
            work, what="watch the document folders", on_success=self._synced
        )
        self._sync_op.finished.connect(self._sync_ended)

    def _synced(self, result: SyncResult) -> None:
        if not self._running or not shiboken_ok(self.tab):
            return
        self.tab.set_watching(self.watches.names)
        for name in result.started:  # a catch-up pass for what changed while unwatched
            if name != self.tab.indexing:
                self.tab.queue_index(name)
        for message in result.failed.values():
            self.tab.status.error(message)

    def _sync_ended(self) -> None:
        if self._again:
            self._again = False
            self.retarget()

    def _on_change(self, name: str) -> None:
        """A watched collection's files changed (and then were quiet): index what changed."""
        if not (self._running and name in self.watches.names and shiboken_ok(self.tab)):
            return
        if any(view.name == name for view in self.tab.collections):  # not just removed
            self.tab.queue_index(name)
