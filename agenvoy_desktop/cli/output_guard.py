"""The command's stdout, guarded: control characters escaped, a closed pipe ignored.

Every command prints through ``sys.stdout``; :func:`guarded_stdout` puts a
:class:`GuardedStdout` there while the command runs, so nothing printed
(answers, titles, listings, doctor's findings) reaches the terminal with a
raw escape sequence, whichever code path printed it (the explicit
:mod:`~agenvoy_desktop.cli.safe_text` calls at each field are the first line;
this is the backstop).

A reader that stops early (``agenvoy-desktop sessions | head -1``) closes
the pipe.  The first write after that fails with ``BrokenPipeError``; the
guard then points the descriptor at the null device (Python's documented
recipe, so the interpreter's last flush cannot fail again) and lets the
command finish: a ``chat`` still stores its answer, an ``import`` still
completes.  :func:`~agenvoy_desktop.cli.main` then exits quietly with
:data:`READER_GONE_STATUS`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TextIO, cast

from agenvoy_desktop.cli.safe_text import shown

READER_GONE_STATUS = 128 + getattr(signal, "SIGPIPE", 13)
"""141: what a Unix tool killed by SIGPIPE reports (``yes | head`` under ``pipefail``).

Not 0: the output did not all reach a reader, and a script that asked for
``pipefail`` should learn so, as from any other tool; not 1, which means
the command failed.
"""


class GuardedStdout:
    """A text stream that escapes controls and absorbs a broken pipe (see the module)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            self._guard(lambda: self._stream.write(shown(text)))
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            self._guard(self._stream.flush)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)

    def _guard(self, action: Callable[[], object]) -> None:
        try:
            action()
        except BrokenPipeError:
            self.reader_gone = True
            _to_null(self._stream)


def _to_null(stream: TextIO) -> None:
    """Point *stream*'s descriptor at the null device, so what is still buffered goes there."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError):  # a stream with no descriptor: nothing will flush it late
        pass


def stderr_or_null() -> None:
    """Give the process a stderr where it has none (started with ``2>&-``, or frozen
    without a console): messages, progress bars and the logging of the command
    then go to the null device instead of failing on ``None``."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115  # for the process's life


@contextlib.contextmanager
def guarded_stdout() -> Iterator[GuardedStdout]:
    """``sys.stdout`` guarded while the block runs (and flushed inside it).

    A frozen app started without a console has no stdout at all (``None``):
    what a command prints then goes to the null device.
    """
    original = sys.stdout
    with contextlib.ExitStack() as stack:
        target = original
        if target is None:
            target = stack.enter_context(open(os.devnull, "w", encoding="utf-8"))
        guard = GuardedStdout(target)
        sys.stdout = cast(TextIO, guard)
        try:
            yield guard
            guard.flush()  # here, not at exit: a pipe closed early must surface now
        finally:
            sys.stdout = original
