"""Indexing in a child process: the window starts it, watches it, may cancel it, survives it.

Reading PDFs, parsing mail and embedding thousands of chunks can take long,
use much memory, or crash in a C library; none of that may reach the
window or the conversation memory.  So :class:`IndexJob` runs
:func:`~agenvoy_desktop.rag.indexer.index_collection` in a *spawned*
process (nothing of the parent's state, threads or models is inherited),
which builds its own embedder from a ``module:function`` factory name
(``rag`` may not import the model layer; the real factory is
``agenvoy_desktop.agent.doc_embedder:open_document_embedder``).

Progress comes back through a one-way pipe.  Cancel is a shared flag in
raw shared memory, not a ``multiprocessing.Event``: an Event takes a lock,
and a child killed while holding it would leave the parent's ``cancel()``
waiting forever.  If the child dies (crash, ``kill -9``, out of memory) the
job says "the indexer stopped unexpectedly"; the index keeps every file
finished before, and the next run resumes with no duplicates (see
:mod:`.index`).

``python -m agenvoy_desktop.rag.worker`` runs the same work in the
foreground (progress as JSON lines on stdout), for scripts and debugging.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import importlib
import json
import multiprocessing
import multiprocessing.connection
import pickle
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.paths import AppPaths, private_umask
from agenvoy_desktop.rag.indexer import IndexReport, index_collection
from agenvoy_desktop.rag.registry import CollectionRegistry

EmbedderFactory = Callable[[AppPaths, str | None], TextEmbedder]
PROGRESS_EVERY_S = 0.1
"""Least time between two progress messages (the last one of a stage always goes)."""
CRASHED = "the indexer stopped unexpectedly: what it finished is kept; index again to go on"
Status = Literal["running", "done", "cancelled", "failed", "crashed"]
Message = tuple[Any, ...]


class WorkerSetupError(KnownError, ValueError):
    """The child could not start its work (bad factory name, model that will not load)."""


class _Flag(Protocol):
    value: bool


@dataclass(frozen=True, slots=True)
class IndexRequest:
    """What the child needs, all picklable: where the profile is, what to index, how to embed."""

    config_dir: str
    data_dir: str
    collection: str
    model_path: str | None = None
    factory: str | None = None
    """``module:function`` returning the embedder; None indexes for keyword search only."""

    def paths(self) -> AppPaths:
        return AppPaths(Path(self.config_dir), Path(self.data_dir))


def load_factory(name: str) -> EmbedderFactory:
    """The function *name* (``package.module:function``) points at."""
    module_name, _, attr = name.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError):
        raise WorkerSetupError(f"no embedder factory {name!r}") from None
    if not callable(factory):
        raise WorkerSetupError(f"{name!r} is not a function")
    return factory  # type: ignore[no-any-return]


def _open_embedder(request: IndexRequest) -> TextEmbedder | None:
    if request.factory is None:
        return None
    factory = load_factory(request.factory)
    try:
        return factory(request.paths(), request.model_path)
    except (KnownError, OSError, ValueError) as exc:
        raise WorkerSetupError(f"cannot load the embedding model: {exc}") from None


def run_request(
    request: IndexRequest, send: Callable[[Message], None], cancelled: Callable[[], bool]
) -> int:
    """Do the indexing *request* describes, reporting through *send*; returns the exit code.

    Messages: ``("progress", stage, done, total)``, then one of
    ``("done", report)``, ``("cancelled", report | None)``, ``("failed", message)``.
    """
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            send(("progress", stage, done, total))

    try:
        paths = request.paths()
        collection = CollectionRegistry(paths).get(request.collection)
        embedder = _open_embedder(request)
        try:
            report = index_collection(paths, collection, embedder, progress, cancelled)
        finally:
            close = getattr(embedder, "close", None)
            if close is not None:
                close()
    except OperationCancelledError:
        send(("cancelled", None))
        return 0
    except KnownError as exc:
        send(("failed", str(exc)))
        return 1
    send(("cancelled" if report.cancelled else "done", dataclasses.asdict(report)))
    return 0


def child_main(
    request: IndexRequest, conn: multiprocessing.connection.Connection, flag: _Flag
) -> None:
    """The spawned child's entry point."""
    private_umask()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C in a terminal is the parent's
    try:
        code = run_request(request, conn.send, lambda: bool(flag.value))
    finally:
        with contextlib.suppress(OSError):
            conn.close()
    sys.exit(code)


