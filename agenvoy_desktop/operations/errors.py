"""The error memory as the Errors tab shows it, and the changes a person makes to it.

The error memory is one store for every session; a change here names no
session, so every view of it reloads.
"""

from __future__ import annotations

from typing import Any

from agenvoy_desktop.core.error_memory import ErrorMemory
from agenvoy_desktop.core.error_types import ErrorRecord
from agenvoy_desktop.operations.changes import ERRORS_CHANGED, Changed


def list_records(errors: ErrorMemory, *, include_expired: bool = False) -> list[ErrorRecord]:
    """Every record, newest first (expired ones only when asked for)."""
    return list(errors.list(include_expired=include_expired))


def add_record(
    errors: ErrorMemory, fields: dict[str, Any], session_id: str | None
) -> Changed[ErrorRecord]:
    """A note the person wrote: *fields* as the add dialog gives them (validated by the store)."""
    record = errors.add(**fields, source="user", session_id=session_id)
    return Changed(record, ERRORS_CHANGED)


def set_outcome(errors: ErrorMemory, record_id: int, outcome: str) -> Changed[ErrorRecord]:
    """Mark how the failure ended: resolved, failed or abandoned."""
    return Changed(errors.update(record_id, outcome=outcome), ERRORS_CHANGED)


def renew_record(errors: ErrorMemory, record_id: int) -> Changed[ErrorRecord]:
    """Keep a record for another full expiry period."""
    return Changed(errors.renew(record_id), ERRORS_CHANGED)


def delete_record(errors: ErrorMemory, record_id: int) -> Changed[None]:
    """Forget a record."""
    errors.delete(record_id)
    return Changed(None, ERRORS_CHANGED)
