"""MemoryStore: one object that owns a profile's conversation memory.

It keeps the three layers in step — history.json (hot window), the SQLite
archive (everything) and the per-session vector index — and is the only
writer of them.  Write order for a new message: history.json first (it is
what the user sees and what the model reads), then the archive, then the
vector; opening the profile (:func:`startup.open_memory`) reconciles
whatever a crash left between those steps.

Not thread-safe by design: callers run it on one worker (the UI's storage
thread, or the CLI's main thread); the embedding model has its own thread.

Several processes (the window, CLI commands, a second window) may each open a
store on one profile.  Every write of a session runs under that session's
cross-process lock (:mod:`locks`), for the whole operation — an import holds
it until its last vector is stored, so a reset waits for it or reports who
is busy.  On taking the lock the store checks whether another process
changed the session since it cached it, and drops its caches if so.  Reads
take no lock and re-read a history.json that changed on disk, but never
repair one: a torn tail may be another process's append in progress.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.findings import Finding
from agenvoy_desktop.core.history import HistoryFile, encode_history, quick_tail, take_window
from agenvoy_desktop.core.history_stamps import STAMPS_FILE, HistoryStamps, Tail
from agenvoy_desktop.core.import_keys import only_new
from agenvoy_desktop.core.locks import StoreBusyError, StoreLocks
from agenvoy_desktop.core.messages import Message, check_messages, message_limit, new_message_id
from agenvoy_desktop.core.model_name import DEFAULT_MODEL_NAME
from agenvoy_desktop.core.session_settings import keep_title
from agenvoy_desktop.core.timeutil import Clock, now_ns
from agenvoy_desktop.core.turn_lock import TurnLocks
from agenvoy_desktop.paths import AppPaths

if TYPE_CHECKING:  # numpy and hnswlib load on the first vector, not with every store
    from agenvoy_desktop.core.embedding import TextEmbedder
    from agenvoy_desktop.core.vectors import SessionVectors

log = logging.getLogger(__name__)

DEFAULT_MAX_HISTORY_BYTES = 5 * 1024 * 1024
COMPACT_TO = 0.8
EMBED_BATCH = 64
FLUSH_EVERY_S = 60.0
FLUSH_EVERY_N = 256
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_WINDOWS_DEVICE = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?", re.IGNORECASE)
"""Names Windows reserves for devices, with any extension: no folder can have them."""
"""A session id, whole (always ``fullmatch``: ``$`` would accept a trailing newline)."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ImportCount:
    """What one import did to one session: messages added, and those already there."""

    session_id: str
    added: int
    already: int


"""``progress(done, total)``."""
Cancelled = Callable[[], bool]
T = TypeVar("T")


class UnknownSessionError(KnownError, KeyError):
    """No session with that id; ``str()`` is a readable message."""

    def __str__(self) -> str:
        return f"no session {self.args[0]!r}"


class InvalidSessionIdError(KnownError, ValueError):
    """A session id that cannot be a folder name."""


class SessionIdCaseError(InvalidSessionIdError):
    """A new session id that differs from an existing session's only in case."""


class OperationCancelledError(KnownError, RuntimeError):
    """Long work stopped at the user's request; what was done is kept."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A row of the sessions list."""

    session_id: str
    title: str | None
    created_ns: int
    updated_ns: int
    history_messages: int
    history_bytes: int
    archived_messages: int
    vectors: int | None
    """Messages with a vector (None: not counted; the sessions list never shows it)."""
    start_at_ns: int


def valid_session_id(name: str) -> bool:
    """Whether *name* can name a session folder on every platform.

    Letters, digits, ``.``, ``_`` and ``-``, not starting with a dot; and
    nothing Windows would change or refuse: no device name (``CON``,
    ``nul.txt``, ``COM1``) and no trailing dot, which Windows strips (``s1.``
    and ``s1`` would share one folder).
    """
    return (
        isinstance(name, str)
        and _SESSION_ID.fullmatch(name) is not None
        and not name.endswith(".")
        and _WINDOWS_DEVICE.fullmatch(name) is None
    )


