"""The incremental rolling-summary runner and its triggers.

What a run folds: archive messages newer than the cursor (``seq`` order) and
older than the current context window.  The archive, not history.json, is
the source, so messages that compaction already trimmed from history.json
are still folded in, however many accumulated.

How: in chunks sized to the summary model's context (instructions + previous
summary + transcript + room for the answer), one ``complete_json`` call per
chunk that receives the previous summary and returns the merged one.  After
each good chunk: summary.json, then summary.meta.json (cursor = the chunk's
newest message), then the pass history line and a ``summary_pass`` timeline
event.  A failed chunk — a model error, a schema violation, or an empty
summary for messages that had content — stops the run: earlier chunks stay,
the cursor stays at the last success, a ``failed`` record is written, and the
next run resumes at the cursor without redoing anything.

Budget per chunk: the answer gets :data:`ANSWER_TOKENS`, the longest answer
the schema's grammar allows (every list full, every string at its
``maxLength``, one token per character), so the answer always closes inside
its budget.  That needs a context of twice as much (about 5,000 tokens; the
app's default is 8,192); a smaller context reserves half of itself and
relies on the retry below.  The transcript gets what is left of the context
after the instructions, the previous summary and a 64-token margin (token
counts cached per text).  A single message bigger than that is cut in the
middle for the prompt.  A pass whose answer still fails (cut off, not JSON,
a repeated sentence) is retried once with the first half of the chunk; the
other half goes into the next chunk.  On that retry a sentence said twice
no longer fails the chunk: its repeats are removed (and noted in the pass
record), since a summary that says something once is better than none.

Traceable decisions: every transcript line carries a handle (``m1``…) and
every decision of the previous summary one (``p1``…); the schema makes a
decision name one of them as its ``source``, and
:func:`~agenvoy_desktop.core.summary.trace_decisions` turns the handle into
the message id, dropping decisions whose text does not overlap what they
cite.

Tool traffic is folded in compact form: a tool result becomes
``[tool NAME → first 160 characters]`` and an assistant tool call
``[calls NAME(arguments…)]``, so the summary may keep a fact a tool found
without spending the context on raw results.

The mtime gate (skip work that cannot exist) compares history.json's
(mtime_ns, size, inode) with the stamp recorded when the summary was last
brought fully up to date under the same window size.  Any append, compaction
or reset changes the stamp, so coarse file-system time stamps cannot hide
real work; a run that failed or was cancelled never arms the gate.

Locking: one asyncio lock per session inside the process (triggers get
``busy`` at once; ``wait=True`` callers — the on-demand button and CLI —
queue behind the running pass), plus ``summary.lock`` in the session folder,
created with O_CREAT|O_EXCL and holding pid + time, so the CLI and the app
never run one session at the same time.  A lock whose process is gone, or
whose time is more than 10 minutes old (it is refreshed after every chunk),
is stale and taken over.  The files themselves are written under the
store's session lock (held only for the write, never across a model call),
the lock every writer of the session takes; a chunk whose messages a reset
removed meanwhile is discarded there instead of saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from agenvoy_desktop.core.archive import ArchivedMessage, ArchiveError
from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.model_api import JsonModel, ModelOutputError
from agenvoy_desktop.core.store import Cancelled, MemoryStore, Progress
from agenvoy_desktop.core.summary import (
    SUMMARIZE_INSTRUCTIONS,
    SUMMARY_SCHEMA,
    HistoryStamp,
    PassRecord,
    Source,
    Summary,
    SummaryFileError,
    SummaryFormatError,
    SummaryMeta,
    answer_char_bound,
    append_record,
    build_prompt,
    cut_middle,
    decision_sources,
    load_meta,
    load_summary,
    message_handle,
    message_text,
    parse_summary,
    repeated_sentences,
    save_meta,
    save_summary,
    summary_prompt_json,
    summary_schema,
    trace_decisions,
    transcript_line,
    validate_summary,
    without_repeats,
)
from agenvoy_desktop.core.timeutil import Clock, now_ns

log = logging.getLogger(__name__)

T = TypeVar("T")

StopReason = Literal["up_to_date", "mtime_gate", "done", "failed", "cancelled", "busy"]
PassListener = Callable[[str, PassRecord], None]
"""``listener(session_id, record)`` after every pass, failure and edit."""

LOCK_FILE = "summary.lock"
LOCK_STALE_NS = 10 * 60 * 1_000_000_000
SAFETY_TOKENS = 64
"""Room for the chat template's role markers and token-count drift."""
GROWTH_TOKENS = 256
"""With an explicit ``max_answer_tokens``: the answer may be this much longer than
the previous summary."""
ANSWER_TOKENS = answer_char_bound(SUMMARY_SCHEMA)
"""The longest answer the schema allows, in characters, hence tokens (module docstring)."""
MIN_TRANSCRIPT_TOKENS = 48
PAGE = 256
_TOKEN_CACHE_MAX = 50_000
_MISSING: HistoryStamp = (0, -1, 0)


