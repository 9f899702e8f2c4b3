"""Document collections as the Documents tab shows them, and the changes a person makes.

Reads open a collection's index briefly and close it again (the indexer
child may be writing it meanwhile: SQLite keeps both consistent); a
collection never indexed has no index folder, and a read never creates
one.  Writes return :data:`DOCUMENTS_CHANGED`, so every view of the
collections reloads.  :func:`run_index_job` drives the indexer child
process (:class:`~agenvoy_desktop.rag.worker.IndexJob`) from a worker
thread: progress, cancel, and a crash that costs only the run, never the
app.  :func:`resolve_citation` is the one gate between a citation in an
answer and a file on disk: only files inside a collection's roots pass.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.locks import FileLock, program_name
from agenvoy_desktop.operations.changes import DOCUMENTS_CHANGED, Changed
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.errors import InvalidRootError
from agenvoy_desktop.rag.index import DocumentIndex, index_folder, open_document_index
from agenvoy_desktop.rag.index_schema import INDEX_FILE
from agenvoy_desktop.rag.indexer import RUNNING_MARK
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir
from agenvoy_desktop.rag.search import DocumentHit, search_documents
from agenvoy_desktop.rag.walk import root_labels, walk_collection
from agenvoy_desktop.rag.worker import CRASHED, IndexJob, JobOutcome

FileStatus = Literal["indexed", "failed", "changed", "new", "deleted"]
Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: the indexer's ``scan`` and ``index`` stages."""
POLL_S = 0.1
"""How long one wait for the indexer's messages lasts (a cancel is seen this fast)."""
CANCEL_GRACE_S = 15.0
"""How long a cancelled indexer may take to stop by itself before it is killed."""
MAX_VIEW_CHARS = 2_000_000
"""A file larger than this is shown cut (the viewer is for reading a cited place)."""


class IndexerCrashedError(KnownError, RuntimeError):
    """The indexer child died (crash, kill, out of memory); what it finished is kept."""


class IndexFailedError(KnownError, RuntimeError):
    """The indexer could not do its work (no embedding model, the index busy)."""


class CollectionBusyError(KnownError, RuntimeError):
    """The collection is being indexed: it cannot be removed now."""


