"""One thread that owns the profile's stores; async callers queue on it.

MemoryStore and the error memory are not thread-safe by design (one SQLite
connection each, files written in place).  The window, the CLI and the agent
all reach them through :class:`Storage.run`, which serialises every call on
a single worker thread — so the UI thread never waits on disk and two writers
never interleave.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Storage:
    """A single-thread executor with an awaitable :meth:`run`."""

    def __init__(self, name: str = "agenvoy-storage") -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on the storage thread and await its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Blocking variant for start-up and shutdown code outside any loop."""
        return self._pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        """Finish queued work, then stop the thread (safe to call twice)."""
        self._pool.shutdown(wait=True)
