"""Index one collection: scan, then read, chunk and embed each new or changed file.

Incremental by construction: the scan compares the disk with the index's
manifest, so only new and changed files are read and embedded, touched
files only get their manifest refreshed, and deleted files lose their
chunks and vectors.  Cancelling stops between files (or between embedding
batches of a long one); every file finished so far stays indexed, and the
next run picks up the rest.  A lock file keeps two indexers off one
collection; the conversation memory is never opened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.locks import FileLock, program_name
from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.chunking import Chunk, chunk_document
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.errors import UnreadableFileError
from agenvoy_desktop.rag.index import (
    FloatArray,
    PreparedFile,
    index_folder,
    model_name,
    open_document_index,
)
from agenvoy_desktop.rag.readers import read_document
from agenvoy_desktop.rag.registry import documents_dir
from agenvoy_desktop.rag.scan import FileEntry, scan_collection

log = logging.getLogger(__name__)

RUNNING_MARK = "index.running"
"""Present in a collection's folder while an indexer works on it; left behind only when
the process died (killed, crashed), so the next start knows to resume that index."""

EMBED_BATCH = 32
"""Chunks per embedding call: small enough that a cancel inside a long file is prompt."""
EMBED_CHARS = 2000
"""Characters of a chunk (heading included) given to the embedder; the model reads ~256 tokens."""

IndexProgress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: ``"scan"`` counts files looked at, ``"index"`` indexed."""
Cancelled = Callable[[], bool]


@dataclass
class IndexReport:
    """What one run did (counts of files unless named otherwise)."""

    collection: str
    new: int = 0
    changed: int = 0
    deleted: int = 0
    touched: int = 0
    unreadable: int = 0
    """Files the scan or a reader could not read (listed with reasons in the index)."""
    chunks: int = 0
    """Chunks written."""
    seconds: float = 0.0
    cancelled: bool = False
    notices: list[str] = field(default_factory=list)


def embed_text(chunk: Chunk) -> str:
    """What is embedded for a chunk: its heading trail gives a bare paragraph its topic."""
    text = f"{chunk.heading}\n{chunk.text}" if chunk.heading else chunk.text
    return text[:EMBED_CHARS]


def make_prepare(
    embedder: TextEmbedder | None, cancelled: Cancelled | None
) -> Callable[[FileEntry], PreparedFile]:
    """The per-file work: read, chunk, embed in batches (a reader's failure is a reason)."""

    def prepare(entry: FileEntry) -> PreparedFile:
        try:
            chunks = chunk_document(read_document(entry.file, entry.path))
        except UnreadableFileError as exc:
            return PreparedFile(reason=exc.reason)
        except Exception as exc:  # a reader's bug must not stop every later run
            log.exception("reading %s failed", entry.path)
            return PreparedFile(reason=f"could not be read (internal error: {type(exc).__name__})")
        if embedder is None:
            return PreparedFile(chunks)
        return PreparedFile(chunks, _embed(embedder, chunks, cancelled))

    return prepare


def _embed(embedder: TextEmbedder, chunks: list[Chunk], cancelled: Cancelled | None) -> FloatArray:
    parts: list[FloatArray] = []
    for start in range(0, len(chunks), EMBED_BATCH):
        if cancelled is not None and cancelled():
            raise OperationCancelledError("indexing was cancelled")
        batch = [embed_text(c) for c in chunks[start : start + EMBED_BATCH]]
        parts.append(np.asarray(embedder.embed(batch), dtype=np.float32))
    if not parts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate(parts)


def index_collection(
    paths: AppPaths,
    collection: Collection,
    embedder: TextEmbedder | None,
    progress: IndexProgress | None = None,
    cancelled: Cancelled | None = None,
) -> IndexReport:
    """Bring *collection*'s index up to date with its files (see the module docstring).

    Raises ``StoreBusyError`` when another indexer holds the collection,
    ``OperationCancelledError`` when cancelled during the scan (nothing was
    changed yet), and ``DocumentIndexError`` when the index file cannot be
    written (disk full, read-only).  *embedder* None: keyword search only.
    """
    started = time.monotonic()
    folder = index_folder(documents_dir(paths), collection.name)
    lock = FileLock(folder / "index.lock", f"the index of {collection.name!r}", program_name())
    lock.acquire("index documents", shared=False, wait_s=0)
    mark = folder / RUNNING_MARK
    try:
        mark.touch()
        index = open_document_index(folder, collection.name, check=True)
        report = IndexReport(collection.name, notices=list(index.notices))
        try:
            if embedder is not None and index.use_embedder(embedder.dim, model_name(embedder)):
                report.notices.append(
                    f"the embedding model changed: {collection.name!r} is indexed again in full"
                )
            plan = scan_collection(
                collection,
                index.manifest(),
                progress=None if progress is None else lambda d, t: progress("scan", d, t),
                cancelled=cancelled,
                skip_dirs=(paths.config_dir, paths.data_dir),
            )
            result = index.apply(
                plan,
                make_prepare(embedder, cancelled),
                progress=None if progress is None else lambda d, t: progress("index", d, t),
                cancelled=cancelled,
            )
        finally:
            index.close()
    finally:
        mark.unlink(missing_ok=True)  # this process ends the run, finished or not
        lock.release()
    report.new, report.changed = len(plan.new), len(plan.changed)
    report.deleted, report.touched = result.deleted, result.touched
    report.unreadable = len(plan.unreadable) + result.failed
    report.chunks, report.cancelled = result.chunks, result.cancelled
    if result.bad_names:
        report.notices.append(
            f"{len(result.bad_names)} files were skipped because their names are not valid"
            " text (such as a file copied from an old disk): rename them to index them"
        )
    report.seconds = time.monotonic() - started
    return report