def check_session_id(session_id: str) -> str:
    """Return *session_id* if it can name a folder on every platform, else raise."""
    if not valid_session_id(session_id):
        raise InvalidSessionIdError(
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' or '-'"
            " (no device name such as CON or NUL, no dot at the end)"
        )
    return session_id


def case_twins(session_ids: Iterable[str]) -> list[tuple[str, ...]]:
    """Groups of ids that differ only in case, each group sorted, and the groups sorted.

    Windows and macOS fold case in file names, so such ids would share one
    folder there: a profile copied to one of them would mix the sessions.
    Ids are ASCII (:func:`valid_session_id`), so ``lower()`` folds them all.
    """
    groups: dict[str, list[str]] = {}
    for sid in session_ids:
        groups.setdefault(sid.lower(), []).append(sid)
    return sorted(tuple(sorted(set(g))) for g in groups.values() if len(set(g)) > 1)


class MemoryStore:
    """Conversation memory of one profile (see module docstring)."""

    def __init__(
        self,
        paths: AppPaths,
        embedder: TextEmbedder | None = None,
        *,
        model_name: str = DEFAULT_MODEL_NAME,
        max_history_bytes: int = DEFAULT_MAX_HISTORY_BYTES,
        clock: Clock = now_ns,
        archive: Archive | None = None,
    ) -> None:
        """Open the profile's memory as it is on disk: no repair, no reconciliation.

        *archive* is one already opened (and, if it was damaged, rebuilt) by
        :func:`startup.open_memory`, which is how the app opens a profile;
        without it the archive file is opened as it is.  Vectors of another
        embedding model are dropped here (they are meaningless with this one).
        ``notices``, ``findings`` and ``missing_vectors`` stay empty unless
        :func:`startup.open_memory` filled them.
        """
        self.paths = paths.ensure()
        self.embedder = embedder
        self.model_name = model_name
        self.max_history_bytes = max_history_bytes
        self.clock = clock
        self.notices: list[str] = []
        """What opening repaired that the user should hear of (one line each)."""
        self.findings: list[Finding] = []
        """What start-up reconciliation found and repaired."""
        self.missing_vectors: dict[str, int] = {}
        """Per session, messages still lacking a vector: the caller's background work."""
        self.archive = archive if archive is not None else Archive(paths.archive_db)
        self._histories: dict[str, HistoryFile] = {}
        self._vectors: dict[str, SessionVectors] = {}
        self._unsaved: dict[str, int] = {}
        self._last_flush: dict[str, float] = {}
        self._dim_recorded = False
        try:
            self.check_embedding_model()
        except BaseException:
            self.archive.close()
            raise

    def replace_archive(self, rebuild: Callable[[], tuple[Archive, T]]) -> T:
        """Close the archive and start over on the one *rebuild* makes in its place.

        For a damaged archive (see :mod:`recovery`): *rebuild* runs under the
        profile lock, so no other process writes meanwhile, and every cache
        is dropped (it may hold rows the old file lost).  Returns what
        *rebuild* reports.
        """
        with self.locks.profile("archive repair"):
            self.archive.close()
            self._histories.clear()
            self._vectors.clear()
            self._dim_recorded = False
            self.archive, report = rebuild()
        self.check_embedding_model()
        return report

    # -- plumbing ----------------------------------------------------------
    def close(self) -> None:
        for session_id, vectors in list(self._vectors.items()):
            if vectors.dirty:
                self._flush_at_close(session_id, vectors)
        self._stamp_histories()
        self.archive.close()

    def _stamp_histories(self) -> None:
        """Stamp the history files this store holds as they are on disk (no file is read).

        A session written in this run then costs the next start one ``stat()``
        too, instead of a read of its history.json.
        """
        stamps = [(sid, s) for sid, hist in self._histories.items() if (s := hist.tail_stamp())]
        for session_id, (signature, tail) in stamps:
            self.history_stamps.record(session_id, signature, tail)
        if "history_stamps" in vars(self):  # opened: what the sessions list read is kept too
            self.history_stamps.save()

    def _flush_at_close(self, session_id: str, vectors: SessionVectors) -> None:
        """Save an index file that lags behind, unless the session is busy or changed.

        The file is a cache of the archive: skipping it costs a top-up at
        the next open, while saving a stale one over another process's
        work would cost a rebuild.
        """
        try:
            with self.locked(session_id, "close", wait_s=0.0):
                if self._vectors.get(session_id) is vectors:  # still current
                    vectors.flush()
        except StoreBusyError:
            log.debug("session %s busy at close: its index file heals at next open", session_id)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def folder(self, session_id: str) -> Path:
        return self.paths.sessions_dir / check_session_id(session_id)

    @cached_property
    def locks(self) -> StoreLocks:
        """This store's cross-process locks of the profile (see :mod:`locks`)."""
        return StoreLocks(self.paths.memory_dir)

    @cached_property
    def history_stamps(self) -> HistoryStamps:
        """What each history.json held when last read (see :mod:`history_stamps`)."""
        return HistoryStamps(self.paths.memory_dir / STAMPS_FILE)

    def history_tail(self, session_id: str) -> tuple[Tail, int] | None:
        """((count, last id), size) of the session's history.json; None if not canonical.

        One ``stat()`` while the file is as its stamp says; otherwise the file
        is read (:func:`quick_tail`) and stamped.  A missing file holds nothing.
        """
        path = self.folder(session_id) / "history.json"
        stamped, signature = self.history_stamps.tail(session_id, path)
        if signature is None:
            return (0, None), 0
        if stamped is None:
            stamped = quick_tail(path)
            self.history_stamps.record(session_id, signature, stamped)
        return (stamped, signature[1]) if stamped is not None else None

    @cached_property
    def turns(self) -> TurnLocks:
        """Which sessions have a reply being written (see :mod:`turn_lock`)."""
        return TurnLocks(self.paths.memory_dir)

    @contextlib.contextmanager
    def locked(
        self, session_id: str, operation: str, *, wait_s: float | None = None
    ) -> Iterator[None]:
        """Hold the session's write lock; *operation* names it for whoever waits.

        Reentrant.  The outermost acquisition drops the caches of a session
        another process changed meanwhile.  Raises StoreBusyError when the
        lock stays busy for *wait_s* seconds (default: the store's wait).
        """
        with self.locks.session(check_session_id(session_id), operation, wait_s=wait_s) as first:
            if first:
                self._drop_if_changed(session_id, deep=True)
            yield

    def _drop_if_changed(self, session_id: str, *, deep: bool) -> None:
        """Drop caches that another process made stale.

        history.json's signature tells for both caches.  A session whose
        history is not cached (only searched so far) has its index checked
        against the archive when *deep* (taking the lock): one query, and
        writing on a stale index would save dead labels.
        """
        hist = self._histories.get(session_id)
        if hist is None:
            vec = self._vectors.get(session_id)
            if deep and vec is not None and not vec.is_current():
                self.drop_cached(session_id)
        elif not hist.is_current():
            log.info("session %s changed in another process: reloading it", session_id)
            self.drop_cached(session_id)

    def drop_cached(self, session_id: str) -> None:
        """Forget the in-memory history and index of a session; files stay as they are."""
        hist = self._histories.pop(session_id, None)
        if hist is not None:
            hist.forget()
        vec = self._vectors.pop(session_id, None)
        if vec is not None:
            vec.drop_cache()
        self._unsaved.pop(session_id, None)

    def _fresh(self, session_id: str) -> None:
        """Before a read: the caches are re-read when another process changed the file."""
        if not self.locks.holds_session(session_id):
            self._drop_if_changed(session_id, deep=False)

    def history(self, session_id: str) -> HistoryFile:
        self._fresh(session_id)
        hist = self._histories.get(session_id)
        if hist is None:
            hist = HistoryFile(
                self.folder(session_id) / "history.json",
                self.clock(),
                may_repair=lambda: self.locks.holds_session(session_id),
            )
            self._histories[session_id] = hist
        return hist

    def vectors(self, session_id: str) -> SessionVectors:
        self._fresh(session_id)
        vec = self._vectors.get(session_id)
        if vec is None:
            from agenvoy_desktop.core.vectors import SessionVectors

            dim = self.embedder.dim if self.embedder is not None else self._stored_dim()
            vec = SessionVectors(self.folder(session_id), session_id, self.archive, dim)
            self._vectors[session_id] = vec
        return vec

    def check_embedding_model(self) -> None:
        """Vectors of another model are meaningless: drop them, re-embed lazily.

        The archive remembers which model (and dimension) made its vectors; a
        different embedder clears them all (derived data), and reconciliation
        then embeds every history message again with the new model.
        """
        if self.embedder is None:
            return
        from agenvoy_desktop.core.embedding import EMBED_TEXT_VERSION

        # What is embedded is part of the model's identity: new text, new vectors.
        current = f"{self.model_name}:{self.embedder.dim}:text{EMBED_TEXT_VERSION}"
        if self.archive.get_meta("vector_model") == current:
            return
        with self.locks.profile("embedding model change"):  # every session's vectors go
            self._switch_embedding_model(current, self.embedder.dim)

    def _switch_embedding_model(self, current: str, dim: int) -> None:
        stored = self.archive.get_meta("vector_model")
        if stored == current:  # another process switched while this one waited
            return
        if stored is not None or self.archive.vector_sessions():
            log.warning("embedding model changed (%s -> %s): re-embedding", stored, current)
            self.archive.delete_all_vectors()
            for folder in self.paths.sessions_dir.iterdir():
                for name in ("vectors.hnsw", "vectors.meta.json"):
                    (folder / name).unlink(missing_ok=True)
        self.archive.set_meta("vector_model", current)
        self.archive.set_meta("vector_dim", str(dim))

    def _stored_dim(self) -> int:
        return int(self.archive.get_meta("vector_dim") or 384)

    def forget_cached(self, session_id: str) -> None:
        """Drop in-memory state of a session and its index files (reset/remove)."""
        self._histories.pop(session_id, None)
        vec = self._vectors.pop(session_id, None)
        if vec is not None:
            vec.clear()

    # -- sessions ------------------------------------------------------------
    def exists(self, session_id: str) -> bool:
        return self.folder(session_id).is_dir() or self.archive.session(session_id) is not None

    def require(self, session_id: str) -> str:
        if not self.exists(session_id):
            raise UnknownSessionError(session_id)
        return session_id

    def create_session(self, title: str | None = None, session_id: str | None = None) -> str:
        """A session *session_id* (or a fresh id), titled *title* if it is new; its id.

        A title given here (a file's name on import, a fork's) is kept beside
        the session's settings as a typed one is, so an archive rebuilt from
        history.json gets it back.
        """
        sid = check_session_id(session_id or new_message_id()[:12])
        with self.locked(sid, "create"):
            self.refuse_case_twin(sid)
            folder = self.folder(sid)
            new = self.archive.session(sid) is None
            folder.mkdir(parents=True, exist_ok=True)
            self.archive.ensure_session(sid, self.clock(), title)
            if new and title:
                keep_title(folder, title)
        return sid

    def refuse_case_twin(self, session_id: str) -> None:
        """Raise SessionIdCaseError if *session_id* is new and an existing id differs only in case.

        Checked wherever a session comes to be: on Windows and macOS both
        would write one folder.  An id that exists as spelled passes, so a
        profile that already holds such a pair (made before this check)
        keeps working on Linux; ``doctor`` reports the pair.
        """
        existing = self.session_ids()
        if session_id in existing:
            return
        twin = next((s for s in existing if s.lower() == session_id.lower()), None)
        if twin is not None:
            raise SessionIdCaseError(
                f"a session {twin!r} already exists; ids differ only in case, and on Windows"
                f" and macOS {session_id!r} would share its folder: use {twin!r} or another id"
            )

    def session_ids(self) -> list[str]:
        folders = {
            p.name
            for p in self.paths.sessions_dir.iterdir()
            if p.is_dir() and valid_session_id(p.name)
        }
        return sorted(folders | {m.session_id for m in self.archive.sessions()})

    def info(self, session_id: str, *, vectors: bool = True) -> SessionInfo:
        """One row of the sessions list; ``vectors=False`` skips the vector count (1 ms each)."""
        self.require(session_id)
        meta = self.archive.session(session_id)
        hist = self.history(session_id)
        stamped = None if hist.loaded else self.history_tail(session_id)
        count, size = (stamped[0][0], stamped[1]) if stamped is not None else hist.counted()
        return SessionInfo(
            session_id=session_id,
            title=meta.title if meta else None,
            created_ns=meta.created_ns if meta else 0,
            updated_ns=meta.updated_ns if meta else 0,
            history_messages=count,
            history_bytes=size,
            archived_messages=self.archive.count(session_id),
            vectors=self.archive.vector_message_count(session_id) if vectors else None,
            start_at_ns=meta.start_at_ns if meta else 0,
        )

    def sessions(self, *, vectors: bool = True) -> list[SessionInfo]:
        infos = [self.info(sid, vectors=vectors) for sid in self.session_ids()]
        return sorted(infos, key=lambda i: i.updated_ns, reverse=True)

    # -- writing -------------------------------------------------------------
    def new_message(self, role: str, content: str, **extra: Any) -> Message:
        return Message(new_message_id(), role, content, self.clock(), extra=extra)

    def append(
        self, session_id: str, messages: Sequence[Message], *, embed: bool = True
    ) -> list[Message]:
        """Write new messages to all layers; compacts when history grows too big.

        Messages are validated first (:func:`check_messages`): a bad one
        raises before any layer is touched.
        """
        check_messages(messages, message_limit(self.max_history_bytes))
        with self.locked(session_id, "append"):
            self.require(session_id)
            self.archive.ensure_session(session_id, self.clock())
            self.history(session_id).append(messages)
            self.archive.add_messages(session_id, messages, self.clock())
            self.maybe_compact(session_id)
            if embed and self.embedder is not None:
                self.index_messages(session_id, messages)
        return list(messages)

    def index_messages(self, session_id: str, messages: Sequence[Message]) -> None:
        """Embed just-appended messages: the per-turn path, no scan of the history.

        The agent appends with ``embed=False`` and calls this after the turn,
        so embedding never delays an answer.

        Older messages still lacking a vector (an embedder that failed earlier)
        are found by :meth:`index_pending` at import and by start-up
        reconciliation.  The index file is saved at most every
        ``FLUSH_EVERY_S`` or ``FLUSH_EVERY_N`` additions: the vectors are in
        SQLite already, and an index that missed its last save heals from
        there when it is opened.
        """
        if self.embedder is None:
            return
        with self.locked(session_id, "indexing"):
            self._index_messages(session_id, messages)

    def _index_messages(self, session_id: str, messages: Sequence[Message]) -> None:
        assert self.embedder is not None
        # Only what is still in history: compaction or a reset may have dropped it.
        live = {m.id for m in self.history(session_id).messages}
        rowids = self.archive.rowids_for(m.id for m in messages if m.id in live)
        items = [(rowids[m.id], m) for m in messages if m.id in rowids]
        if not items:
            return
        if not self._dim_recorded:
            self.archive.set_meta("vector_dim", str(self.embedder.dim))
            self._dim_recorded = True
        import numpy as np

        jobs = self._embedding_jobs(session_id, items)
        result = self.embedder.embed([text for _, _, text in jobs])
        vectors = self.vectors(session_id)
        vectors.add(
            self.model_name, [r for r, _, _ in jobs], np.asarray(result), [p for _, p, _ in jobs]
        )
        unsaved = self._unsaved.get(session_id, 0) + len(items)
        now = time.monotonic()
        if unsaved >= FLUSH_EVERY_N or now - self._last_flush.get(session_id, 0.0) > FLUSH_EVERY_S:
            vectors.flush()
            self._last_flush[session_id] = now
            unsaved = 0
        self._unsaved[session_id] = unsaved

    def _embedding_jobs(
        self, session_id: str, items: Sequence[tuple[int, Message]]
    ) -> list[tuple[int, int, str]]:
        """(rowid, part, text) for each vector the messages need, in order.

        Each message is embedded with the readable history message before it
        as context (see :func:`embedding_parts`).
        """
        from agenvoy_desktop.core.embedding import embedding_parts, with_previous

        previous = with_previous(self.history(session_id).messages, (m.id for _, m in items))
        return [
            (rowid, part, text)
            for rowid, message in items
            for part, text in enumerate(embedding_parts(message, previous.get(message.id)))
        ]

    def import_messages(
        self,
        messages: Sequence[Message],
        session_id: str | None = None,
        *,
        title: str | None = None,
        progress: Progress | None = None,
        cancelled: Cancelled | None = None,
    ) -> str:
        """Bulk import into a new or existing session; embeds what stays in history.

        Everything is validated before the session is created, so a refused
        import leaves no empty session behind.
        """
        return self.import_new(
            messages, session_id, title=title, progress=progress, cancelled=cancelled
        ).session_id

    def import_new(
        self,
        messages: Sequence[Message],
        session_id: str | None = None,
        *,
        title: str | None = None,
        progress: Progress | None = None,
        cancelled: Cancelled | None = None,
        embed: bool = True,
    ) -> ImportCount:
        """:meth:`import_messages`, adding only the messages the session does not hold yet.

        A message is already there when one of the session's messages (history or
        archive) is known by one of its keys (``core/import_keys.py``): importing a
        file twice, or again after a killed import, adds nothing twice.  ``embed=False``
        leaves the vectors to a later :meth:`index_pending` (a bulk import stores every
        conversation first, so all of it is searchable by keyword at once).
        """
        check_messages(messages, message_limit(self.max_history_bytes))
        sid = check_session_id(session_id or new_message_id()[:12])
        # One lock for the whole import: a reset or remove runs before or after it, never
        # in between, so a finished import's messages are all there.
        with self.locked(sid, "import"):
            # Before exists(): on a case-folding disk it would find the twin's folder.
            self.refuse_case_twin(sid)
            if not self.exists(sid):
                self.create_session(title, sid)
            self.archive.ensure_session(sid, self.clock(), title)
            hist = self.history(sid)
            held = [row.message for row in self.archive.messages(sid)]
            fresh = only_new([*held, *hist.messages], messages)
            if fresh:
                hist.rewrite([*hist.messages, *fresh])
                self.archive.add_messages(sid, fresh, self.clock())
                self.maybe_compact(sid)
                detail = {"messages": len(fresh), "already": len(messages) - len(fresh)}
                self.archive.add_event(sid, self.clock(), "import", detail)
            if embed and self.embedder is not None:
                self.index_pending(sid, progress=progress, cancelled=cancelled)
        return ImportCount(sid, len(fresh), len(messages) - len(fresh))

    def window(self, session_id: str, n: int, step: int = 0) -> list[Message]:
        """The last-N context window of a session; its start moves *step* at a time (0: each turn).

        See :func:`~agenvoy_desktop.core.history.take_window`.
        """
        return take_window(self.history(session_id).messages, n, step)

    # -- vectors -------------------------------------------------------------
    def pending_vectors(self, session_id: str) -> list[tuple[int, Message]]:
        """History messages that have no vector yet, as (archive rowid, message)."""
        hist = self.history(session_id).messages
        rowids = self.archive.rowids_for(m.id for m in hist)
        have = self.archive.vector_rowids(session_id)
        return [(rowids[m.id], m) for m in hist if m.id in rowids and rowids[m.id] not in have]

    def index_pending(
        self,
        session_id: str,
        *,
        progress: Progress | None = None,
        cancelled: Cancelled | None = None,
    ) -> int:
        """Embed every history message lacking a vector, batched and pipelined.

        The next batch is already embedding on the model's thread while this
        thread stores the previous one.
        """
        if self.embedder is None:
            return 0
        with self.locked(session_id, "indexing"):
            return self._index_pending(session_id, progress, cancelled)

    def _index_pending(
        self, session_id: str, progress: Progress | None, cancelled: Cancelled | None
    ) -> int:
        assert self.embedder is not None
        import numpy as np

        todo = self.pending_vectors(session_id)
        if not todo:
            return 0
        self.archive.set_meta("vector_dim", str(self.embedder.dim))
        vectors = self.vectors(session_id)
        batches = _whole_messages(self._embedding_jobs(session_id, todo), EMBED_BATCH)
        future = self.embedder.submit([text for _, _, text in batches[0]])
        done = 0
        for number, batch in enumerate(batches):
            result = future.result()
            if number + 1 < len(batches):
                future = self.embedder.submit([text for _, _, text in batches[number + 1]])
            vectors.add(
                self.model_name,
                [r for r, _, _ in batch],
                np.asarray(result),
                [p for _, p, _ in batch],
            )
            done += sum(1 for _, part, _ in batch if part == 0)
            if progress is not None:
                progress(done, len(todo))
            if cancelled is not None and cancelled():
                vectors.flush()
                raise OperationCancelledError(f"indexing stopped after {done} of {len(todo)}")
        vectors.flush()
        return done

    # -- compaction ----------------------------------------------------------
    def maybe_compact(self, session_id: str) -> bool:
        """Trim history.json to 80 % at a pair boundary once it passes the limit."""
        with self.locked(session_id, "compaction"):
            return self._maybe_compact(session_id)

    def _maybe_compact(self, session_id: str) -> bool:
        hist = self.history(session_id)
        if hist.size_bytes <= self.max_history_bytes:
            return False
        messages = hist.messages
        cut = compaction_cut(messages, int(self.max_history_bytes * COMPACT_TO))
        if cut <= 0:
            return False
        dropped, kept = messages[:cut], messages[cut:]
        hist.rewrite(kept)
        rowids = self.archive.rowids_for([kept[0].id, *(m.id for m in dropped)])
        first = self.archive.by_rowids([rowids[kept[0].id]])[rowids[kept[0].id]]
        self.archive.set_cut(session_id, first.seq, kept[0].time_ns)
        gone = [rowids[m.id] for m in dropped if m.id in rowids]
        have = self.archive.vector_rowids(session_id)
        self.vectors(session_id).remove([r for r in gone if r in have])
        self.archive.add_event(
            session_id,
            self.clock(),
            "compaction",
            {"dropped": len(dropped), "kept": len(kept), "start_at_ns": kept[0].time_ns},
        )
        log.info("compacted %s: dropped %d messages", session_id, len(dropped))
        return True


def _whole_messages(
    jobs: Sequence[tuple[int, int, str]], size: int
) -> list[list[tuple[int, int, str]]]:
    """Embedding jobs in batches of about *size* texts, never splitting a message.

    A batch stops only at a message's first part, so an interrupted run
    leaves every message with all its vectors or none (the next run embeds
    the messages that have none).
    """
    batches: list[list[tuple[int, int, str]]] = [[]]
    for job in jobs:
        if len(batches[-1]) >= size and job[1] == 0:
            batches.append([])
        batches[-1].append(job)
    return [b for b in batches if b]


def compaction_cut(messages: Sequence[Message], target_bytes: int) -> int:
    """Index of the first message to keep so the file fits *target_bytes*.

    The kept part starts at a user message (a complete user+assistant
    boundary) and always includes the last exchange.
    """
    sizes = [len(encode_history([m])) - 4 + 2 for m in messages]
    total = sum(sizes) + 4
    cut = 0
    while cut < len(messages) and total > target_bytes:
        total -= sizes[cut]
        cut += 1
    while cut < len(messages) and messages[cut].role != "user":
        cut += 1
    if cut >= len(messages):
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
        cut = last_user
    return cut
