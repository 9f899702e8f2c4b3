"""A small registry file: JSON with a format version, kept safe from damage and from newer apps.

The model catalogue and the chat endpoints each keep the user's decisions in
one such file (``{"version": N, "entries": [...]}``) and follow the same three
rules, which live here so they cannot drift apart:

- A file written by a newer app version is never read nor rewritten: an older
  app that saved it again would drop what it does not understand.
- A damaged file (not UTF-8, not JSON, or a shape the registry's parser
  refuses) is moved aside as ``<name>.corrupt-<ns>``, never deleted, so what
  the user had can still be recovered by hand.
- Writes replace the file atomically and owner-only
  (:func:`~agenvoy_desktop.core.atomic.atomic_write_text`).

What a registry does after a file was moved aside (start empty, rebuild from
the folder) and the words it shows the user stay with the registry: they are
passed in, so each one's messages read exactly as they did.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.timeutil import now_ns

T = TypeVar("T")

DAMAGE_ERRORS: tuple[type[Exception], ...] = (TypeError, ValueError, KeyError)
"""What a parser raises for content of the wrong shape (counted as damage, not as a bug)."""


@dataclass(frozen=True)
class VersionedJsonFile:
    """One versioned JSON file and the registry-specific words for its problems."""

    path: Path
    version: int
    """The format this app writes; a file with a higher one is left alone."""
    error: Callable[[str], Exception]
    """Builds the registry's own error from a one-line message, so ``except`` clauses that
    name that error keep catching a newer or unreadable file."""
    newer_outcome: str
    """What the app does instead of reading a newer file; ends the one-line message."""

    def load(self, parse: Callable[[Any], T], recover: Callable[[str, Path], T]) -> T | None:
        """The file's content as *parse* makes it; None when there is no file yet.

        A damaged file is moved aside, then ``recover(why, aside)`` gives the
        result in its place.  Raises :attr:`error` when the file cannot be read,
        was written by a newer version, or is damaged and cannot be moved.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            return recover(*self._move_aside(f"not UTF-8 text ({exc.reason})"))
        except OSError as exc:
            raise self.error(f"{self.path}: cannot read ({exc.strerror or exc})") from exc
        try:
            data = json.loads(text)
        except ValueError as exc:
            return recover(*self._move_aside(f"not valid JSON ({exc})"))
        self._refuse_newer(data)
        try:
            return parse(data)
        except DAMAGE_ERRORS as exc:
            return recover(*self._move_aside(str(exc)))

    def save(self, entries: list[dict[str, Any]]) -> None:
        """Replace the file with *entries* under this app's version (atomic, owner-only)."""
        data = {"version": self.version, "entries": entries}
        atomic_write_text(self.path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")

    def damage_note(self, why: str, aside: Path, outcome: str) -> str:
        """The one line that tells the user a damaged file was moved aside and what followed."""
        return f"{self.path} was damaged ({why}); it was moved to {aside.name} and {outcome}"

    def _refuse_newer(self, data: object) -> None:
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, int) and version > self.version:
            raise self.error(
                f"{self.path} was written by a newer version of the app (format {version}); "
                f"it is left as it is and {self.newer_outcome}"
            )

    def _move_aside(self, why: str) -> tuple[str, Path]:
        """Rename the damaged file out of the way; returns (why, where it went)."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{now_ns()}")
        try:
            os.replace(self.path, aside)
        except OSError as exc:
            raise self.error(
                f"{self.path} is damaged ({why}) and cannot be moved aside ({exc})"
            ) from exc
        return why, aside
