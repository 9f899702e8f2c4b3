"""A session's summary as the Summary tab shows it, and the edits a person makes to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import save_user_edit
from agenvoy_desktop.core.summary import (
    SUMMARY_FILE,
    KeyDecision,
    PassRecord,
    Summary,
    SummaryFileError,
    SummaryMeta,
    load_meta,
    load_summary,
    read_records,
)
from agenvoy_desktop.core.timeutil import Clock
from agenvoy_desktop.operations.changes import Changed, summary_changes

HISTORY_ROWS = 200
"""Pass records read with a snapshot (newest first)."""


@dataclass(frozen=True, slots=True)
class SummarySnapshot:
    """Everything the tab shows for one session, read in one storage call."""

    session_id: str
    summary: Summary | None = None
    meta: SummaryMeta | None = None
    records: list[PassRecord] = field(default_factory=list)
    raw: str = ""
    problems: list[str] = field(default_factory=list)
    pending: int | None = None


def read_snapshot(
    store: MemoryStore, session_id: str, pending: Callable[[str], int] | None = None
) -> SummarySnapshot:
    """Read summary, meta, pass history and raw file; file problems become sentences."""
    folder = store.folder(store.require(session_id))
    problems: list[str] = []
    summary: Summary | None = None
    meta: SummaryMeta | None = None
    try:
        summary = load_summary(folder)
    except SummaryFileError as exc:
        problems.append(str(exc))
    try:
        meta = load_meta(folder)
    except SummaryFileError as exc:
        problems.append(str(exc))
    try:
        raw = (folder / SUMMARY_FILE).read_text("utf-8")
    except FileNotFoundError:
        raw = ""
    except (OSError, UnicodeDecodeError) as exc:
        raw = ""
        problems.append(f"{folder / SUMMARY_FILE}: cannot read ({exc})")
    waiting = None
    if pending is not None:
        try:
            waiting = pending(session_id)
        except (OSError, SummaryFileError, ValueError) as exc:
            problems.append(f"pending messages unknown: {exc}")
    return SummarySnapshot(
        session_id, summary, meta, read_records(folder, HISTORY_ROWS), raw, problems, waiting
    )


def with_decision(summary: Summary, index: int, text: str) -> Summary:
    """*summary* with decision *index* reworded (its date and source message kept).

    The words are now the user's, so the decision is binding on their
    authority even if it had no source message.
    """
    items = list(summary.key_decisions)
    items[index] = replace(items[index], decision=text.strip(), by_user=True)
    return replace(summary, key_decisions=tuple(items))


def without_decision(summary: Summary, index: int) -> Summary:
    items = list(summary.key_decisions)
    del items[index]
    return replace(summary, key_decisions=tuple(items))


def plus_decision(summary: Summary, text: str, today: date | None = None) -> Summary:
    when = (today or date.today()).isoformat()
    added = KeyDecision(text.strip(), when, by_user=True)
    return replace(summary, key_decisions=(*summary.key_decisions, added))


def save_edit(
    store: MemoryStore, session_id: str, summary: Summary, clock: Clock
) -> Changed[PassRecord]:
    """Save the person's edit of the summary (validated; recorded like a pass)."""
    return Changed(save_user_edit(store, session_id, summary, clock), summary_changes(session_id))
