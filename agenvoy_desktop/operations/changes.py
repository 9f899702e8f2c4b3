"""What an operation changed in memory, so each view can decide what to reload.

A write in :mod:`agenvoy_desktop.operations` returns a :class:`MemoryChanges`
(or a :class:`Changed` value that carries one).  The window broadcasts it to
every panel; a panel reloads only when a part it shows changed, in the
session it shows.  No panel has to know which other panels exist, and a new
write cannot forget to refresh one (the pattern of Anki's ``OpChanges``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

Part = Literal[
    "sessions",
    "messages",
    "summary",
    "vectors",
    "errors",
    "timeline",
    "models",
    "documents",
    "session_settings",
]


@dataclass(frozen=True, slots=True)
class MemoryChanges:
    """Which parts of memory an operation changed.

    ``session_id`` names the one session the change is confined to; None
    means any session may have changed (a start-up repair, a model switch)
    or the part is not per session (the sessions list, error memory, models).
    """

    sessions: bool = False
    """The sessions list: a session appeared, went away, was renamed or grew."""
    messages: bool = False
    summary: bool = False
    vectors: bool = False
    errors: bool = False
    """The cross-session error memory."""
    timeline: bool = False
    models: bool = False
    """Which models are in use, or their settings."""
    documents: bool = False
    """The document collections: added, removed, re-indexed, switched on or off."""
    session_settings: bool = False
    """A session's own settings: its system prompt, tools on or off."""
    session_id: str | None = None

    def __or__(self, other: MemoryChanges) -> MemoryChanges:
        """Both changes; the session stays named only when both name the same one."""
        merged = {f.name: getattr(self, f.name) or getattr(other, f.name) for f in _PARTS}
        same = self.session_id if self.session_id == other.session_id else None
        return MemoryChanges(**merged, session_id=same)

    def touches(self, session_id: str | None) -> bool:
        """Whether the change may concern *session_id* (always, when it names none)."""
        return self.session_id is None or self.session_id == session_id

    def any_of(self, *parts: Part) -> bool:
        """Whether any of *parts* changed."""
        return any(getattr(self, part) for part in parts)

    def affects(self, session_id: str | None, *parts: Part) -> bool:
        """Whether a view of *session_id* showing *parts* should reload."""
        return self.any_of(*parts) and self.touches(session_id)

    @property
    def empty(self) -> bool:
        return not any(getattr(self, f.name) for f in _PARTS)


_PARTS = tuple(f for f in fields(MemoryChanges) if f.name != "session_id")

NO_CHANGES = MemoryChanges()


@dataclass(frozen=True, slots=True)
class Changed(Generic[T]):
    """An operation's result together with what it changed."""

    value: T
    changes: MemoryChanges


def turn_changes(session_id: str) -> MemoryChanges:
    """A finished turn: new messages and their vectors, events, maybe a lesson learned."""
    return MemoryChanges(
        sessions=True,
        messages=True,
        vectors=True,
        timeline=True,
        errors=True,
        session_id=session_id,
    )


def summary_changes(session_id: str) -> MemoryChanges:
    """A summary pass or edit: the summary and its timeline entry."""
    return MemoryChanges(summary=True, timeline=True, session_id=session_id)


def session_changes(session_id: str | None = None) -> MemoryChanges:
    """A session's contents as a whole: added, reset, removed, imported or repaired."""
    return MemoryChanges(
        sessions=True,
        messages=True,
        summary=True,
        vectors=True,
        timeline=True,
        session_id=session_id,
    )


ERRORS_CHANGED = MemoryChanges(errors=True)
DOCUMENTS_CHANGED = MemoryChanges(documents=True)
MODELS_CHANGED = MemoryChanges(models=True)
VECTORS_CHANGED = MemoryChanges(vectors=True)
