"""Following a collection's folders as they change, so its index can follow without a click.

A :class:`CollectionWatcher` asks the operating system (through
``watchdog``: inotify, FSEvents, ReadDirectoryChangesW) for the changes
under a collection's roots, keeps only those the next index run would see
(the collection's include/exclude patterns, the formats it reads, no hidden
files, nothing inside the app's own profile), and calls back with the
collection's name once the folders have been quiet for a while: saving a
file, a ``git checkout`` of a thousand files or a folder copied in is one
call, not a thousand.  Only writes are asked for, never reads, so the
indexer reading the files does not wake the watcher.  Idle, it costs a
blocked thread; :meth:`CollectionWatcher.stop` joins every thread it
started, so a closing window never waits on it.

:class:`WatchSet` keeps one watcher per watched collection and brings the
set in line with the registry when collections change.  Nothing here
indexes: the callback's owner decides what to run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.globs import PathFilter
from agenvoy_desktop.rag.readers.formats import format_of

log = logging.getLogger(__name__)

QUIET_S = 2.0
"""How long the folders must be quiet before the callback runs (tests use less)."""
STOP_WAIT_S = 5.0
OBSERVER_TIMEOUT_S = 1.0
"""How long watchdog's dispatcher blocks between looks at its stop flag (a stop wakes it)."""
WRITE_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
"""What is asked of the system: writes only (a folder's own "modified" comes with its files')."""

Changed = Callable[[str], None]
"""``changed(collection_name)``, called on the watcher's own thread."""


class WatchError(KnownError, OSError):
    """A collection's folders cannot be watched (the system's limit on watches, a lost disk)."""


@dataclass(frozen=True)
class _Scope:
    """Which paths under a collection's roots its index would read (as :mod:`.walk` decides)."""

    roots: tuple[Path, ...]
    filter: PathFilter
    skip_dirs: tuple[Path, ...] = ()

    def wants(self, path: str, is_directory: bool) -> bool:
        file = Path(os.path.normpath(path))
        if any(file == skip or file.is_relative_to(skip) for skip in self.skip_dirs):
            return False
        for root in self.roots:
            if file == root:
                return True
            if file.is_relative_to(root):
                return self._wants_rel(file.relative_to(root).as_posix(), is_directory)
        return False

    def _wants_rel(self, rel: str, is_directory: bool) -> bool:
        parts = rel.split("/")
        if any(part.startswith(".") for part in parts):
            return False
        if any(self.filter.prunes_folder("/".join(parts[:n])) for n in range(1, len(parts))):
            return False
        if is_directory:
            return not self.filter.prunes_folder(rel)
        return format_of(parts[-1]) is not None and self.filter.wants_file(rel)


class _Handler(FileSystemEventHandler):
    """Passes the events that matter to the debouncer, with the paths they name."""

    def __init__(self, scope: _Scope, poke: Callable[[str], None]) -> None:
        self.scope = scope
        self.poke = poke

    def on_any_event(self, event: FileSystemEvent) -> None:
        for raw in (event.src_path, event.dest_path):
            path = os.fsdecode(raw) if raw else ""
            if path and self.scope.wants(path, event.is_directory):
                self.poke(path)


@dataclass
class _Debouncer:
    """Calls *fire* once the pokes have stopped for *quiet_s*; one thread, asleep when idle."""

    quiet_s: float
    fire: Callable[[frozenset[str]], None]
    name: str
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _due: float | None = None
    _paths: set[str] = field(default_factory=set)
    _stopped: bool = False
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def poke(self, path: str) -> None:
        with self._cond:
            self._due = time.monotonic() + self.quiet_s
            self._paths.add(path)
            self._cond.notify()

    @property
    def idle(self) -> bool:
        """Nothing waiting to be reported."""
        with self._cond:
            return self._due is None

    def stop(self, timeout: float) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            try:
                self.fire(batch)
            except Exception:  # a broken callback must not end the watching
                log.exception("reporting a change of %s failed", self.name)

    def _next_batch(self) -> frozenset[str] | None:
        """Wait for a quiet spell after some pokes; None once stopped."""
        with self._cond:
            while True:
                if self._stopped:
                    return None
                if self._due is None:
                    self._cond.wait()
                    continue
                left = self._due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                batch = frozenset(self._paths)
                self._due = None
                self._paths.clear()
                return batch