class SummaryBusyError(RuntimeError):
    """Another summary pass holds the session (in this or another process)."""


class StoreRunner(Protocol):
    """Runs blocking store work off the event loop (``agent.storage.Storage`` fits)."""

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


class _Inline:
    """Default runner: calls the store directly (CLI, tests)."""

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class SummaryRunResult:
    """What one :meth:`Summarizer.run` did; cursors are archive ``seq`` (-1 = none)."""

    session_id: str
    stopped: StopReason
    passes: int = 0
    folded: int = 0
    cursor_before: int = -1
    cursor_after: int = -1
    remaining: int = 0
    error: str | None = None


# -- the cross-process lock ----------------------------------------------------------
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


# -- cursor and pending messages ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Cursor:
    seq: int = -1
    message_id: str | None = None
    time_ns: int = 0

    @classmethod
    def of(cls, row: ArchivedMessage) -> _Cursor:
        return cls(row.seq, row.message.id, row.message.time_ns)

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "seq": self.seq, "time_ns": self.time_ns}


def _seq_of(store: MemoryStore, session_id: str, message_id: str) -> int | None:
    """Archive seq of one message (wants ``Archive.seq_of``; built on public calls)."""
    rowid = store.archive.rowids_for([message_id]).get(message_id)
    if rowid is None:
        return None
    row = store.archive.by_rowids([rowid]).get(rowid)
    return row.seq if row is not None and row.session_id == session_id else None


def _resolve_cursor(store: MemoryStore, session_id: str, meta: SummaryMeta | None) -> _Cursor:
    """The meta's cursor, checked against the archive.

    After a reset the archive restarts at seq 0 and the cursor's message is
    gone: everything now in the archive is new to the (kept) summary.
    """
    if meta is None or meta.cursor_message_id is None:
        return _Cursor()
    seq = _seq_of(store, session_id, meta.cursor_message_id)
    if seq is None:
        log.info("summary cursor of %s is not in the archive (reset?): folding anew", session_id)
        return _Cursor()
    return _Cursor(seq, meta.cursor_message_id, meta.cursor_time_ns)


def _window_start(store: MemoryStore, session_id: str, window_messages: int) -> int | None:
    """Archive seq of the window's oldest message; None = every archived row is older."""
    window = store.window(session_id, window_messages)
    rowids = store.archive.rowids_for(m.id for m in window)
    first = next((rowids[m.id] for m in window if m.id in rowids), None)
    if first is None:
        return None
    row = store.archive.by_rowids([first]).get(first)
    return None if row is None else row.seq


def _gate_closed(meta: SummaryMeta, stamp: HistoryStamp, owner: Summarizer) -> bool:
    """The mtime gate: history.json unchanged since the summary was last fully caught up."""
    return (
        meta.caught_up
        and meta.window_messages == owner.window_messages
        and meta.history_stamp == stamp
    )


def _count_between(store: MemoryStore, session_id: str, after: int, end: int | None) -> int:
    total = store.archive.count_from(session_id, after + 1)
    if end is None:
        return total
    # A cursor inside the window (the window grew, or N shrank) leaves nothing pending.
    return max(0, total - store.archive.count_from(session_id, end))


