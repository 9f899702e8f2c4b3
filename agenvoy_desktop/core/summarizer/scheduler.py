"""When to summarize: after a turn, when idle, on demand."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from agenvoy_desktop.core.store import Cancelled, Progress
from agenvoy_desktop.core.summarizer.runner import Summarizer
from agenvoy_desktop.core.summarizer.runs import PassListener, SummaryRunResult
from agenvoy_desktop.core.timeutil import Clock, now_ns

log = logging.getLogger(__name__)


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
