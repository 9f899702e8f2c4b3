"""Cross-session error memory: what failed, why, what was tried.

A package by responsibility; everything a caller needs is importable from here.

- :mod:`.store` — :class:`ErrorMemory`, the SQLite store: writes, reads,
  expiry and purge, vectors kept in step with the in-memory index.
- :mod:`.opening` — where a profile keeps it, opening it checked, setting a
  damaged file aside.
- :mod:`.salvage` — the records a damaged file still holds, for the fresh one.
- :mod:`.schema` — tables, migrations, the columns a record is read from.
- :mod:`.records` — rows ↔ :class:`ErrorRecord`, merging and editing drafts.
- :mod:`.writes` — the SQL that writes and deletes a record's rows.
- :mod:`.index` — the in-memory columns and vectors every ranking reads.
- :mod:`.candidates` — the keyword, full-text and substring queries.
- :mod:`.ranking` — how a failure or a search picks and orders records.
- :mod:`.exceptions` — the failures it reports to the user.

The vocabulary (what a record is, classification, validation, hint text)
is :mod:`core.error_types`, pure and shared.
"""

from __future__ import annotations

from agenvoy_desktop.core.error_memory.candidates import FTS_POSTINGS_BUDGET, OVERLAP_CANDIDATES
from agenvoy_desktop.core.error_memory.exceptions import (
    ErrorMemoryDamagedError,
    ErrorMemoryError,
    ErrorQueryInvalid,
    ErrorRecordNotFound,
)
from agenvoy_desktop.core.error_memory.opening import error_db_path, open_error_memory, start_fresh
from agenvoy_desktop.core.error_memory.ranking import LOOKUP_MIN_SIMILARITY, SEARCH_MIN_SIMILARITY
from agenvoy_desktop.core.error_memory.schema import MIGRATIONS, ORDER_KEYS, SCHEMA_VERSION
from agenvoy_desktop.core.error_memory.store import (
    DAY_NS,
    DEFAULT_TTL_DAYS,
    PURGE_INTERVAL_NS,
    ErrorMemory,
)
from agenvoy_desktop.core.error_types import (
    ErrorHint,
    ErrorRecord,
    ErrorRecordInvalid,
    classify_error,
    format_hints,
)

__all__ = [
    "DAY_NS",
    "DEFAULT_TTL_DAYS",
    "FTS_POSTINGS_BUDGET",
    "LOOKUP_MIN_SIMILARITY",
    "MIGRATIONS",
    "ORDER_KEYS",
    "OVERLAP_CANDIDATES",
    "PURGE_INTERVAL_NS",
    "SCHEMA_VERSION",
    "SEARCH_MIN_SIMILARITY",
    "ErrorHint",
    "ErrorMemory",
    "ErrorMemoryDamagedError",
    "ErrorMemoryError",
    "ErrorQueryInvalid",
    "ErrorRecord",
    "ErrorRecordInvalid",
    "ErrorRecordNotFound",
    "classify_error",
    "error_db_path",
    "format_hints",
    "open_error_memory",
    "start_fresh",
]