def history_stamp(path: Path) -> HistoryStamp:
    try:
        st = path.stat()
    except FileNotFoundError:
        return _MISSING
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class _Pending:
    """Unsummarised archive rows, fetched a page at a time (catch-up can be huge)."""

    def __init__(self, session_id: str, after: int, end: int | None, total: int) -> None:
        self.session_id = session_id
        self.end = end
        self.total = total
        self.rows: list[ArchivedMessage] = []
        self._next_seq = after + 1
        self._exhausted = total == 0

    def fetch(self, store: MemoryStore) -> None:
        if self._exhausted:
            return
        upper = self._next_seq + PAGE if self.end is None else min(self.end, self._next_seq + PAGE)
        page = store.archive.messages(self.session_id, self._next_seq, upper)
        self.rows.extend(page)
        self._next_seq = upper
        last = store.archive.session(self.session_id)
        limit = self.end if self.end is not None else (last.next_seq if last else 0)
        self._exhausted = len(self.rows) >= self.total or self._next_seq >= limit

    @property
    def exhausted(self) -> bool:
        return self._exhausted


@dataclass(slots=True)
class _Chunk:
    rows: list[ArchivedMessage]
    lines: list[str]
    reserve: int
    earlier: dict[str, Source]
    """Handles of the previous summary's decisions (``p1``…)."""

    @property
    def has_content(self) -> bool:
        return any(message_text(r.message) for r in self.rows)

    @property
    def sources(self) -> dict[str, Source]:
        """Every handle a decision may cite: earlier decisions, then this chunk's messages."""
        mine = {
            message_handle(i): Source(row.message.id, message_text(row.message))
            for i, row in enumerate(self.rows)
        }
        return {**self.earlier, **mine}

    def first_half(self) -> _Chunk:
        """The retry after a failed answer: fewer messages, so less to get wrong."""
        keep = len(self.rows) // 2
        return _Chunk(self.rows[:keep], self.lines[:keep], self.reserve, self.earlier)


class _ContextTooSmallError(RuntimeError):
    pass


class _SourceGoneError(RuntimeError):
    """The chunk's messages are no longer in the archive (a reset): its pass is dropped."""


class _RetryFailedError(RuntimeError):
    """The retry with half the chunk failed too; ``chunk`` is that half."""

    def __init__(self, chunk: _Chunk, message: str) -> None:
        super().__init__(message)
        self.chunk = chunk


@dataclass(slots=True)
class _Folded:
    """A good answer for a chunk, its token accounting and notes for the pass record."""

    summary: Summary
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


