"""Between a stored row and an :class:`ErrorRecord`: reading, writing, merging drafts.

Pure functions over :mod:`core.error_types` values; the SQL that runs them
lives in :mod:`.writes` and :mod:`.store`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agenvoy_desktop.core.error_types import (
    ERROR_TYPE_PREFIX,
    ErrorRecord,
    RecordDraft,
    draft_record,
    merge_keywords,
    symptom_key,
    with_type_keyword,
)
from agenvoy_desktop.core.retrieval.fts_text import index_text


def record_from_row(row: Sequence[Any], vector_tag: str | None) -> ErrorRecord:
    """A record from a row of ``schema.RECORD_COLUMNS``; *vector_tag* is the current model's."""
    return ErrorRecord(
        id=row[0],
        tool=row[1],
        keywords=tuple(json.loads(row[2])),
        error_type=row[3],
        symptom=row[4],
        cause=row[5],
        action=row[6],
        outcome=row[7],
        created_ns=row[8],
        updated_ns=row[9],
        expires_ns=row[10],
        hits=row[11],
        last_hit_ns=row[12],
        source=row[13],
        session_id=row[14],
        has_vector=row[15] is not None and row[15] == vector_tag,
    )


def record_values(draft: RecordDraft, now: int, expires_ns: int) -> dict[str, Any]:
    """The ``errors`` columns a write of *draft* sets (``created_ns`` only on insert)."""
    keywords = with_type_keyword(draft.keywords, draft.error_type)
    return {
        "tool": draft.tool,
        "symptom": draft.symptom,
        "symptom_key": symptom_key(draft.symptom),
        "cause": draft.cause,
        "action": draft.action,
        "outcome": draft.outcome,
        "error_type": draft.error_type,
        "keywords": json.dumps(list(keywords), ensure_ascii=False),
        "source": draft.source,
        "session_id": draft.session_id,
        "updated_ns": now,
        "expires_ns": expires_ns,
    }


def fts_body(tool: str, symptom: str, cause: str, action: str, keywords: Sequence[str]) -> str:
    """What full text indexes: the texts, and keywords with the class as plain words
    (``error_type:`` itself would make "error" match every record)."""
    words = [k.removeprefix(ERROR_TYPE_PREFIX).replace("_", " ") for k in keywords]
    return index_text("\n".join((tool, symptom, cause, action, " ".join(words))))


def merged_draft(old: ErrorRecord, new: RecordDraft, *, type_given: bool) -> RecordDraft:
    """What a duplicate add leaves: *old* updated by *new*.

    Keywords are merged, a non-empty cause or action replaces the old one
    (an empty one keeps it), the outcome is overwritten; the symptom's
    wording, where and by whom it was first learned stay.  The class stays
    unless the caller gave one (*type_given*).
    """
    return replace(
        new,
        symptom=old.symptom,
        cause=new.cause or old.cause,
        action=new.action or old.action,
        error_type=new.error_type if type_given else old.error_type,
        keywords=merge_keywords(old.keywords, new.keywords),
        source=old.source,
        session_id=old.session_id or new.session_id,
    )


def edited_draft(
    old: ErrorRecord,
    *,
    tool: str | None,
    symptom: str | None,
    cause: str | None,
    action: str | None,
    outcome: str | None,
    keywords: Sequence[str] | None,
    error_type: str | None,
) -> RecordDraft:
    """*old* with the given fields changed (None = keep), validated.

    A new symptom is re-classified unless ``error_type`` is given.
    Raises ErrorRecordInvalid (naming the field) on bad input.
    """
    if error_type is None and symptom is not None:
        etype = None
    else:
        etype = error_type if error_type is not None else old.error_type
    return draft_record(
        tool=old.tool if tool is None else tool,
        symptom=old.symptom if symptom is None else symptom,
        cause=old.cause if cause is None else cause,
        action=old.action if action is None else action,
        outcome=old.outcome if outcome is None else outcome,
        keywords=old.keywords if keywords is None else keywords,
        error_type=etype,
        source=old.source,
        session_id=old.session_id,
    )


def texts_of(record: ErrorRecord | RecordDraft) -> tuple[str, str, str]:
    """The texts vectors are made of: a change to any of them needs new vectors."""
    return (record.symptom, record.cause, record.action)
