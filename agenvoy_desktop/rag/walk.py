"""Finding a collection's files: its roots walked, its patterns applied, odd files named.

Each file gets a collection-relative path, ``<root label>/<path in root>``:
the label is the root's folder name (``notes/ideas/x.md``), made unique
when two roots share a name, so adding a root later does not rename the
files already indexed.  Hidden files and folders are skipped, symlinked
folders are followed once (a link back up the tree is not a loop forever),
and a file over the size limit, a broken link or a folder that will not
open is listed with the reason instead of stopping the walk.  A root that is
missing now (an unplugged disk) is reported, and the caller keeps its
files' index: nothing is deleted because a drive is away.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.globs import PathFilter
from agenvoy_desktop.rag.readers.formats import format_of

MAX_FILE_BYTES = 20 * 1024 * 1024
"""Files larger than this are listed as unreadable, not read (a default; callers may change it)."""

Cancelled = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A file that belongs to the collection, as it was on disk when walked."""

    path: str
    file: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A file (or folder) left out, and why, for the user to see."""

    path: str
    reason: str


@dataclass
class WalkResult:
    files: list[FoundFile] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Collection paths (a root label, or ``label/folder``) that could not be looked at now:
    what the manifest has under them is kept, not deleted."""


def root_labels(roots: tuple[Path, ...]) -> list[str]:
    """One unique label per root: its name, with ``-2``, ``-3``... when names clash."""
    labels: list[str] = []
    for root in roots:
        base = root.name or "root"
        label, n = base, 1
        while label in labels:
            n += 1
            label = f"{base}-{n}"
        labels.append(label)
    return labels


def walk_collection(
    collection: Collection,
    *,
    max_bytes: int = MAX_FILE_BYTES,
    cancelled: Cancelled | None = None,
    skip_dirs: Sequence[Path] = (),
) -> WalkResult:
    """Every file of *collection* (sorted), with the ones left out and the roots now missing.

    *skip_dirs* are never entered: the app's own profile, so a collection of
    a whole home folder does not index the conversation memory (or itself).
    """
    result = WalkResult()
    walker = _Walker(collection.path_filter(), max_bytes, cancelled or (lambda: False), result)
    for folder in skip_dirs:
        with contextlib.suppress(OSError):
            info = folder.stat()
            walker.seen_dirs.add((info.st_dev, info.st_ino))
    for root, label in zip(collection.roots, root_labels(collection.roots), strict=True):
        walker.root(root, label)
    return result


@dataclass
class _Walker:
    filter: PathFilter
    max_bytes: int
    cancelled: Cancelled
    result: WalkResult
    seen_dirs: set[tuple[int, int]] = field(default_factory=set)

    def root(self, root: Path, label: str) -> None:
        try:
            info = root.stat()
        except OSError:
            self.result.kept.append(label)
            self.result.unreadable.append(Unreadable(label, f"not found now: {root}"))
            return
        if stat.S_ISDIR(info.st_mode):
            self.seen_dirs.add((info.st_dev, info.st_ino))
            self.folder(root, label, "")
        else:
            self.file(root, label, info)

    def folder(self, folder: Path, label: str, rel: str) -> None:
        if self.cancelled():
            raise OperationCancelledError("the document scan was cancelled")
        where = f"{label}/{rel}" if rel else label
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            self.result.kept.append(where)
            self.result.unreadable.append(Unreadable(where, f"cannot open folder ({exc.strerror})"))
            return
        for entry in entries:
            if not entry.name.startswith("."):
                self.entry(entry, label, f"{rel}/{entry.name}" if rel else entry.name)

    def entry(self, entry: os.DirEntry[str], label: str, rel: str) -> None:
        try:
            info = entry.stat()  # follows links
        except OSError:
            if format_of(entry.name) is not None and self.filter.wants_file(rel):
                reason = "broken link" if entry.is_symlink() else "cannot be read"
                self.result.unreadable.append(Unreadable(f"{label}/{rel}", reason))
            return
        if stat.S_ISDIR(info.st_mode):
            key = (info.st_dev, info.st_ino)
            if key not in self.seen_dirs and not self.filter.prunes_folder(rel):
                self.seen_dirs.add(key)
                self.folder(Path(entry.path), label, rel)
        elif (
            stat.S_ISREG(info.st_mode)
            and format_of(entry.name) is not None
            and self.filter.wants_file(rel)
        ):
            self.file(Path(entry.path), f"{label}/{rel}", info)

    def file(self, file: Path, path: str, info: os.stat_result) -> None:
        if info.st_size > self.max_bytes:
            reason = f"larger than {_size_text(self.max_bytes)} (the limit)"
            self.result.unreadable.append(Unreadable(path, reason))
            return
        self.result.files.append(FoundFile(path, file, info.st_size, info.st_mtime_ns))


def _size_text(size: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{round(size / scale, 1):g} {unit}"
    return f"{size} bytes"
