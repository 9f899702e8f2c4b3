"""Include/exclude patterns, matched against paths relative to a collection root.

``fnmatch`` lets ``*`` cross folder separators and has no ``**``, so the
patterns are compiled here: ``*`` and ``?`` stay inside one path segment,
``**`` spans any number of folders (``**/x`` also matches a top-level
``x``), and a pattern without a ``/`` matches the file name at any depth
(``*.md``), as in ``.gitignore``.  Patterns are checked when a collection is
made: one that names a parent folder (``..``) or an absolute path could only
be a mistake or an attempt to read outside the collection, and is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from agenvoy_desktop.rag.errors import InvalidGlobError

MAX_PATTERN_CHARS = 500


def normalize_pattern(pattern: str) -> str:
    """*pattern* with ``/`` separators, or :class:`InvalidGlobError` if it is unsafe."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise InvalidGlobError("empty file pattern: give a pattern such as *.md or notes/**")
    if len(pattern) > MAX_PATTERN_CHARS or "\x00" in pattern:
        raise InvalidGlobError(f"file pattern too long or malformed: {pattern[:40]!r}")
    norm = pattern.strip().replace("\\", "/")
    if norm.startswith("/") or re.match(r"[A-Za-z]:", norm) or norm.startswith("~"):
        raise InvalidGlobError(
            f"file pattern {pattern!r} is absolute:"
            " patterns are relative to the collection's folders"
        )
    segments = norm.rstrip("/").split("/")
    if any(seg in ("..", ".") for seg in segments):
        raise InvalidGlobError(
            f"file pattern {pattern!r} names '.' or '..': patterns stay inside the collection"
        )
    if "" in segments:
        raise InvalidGlobError(f"file pattern {pattern!r} has an empty folder name ('//')")
    return norm.rstrip("/")


def _segment_regex(segment: str) -> str:
    """One path segment's pattern as a regex that never crosses a ``/``."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append(f"[{'^' if negate else ''}{re.escape(body).replace(chr(92) + '-', '-')}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The regex for one normalised pattern, matched against a whole relative path."""
    norm = normalize_pattern(pattern)
    if "/" not in norm:
        norm = f"**/{norm}"
    parts: list[str] = []
    segments = norm.split("/")
    for index, seg in enumerate(segments):
        last = index == len(segments) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment_regex(seg) + ("" if last else "/"))
    return re.compile("".join(parts))


@dataclass(frozen=True)
class PathFilter:
    """A collection's include/exclude decision for paths relative to one root."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @cached_property
    def _include(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compile_pattern(p) for p in self.include)

    @cached_property
    def _exclude(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compile_pattern(p) for p in self.exclude)

    def wants_file(self, rel: str) -> bool:
        """Whether the file at *rel* (``a/b.md``) belongs to the collection."""
        if any(rx.fullmatch(rel) for rx in self._exclude):
            return False
        return not self._include or any(rx.fullmatch(rel) for rx in self._include)

    def prunes_folder(self, rel: str) -> bool:
        """Whether the folder *rel* is excluded as a whole (``node_modules``, ``build/**``)."""
        return any(rx.fullmatch(rel) or rx.fullmatch(f"{rel}/") for rx in self._exclude)


def check_patterns(patterns: Sequence[str]) -> tuple[str, ...]:
    """The normalised, de-duplicated *patterns*; raises on the first unsafe one."""
    out: list[str] = []
    for pattern in patterns:
        norm = normalize_pattern(pattern)
        compile_pattern(norm)
        if norm not in out:
            out.append(norm)
    return tuple(out)
