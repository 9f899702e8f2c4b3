"""A session's summary as the Summary tab shows it, and the edits a person makes to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TypeVar

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import save_user_edit
from agenvoy_desktop.core.summary import (
    SUMMARY_FILE,
    KeyDecision,
    PassRecord,
    PastDiscussion,
    Summary,
    SummaryFileError,
    SummaryMeta,
    load_meta,
    load_previous_summary,
    load_summary,
    read_records,
    terms,
    topic_key,
)
from agenvoy_desktop.core.summary_facts import Fact
from agenvoy_desktop.core.timeutil import Clock
from agenvoy_desktop.operations.changes import Changed, summary_changes

HISTORY_ROWS = 200
"""Pass records read with a snapshot (newest first)."""
T = TypeVar("T")
RENAMED_TOPIC_SHARE = 0.5
"""Share of content terms (title and gist together) a removed and an added topic must have in
common to count as one topic renamed or rewritten rather than one gone and another new."""


@dataclass(frozen=True, slots=True)
class TopicChange:
    """One past discussion before and after a pass: its title, its gist, or both changed."""

    before: PastDiscussion
    after: PastDiscussion

    @property
    def renamed(self) -> bool:
        return self.before.topic != self.after.topic

    @property
    def rewritten(self) -> bool:
        return _same_text(self.before.description) != _same_text(self.after.description)


@dataclass(frozen=True, slots=True)
class FactChange:
    """A fact a newer one replaced ("moving to Oak Lane" after "to Rose Street")."""

    before: str
    after: Fact


@dataclass(frozen=True, slots=True)
class SummaryDiff:
    """What one pass (or edit) changed in the summary, as a person would list it.

    Decisions and facts are compared by their words (case and spacing
    aside); topics by title, and a topic whose title changed but whose
    words mostly stayed is one topic renamed, not one gone and one new.
    """

    topics_added: tuple[PastDiscussion, ...] = ()
    topics_removed: tuple[PastDiscussion, ...] = ()
    topics_changed: tuple[TopicChange, ...] = ()
    decisions_added: tuple[KeyDecision, ...] = ()
    decisions_removed: tuple[KeyDecision, ...] = ()
    facts_added: tuple[Fact, ...] = ()
    facts_removed: tuple[Fact, ...] = ()
    facts_changed: tuple[FactChange, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not any(
            (
                self.topics_added,
                self.topics_removed,
                self.topics_changed,
                self.decisions_added,
                self.decisions_removed,
                self.facts_added,
                self.facts_removed,
                self.facts_changed,
            )
        )


def _same_text(text: str) -> str:
    """Text as compared: case and runs of spaces do not count as a change."""
    return " ".join(text.casefold().split())


def summary_diff(before: Summary, after: Summary) -> SummaryDiff:
    """What changed from *before* to *after* (pure: the Summary tab's "Changed" section)."""
    added, removed, changed = _topic_diff(before.past_discussions, after.past_discussions)
    decisions_added, decisions_removed = _by_text(
        before.key_decisions, after.key_decisions, lambda d: d.decision
    )
    facts_added, facts_removed, facts_changed = _fact_diff(before.facts, after.facts)
    return SummaryDiff(
        topics_added=added,
        topics_removed=removed,
        topics_changed=changed,
        decisions_added=decisions_added,
        decisions_removed=decisions_removed,
        facts_added=facts_added,
        facts_removed=facts_removed,
        facts_changed=facts_changed,
    )


def _by_text(
    before: tuple[T, ...], after: tuple[T, ...], text: Callable[[T], str]
) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """(added, removed) of two lists compared by their text, each in its list's order."""
    old = {_same_text(text(item)) for item in before}
    new = {_same_text(text(item)) for item in after}
    return (
        tuple(item for item in after if _same_text(text(item)) not in old),
        tuple(item for item in before if _same_text(text(item)) not in new),
    )


def _fact_diff(
    before: tuple[Fact, ...], after: tuple[Fact, ...]
) -> tuple[tuple[Fact, ...], tuple[Fact, ...], tuple[FactChange, ...]]:
    """(added, removed, replaced): a new fact that names the old one it replaced is a change."""
    added, removed = _by_text(before, after, lambda f: f.text)
    gone = {_same_text(f.text): f for f in removed}
    changes: list[FactChange] = []
    new: list[Fact] = []
    for fact in added:
        old = gone.pop(_same_text(fact.replaced), None) if fact.replaced else None
        if old is None:
            new.append(fact)
        else:
            changes.append(FactChange(old.text, fact))
    still_gone = {id(f) for f in gone.values()}
    return tuple(new), tuple(f for f in removed if id(f) in still_gone), tuple(changes)


def _topic_diff(
    before: tuple[PastDiscussion, ...], after: tuple[PastDiscussion, ...]
) -> tuple[tuple[PastDiscussion, ...], tuple[PastDiscussion, ...], tuple[TopicChange, ...]]:
    """(added, removed, changed) topics: same title first, then renamed ones by shared words."""
    old: dict[str, PastDiscussion] = {}
    twins: list[PastDiscussion] = []  # a second topic of the same title (a user's edit)
    for item in before:
        if topic_key(item.topic) in old:
            twins.append(item)
        else:
            old[topic_key(item.topic)] = item
    changed: list[TopicChange] = []
    unmatched: list[PastDiscussion] = []
    for item in after:
        was = old.pop(topic_key(item.topic), None)
        if was is None:
            unmatched.append(item)
        elif was.topic != item.topic or _same_text(was.description) != _same_text(item.description):
            changed.append(TopicChange(was, item))
    added: list[PastDiscussion] = []
    for item in unmatched:
        was = _renamed_from(item, list(old.values()))
        if was is None:
            added.append(item)
        else:
            del old[topic_key(was.topic)]
            changed.append(TopicChange(was, item))
    order = {id(p): i for i, p in enumerate(after)}
    changed.sort(key=lambda c: order[id(c.after)])
    return tuple(added), (*old.values(), *twins), tuple(changed)


def _renamed_from(item: PastDiscussion, candidates: list[PastDiscussion]) -> PastDiscussion | None:
    """The removed topic *item* most likely renames, if they share enough of their words."""
    words = terms(f"{item.topic} {item.description}")
    best: PastDiscussion | None = None
    best_share = RENAMED_TOPIC_SHARE
    for was in candidates:
        other = terms(f"{was.topic} {was.description}")
        share = len(words & other) / max(len(words | other), 1)
        if share >= best_share:
            best, best_share = was, share
    return best


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
    diff: SummaryDiff | None = None
    """What the last pass or edit changed; None without a previous summary to compare with."""


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
        session_id,
        summary,
        meta,
        read_records(folder, HISTORY_ROWS),
        raw,
        problems,
        waiting,
        _last_change(folder, summary),
    )


def _last_change(folder: Path, summary: Summary | None) -> SummaryDiff | None:
    previous = load_previous_summary(folder) if summary is not None else None
    if summary is None or previous is None:
        return None
    return summary_diff(previous, summary)


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
