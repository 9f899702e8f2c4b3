"""The runner: folds pending messages into the summary chunk by chunk."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from agenvoy_desktop.core.archive import ArchivedMessage, ArchiveError
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.model_api import JsonModel, ModelOutputError
from agenvoy_desktop.core.store import Cancelled, MemoryStore, Progress
from agenvoy_desktop.core.summarizer.edits import save_user_edit
from agenvoy_desktop.core.summarizer.loop_stop import LoopStop
from agenvoy_desktop.core.summarizer.pending import (
    Chunk,
    ContextTooSmallError,
    Cursor,
    Folded,
    PassStoppedError,
    Pending,
    RetryFailedError,
    SourceGoneError,
    count_between,
    gate_closed,
    history_stamp,
    resolve_cursor,
    window_start,
)
from agenvoy_desktop.core.summarizer.runs import (
    ANSWER_TOKENS,
    GROWTH_TOKENS,
    MIN_TRANSCRIPT_TOKENS,
    MISSING_STAMP,
    SAFETY_TOKENS,
    TOKEN_CACHE_MAX,
    InlineRunner,
    PassListener,
    PassProgress,
    ProgressListener,
    RunListener,
    StopReason,
    StoreRunner,
    SummaryRunResult,
)
from agenvoy_desktop.core.summarizer.session_lock import SessionLock
from agenvoy_desktop.core.summary import (
    SUMMARIZE_INSTRUCTIONS,
    PassRecord,
    RecordKind,
    Summary,
    SummaryFileError,
    SummaryFormatError,
    SummaryMeta,
    append_record,
    build_prompt,
    cut_middle,
    decision_sources,
    load_meta,
    load_summary,
    message_handle,
    one_per_topic,
    parse_summary,
    repeated_sentences,
    save_meta,
    save_summary,
    summary_prompt_json,
    summary_schema,
    trace_decisions,
    transcript_line,
    without_cut_words,
    without_repeats,
)
from agenvoy_desktop.core.summary_facts import merge_facts, pick_facts
from agenvoy_desktop.core.timeutil import Clock, now_ns

T = TypeVar("T")

ANSWER_GROWTH_CHARS = 400
"""How much longer than the previous summary an answer is expected to be (for progress)."""
ANSWER_SHARE_CAP = 0.95
"""Progress stops short of done until the answer is parsed: the estimate may be low."""
LEFT_OUT_NOTED = 40
"""Sentences with a value that a pass left out, noted in its record (a cap for huge chunks)."""

END_AT_REPEAT = True
"""End an answer at its first repeated discussion (:mod:`.loop_stop`); benchmarks switch it."""
CANCEL_POLL_S = 0.1
"""How often a run's ``cancelled`` callback is asked while the model writes (it cannot
call back): a stop through :meth:`Summarizer.stop` or a cancelled task needs no polling."""
STOPPED: RecordKind = "stopped"
"""The pass-history kind of a pass that a stop ended while the model wrote its answer."""

log = logging.getLogger(__name__)


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
        self.storage: StoreRunner = storage or InlineRunner()
        self._locks: dict[str, asyncio.Lock] = {}
        self._listeners: list[PassListener] = []
        self._progress_listeners: list[ProgressListener] = []
        self._run_listeners: list[RunListener] = []
        self._tokens: dict[str, int] = {}
        self.stopping: set[str] = set()
        """Sessions whose passes :meth:`stop_session` is ending (queued ones never start)."""
        self._runs: dict[str, _Run] = {}

    # -- listeners and helpers ---------------------------------------------------------
    def on_pass(self, listener: PassListener) -> Callable[[], None]:
        """Call *listener* after every pass/failure/edit; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def on_progress(self, listener: ProgressListener) -> Callable[[], None]:
        """Call *listener* (on the event loop) as a pass writes its answer; returns an
        unsubscribe function."""
        self._progress_listeners.append(listener)
        return lambda: self._progress_listeners.remove(listener)

    def on_run(self, listener: RunListener) -> Callable[[], None]:
        """Call *listener* (on the event loop) when a run starts folding and when it ends.

        Every run tells it, whoever started it (a turn, the idle timer, the
        Summary tab), so a window can offer Stop for passes it did not start.
        A run that finds nothing to fold tells nothing: the idle timer's scans
        would flash a Stop button.  Returns an unsubscribe function.
        """
        self._run_listeners.append(listener)
        return lambda: self._run_listeners.remove(listener)

    def emit_run(self, session_id: str, folding: bool) -> None:
        _tell(self._run_listeners, "run", session_id, folding)

    def is_folding(self, session_id: str) -> bool:
        """Whether a run of this process is folding the session's messages now
        (what :meth:`on_run` listeners were told; :meth:`stop` ends it)."""
        run = self._runs.get(session_id)
        return run is not None and run.folding

    def emit_progress(self, session_id: str, progress: PassProgress) -> None:
        _tell(self._progress_listeners, "progress", session_id, progress)

    def emit(self, session_id: str, record: PassRecord) -> None:
        _tell(self._listeners, "pass", session_id, record)

    def is_running(self, session_id: str) -> bool:
        lock = self._locks.get(session_id)
        return lock is not None and lock.locked()

    async def count_tokens(self, text: str) -> int:
        """Token count with a per-text cache (messages are re-planned after failures)."""
        cached = self._tokens.get(text)
        if cached is None:
            if len(self._tokens) >= TOKEN_CACHE_MAX:
                self._tokens.clear()
            cached = self._tokens[text] = await self.model.count_tokens(text)
        return cached

    def pending_count_sync(self, session_id: str) -> int:
        """Unsummarised messages older than the window (no model; runs on the store thread)."""
        meta = load_meta(self.store.folder(session_id))
        cursor = resolve_cursor(self.store, session_id, meta)
        end = window_start(self.store, session_id, self.window_messages)
        return count_between(self.store, session_id, cursor.seq, end)

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
            run = _Run(self, session_id, folder, file_lock, progress=progress, cancel=cancelled)
            self._runs[session_id] = run
            try:
                return await run.go(force)
            finally:
                self._runs.pop(session_id, None)
                await self.storage.run(file_lock.release)

    def _prepare(self, session_id: str) -> Path:
        with self.store.locked(session_id, "summary"):  # a remove must not race the mkdir
            folder = self.store.folder(self.store.require(session_id))
            folder.mkdir(parents=True, exist_ok=True)
        return folder

    def stop(self, session_id: str) -> bool:
        """Stop this process's running pass of a session now, without waiting for it.

        The model's answer ends at its next token (the call is cancelled: the
        engine's worker sees that before each token, an endpoint's stream is
        closed); the pass is recorded as ``stopped``, the summary and cursor
        stay as they were, and the run returns ``cancelled``.  Between two
        model calls it ends before the next one.  False when no pass was running.
        """
        run = self._runs.get(session_id)
        if run is None:
            return False
        run.stop_asked.set()
        return True

    async def stop_session(self, session_id: str) -> None:
        """Stop this process's passes of a session (:meth:`stop`) and wait for them.

        Call it before a reset or remove, so that no pass writes into a folder
        that is going away (what succeeded so far is kept).
        """
        lock = self._locks.get(session_id)
        if lock is None or not lock.locked():
            return
        self.stopping.add(session_id)
        self.stop(session_id)
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


