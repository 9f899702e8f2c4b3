"""One worker thread that owns one llama.cpp model.

A llama.cpp context is not safe for concurrent calls, so the chat engine and
the embedder each queue their jobs on a single thread.  The model is created
on that thread at the first job (constructing a worker costs nothing: no
thread, no file read) and freed on close, after the thread has exited, so
nothing else ever touches it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from agenvoy_desktop.core.errors import KnownError

_T = TypeVar("_T")


class ModelClosedError(KnownError, RuntimeError):
    """Work reached a model after it was closed (the app is quitting or the model was changed)."""


class ClosableModel(Protocol):
    def close(self) -> None: ...


_M = TypeVar("_M", bound=ClosableModel)


class ModelWorker(Generic[_M]):
    """Runs jobs ``job(model)`` one at a time on one thread, loading the model first."""

    def __init__(self, load: Callable[[], _M], *, thread_name: str, closed_message: str) -> None:
        """*load* runs on the worker at the first job; *closed_message* is the
        :class:`ModelClosedError` a submit after :meth:`close` raises."""
        self._load = load
        self._closed_message = closed_message
        self.model: _M | None = None  # created and used on the worker only
        self.closed = False
        self._lock = threading.Lock()
        # The pool starts its one thread on the first submit, not here.
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=thread_name
        )

    def submit(
        self, job: Callable[[_M], _T], *, check: Callable[[], None] | None = None
    ) -> concurrent.futures.Future[_T]:
        """Queue *job*; :class:`ModelClosedError` once the worker is closed.

        *check* runs on the worker before the model is loaded and may raise
        to drop a job that was cancelled while it waited (no load for it).
        """
        with self._lock:
            if self.closed:
                raise ModelClosedError(self._closed_message)
            return self._pool.submit(self._run, job, check)

    def submit_if_loaded(self, job: Callable[[_M], object]) -> concurrent.futures.Future[None]:
        """Queue *job* for the model only if it is loaded by then (clearing what a model
        holds need not load one); nothing once the worker is closed."""
        with self._lock:
            if self.closed:
                done: concurrent.futures.Future[None] = concurrent.futures.Future()
                done.set_result(None)
                return done
            return self._pool.submit(self._run_if_loaded, job)

    def _run_if_loaded(self, job: Callable[[_M], object]) -> None:
        if self.model is not None:
            job(self.model)

    def _run(self, job: Callable[[_M], _T], check: Callable[[], None] | None) -> _T:
        if check is not None:
            check()
        return job(self._loaded())

    def _loaded(self) -> _M:
        """The model, loaded on first use (worker thread)."""
        if self.model is None:
            self.model = self._load()
        return self.model

    def close(self, stop_running: Callable[[], None] | None = None) -> None:
        """Refuse new jobs, cancel queued ones, wait for the running one, free the model.

        *stop_running* is called once new jobs are refused and before the
        wait, to ask a long job to end early.  A second close does nothing.
        """
        with self._lock:
            if self.closed:
                return
            self.closed = True
        if stop_running is not None:
            stop_running()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.model is not None:  # the worker has exited; nobody else touches it
            self.model.close()
            self.model = None