# -- the runner ------------------------------------------------------------------------
class Summarizer:
    """Folds a session's older messages into its rolling summary (module docstring).

    ``max_answer_tokens`` replaces the worst-case answer budget
    (:data:`ANSWER_TOKENS`) with max(it, previous summary + 256): smaller
    chunks of context for tests, at the risk of an answer cut off.
    """

    def __init__(
        self,
        store: MemoryStore,
        model: JsonModel,
        *,
        window_messages: int = 16,
        clock: Clock = now_ns,
        max_answer_tokens: int | None = None,
        storage: StoreRunner | None = None,
    ) -> None:
        self.store = store
        self.model = model
        self.window_messages = window_messages
        self.clock = clock
        self.max_answer_tokens = max_answer_tokens
        self.storage: StoreRunner = storage or _Inline()
        self._locks: dict[str, asyncio.Lock] = {}
        self._listeners: list[PassListener] = []
        self._tokens: dict[str, int] = {}
        self.stopping: set[str] = set()
        """Sessions whose running pass must stop at the next chunk boundary."""

    # -- listeners and helpers ---------------------------------------------------------
    def on_pass(self, listener: PassListener) -> Callable[[], None]:
        """Call *listener* after every pass/failure/edit; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def emit(self, session_id: str, record: PassRecord) -> None:
        for listener in list(self._listeners):
            try:
                listener(session_id, record)
            except Exception:
                log.exception("summary listener failed")

    def is_running(self, session_id: str) -> bool:
        lock = self._locks.get(session_id)
        return lock is not None and lock.locked()

    async def count_tokens(self, text: str) -> int:
        """Token count with a per-text cache (messages are re-planned after failures)."""
        cached = self._tokens.get(text)
        if cached is None:
            if len(self._tokens) >= _TOKEN_CACHE_MAX:
                self._tokens.clear()
            cached = self._tokens[text] = await self.model.count_tokens(text)
        return cached

    def pending_count_sync(self, session_id: str) -> int:
        """Unsummarised messages older than the window (no model; runs on the store thread)."""
        meta = load_meta(self.store.folder(session_id))
        cursor = _resolve_cursor(self.store, session_id, meta)
        end = _window_start(self.store, session_id, self.window_messages)
        return _count_between(self.store, session_id, cursor.seq, end)

    async def pending_count(self, session_id: str) -> int:
        return await self.storage.run(self.pending_count_sync, session_id)

    # -- running -------------------------------------------------------------------------
    async def run(
        self,
        session_id: str,
        *,
        force: bool = False,
        wait: bool = False,
        progress: Progress | None = None,
        cancelled: Cancelled | None = None,
    ) -> SummaryRunResult:
        """Fold every unsummarised message older than the window into the summary.

        ``force`` skips the mtime gate; ``wait`` queues behind a pass already
        running in this process instead of returning ``busy`` (a pass in
        another process is always ``busy``).  Raises UnknownSessionError.
        """
        try:
            folder = await self.storage.run(self._prepare, session_id)
        except StoreBusyError as exc:  # a long import or reset holds the session
            return SummaryRunResult(session_id, "busy", error=str(exc))
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        if lock.locked() and not wait:
            return SummaryRunResult(session_id, "busy")
        async with lock:
            file_lock = await self.storage.run(SessionLock.acquire, folder, self.clock)
            if file_lock is None:
                return SummaryRunResult(session_id, "busy", error="another process is summarising")
            try:
                run = _Run(self, session_id, folder, file_lock, progress=progress, cancel=cancelled)
                return await run.go(force)
            finally:
                await self.storage.run(file_lock.release)

    def _prepare(self, session_id: str) -> Path:
        with self.store.locked(session_id, "summary"):  # a remove must not race the mkdir
            folder = self.store.folder(self.store.require(session_id))
            folder.mkdir(parents=True, exist_ok=True)
        return folder

    async def stop_session(self, session_id: str) -> None:
        """Stop this process's passes of a session at the next chunk and wait for them.

        Call it before a reset or remove, so that no pass writes into a folder
        that is going away (what succeeded so far is kept).
        """
        lock = self._locks.get(session_id)
        if lock is None or not lock.locked():
            return
        self.stopping.add(session_id)
        try:
            async with lock:
                pass
        finally:
            self.stopping.discard(session_id)

    async def save_edit(self, session_id: str, summary: Summary) -> PassRecord:
        """The inspector's edit path: :func:`save_user_edit` off the loop, then listeners."""
        record = await self.storage.run(save_user_edit, self.store, session_id, summary, self.clock)
        self.emit(session_id, record)
        return record


