"""A session's settings as the settings dialog, the CLI and the Context tab use them.

Reads tell what was wrong with a damaged file (the turn itself just uses the
defaults); a save says what it changed, so the Context tab shows the new
persona at once.  Both run on the storage thread.
"""

from __future__ import annotations

from agenvoy_desktop.core.session_settings import (
    SessionSettings,
    SettingsReading,
    read_settings_file,
    store_session_settings,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations.changes import Changed, MemoryChanges


def settings_changes(session_id: str) -> MemoryChanges:
    """A session's persona or tools switch changed: what its next turn is sent."""
    return MemoryChanges(session_settings=True, session_id=session_id)


def read_session_settings(store: MemoryStore, session_id: str) -> SettingsReading:
    """The session's settings and, if its file was damaged, a sentence saying so."""
    return read_settings_file(store.folder(store.require(session_id)))


def save_session_settings(
    store: MemoryStore, session_id: str, settings: SessionSettings
) -> Changed[SessionSettings]:
    """Store the settings (a blank prompt is the default one); what was stored."""
    stored = store_session_settings(store, session_id, settings)
    return Changed(stored, settings_changes(session_id))
