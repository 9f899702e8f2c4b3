"""The one line between a failure the user can act on and a bug.

Every failure the app expects — a damaged or full store, a missing model,
a file in the wrong format, a search string it cannot run, a busy session —
is a :class:`KnownError`.  Its message is one line meant for the person:
what happened and what to do.  Anything else that escapes an operation is a
bug: the CLI and the window say "internal error" with where the log is, and
the log keeps the traceback.

The existing error classes keep their old built-in bases (``ValueError``,
``RuntimeError``, ``KeyError``) next to :class:`KnownError`, so an
``except ValueError`` written before the taxonomy still catches what it
caught; what changed is only which failures reach the user as plain text.
"""

from __future__ import annotations


class KnownError(Exception):
    """A failure the user can act on; ``str()`` is one line for them."""


def is_known(exc: BaseException) -> bool:
    """Whether *exc* is an expected failure (shown as its message) rather than a bug.

    ``OSError`` counts as known: it is the environment (a permission, a
    missing folder, a full disk) speaking, and its text names the file.
    """
    return isinstance(exc, KnownError | OSError)


def one_line(exc: BaseException) -> str:
    """*exc*'s message on one line (its class name when it has no message)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return " ".join(str(exc).split()) or type(exc).__name__