class _Run:
    """One run's state, kept apart so :class:`Summarizer` stays reentrant."""

    def __init__(
        self,
        owner: Summarizer,
        session_id: str,
        folder: Path,
        lock: SessionLock,
        *,
        progress: Progress | None,
        cancel: Cancelled | None,
    ) -> None:
        self.owner = owner
        self.store = owner.store
        self.sid = session_id
        self.folder = folder
        self.lock = lock
        self.progress = progress
        self.cancelled = cancel
        self.summary = Summary()
        self.meta = SummaryMeta()
        self.had_meta = False
        self.cursor = _Cursor()
        self.start = _Cursor()
        self.stamp = _MISSING
        self.pending = _Pending(session_id, -1, None, 0)
        self.index = 0
        self.passes = 0
        self.folded = 0

    async def io(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.owner.storage.run(fn, *args)

    def result(self, stopped: StopReason, error: str | None = None) -> SummaryRunResult:
        return SummaryRunResult(
            session_id=self.sid,
            stopped=stopped,
            passes=self.passes,
            folded=self.folded,
            cursor_before=self.start.seq,
            cursor_after=self.cursor.seq,
            remaining=max(0, self.pending.total - self.folded),
            error=error,
        )

    async def go(self, force: bool) -> SummaryRunResult:
        try:
            if await self.io(self._load, force):
                return self.result("mtime_gate")
        except (SummaryFileError, ArchiveError) as exc:
            return await self._failed(None, _describe(exc), 0.0)
        try:
            if self.pending.total == 0:
                await self.io(self._mark_caught_up)
                return self.result("up_to_date")
            return await self._fold_all()
        except StoreBusyError as exc:  # what was saved stays; the next run resumes there
            return self.result("busy", str(exc))

    def _load(self, force: bool) -> bool:
        """Read the files and count what is pending; True when the mtime gate skips the run."""
        self.stamp = history_stamp(self.folder / "history.json")
        meta = load_meta(self.folder)
        if meta is not None and not force and _gate_closed(meta, self.stamp, self.owner):
            self.cursor = self.start = _Cursor(meta.cursor_seq, meta.cursor_message_id)
            return True
        self.meta = meta or SummaryMeta()
        self.had_meta = meta is not None
        self.summary = load_summary(self.folder) or Summary()
        self.cursor = self.start = _resolve_cursor(self.store, self.sid, meta)
        end = _window_start(self.store, self.sid, self.owner.window_messages)
        total = _count_between(self.store, self.sid, self.cursor.seq, end)
        self.pending = _Pending(self.sid, self.cursor.seq, end, total)
        return False

    def _mark_caught_up(self) -> None:
        """Arm the mtime gate for this history.json (written only when something changed)."""
        meta = self.meta.with_(
            caught_up=True, window_messages=self.owner.window_messages, history_stamp=self.stamp
        )
        if meta != self.meta and (self.had_meta or self.stamp != _MISSING):
            with self.store.locked(self.sid, "summary"):
                if self.folder.is_dir():
                    save_meta(self.folder, meta)

    async def _fold_all(self) -> SummaryRunResult:
        while self.index < len(self.pending.rows) or not self.pending.exhausted:
            if self.sid in self.owner.stopping or (self.cancelled and self.cancelled()):
                return self.result("cancelled")
            started = time.perf_counter()
            chunk: _Chunk | None = None
            try:
                chunk = await self._plan()
                if not chunk.rows:
                    break
                started = time.perf_counter()
                chunk, folded = await self._summarize_or_retry(chunk)
            except _RetryFailedError as exc:
                chunk = exc.chunk
                return await self._failed(chunk, str(exc), time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - any model or planning failure fails the chunk
                return await self._failed(chunk, _describe(exc), time.perf_counter() - started)
            duration = time.perf_counter() - started
            try:
                record = await self.io(self._commit, chunk, folded, duration)
            except _SourceGoneError as exc:
                log.info("summary of %s: %s", self.sid, exc)
                return self.result("cancelled", str(exc))
            except OSError as exc:  # disk full, read-only...: the atomic writes left the old files
                return await self._failed(chunk, _describe(exc), duration)
            self.owner.emit(self.sid, record)
            if self.progress is not None:
                self.progress(self.folded, self.pending.total)
        return self.result("done")

    async def _summarize_or_retry(self, chunk: _Chunk) -> tuple[_Chunk, _Folded]:
        """One pass; after a bad answer, one more over the first half of the chunk.

        A small model that loses its way over many messages often manages
        half as many; the other half is planned into the next chunk, so
        nothing is skipped.  Only answer problems are retried: a model that
        cannot run at all fails the chunk at once.
        """
        try:
            return chunk, await self._summarize(chunk)
        except (ModelOutputError, SummaryFormatError) as exc:
            if len(chunk.rows) < 2:
                raise
            first_error = _describe(exc)
        half = chunk.first_half()
        log.warning(
            "summary of %s: %s; retrying with %d of %d messages",
            self.sid,
            first_error,
            len(half.rows),
            len(chunk.rows),
        )
        try:
            folded = await self._summarize(half, last_try=True)
        except (ModelOutputError, SummaryFormatError) as exc:
            raise _RetryFailedError(half, f"{_describe(exc)} (and before: {first_error})") from exc
        folded.notes["retried_after"] = first_error
        return half, folded

    async def _summarize(self, chunk: _Chunk, *, last_try: bool = False) -> _Folded:
        """One model call for *chunk*; the answer validated and its decisions traced.

        On the ``last_try`` a sentence said twice is removed instead of
        failing the chunk (see :func:`~agenvoy_desktop.core.summary.without_repeats`).
        """
        if not chunk.has_content:  # nothing to learn: advance without a model call
            return _Folded(self.summary)
        prompt = build_prompt(self.summary, chunk.lines)
        sources = chunk.sources
        completion = await self.owner.model.complete_json(
            prompt, summary_schema(list(sources)), max_tokens=chunk.reserve
        )
        answer = parse_summary(completion.value, "model answer", repeats=last_try)
        notes: dict[str, Any] = {}
        if last_try and (twice := repeated_sentences(answer)):
            answer = without_repeats(answer)
            notes["repeats_removed"] = twice
        answer, dropped = trace_decisions(answer, sources)
        if answer.is_empty:
            raise SummaryFormatError(
                f"model answer: empty summary for {len(chunk.rows)} messages with content"
            )
        if dropped:
            log.info("summary of %s: dropped untraced decisions: %s", self.sid, dropped)
            notes["dropped_decisions"] = dropped
        return _Folded(answer, completion.prompt_tokens, completion.completion_tokens, notes)

    # -- planning ------------------------------------------------------------------------
    async def _row(self, index: int) -> ArchivedMessage | None:
        while index >= len(self.pending.rows) and not self.pending.exhausted:
            await self.io(self.pending.fetch, self.store)
        return self.pending.rows[index] if index < len(self.pending.rows) else None

    async def _plan(self) -> _Chunk:
        """The next chunk: as many messages as fit beside instructions, summary and answer."""
        count = self.owner.count_tokens
        reserve = min(ANSWER_TOKENS, self.owner.model.context_size // 2)
        if self.owner.max_answer_tokens is not None:
            summary_tokens = await count(summary_prompt_json(self.summary))
            reserve = max(self.owner.max_answer_tokens, summary_tokens + GROWTH_TOKENS)
        frame = build_prompt(self.summary, [])
        fixed = await count(SUMMARIZE_INSTRUCTIONS) + await count(frame[1]["content"])
        budget = self.owner.model.context_size - reserve - fixed - SAFETY_TOKENS
        if budget < MIN_TRANSCRIPT_TOKENS:
            raise _ContextTooSmallError(
                f"model {self.owner.model.name}: context of {self.owner.model.context_size} "
                f"tokens leaves {budget} for messages (need {MIN_TRANSCRIPT_TOKENS}+)"
            )
        chunk = _Chunk([], [], reserve, decision_sources(self.summary))
        used = 0
        while (row := await self._row(self.index + len(chunk.rows))) is not None:
            line = transcript_line(row.message, message_handle(len(chunk.rows)))
            cost = await count(line) + 1  # + the newline
            if used + cost > budget:
                if chunk.rows:
                    break
                line, cost = await self._fit(line, budget - 1), budget
            chunk.rows.append(row)
            chunk.lines.append(line)
            used += cost
        return chunk

    async def _fit(self, line: str, budget: int) -> str:
        """Cut a message bigger than the whole budget in the middle until it fits."""
        tokens = await self.owner.model.count_tokens(line)
        keep = int(len(line) * budget / max(tokens, 1) * 0.9)
        for _ in range(12):
            text = cut_middle(line, keep)
            if await self.owner.model.count_tokens(text) <= budget:
                return text
            keep = int(keep * 0.7)
        return cut_middle(line, 0)

    # -- recording -----------------------------------------------------------------------
    def _commit(self, chunk: _Chunk, folded: _Folded, duration: float) -> PassRecord:
        """Save, under the session lock: checked, then written (see :meth:`_save`)."""
        with self.store.locked(self.sid, "summary"):
            if not self.folder.is_dir():  # removed meanwhile: never recreate it
                raise FileNotFoundError(f"session {self.sid} was removed during the summary")
            ids = [row.message.id for row in chunk.rows]
            if len(self.store.archive.rowids_for(ids)) != len(ids):
                raise _SourceGoneError(
                    f"session {self.sid} was reset during the summary; the pass was discarded"
                )
            return self._save(chunk, folded, duration)

    def _save(self, chunk: _Chunk, folded: _Folded, duration: float) -> PassRecord:
        """Save order: summary, meta (cursor), history line, timeline event."""
        answer = folded.summary
        before, after = self.cursor, _Cursor.of(chunk.rows[-1])
        self.index += len(chunk.rows)
        done = self.index >= len(self.pending.rows) and self.pending.exhausted
        now = self.owner.clock()
        save_summary(self.folder, answer)
        self.meta = self.meta.with_(
            cursor_seq=after.seq,
            cursor_message_id=after.message_id,
            cursor_time_ns=after.time_ns,
            summarized_messages=self.meta.summarized_messages + len(chunk.rows),
            updated_ns=now,
            model=self.owner.model.name,
            window_messages=self.owner.window_messages,
            caught_up=done,
            history_stamp=self.stamp,
        )
        save_meta(self.folder, self.meta)
        self.summary, self.cursor = answer, after
        log.info(
            "summary of %s: folded %d messages (seq %d-%d) in %.1f s",
            self.sid,
            len(chunk.rows),
            chunk.rows[0].seq,
            after.seq,
            duration,
        )
        self.passes += 1
        self.folded += len(chunk.rows)
        record = self._record(
            "pass",
            chunk,
            before,
            duration,
            prompt=folded.prompt_tokens,
            completion=folded.completion_tokens,
            notes=folded.notes,
        )
        self._write_record(record)
        self.lock.refresh()
        return record

    def _record(
        self,
        kind: Literal["pass", "failed"],
        chunk: _Chunk | None,
        before: _Cursor,
        duration: float,
        *,
        prompt: int = 0,
        completion: int = 0,
        error: str | None = None,
        notes: dict[str, Any] | None = None,
    ) -> PassRecord:
        rows = chunk.rows if chunk else []
        return PassRecord(
            kind=kind,
            time_ns=self.owner.clock(),
            model=self.owner.model.name,
            chunk_first=_Cursor.of(rows[0]).to_json() if rows else None,
            chunk_last=_Cursor.of(rows[-1]).to_json() if rows else None,
            cursor_before=before.to_json(),
            cursor_after=self.cursor.to_json(),
            messages=len(rows),
            duration_s=round(duration, 4),
            prompt_tokens=prompt,
            completion_tokens=completion,
            error=error,
            extra=dict(notes or {}),
        )

    def _write_record(self, record: PassRecord) -> None:
        with self.store.locked(self.sid, "summary"):
            if not self.folder.is_dir():
                return
            append_record(self.folder, record)
        kind = "summary_pass" if record.kind == "pass" else "summary_failed"
        try:
            self.store.archive.add_event(self.sid, record.time_ns, kind, record.to_json())
        except ArchiveError as exc:  # the pass itself is saved; only the timeline misses it
            log.warning("summary event of %s not recorded: %s", self.sid, exc)

    async def _failed(self, chunk: _Chunk | None, error: str, duration: float) -> SummaryRunResult:
        log.warning("summary of %s failed: %s", self.sid, error)
        record = self._record("failed", chunk, self.cursor, duration, error=error)
        try:
            await self.io(self._write_record, record)
        except (OSError, StoreBusyError) as exc:
            log.warning("summary failure of %s not logged: %s", self.sid, exc)
        self.owner.emit(self.sid, record)
        return self.result("failed", error)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ModelOutputError | SummaryFormatError | SummaryFileError):
        return str(exc)
    if isinstance(exc, ArchiveError | _ContextTooSmallError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


# -- user edits --------------------------------------------------------------------------
def save_user_edit(
    store: MemoryStore, session_id: str, summary: Summary, clock: Clock = now_ns
) -> PassRecord:
    """Save a summary the user edited: validated, saved like a pass, cursor unchanged.

    Raises SummaryFormatError (bad edit), SummaryBusyError (a pass is
    running: its next chunk would overwrite the edit), SummaryFileError.
    """
    summary = validate_summary(summary)
    with store.locked(session_id, "summary edit"):
        folder = store.folder(store.require(session_id))
        folder.mkdir(parents=True, exist_ok=True)
    lock = SessionLock.acquire(folder, clock)
    if lock is None:
        raise SummaryBusyError(
            f"session {session_id}: a summary pass is running; try again when it finishes"
        )
    try:
        with store.locked(session_id, "summary edit"):
            record = _save_edit(store, session_id, folder, summary, clock)
    finally:
        lock.release()
    return record


def _save_edit(
    store: MemoryStore, session_id: str, folder: Path, summary: Summary, clock: Clock
) -> PassRecord:
    """Write an edit; the caller holds both the summary lock and the session lock."""
    meta = load_meta(folder) or SummaryMeta()
    now = clock()
    save_summary(folder, summary)
    save_meta(folder, meta.with_(updated_ns=now))
    cursor = _Cursor(meta.cursor_seq, meta.cursor_message_id, meta.cursor_time_ns).to_json()
    record = PassRecord("edit", now, model="user", cursor_before=cursor, cursor_after=cursor)
    append_record(folder, record)
    try:
        store.archive.add_event(session_id, now, "summary_edit", record.to_json())
    except ArchiveError as exc:
        log.warning("summary edit event of %s not recorded: %s", session_id, exc)
    return record


# -- triggers ----------------------------------------------------------------------------
class SummaryScheduler:
    """When summaries run: after a turn, on an idle timer, and on demand.

    ``after_turn`` does the cheap check (cursor, window, two archive counts;
    no model) and runs only when at least ``after_turn_min_pending`` messages
    left the window: the summary model shares the machine with the chat model,
    so folding two messages after every exchange would slow the next answer
    for little gain.  Whatever stays pending is folded by the idle timer once
    the session has been quiet for ``idle_seconds``.  A session whose idle run
    failed is retried by the timer only after ``retry_seconds`` (the other
    triggers are not held back).
    """

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        idle_seconds: float,
        clock: Clock = now_ns,
        after_turn_min_pending: int = 8,
        retry_seconds: float = 900.0,
        poll_seconds: float | None = None,
    ) -> None:
        self.summarizer = summarizer
        self.idle_ns = int(idle_seconds * 1e9)
        self.retry_ns = int(retry_seconds * 1e9)
        self.clock = clock
        self.after_turn_min_pending = after_turn_min_pending
        self.poll_seconds = poll_seconds or max(1.0, min(idle_seconds / 2, 60.0))
        self._started_ns = clock()
        self._activity: dict[str, int] = {}
        self._failed_at: dict[str, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.Task[None] | None = None

    def on_pass(self, listener: PassListener) -> Callable[[], None]:
        return self.summarizer.on_pass(listener)

    # -- after a turn ----------------------------------------------------------------------
    def note_activity(self, session_id: str) -> None:
        """The session is in use: the idle timer leaves it alone for ``idle_seconds``."""
        self._activity[session_id] = self.clock()

    def after_turn(self, session_id: str) -> None:
        """Note activity and schedule a run if enough messages left the window."""
        self.note_activity(session_id)
        task = asyncio.get_running_loop().create_task(self._after_turn(session_id))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _after_turn(self, session_id: str) -> SummaryRunResult | None:
        if self.summarizer.is_running(session_id):
            return None
        pending = await self.summarizer.pending_count(session_id)
        if pending < max(1, self.after_turn_min_pending):
            return None
        return await self.summarizer.run(session_id)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("summary trigger failed", exc_info=exc)

    async def idle(self) -> None:
        """Wait until every after-turn task has finished (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- idle timer --------------------------------------------------------------------------
    def start(self) -> None:
        """Start the idle timer on the running loop."""
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop the timer and every run it or a turn started (what succeeded is kept)."""
        tasks = [*self._tasks, *([self._timer] if self._timer else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._timer = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.tick()
            except Exception:
                log.exception("idle summary scan failed")

    async def tick(self) -> list[SummaryRunResult]:
        """One idle scan: run every quiet session (the mtime gate keeps this cheap)."""
        results: list[SummaryRunResult] = []
        store = self.summarizer.store
        for session_id in await self.summarizer.storage.run(store.session_ids):
            now = self.clock()
            quiet = now - self._activity.get(session_id, self._started_ns) >= self.idle_ns
            failed = self._failed_at.get(session_id)
            if not quiet or (failed is not None and now - failed < self.retry_ns):
                continue
            if self.summarizer.is_running(session_id):
                continue
            result = await self.summarizer.run(session_id)
            if result.stopped == "failed":
                self._failed_at[session_id] = now
            else:
                self._failed_at.pop(session_id, None)
            if result.stopped not in ("mtime_gate", "up_to_date"):
                results.append(result)
        return results

    # -- on demand ---------------------------------------------------------------------------
    async def summarize_now(
        self,
        session_id: str,
        progress: Progress | None = None,
        cancelled: Cancelled | None = None,
    ) -> SummaryRunResult:
        """The "Summarize now" button and ``agenvoy-desktop summarize ID``.

        Skips the mtime gate and waits for a pass already running in this
        process (then folds whatever is still pending).
        """
        self._failed_at.pop(session_id, None)
        return await self.summarizer.run(
            session_id, force=True, wait=True, progress=progress, cancelled=cancelled
        )