@dataclass(frozen=True, slots=True)
class CollectionView:
    """One collection with what its index holds (``problem``: why the index is unreadable)."""

    name: str
    roots: tuple[str, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    files: int = 0
    chunks: int = 0
    vectors: int = 0
    failed: int = 0
    last_indexed_ns: int | None = None
    problem: str | None = None
    watch: bool = False
    """Whether the window follows its folders' changes (Settings must have documents on)."""

    @property
    def indexed(self) -> bool:
        return self.last_indexed_ns is not None


@dataclass(frozen=True, slots=True)
class FileView:
    """One file of a collection: its state in the index and on disk, and why it failed."""

    path: str
    status: FileStatus
    reason: str = ""
    chunks: int = 0
    indexed_ns: int | None = None


@dataclass(frozen=True, slots=True)
class ChunkView:
    """One stored chunk of a file, in reading order."""

    heading: str
    start_line: int | None
    end_line: int | None
    page: int | None
    text: str
    citation: str

    @property
    def place(self) -> str:
        """Where in the file: ``lines 12–30``, ``page 3`` or ``whole file``."""
        if self.page is not None:
            return f"page {self.page}"
        if self.start_line is None:
            return "whole file"
        if self.start_line == self.end_line:
            return f"line {self.start_line}"
        return f"lines {self.start_line}–{self.end_line}"


# -- reads -------------------------------------------------------------------------------------
def _folder(paths: AppPaths, name: str) -> Path:
    return index_folder(documents_dir(paths), name)


def _open_existing(paths: AppPaths, name: str) -> DocumentIndex | None:
    """The collection's index, or None when it was never indexed (nothing is created)."""
    folder = _folder(paths, name)
    if not (folder / INDEX_FILE).exists():
        return None
    return open_document_index(folder, name)


def registry_notices(paths: AppPaths) -> list[str]:
    """Problems met reading the collections file (set aside, too new), one line each."""
    registry = CollectionRegistry(paths)
    registry.list()
    return list(registry.notices)


def list_collections(paths: AppPaths) -> list[CollectionView]:
    """Every collection with its counts; an unreadable index is a ``problem``, not a failure."""
    return [_view(paths, c) for c in CollectionRegistry(paths).list()]


def _view(paths: AppPaths, collection: Collection) -> CollectionView:
    base = CollectionView(
        collection.name,
        tuple(str(r) for r in collection.roots),
        collection.include,
        collection.exclude,
        watch=collection.watch,
    )
    try:
        index = _open_existing(paths, collection.name)
        if index is None:
            return base
        try:
            stats = index.stats()
        finally:
            index.close()
    except (KnownError, OSError) as exc:
        return replace(base, problem=f"the index cannot be read: {exc}")
    return replace(
        base,
        files=stats.files,
        chunks=stats.chunks,
        vectors=stats.vectors,
        failed=len(stats.failed),
        last_indexed_ns=stats.last_indexed_ns,
    )


def collection_files(paths: AppPaths, name: str, *, check_disk: bool = True) -> list[FileView]:
    """The collection's files: indexed or failed (with why), and — *check_disk* — what changed.

    Comparing with the disk only looks at sizes and times (nothing is read):
    a file that is newer is ``changed``, one not indexed yet ``new``, one gone
    ``deleted``; the next index run settles them.
    """
    collection = CollectionRegistry(paths).get(name)
    index = _open_existing(paths, name)
    rows = []
    if index is not None:
        try:
            rows = index.files()
        finally:
            index.close()
    on_disk = _disk_state(paths, collection) if check_disk else None
    views: list[FileView] = []
    for row in rows:
        shown: FileStatus = "failed" if row.status == "failed" else "indexed"
        reason = row.reason
        if on_disk is not None:
            now = on_disk.pop(row.path, None)
            if now is None and row.size >= 0:
                shown, reason = (
                    "deleted",
                    "no longer on disk or in the collection: the next index run forgets it",
                )
            elif now is not None and now != (row.size, row.mtime_ns) and shown == "indexed":
                shown, reason = "changed", "changed on disk since it was indexed"
        views.append(FileView(row.path, shown, reason, row.chunks, row.indexed_ns))
    for path in sorted(on_disk or {}):
        views.append(FileView(path, "new", "not indexed yet"))
    views.sort(key=lambda v: v.path)
    return views


def _disk_state(paths: AppPaths, collection: Collection) -> dict[str, tuple[int, int]]:
    found = walk_collection(collection, skip_dirs=(paths.config_dir, paths.data_dir))
    return {f.path: (f.size, f.mtime_ns) for f in found.files}


def collection_chunks(paths: AppPaths, name: str, path: str) -> list[ChunkView]:
    """The chunks stored for one file of the collection, in reading order."""
    CollectionRegistry(paths).get(name)
    index = _open_existing(paths, name)
    if index is None:
        return []
    try:
        rows = index.file_chunks(path)
    finally:
        index.close()
    return [
        ChunkView(row.heading, row.start_line, row.end_line, row.page, row.text, row.citation())
        for row in rows
    ]


def search(
    paths: AppPaths,
    name: str,
    query: str,
    *,
    mode: str = "hybrid",
    limit: int = 10,
    embedder: TextEmbedder | None = None,
) -> list[DocumentHit]:
    """``search_rag`` as the assistant runs it, over one collection (never indexed: nothing)."""
    CollectionRegistry(paths).get(name)
    index = _open_existing(paths, name)
    if index is None:
        return []
    try:
        return search_documents(index, query, mode, limit, embedder)
    finally:
        index.close()


# -- writes ------------------------------------------------------------------------------------
def add_collection(
    paths: AppPaths,
    name: str,
    roots: Sequence[str | Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    *,
    watch: bool = False,
) -> Changed[Collection]:
    """Add a collection (checked by the registry: the name, the roots, the patterns)."""
    collection = CollectionRegistry(paths).add(name, roots, include, exclude, watch=watch)
    return Changed(collection, DOCUMENTS_CHANGED)


@dataclass(frozen=True, slots=True)
class CollectionUpdate:
    """A collection before and after a change; ``reindex``: what it covers changed."""

    before: Collection
    after: Collection

    @property
    def reindex(self) -> bool:
        """Whether the index must run again to match (files added or no longer covered)."""
        return (self.before.roots, self.before.include, self.before.exclude) != (
            self.after.roots,
            self.after.include,
            self.after.exclude,
        )

    @property
    def changed(self) -> bool:
        return self.before != self.after


def update_collection(
    paths: AppPaths,
    name: str,
    *,
    roots: Sequence[str | Path] | None = None,
    add: Sequence[str | Path] = (),
    drop: Sequence[str | Path] = (),
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    watch: bool | None = None,
) -> Changed[CollectionUpdate]:
    """Change a collection's roots, patterns or watching; None (or nothing to add) keeps a part.

    *roots* replaces the list (the window's dialog); *add* and *drop* change
    it (the CLI).  A dropped path that is not a root, or dropping every
    root, is refused with the reason.  The index is left as it is: the next
    index run reads what is newly covered and forgets what no longer is.
    """
    registry = CollectionRegistry(paths)
    if roots is None and (add or drop):
        roots = _changed_roots(registry.get(name), add, drop)
    before, after = registry.update(
        name, roots=roots, include=include, exclude=exclude, watch=watch
    )
    return Changed(CollectionUpdate(before, after), DOCUMENTS_CHANGED)


def _changed_roots(
    collection: Collection, add: Sequence[str | Path], drop: Sequence[str | Path]
) -> list[str | Path]:
    gone = {Path(os.path.normpath(p)) for p in drop if str(p).strip()}
    unknown = sorted(str(p) for p in gone if p not in collection.roots)
    if unknown:
        raise InvalidRootError(
            f"{unknown[0]} is not one of the folders of {collection.name!r}:"
            " name it as the collection lists it"
        )
    kept = [root for root in collection.roots if root not in gone]
    if not kept and not add:
        raise InvalidRootError(
            f"cannot drop every folder of {collection.name!r}: a collection needs at least one"
            " (remove the collection instead)"
        )
    return [*kept, *add]


def watched_collections(paths: AppPaths) -> list[Collection]:
    """The collections whose folders the window follows (``watch`` on)."""
    return [c for c in CollectionRegistry(paths).list() if c.watch]


def remove_collection(paths: AppPaths, name: str) -> Changed[Collection]:
    """Forget a collection and delete its index (the user's files are never touched).

    Refused while an indexer works on it: cancel that first.
    """
    folder = _folder(paths, name)
    lock: FileLock | None = None
    if folder.is_dir():
        lock = FileLock(folder / "index.lock", f"the index of {name!r}", program_name())
        try:
            lock.acquire("remove a document collection", shared=False, wait_s=0)
        except KnownError:
            raise CollectionBusyError(
                f"collection {name!r} is being indexed: cancel the indexing, then remove it"
            ) from None
    try:
        collection = CollectionRegistry(paths).remove(name)
    finally:
        if lock is not None:
            lock.release()
    shutil.rmtree(folder, ignore_errors=True)
    return Changed(collection, DOCUMENTS_CHANGED)


def interrupted_collections(paths: AppPaths) -> list[str]:
    """Collections whose last index run died with its process (killed, crashed, power cut).

    What that run finished is kept; running the indexer again picks up the
    rest (the window does so at start).
    """
    documents = documents_dir(paths)
    return [
        c.name
        for c in CollectionRegistry(paths).list()
        if (index_folder(documents, c.name) / RUNNING_MARK).exists()
    ]


def indexed_by_another_model(paths: AppPaths, embedder: TextEmbedder | None) -> list[str]:
    """Collections whose vectors another embedding model made (it was switched in Settings).

    Until they are indexed again they are searched by words only (another model's vectors
    cannot be compared with this one's questions); the window indexes them again at start,
    as it embeds the messages again.  An unreadable index is left to the Documents tab.
    """
    if embedder is None:
        return []
    names = []
    for collection in CollectionRegistry(paths).list():
        try:
            index = _open_existing(paths, collection.name)
        except (KnownError, OSError):
            continue
        if index is None:
            continue
        try:
            if index.vectors_of_another_model(embedder):
                names.append(collection.name)
        finally:
            index.close()
    return names


def run_index_job(
    paths: AppPaths,
    name: str,
    factory: str | None,
    progress: Progress,
    cancelled: Callable[[], bool],
    *,
    model_path: str | None = None,
    started: Callable[[IndexJob], None] | None = None,
) -> Changed[JobOutcome]:
    """Index *name* in a child process and wait for it (blocking: run it on a worker thread).

    *factory* names the child's embedder (``module:function``; None indexes
    for keyword search only).  When ``cancelled()`` turns true the child is
    asked to stop after the file in hand, and killed if it does not within
    :data:`CANCEL_GRACE_S`.  A crash raises :class:`IndexerCrashedError` and
    a failure :class:`IndexFailedError`; what the child finished is kept
    either way.  A cancelled run returns its outcome like a finished one.
    """
    CollectionRegistry(paths).get(name)
    job = IndexJob(paths, name, model_path=model_path, factory=factory)
    job.start()
    if started is not None:
        started(job)
    cancel_at: float | None = None
    reported: tuple[str, int, int] | None = None
    while True:
        if cancel_at is None and cancelled():
            job.cancel()
            cancel_at = time.monotonic()
        elif cancel_at is not None and time.monotonic() - cancel_at > CANCEL_GRACE_S:
            job.kill()
        outcome = job.poll(POLL_S)
        if job.progress is not None and job.progress != reported:
            reported = job.progress
            progress(*reported)
        if outcome is not None:
            break
    if outcome.status == "crashed":
        raise IndexerCrashedError(CRASHED)
    if outcome.status == "failed":
        raise IndexFailedError(f"indexing {name!r} failed: {outcome.message}")
    return Changed(outcome, DOCUMENTS_CHANGED)


def outcome_text(outcome: JobOutcome) -> str:
    """One line saying what an index run did."""
    report = outcome.report
    if report is None:
        return "Indexing was cancelled before anything changed."
    counts = [
        f"{count:,} {what}"
        for count, what in (
            (report.new, "new"),
            (report.changed, "changed"),
            (report.deleted, "removed"),
            (report.unreadable, "unreadable"),
        )
        if count
    ]
    done = f"{', '.join(counts) or 'nothing changed'} · {report.chunks:,} chunks written"
    head = "Indexing cancelled — what was done is kept" if report.cancelled else "Indexed"
    notices = f" · {' · '.join(report.notices)}" if report.notices else ""
    return f"{head} {report.collection!r}: {done}.{notices}"


# -- citations ---------------------------------------------------------------------------------
_CITATION = re.compile(
    r"(?P<path>[^\s`'\"<>()\[\]]+?\.[A-Za-z0-9]{1,8})"
    r"(?:(?::(?P<start>\d+)(?:[-–](?P<end>\d+))?)|(?:\s+p\.\s?(?P<page>\d+)))"
)


@dataclass(frozen=True, slots=True)
class Citation:
    """A place an answer cites: a collection path and its lines or page."""

    path: str
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None

    @property
    def text(self) -> str:
        if self.page is not None:
            return f"{self.path} p. {self.page}"
        if self.start_line is None:
            return self.path
        if self.end_line in (None, self.start_line):
            return f"{self.path}:{self.start_line}"
        return f"{self.path}:{self.start_line}-{self.end_line}"


def find_citations(text: str) -> list[tuple[int, int, Citation]]:
    """Each ``path:12-30`` / ``path p. 3`` in *text*, as (start, end, citation)."""
    out: list[tuple[int, int, Citation]] = []
    for match in _CITATION.finditer(text):
        start = match.group("start")
        end = match.group("end")
        page = match.group("page")
        citation = Citation(
            match.group("path"),
            int(start) if start else None,
            int(end) if end else (int(start) if start else None),
            int(page) if page else None,
        )
        out.append((match.start(), match.end(), citation))
    return out


def parse_citation(text: str) -> Citation | None:
    """*text* as one citation (the whole of it), or None."""
    found = find_citations(text.strip())
    if len(found) == 1 and found[0][0] == 0 and found[0][1] == len(text.strip()):
        return found[0][2]
    return None


def citation_roots(paths: AppPaths) -> dict[str, Path]:
    """Root label → root folder or file, over every collection (the first one wins a clash)."""
    out: dict[str, Path] = {}
    for collection in CollectionRegistry(paths).list():
        for root, label in zip(collection.roots, root_labels(collection.roots), strict=True):
            out.setdefault(label, root)
    return out


def resolve_citation(roots: dict[str, Path], path: str) -> Path | None:
    """The file a collection *path* names, when it exists inside its root; else None.

    The path's first part is the root's label; ``..``, absolute parts and
    links that lead out of the root are refused.
    """
    label, _, rest = path.partition("/")
    root = roots.get(label)
    if root is None:
        return None
    if not rest:
        target = root
        base = root.parent
    else:
        if any(part in ("", ".", "..") for part in rest.split("/")) or rest.startswith("/"):
            return None
        target = root / rest
        base = root
    try:
        real = Path(os.path.realpath(target))
        real_base = Path(os.path.realpath(base))
    except OSError:
        return None
    if not real.is_relative_to(real_base) or not real.is_file():
        return None
    return real


@dataclass(frozen=True, slots=True)
class CitedText:
    """The text of a cited file, and which of its lines the citation covers (1-based)."""

    file: Path
    text: str
    first_line: int | None
    last_line: int | None
    note: str = ""


def read_cited(roots: dict[str, Path], citation: Citation) -> CitedText:
    """The cited file's text (a PDF: the cited page's text); refuses files outside the roots."""
    file = resolve_citation(roots, citation.path)
    if file is None:
        raise CitationError(
            f"{citation.path} is not a file in your document collections (any more)"
        )
    if citation.page is not None:
        return _pdf_page(file, citation)
    with file.open("rb") as handle:
        data = handle.read(MAX_VIEW_CHARS + 1)
    note = "the file is long: only its beginning is shown" if len(data) > MAX_VIEW_CHARS else ""
    text = data[:MAX_VIEW_CHARS].decode("utf-8", "replace")
    return CitedText(file, text, citation.start_line, citation.end_line, note)


def _pdf_page(file: Path, citation: Citation) -> CitedText:
    from agenvoy_desktop.rag.readers import read_document

    document = read_document(file, citation.path)
    page = [b.text for b in document.blocks if b.page == citation.page]
    if not page:
        return CitedText(file, "", None, None, f"page {citation.page} has no text")
    return CitedText(file, "\n\n".join(page), None, None, f"page {citation.page}")


class CitationError(KnownError, ValueError):
    """A citation that names no file in the collections."""