def _tell(listeners: Sequence[Callable[..., None]], what: str, *args: object) -> None:
    """Call every listener with *args*; one that fails is logged and the others still hear."""
    for listener in list(listeners):
        try:
            listener(*args)
        except Exception:
            log.exception("summary %s listener failed", what)


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
        self.cursor = Cursor()
        self.start = Cursor()
        self.stamp = MISSING_STAMP
        self.pending = Pending(session_id, -1, None, 0)
        self.index = 0
        self.passes = 0
        self.folded = 0
        self.loop = asyncio.get_running_loop()
        self.stop_asked = asyncio.Event()
        """Set by :meth:`Summarizer.stop`: the model's answer is cancelled at once."""
        self.halted = False
        """The answer was stopped: progress the engine's thread still sends is dropped."""
        self.folding = False
        """Between the start and end that :meth:`Summarizer.on_run` listeners hear of."""

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
            return await self._fold_told()
        except StoreBusyError as exc:  # what was saved stays; the next run resumes there
            return self.result("busy", str(exc))

    def _load(self, force: bool) -> bool:
        """Read the files and count what is pending; True when the mtime gate skips the run."""
        self.stamp = history_stamp(self.folder / "history.json")
        meta = load_meta(self.folder)
        window = self.owner.window_messages
        if meta is not None and not force and gate_closed(meta, self.stamp, window):
            self.cursor = self.start = Cursor(meta.cursor_seq, meta.cursor_message_id)
            return True
        self.meta = meta or SummaryMeta()
        self.had_meta = meta is not None
        self.summary = load_summary(self.folder) or Summary()
        self.cursor = self.start = resolve_cursor(self.store, self.sid, meta)
        end = window_start(self.store, self.sid, self.owner.window_messages)
        total = count_between(self.store, self.sid, self.cursor.seq, end)
        self.pending = Pending(self.sid, self.cursor.seq, end, total)
        return False

    def _mark_caught_up(self) -> None:
        """Arm the mtime gate for this history.json (written only when something changed)."""
        meta = self.meta.with_(
            caught_up=True, window_messages=self.owner.window_messages, history_stamp=self.stamp
        )
        if meta != self.meta and (self.had_meta or self.stamp != MISSING_STAMP):
            with self.store.locked(self.sid, "summary"):
                if self.folder.is_dir():
                    save_meta(self.folder, meta)

    def stop_wanted(self) -> bool:
        """Whether any stop was asked: :meth:`Summarizer.stop`, ``stop_session`` or the flag."""
        return (
            self.stop_asked.is_set()
            or self.sid in self.owner.stopping
            or bool(self.cancelled and self.cancelled())
        )

    async def _fold_told(self) -> SummaryRunResult:
        """:meth:`_fold_all`, with the run listeners told when it starts and ends."""
        self.folding = True
        self.owner.emit_run(self.sid, True)
        try:
            return await self._fold_all()
        finally:
            self.folding = False
            self.owner.emit_run(self.sid, False)

    async def _fold_all(self) -> SummaryRunResult:
        while self.index < len(self.pending.rows) or not self.pending.exhausted:
            if self.stop_wanted():
                return self.result("cancelled")
            started = time.perf_counter()
            chunk: Chunk | None = None
            try:
                chunk = await self._plan()
                if not chunk.rows:
                    break
                if self.stop_wanted():  # asked while the model loaded or counted: no answer
                    return self.result("cancelled")
                started = time.perf_counter()
                chunk, folded = await self._summarize_or_retry(chunk)
            except PassStoppedError as exc:
                result = await self._stopped(exc.chunk, time.perf_counter() - started)
                if exc.interrupted:
                    raise asyncio.CancelledError from exc
                return result
            except RetryFailedError as exc:
                chunk = exc.chunk
                return await self._failed(chunk, str(exc), time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - any model or planning failure fails the chunk
                return await self._failed(chunk, _describe(exc), time.perf_counter() - started)
            duration = time.perf_counter() - started
            try:
                record = await self.io(self._commit, chunk, folded, duration)
            except SourceGoneError as exc:
                log.info("summary of %s: %s", self.sid, exc)
                return self.result("cancelled", str(exc))
            except OSError as exc:  # disk full, read-only...: the atomic writes left the old files
                return await self._failed(chunk, _describe(exc), duration)
            self.owner.emit(self.sid, record)
            if self.progress is not None:
                self.progress(self.folded, self.pending.total)
        return self.result("done")

    async def _summarize_or_retry(self, chunk: Chunk) -> tuple[Chunk, Folded]:
        """One pass; after a bad answer, one more over the first half of the chunk.

        A small model that loses its way over many messages often manages
        half as many; the other half is planned into the next chunk, so
        nothing is skipped.  Only answer problems are retried (an answer cut
        off, not JSON, off-shape or empty): a model that cannot run at all
        fails the chunk at once.  A repeated sentence is no such problem:
        :meth:`_summarize` drops the repeat instead.
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
            folded = await self._summarize(half)
        except (ModelOutputError, SummaryFormatError) as exc:
            raise RetryFailedError(half, f"{_describe(exc)} (and before: {first_error})") from exc
        folded.notes["retried_after"] = first_error
        return half, folded

    async def _summarize(self, chunk: Chunk) -> Folded:
        """One model call for *chunk*; the answer validated and its decisions traced.

        A sentence said twice is removed, keeping its first occurrence (see
        :func:`~agenvoy_desktop.core.summary.without_repeats`), rather than
        failing the answer: asking again costs a whole second generation
        (on the starter model, minutes), and what the repeat said is still
        there once.
        """
        if not chunk.has_content:  # nothing to learn: advance without a model call
            return Folded(self.summary)
        folded = await self._model_answer(chunk)
        return self._with_facts(chunk, folded)

    def _with_facts(self, chunk: Chunk, folded: Folded) -> Folded:
        """The chunk's facts merged into the answer (the model never writes them).

        The pass record notes how many came in and which went, and why, so
        the Summary tab can show what each pass kept and let go.
        """
        folded_ids = {row.message.id for row in chunk.rows}
        picked = pick_facts(row.message for row in chunk.rows)
        facts, dropped = merge_facts(self.summary.facts, picked.facts)
        folded.notes["facts_added"] = sum(1 for f in facts if f.source in folded_ids)
        if dropped:
            folded.notes["facts_dropped"] = [d.to_json() for d in dropped]
        if picked.left_out:
            folded.notes["facts_left_out"] = [d.to_json() for d in picked.left_out[:LEFT_OUT_NOTED]]
        return replace(folded, summary=replace(folded.summary, facts=facts))

    async def _model_answer(self, chunk: Chunk) -> Folded:
        """The model's topics, decisions and current discussion for *chunk*, checked."""
        prompt = build_prompt(self.summary, chunk.lines)
        sources = chunk.sources
        stop = LoopStop()
        expected = len(summary_prompt_json(self.summary)) + ANSWER_GROWTH_CHARS
        self._report(chunk, 0.0)

        def watch(answer: str) -> str | None:
            """Progress as the answer grows (called where a JSON object closes), then the stop."""
            self._report(chunk, min(ANSWER_SHARE_CAP, len(answer) / expected))
            return stop(answer) if END_AT_REPEAT else None

        completion = await self._unless_stopped(
            chunk,
            self.owner.model.complete_json(
                prompt, summary_schema(list(sources)), max_tokens=chunk.reserve, stop_when=watch
            ),
        )
        value = completion.value
        if END_AT_REPEAT and not stop.repeated and (ended := stop(completion.text)) is not None:
            value = json.loads(ended, strict=False)  # a model that generated it all anyway
        answer = parse_summary(value, "model answer", repeats=True)
        notes: dict[str, Any] = {}
        if stop.repeated:
            notes["ended_at_repeat"] = stop.repeated[0]
        if twice := repeated_sentences(answer):
            answer = without_repeats(answer)
            notes["repeats_removed"] = twice
        answer, dropped = trace_decisions(answer, sources)
        answer = without_cut_words(one_per_topic(answer))
        if answer.is_empty:
            raise SummaryFormatError(
                f"model answer: empty summary for {len(chunk.rows)} messages with content"
            )
        if dropped:
            log.info("summary of %s: dropped untraced decisions: %s", self.sid, dropped)
            notes["dropped_decisions"] = dropped
        return Folded(answer, completion.prompt_tokens, completion.completion_tokens, notes)

    async def _unless_stopped(self, chunk: Chunk, call: Awaitable[T]) -> T:
        """*call*'s result, or :class:`PassStoppedError` as soon as a stop is asked.

        The call is cancelled, which ends the answer on both backends at once:
        the engine's worker checks its request before every token (and every
        prompt batch), and an endpoint's stream is closed, which is how its
        server learns to stop.  The cancelled call is awaited, so its socket
        is closed before the run records the stop.  A cancelled run task (the
        window's Stop) is a stop too: recorded, then the cancellation goes on.
        """
        answer = asyncio.ensure_future(call)
        stop = asyncio.ensure_future(self._stop_requested())
        interrupted = False
        try:
            await asyncio.wait((answer, stop), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            interrupted = True
        finally:
            stop.cancel()
            if not answer.done():
                self.halted = True
                answer.cancel()
            await asyncio.wait((answer, stop))
        if answer.cancelled() or interrupted:
            raise PassStoppedError(chunk, interrupted=interrupted)
        return answer.result()  # finished first: a stop asked now ends the run after it

    async def _stop_requested(self) -> None:
        """Returns once a stop is asked (the ``cancelled`` flag is polled: it cannot call)."""
        if self.cancelled is None:
            if self.sid not in self.owner.stopping:
                await self.stop_asked.wait()
            return
        while not self.stop_wanted():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_asked.wait(), CANCEL_POLL_S)

    def _report(self, chunk: Chunk, answer: float) -> None:
        """Tell the progress listeners, on the event loop (the engine calls from its thread)."""
        if self.halted:
            return
        progress = PassProgress(len(chunk.rows), self.folded, self.pending.total, answer)
        self.loop.call_soon_threadsafe(self._emit_progress, progress)

    def _emit_progress(self, progress: PassProgress) -> None:
        if not self.halted:  # the engine's thread may still write a token after a stop
            self.owner.emit_progress(self.sid, progress)

    # -- planning ------------------------------------------------------------------------
    async def _row(self, index: int) -> ArchivedMessage | None:
        while index >= len(self.pending.rows) and not self.pending.exhausted:
            await self.io(self.pending.fetch, self.store)
        return self.pending.rows[index] if index < len(self.pending.rows) else None

    async def _plan(self) -> Chunk:
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
            raise ContextTooSmallError(
                f"model {self.owner.model.name}: context of {self.owner.model.context_size} "
                f"tokens leaves {budget} for messages (need {MIN_TRANSCRIPT_TOKENS}+)"
            )
        chunk = Chunk([], [], reserve, decision_sources(self.summary))
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
    def _commit(self, chunk: Chunk, folded: Folded, duration: float) -> PassRecord:
        """Save, under the session lock: checked, then written (see :meth:`_save`)."""
        with self.store.locked(self.sid, "summary"):
            if not self.folder.is_dir():  # removed meanwhile: never recreate it
                raise FileNotFoundError(f"session {self.sid} was removed during the summary")
            ids = [row.message.id for row in chunk.rows]
            if len(self.store.archive.rowids_for(ids)) != len(ids):
                raise SourceGoneError(
                    f"session {self.sid} was reset during the summary; the pass was discarded"
                )
            return self._save(chunk, folded, duration)

    def _save(self, chunk: Chunk, folded: Folded, duration: float) -> PassRecord:
        """Save order: summary, meta (cursor), history line, timeline event."""
        answer = folded.summary
        before, after = self.cursor, Cursor.of(chunk.rows[-1])
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
        kind: Literal["pass", "failed", "stopped"],
        chunk: Chunk | None,
        before: Cursor,
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
            chunk_first=Cursor.of(rows[0]).to_json() if rows else None,
            chunk_last=Cursor.of(rows[-1]).to_json() if rows else None,
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
        if record.kind == STOPPED:  # the pass history shows it; the timeline has no such event
            return
        kind = "summary_pass" if record.kind == "pass" else "summary_failed"
        try:
            self.store.archive.add_event(self.sid, record.time_ns, kind, record.to_json())
        except ArchiveError as exc:  # the pass itself is saved; only the timeline misses it
            log.warning("summary event of %s not recorded: %s", self.sid, exc)

    async def _failed(self, chunk: Chunk | None, error: str, duration: float) -> SummaryRunResult:
        log.warning("summary of %s failed: %s", self.sid, error)
        record = self._record("failed", chunk, self.cursor, duration, error=error)
        try:
            await self.io(self._write_record, record)
        except (OSError, StoreBusyError) as exc:
            log.warning("summary failure of %s not logged: %s", self.sid, exc)
        self.owner.emit(self.sid, record)
        return self.result("failed", error)

    async def _stopped(self, chunk: Chunk, duration: float) -> SummaryRunResult:
        """A stop ended the model's answer: recorded as ``stopped``, nothing of it saved.

        The summary, its meta and the cursor are as the last good chunk left
        them, so the next run folds this chunk's messages again.
        """
        self.halted = True
        log.info("summary of %s: stopped while the model wrote its answer", self.sid)
        record = self._record("stopped", chunk, self.cursor, duration)
        try:
            await self.io(self._write_record, record)
        except (OSError, StoreBusyError, RuntimeError) as exc:  # RuntimeError: storage closed
            log.warning("summary stop of %s not logged: %s", self.sid, exc)
        self.owner.emit(self.sid, record)
        return self.result("cancelled")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ModelOutputError | SummaryFormatError | SummaryFileError):
        return str(exc)
    if isinstance(exc, ArchiveError | ContextTooSmallError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
