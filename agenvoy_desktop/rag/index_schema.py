"""The schema of a collection's index file, its errors, and the rows it hands out.

One SQLite file per collection (``documents/<name>/index.sqlite3``) holds
the persisted manifest (``files``), the chunks, a contentless FTS5 index
over them (prepared by the same :func:`~agenvoy_desktop.core.retrieval.fts_text.index_text`
and tokenizer as the archive, so CJK text and English stems are found the
same way in documents and in conversations) and the chunk vectors.
Everything in it is derived from the user's files, so a damaged file is
set aside and rebuilt rather than repaired.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.sqlite_db import StoreDamagedError
from agenvoy_desktop.rag.chunking import citation_of

SCHEMA_VERSION = 1
INDEX_FILE = "index.sqlite3"

# ``chunks.id`` is AUTOINCREMENT: it is also the hnswlib label of the chunk's vector,
# and a label must never be reused, or a node marked deleted in a saved vector file
# would come back to life as another chunk.  ``where_`` in the FTS index holds the
# heading trail and the path, weighted below the text itself.
_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'failed')),
    reason TEXT NOT NULL DEFAULT '',
    chunks INTEGER NOT NULL DEFAULT 0,
    indexed_ns INTEGER NOT NULL
);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    start_line INTEGER,
    end_line INTEGER,
    page INTEGER,
    heading TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX chunks_path ON chunks (path);
CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    body, where_, content='', tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('rank', 'bm25(1.0, 0.3)');
CREATE TABLE chunk_vectors (chunk_rowid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
"""

MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}


class DocumentIndexError(KnownError, RuntimeError):
    """A collection's index file cannot be used (disk full, read-only, locked, too new)."""


class DocumentIndexDamagedError(DocumentIndexError, StoreDamagedError):
    """A collection's index file is damaged: it is set aside and rebuilt from the files."""


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A stored chunk, as search returns it."""

    rowid: int
    path: str
    start_line: int | None
    end_line: int | None
    page: int | None
    heading: str
    text: str

    def citation(self) -> str:
        """Where the chunk is (``notes/a.md:12-30``, ``x.pdf p. 3``)."""
        return citation_of(self.path, self.start_line, self.end_line, self.page)


@dataclass(frozen=True, slots=True)
class FailedFile:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """One row of the index's file list: what was indexed of a file, or why it failed."""

    path: str
    size: int
    mtime_ns: int
    status: str
    """``indexed`` or ``failed``."""
    reason: str
    chunks: int
    indexed_ns: int


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What a collection's index holds, for the window, the CLI and the doctor."""

    files: int
    chunks: int
    vectors: int
    failed: list[FailedFile] = field(default_factory=list)
    last_indexed_ns: int | None = None


@dataclass
class ApplyResult:
    """What :meth:`DocumentIndex.apply` did."""

    indexed: int = 0
    failed: int = 0
    deleted: int = 0
    touched: int = 0
    chunks: int = 0
    cancelled: bool = False
    bad_names: list[str] = field(default_factory=list)
    """Files skipped because their names are not UTF-8 (the index could not name them)."""
