"""The error memory as the Errors tab shows it, and the changes a person makes to it.

The error memory is one store for every session; a change here names no
session, so every view of it reloads.
"""

from __future__ import annotations

from typing import Any

from agenvoy_desktop.core.error_memory import ErrorMemory, ErrorRecordNotFound
from agenvoy_desktop.core.error_types import ErrorHint, ErrorRecord
from agenvoy_desktop.operations.changes import ERRORS_CHANGED, Changed


def list_records(
    errors: ErrorMemory,
    tool: str | None = None,
    outcome: str | None = None,
    *,
    include_expired: bool = False,
    order_by: str = "-created",
    limit: int | None = None,
) -> list[ErrorRecord]:
    """Records, newest first by default (expired ones only when asked for)."""
    return list(
        errors.list(tool, outcome, include_expired=include_expired, order_by=order_by, limit=limit)
    )


def get_record(errors: ErrorMemory, record_id: int) -> ErrorRecord:
    """One record, or :class:`ErrorRecordNotFound`."""
    record = errors.get(record_id)
    if record is None:
        raise ErrorRecordNotFound(f"no error record #{record_id}")
    return record


def search_records(
    errors: ErrorMemory, query: str, *, tool: str | None = None, limit: int = 10
) -> list[ErrorHint]:
    """Records matching free text, best first (records added without a model are embedded first)."""
    errors.backfill_vectors()
    return errors.search(query, tool=tool, limit=limit)


def add_record(
    errors: ErrorMemory, fields: dict[str, Any], session_id: str | None
) -> Changed[ErrorRecord]:
    """A note the person wrote: *fields* as the add dialog gives them (validated by the store).

    The same tool and symptom as an existing record updates that record
    instead (:func:`merged_into` tells which happened).
    """
    record = errors.add(**fields, source="user", session_id=session_id)
    return Changed(record, ERRORS_CHANGED)


def merged_into(errors: ErrorMemory, tool: str, symptom: str) -> int | None:
    """The record an add of *tool* and *symptom* would update (None: it would add one)."""
    existing = errors.find(tool, symptom)
    return None if existing is None else existing.id


def edit_record(
    errors: ErrorMemory, record_id: int, fields: dict[str, Any], *, renew: bool = False
) -> Changed[ErrorRecord]:
    """Change a record's fields (and/or keep it for another full period)."""
    record = errors.update(record_id, **fields) if fields else errors.renew(record_id)
    if fields and renew:
        record = errors.renew(record_id)
    return Changed(record, ERRORS_CHANGED)


def purge_expired(errors: ErrorMemory) -> Changed[int]:
    """Delete every expired record now; how many."""
    return Changed(errors.purge_expired(), ERRORS_CHANGED)


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
