"""Chat histories other apps keep on this computer, found without touching them.

Looks where LM Studio keeps its conversations and Jan its threads (Linux,
macOS and Windows folders), and at the top level of the Downloads folder for
ChatGPT and Claude data exports (a .zip holding ``conversations.json``).
Read-only and bounded: folders are listed to a small depth, a zip's table of
contents is read (never a member); nothing is opened for writing, copied or
moved.  What is found is only offered: importing it is the user's choice,
through the same preview as any other import.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agenvoy_desktop.core.import_formats import jan, lm_studio
from agenvoy_desktop.core.import_formats.bounded import ZipTree, is_zip
from agenvoy_desktop.core.import_formats.model import Limits
from agenvoy_desktop.core.importers import ImportFormatError

log = logging.getLogger(__name__)

MAX_DEPTH = 3
MAX_ENTRIES = 20_000
MAX_ZIPS = 200
"""Zip files in Downloads whose table of contents is read, newest first."""


@dataclass(frozen=True, slots=True)
class FoundHistory:
    """A place holding chat history: hand ``path`` to the import (it reads the whole)."""

    app: str
    path: Path
    conversations: int
    """Conversations counted by their files (an export's are counted when it is read)."""
    modified_ns: int


def find_histories(
    home: Path | None = None, env: Mapping[str, str] | None = None
) -> list[FoundHistory]:
    """Every chat history in the usual places, newest first (missing folders are skipped)."""
    home = Path.home() if home is None else home
    env = os.environ if env is None else env
    found: list[FoundHistory] = []
    for app, folder, pattern in _folders(home, env):
        count, newest = _count(folder, pattern)
        if count:
            found.append(FoundHistory(app, folder, count, newest))
    found += _exports(home / "Downloads")
    found.sort(key=lambda f: f.modified_ns, reverse=True)
    return found


def _folders(home: Path, env: Mapping[str, str]) -> list[tuple[str, Path, str]]:
    """(app, folder to import, file name that marks one conversation)."""
    support = home / "Library" / "Application Support"
    local = home / ".local" / "share"
    jan_roots = [home / "jan", local / "Jan" / "data", support / "Jan" / "data"]
    if roaming := env.get("APPDATA", "").strip():
        jan_roots.append(Path(roaming) / "Jan" / "data")
    lms = [home / ".lmstudio" / "conversations", home / ".cache" / "lm-studio" / "conversations"]
    return [
        *((jan.APP, root, "messages.jsonl") for root in jan_roots),
        *((lm_studio.APP, folder, lm_studio.SUFFIX) for folder in lms),
    ]


def _count(folder: Path, pattern: str) -> tuple[int, int]:
    """(files named like *pattern* under *folder*, the newest one's mtime in ns)."""
    count, newest = 0, 0
    for path in _walk(folder):
        if path.name == pattern or (pattern.startswith(".") and path.name.endswith(pattern)):
            count += 1
            try:
                newest = max(newest, path.stat().st_mtime_ns)
            except OSError:
                continue
    return count, newest


def _walk(root: Path) -> Iterator[Path]:
    """Files under *root*, depth and count bounded, symlinks not followed."""
    if not root.is_dir():
        return
    seen = 0
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                return
            if entry.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
                stack.append((Path(entry.path), depth + 1))
            elif entry.is_file(follow_symlinks=False):
                yield Path(entry.path)


def _exports(downloads: Path) -> list[FoundHistory]:
    """ChatGPT and Claude data exports among the newest zips in *downloads*."""
    try:
        zips = [p for p in downloads.iterdir() if p.suffix.lower() == ".zip" and p.is_file()]
    except OSError:
        return []
    zips.sort(key=_mtime, reverse=True)
    found = []
    for path in zips[:MAX_ZIPS]:
        app = _export_app(path)
        if app is not None:
            found.append(FoundHistory(app, path, 0, _mtime(path)))
    return found


def _export_app(path: Path) -> str | None:
    """ "chatgpt" or "claude" when the zip holds their ``conversations.json``, else None.

    ChatGPT's export carries ``chat.html`` beside it, Claude's ``users.json``.
    """
    try:
        if not is_zip(path):
            return None
        tree = ZipTree(path, Limits())
    except (ImportFormatError, OSError):
        return None
    try:
        names = {PurePosixPath(n).name for n in tree.names()}
    finally:
        tree.close()
    if "conversations.json" not in names:
        return None
    if "chat.html" in names:
        return "chatgpt"
    return "claude" if "users.json" in names else "chatgpt"


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
