"""The error memory's own failures, each one line the user can act on."""

from __future__ import annotations

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.sqlite_db import StoreDamagedError


class ErrorMemoryError(KnownError, RuntimeError):
    """An environment problem with the error-memory file, phrased for the user."""


class ErrorMemoryDamagedError(ErrorMemoryError, StoreDamagedError):
    """The error-memory file is damaged: it is set aside and a fresh one started."""


class ErrorRecordNotFound(KnownError, KeyError):
    """No record has this id (deleted, purged, or never written)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "no such error record"


class ErrorQueryInvalid(KnownError, ValueError):
    """A search or listing was asked for with an argument it cannot use (the message says which)."""
