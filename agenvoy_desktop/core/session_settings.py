"""A session's own settings: its system prompt (persona) and whether it uses tools.

Stored as ``session.json`` in the session folder, written atomically, so a
crash leaves the old settings or the new ones.  The file travels with the
folder: a remove deletes it, a reset (which clears only history and vectors)
keeps it.  No file means the defaults: the app's system prompt, tools on.

Settings shape a conversation but are never worth a crash: a file that
cannot be read or has fields of the wrong type gives the defaults for what
is wrong, a logged warning, and a sentence the window can show.  Keys this
version does not know (written by a newer app) are kept when saving.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.errors import KnownError

log = logging.getLogger(__name__)

SETTINGS_FILE = "session.json"
SETTINGS_VERSION = 1
MAX_PROMPT_CHARS = 16_000
"""A longer persona would crowd the conversation out of a small model's context."""


class SessionSettingsError(KnownError, ValueError):
    """Settings that cannot be saved as given; ``str()`` says what to change."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What one session changes about its turns."""

    system_prompt: str | None = None
    """The session's persona, replacing the app's base prompt (None: the default prompt)."""
    tools: bool = True
    """False: plain chat, with no tools offered and no proactive recall or document passages."""

    @property
    def custom_prompt(self) -> bool:
        return self.system_prompt is not None

    def base_prompt(self, default: str) -> str:
        """The base of the system prompt: the session's own, else *default*."""
        return default if self.system_prompt is None else self.system_prompt

    def to_json(self) -> dict[str, Any]:
        return {"system_prompt": self.system_prompt, "tools": self.tools}


DEFAULT_SETTINGS = SessionSettings()


def checked(settings: SessionSettings) -> SessionSettings:
    """*settings* ready to store: a blank prompt means the default; too long is refused."""
    prompt = settings.system_prompt
    if prompt is not None:
        prompt = prompt.strip() or None
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        raise SessionSettingsError(
            f"the system prompt has {len(prompt):,} characters; "
            f"shorten it to at most {MAX_PROMPT_CHARS:,}"
        )
    return SessionSettings(system_prompt=prompt, tools=bool(settings.tools))


@dataclass(frozen=True, slots=True)
class SettingsReading:
    """The settings of a folder and, when the file was not fully usable, why."""

    settings: SessionSettings
    problem: str = ""
    """One sentence about what was wrong ("" when the file was fine or absent)."""


def read_settings_file(folder: Path) -> SettingsReading:
    """Read ``session.json``; anything wrong gives defaults for that part and a problem."""
    path = folder / SETTINGS_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return SettingsReading(DEFAULT_SETTINGS)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return SettingsReading(DEFAULT_SETTINGS, f"{path.name} cannot be read ({exc})")
    if not isinstance(data, dict):
        return SettingsReading(DEFAULT_SETTINGS, f"{path.name} is not a JSON object")
    return _from_json(data, path.name)


def _from_json(data: dict[str, Any], name: str) -> SettingsReading:
    """Known fields of *data*, each of the wrong type replaced by its default."""
    wrong: list[str] = []
    prompt = data.get("system_prompt")
    if prompt is not None and not isinstance(prompt, str):
        wrong.append("system_prompt")
        prompt = None
    tools = data.get("tools", True)
    if not isinstance(tools, bool):
        wrong.append("tools")
        tools = True
    settings = SessionSettings(system_prompt=(prompt or "").strip() or None, tools=tools)
    problem = f"{name}: {', '.join(wrong)} of the wrong type; defaults used" if wrong else ""
    return SettingsReading(settings, problem)


def load_session_settings(folder: Path) -> SessionSettings:
    """The folder's settings for a turn: never raises; a damaged file is logged."""
    reading = read_settings_file(folder)
    if reading.problem:
        log.warning("session settings in %s: %s", folder, reading.problem)
    return reading.settings


def save_session_settings(folder: Path, settings: SessionSettings) -> SessionSettings:
    """Write *settings* atomically (keys a newer version added are kept); what was stored."""
    settings = checked(settings)
    data = _stored(folder)
    data.update(settings.to_json())
    _write(folder, data)
    return settings


TITLE_KEY = "title"
"""The title the person gave the session, kept beside its settings."""


def keep_title(folder: Path, title: str | None) -> None:
    """Keep a copy of the title the person gave the session (None: drop the copy).

    The archive holds the sessions list's titles; a damaged archive is
    rebuilt from history.json, which has none, so a typed title would be
    lost (``core/recovery.py`` reads this copy back).  Automatic titles are
    not kept here: they are made again from the first message, and a reset
    must leave no copy of the session's words.
    """
    data = _stored(folder)
    if (data.get(TITLE_KEY) or None) == (title or None):
        return
    if title:
        data[TITLE_KEY] = title
    else:
        data.pop(TITLE_KEY, None)
    _write(folder, data)


def kept_title(folder: Path) -> str | None:
    """The copy :func:`keep_title` made, if it is there and is text."""
    title = _stored(folder).get(TITLE_KEY)
    return title.strip() or None if isinstance(title, str) else None


def _stored(folder: Path) -> dict[str, Any]:
    """``session.json`` as stored (any object), or empty when missing or unreadable."""
    try:
        old = json.loads((folder / SETTINGS_FILE).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return dict(old) if isinstance(old, dict) else {}


def _write(folder: Path, data: dict[str, Any]) -> None:
    data["version"] = max(SETTINGS_VERSION, _int(data.get("version")))
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / SETTINGS_FILE, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- a store's sessions (storage thread) ------------------------------------------------
class SessionFolders(Protocol):
    """What these functions need of a ``MemoryStore`` (which imports this module)."""

    def folder(self, session_id: str) -> Path: ...

    def require(self, session_id: str) -> str: ...

    def locked(
        self, session_id: str, operation: str, *, wait_s: float | None = None
    ) -> AbstractContextManager[None]: ...


def session_settings(store: SessionFolders, session_id: str) -> SessionSettings:
    """The settings a turn of *session_id* uses (defaults for a session without a folder)."""
    return load_session_settings(store.folder(session_id))


def store_session_settings(
    store: SessionFolders, session_id: str, settings: SessionSettings
) -> SessionSettings:
    """Save a session's settings under its lock; raises for an unknown session."""
    with store.locked(session_id, "session settings"):
        folder = store.folder(store.require(session_id))
        return save_session_settings(folder, settings)
