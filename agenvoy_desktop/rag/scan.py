"""What a re-index has to do: compare the files on disk with the last index's manifest.

The manifest remembers each indexed file's size, mtime and SHA-256.  A file
whose size and mtime are unchanged is not opened at all; one whose mtime
moved but whose content hashes the same (a ``touch``, a copy, a checkout) is
only *touched*: its manifest entry is refreshed and nothing is re-read.
Hashing streams the file in blocks and checks ``cancelled()`` between them,
so a scan of a large collection stops promptly when the user asks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.walk import (
    MAX_FILE_BYTES,
    Cancelled,
    FoundFile,
    Unreadable,
    walk_collection,
)

HASH_BLOCK = 1024 * 1024
Progress = Callable[[int, int], None]
"""``progress(done, total)``, in files."""

__all__ = [
    "MAX_FILE_BYTES",
    "FileEntry",
    "FileState",
    "Manifest",
    "ScanPlan",
    "Unreadable",
    "file_sha256",
    "scan_collection",
]


@dataclass(frozen=True, slots=True)
class FileState:
    """What the index knows of a file: enough to tell whether it changed."""

    size: int
    mtime_ns: int
    sha256: str


@dataclass
class Manifest:
    """Collection path → state of every file in the index (persisted by the indexer)."""

    files: dict[str, FileState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file found by the scan: where it is, its state now, and its state in the manifest."""

    path: str
    file: Path
    state: FileState
    previous: FileState | None = None


@dataclass
class ScanPlan:
    """The scan's verdict, file by file.

    ``unchanged`` includes ``touched`` (same content, new mtime: only the
    manifest changes).  ``deleted`` are manifest paths gone from disk;
    files under a root or folder that could not be looked at (``kept``) and
    files unreadable now are not among them.
    """

    new: list[FileEntry] = field(default_factory=list)
    changed: list[FileEntry] = field(default_factory=list)
    unchanged: list[FileEntry] = field(default_factory=list)
    touched: list[FileEntry] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def to_index(self) -> list[FileEntry]:
        """The files whose chunks must be (re)built."""
        return [*self.new, *self.changed]

    def manifest_after(self, before: Manifest) -> Manifest:
        """The manifest once every file of :attr:`to_index` is indexed and the deleted removed."""
        files = dict(before.files)
        for path in self.deleted:
            files.pop(path, None)
        for entry in (*self.new, *self.changed, *self.touched):
            files[entry.path] = entry.state
        return Manifest(files)


def file_sha256(file: Path, cancelled: Cancelled | None = None) -> str:
    """The file's SHA-256, read in blocks; raises ``OperationCancelledError`` when asked."""
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        while block := handle.read(HASH_BLOCK):
            if cancelled is not None and cancelled():
                raise OperationCancelledError("the document scan was cancelled")
            digest.update(block)
    return digest.hexdigest()


def scan_collection(
    collection: Collection,
    manifest: Manifest,
    *,
    max_bytes: int = MAX_FILE_BYTES,
    verify: bool = False,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
    skip_dirs: Sequence[Path] = (),
) -> ScanPlan:
    """Compare *collection* on disk with *manifest*; ``verify`` hashes even unchanged-looking files.

    Raises ``OperationCancelledError`` (nothing half-done: a plan is all or
    nothing) when ``cancelled()`` becomes true.  *skip_dirs*: see
    :func:`~agenvoy_desktop.rag.walk.walk_collection`.
    """
    walked = walk_collection(
        collection, max_bytes=max_bytes, cancelled=cancelled, skip_dirs=skip_dirs
    )
    plan = ScanPlan(unreadable=walked.unreadable, kept=walked.kept)
    total = len(walked.files)
    seen: set[str] = set()
    for done, found in enumerate(walked.files, 1):
        if cancelled is not None and cancelled():
            raise OperationCancelledError("the document scan was cancelled")
        if _classify(plan, found, manifest.files.get(found.path), verify, cancelled):
            seen.add(found.path)
        if progress is not None:
            progress(done, total)
    skipped = {u.path for u in plan.unreadable}
    plan.deleted = sorted(
        path
        for path in manifest.files
        if path not in seen and path not in skipped and not _under_any(path, plan.kept)
    )
    return plan


def _classify(
    plan: ScanPlan,
    found: FoundFile,
    previous: FileState | None,
    verify: bool,
    cancelled: Cancelled | None,
) -> bool:
    """File *found* into the plan; ``False`` if it vanished meanwhile."""
    same_stat = (
        previous is not None and previous.size == found.size and previous.mtime_ns == found.mtime_ns
    )
    if same_stat and not verify and previous is not None:
        plan.unchanged.append(FileEntry(found.path, found.file, previous, previous))
        return True
    try:
        digest = file_sha256(found.file, cancelled)
    except FileNotFoundError:
        return False
    except OSError as exc:
        plan.unreadable.append(Unreadable(found.path, exc.strerror or type(exc).__name__))
        return True
    entry = FileEntry(
        found.path, found.file, FileState(found.size, found.mtime_ns, digest), previous
    )
    if previous is None:
        plan.new.append(entry)
    elif previous.sha256 != digest:
        plan.changed.append(entry)
    else:
        plan.unchanged.append(entry)
        if not same_stat:
            plan.touched.append(entry)
    return True


def _under_any(path: str, prefixes: list[str]) -> bool:
    return any(path == p or path.startswith(f"{p}/") for p in prefixes)