class CollectionWatcher:
    """Watches one collection's roots and calls ``changed(name)`` after a quiet spell.

    Roots that do not exist now (an unplugged disk) are listed in
    ``missing`` and not watched; :meth:`start` raises :class:`WatchError`
    when the system refuses the watch.
    """

    def __init__(
        self,
        collection: Collection,
        changed: Changed,
        *,
        quiet_s: float = QUIET_S,
        skip_dirs: Sequence[Path] = (),
        observer_factory: Callable[[], BaseObserver] | None = None,
    ) -> None:
        self.collection = collection
        self.missing: list[Path] = []
        self.last_batch: frozenset[str] = frozenset()
        """The paths whose changes made the last call (for the log and for tests)."""
        self._changed = changed
        self._scope = _Scope(
            collection.roots,
            collection.path_filter(),
            tuple(Path(os.path.normpath(p)) for p in skip_dirs),
        )
        self._debouncer = _Debouncer(quiet_s, self._fire, f"agenvoy-watch-{collection.name}")
        self._observer = (observer_factory or _observer)()
        self._started = False

    @property
    def name(self) -> str:
        return self.collection.name

    @property
    def idle(self) -> bool:
        """No change is waiting for its quiet spell."""
        return self._debouncer.idle

    def start(self) -> None:
        """Begin watching (may take a moment on a large tree: call it off the UI thread)."""
        handler = _Handler(self._scope, self._debouncer.poke)
        scheduled: set[tuple[Path, bool]] = set()
        for root in self.collection.roots:
            target, recursive = (root, True) if root.is_dir() else (root.parent, False)
            if not root.exists():
                self.missing.append(root)
                continue
            if (target, recursive) not in scheduled:
                scheduled.add((target, recursive))
                self._schedule(handler, target, recursive)
        self._debouncer.start()
        self._started = True
        try:
            self._observer.start()
        except OSError as exc:
            self.stop()
            raise _watch_error(self.collection.name, exc) from None

    def _schedule(self, handler: _Handler, folder: Path, recursive: bool) -> None:
        try:
            self._observer.schedule(
                handler, str(folder), recursive=recursive, event_filter=WRITE_EVENTS
            )
        except OSError as exc:
            raise _watch_error(self.collection.name, exc) from None

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop watching and join the threads (a pending change is dropped)."""
        self._debouncer.stop(timeout)
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join(timeout)
        else:
            with contextlib.suppress(OSError, KeyError):
                self._observer.unschedule_all()  # emitters a failed start left behind

    @property
    def alive(self) -> bool:
        return self._observer.is_alive()

    def _fire(self, batch: frozenset[str]) -> None:
        self.last_batch = batch
        log.info("%d changed paths in collection %r", len(batch), self.collection.name)
        self._changed(self.collection.name)


def _observer() -> BaseObserver:
    return Observer(timeout=OBSERVER_TIMEOUT_S)


def _watch_error(name: str, exc: OSError) -> WatchError:
    why = exc.strerror or str(exc)
    if exc.errno == 28:  # ENOSPC from inotify: the per-user limit on watched folders
        why = "the system's limit on watched folders is reached (fs.inotify.max_user_watches)"
    return WatchError(
        f"cannot watch the folders of {name!r} for changes ({why}): choose Re-index after"
        " changing its files"
    )


@dataclass
class SyncResult:
    """What :meth:`WatchSet.sync` did: the collections it began watching, and the failures."""

    started: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


class WatchSet:
    """One watcher per watched collection, brought in line with the collections by :meth:`sync`.

    Thread-safe: :meth:`sync` may run on a worker thread while :meth:`close`
    is called from another; once closed, nothing is started again.
    """

    def __init__(
        self,
        changed: Changed,
        *,
        quiet_s: float = QUIET_S,
        skip_dirs: Sequence[Path] = (),
        observer_factory: Callable[[], BaseObserver] | None = None,
    ) -> None:
        self._changed = changed
        self._quiet_s = quiet_s
        self._skip_dirs = tuple(skip_dirs)
        self._observer_factory = observer_factory
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._watchers: dict[str, CollectionWatcher] = {}
        self._refused: dict[str, Collection] = {}
        """Collections the system would not watch: tried again only once they change."""
        self._closed = False

    @property
    def names(self) -> frozenset[str]:
        """The collections watched now."""
        with self._lock:
            return frozenset(self._watchers)

    def watcher(self, name: str) -> CollectionWatcher | None:
        with self._lock:
            return self._watchers.get(name)

    def sync(self, collections: Iterable[Collection]) -> SyncResult:
        """Watch exactly the collections with ``watch`` on; restart one whose folders changed.

        A collection the system refused to watch is reported once, and tried
        again when it changes (not at every sync).
        """
        wanted = {c.name: c for c in collections if c.watch}
        result = SyncResult()
        with self._sync_lock:
            with self._lock:
                if self._closed:
                    return result
                stale = [w for n, w in self._watchers.items() if wanted.get(n) != w.collection]
                for watcher in stale:
                    del self._watchers[watcher.name]
                self._refused = {n: c for n, c in self._refused.items() if wanted.get(n) == c}
                todo = [
                    c
                    for n, c in wanted.items()
                    if n not in self._watchers and n not in self._refused
                ]
            for watcher in stale:
                watcher.stop()
            for collection in todo:
                self._start(collection, result)
        return result

    def _start(self, collection: Collection, result: SyncResult) -> None:
        watcher = CollectionWatcher(
            collection,
            self._changed,
            quiet_s=self._quiet_s,
            skip_dirs=self._skip_dirs,
            observer_factory=self._observer_factory,
        )
        try:
            watcher.start()
        except WatchError as exc:
            result.failed[collection.name] = str(exc)
            self._refused[collection.name] = collection
            return
        with self._lock:
            keep = not self._closed
            if keep:
                self._watchers[collection.name] = watcher
        if keep:
            result.started.append(collection.name)
        else:
            watcher.stop()  # closed while this one was starting

    def close(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop every watcher and join its threads; later syncs do nothing."""
        with self._lock:
            self._closed = True
            watchers, self._watchers = list(self._watchers.values()), {}
        for watcher in watchers:
            watcher.stop(timeout)