@dataclass
class JobOutcome:
    """How a job ended (``status``), with its report or the one-line reason."""

    status: Status
    report: IndexReport | None = None
    message: str = ""
    exit_code: int | None = None
    notices: list[str] = field(default_factory=list)


class IndexJob:
    """One indexing run in a child process, seen from the parent (see the module docstring).

    Call :meth:`poll` now and then (a timer in the window): it reads what
    the child sent and returns the outcome once the child has ended.
    """

    def __init__(
        self,
        paths: AppPaths,
        collection: str,
        *,
        model_path: str | None = None,
        factory: str | None = None,
    ) -> None:
        self.request = IndexRequest(
            str(paths.config_dir), str(paths.data_dir), collection, model_path, factory
        )
        self.progress: tuple[str, int, int] | None = None
        self.outcome: JobOutcome | None = None
        self._final: Message | None = None
        self._context = multiprocessing.get_context("spawn")
        self._flag: Any = self._context.RawValue(ctypes.c_bool, False)
        self._conn: multiprocessing.connection.Connection | None = None
        self._process: Any = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    def start(self) -> None:
        receive, send = self._context.Pipe(duplex=False)
        self._process = self._context.Process(
            target=child_main,
            args=(self.request, send, self._flag),
            name=f"agenvoy-indexer-{self.request.collection}",
            daemon=True,
        )
        self._process.start()
        send.close()  # the child holds the only writer: its death is our end of file
        self._conn = receive

    def cancel(self) -> None:
        """Ask the child to stop after the file (or embedding batch) in hand."""
        self._flag.value = True

    def kill(self) -> None:
        """Stop the child at once (it ignores a cancel while stuck); the index heals next run."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()

    def poll(self, timeout: float = 0.0) -> JobOutcome | None:
        """Read what the child sent (waiting up to *timeout*); the outcome once it ended."""
        if self.outcome is not None:
            return self.outcome
        if self._conn is None:
            raise RuntimeError("the indexing job was not started")
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self._conn.poll(max(0.0, deadline - time.monotonic())):
                    return None
                self._take(self._conn.recv())
            except (EOFError, OSError, pickle.UnpicklingError):
                return self._finish()

    def wait(self, timeout: float | None = None) -> JobOutcome | None:
        """Block until the child ends (or *timeout* passes: None then)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                return self.outcome
            outcome = self.poll(left)
            if outcome is not None:
                return outcome

    def _take(self, message: Message) -> None:
        if message and message[0] == "progress":
            self.progress = (str(message[1]), int(message[2]), int(message[3]))
        else:
            self._final = message

    def _finish(self) -> JobOutcome:
        """The child closed its end: it has ended, or is about to."""
        assert self._conn is not None
        assert self._process is not None
        self._conn.close()
        self._process.join(10)
        code = self._process.exitcode
        self.outcome = _outcome(self._final, code)
        return self.outcome


def _outcome(final: Message | None, code: int | None) -> JobOutcome:
    if final is None:
        return JobOutcome("crashed", message=CRASHED, exit_code=code)
    kind, payload = final[0], final[1]
    if kind == "failed":
        return JobOutcome("failed", message=str(payload), exit_code=code)
    report = IndexReport(**payload) if isinstance(payload, dict) else None
    notices = list(report.notices) if report is not None else []
    status: Status = "done" if kind == "done" else "cancelled"
    return JobOutcome(status, report=report, exit_code=code, notices=notices)


# -- python -m agenvoy_desktop.rag.worker ---------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Index one collection in the foreground; progress and the result as JSON lines."""
    parser = argparse.ArgumentParser(prog="python -m agenvoy_desktop.rag.worker")
    parser.add_argument("--config-dir", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--collection", required=True)
    parser.add_argument("--model", default=None, help="embedding model file")
    parser.add_argument("--factory", default=None, help="module:function making the embedder")
    args = parser.parse_args(argv)
    private_umask()
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    request = IndexRequest(
        args.config_dir, args.data_dir, args.collection, args.model, args.factory
    )

    def send(message: Message) -> None:
        print(json.dumps(message, ensure_ascii=False), flush=True)  # noqa: T201

    return run_request(request, send, lambda: stop[0])


if __name__ == "__main__":
    sys.exit(main())
