"""One collection's index: its manifest, chunks, full-text index and vectors, kept consistent.

Every change to one file is one SQLite transaction: its old chunks, their
FTS entries and vectors go, the new ones come, and the file's manifest
entry is written last, so a process killed at any moment leaves each file
wholly old or wholly new — never half, never twice (the next scan sees the
old manifest entry and indexes the file again).  The hnswlib file is a
cache (:mod:`.doc_vectors`) healed against the stored vectors whenever it
is opened, so a kill between the commit and its save costs nothing.

The index is derived from the user's files: :func:`open_document_index`
sets a damaged file aside and starts an empty one, with a notice, and the
next indexing rebuilds it.  Nothing here touches the conversation memory.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION, index_text
from agenvoy_desktop.core.retrieval.planner import plan_match
from agenvoy_desktop.core.sqlite_db import SqliteStore, set_aside_database
from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.core.timeutil import now_ns
from agenvoy_desktop.core.vectors import to_blob
from agenvoy_desktop.rag.chunking import Chunk
from agenvoy_desktop.rag.doc_vectors import VECTORS_FILE, ChunkVectors
from agenvoy_desktop.rag.index_schema import (
    INDEX_FILE,
    MIGRATIONS,
    SCHEMA_VERSION,
    ApplyResult,
    ChunkRow,
    DocumentIndexDamagedError,
    DocumentIndexError,
    FailedFile,
    IndexedFile,
    IndexStats,
)
from agenvoy_desktop.rag.scan import FileEntry, FileState, Manifest, ScanPlan
from agenvoy_desktop.rag.walk import Unreadable

FloatArray = npt.NDArray[np.float32]
FTS_COLUMNS = "{body where_}"
RANK_SQL = "bm25(chunks_fts, 1.0, 0.3)"
"""The table's ``rank`` (weights of body, where_), called by name so that SQLite
keeps only the best LIMIT matches instead of FTS5 sorting all of them first."""
POSTINGS_BUDGET = 8_000
"""Documents a keyword query scores at most (rarest terms first; see ``plan_match``)."""
FLUSH_EVERY_FILES = 50
"""Files indexed between saves of the vector file (a kill loses at most a heal's work)."""
_CHUNK_COLS = "id, path, start_line, end_line, page, heading, text"


def model_name(embedder: object) -> str:
    """A name for the embedding model, remembered by the index (a new model re-indexes)."""
    path = getattr(embedder, "model_path", None)
    return Path(path).name if isinstance(path, str | Path) else type(embedder).__name__


@dataclass(frozen=True, slots=True)
class PreparedFile:
    """One file made ready for the index: its chunks and their vectors, or why it failed.

    ``vectors`` holds one row per chunk, or is None when there is no
    embedding model (the chunks are then found by keyword only).
    """

    chunks: Sequence[Chunk] = ()
    vectors: FloatArray | None = None
    reason: str | None = None


Prepare = Callable[[FileEntry], PreparedFile]
Progress = Callable[[int, int], None]


def _storable(text: str) -> str:
    """*text* as SQLite can store it (a lone surrogate from a decoded file becomes U+FFFD)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def storable_name(path: str) -> bool:
    """Whether *path* can be a key of the index (a file name that is not UTF-8 cannot)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fts_values(text: str, heading: str, path: str) -> tuple[str, str]:
    """(body, where_) for a chunk: every writer and deleter of the FTS rows uses this."""
    return index_text(text), index_text(f"{heading} {path}")


class DocumentIndex(SqliteStore):
    """The index file of one collection (see the module docstring).  One thread at a time."""

    _kind = "document index"
    _not_a_db = "the file is not a document index"
    _error = DocumentIndexError
    _damaged = DocumentIndexDamagedError
    _schema_version = SCHEMA_VERSION
    _migrations = MIGRATIONS

    def __init__(self, folder: Path, collection: str = "") -> None:
        self.folder = folder
        self.collection = collection or folder.name
        self.notices: list[str] = []
        self._vectors: ChunkVectors | None = None
        self._synced_generation: str | None = None
        super().__init__(folder / INDEX_FILE)

    def _opened(self) -> None:
        if self.get_meta("fts_text_version") != str(FTS_TEXT_VERSION):
            self.rebuild_fts()

    def close(self) -> None:
        """Save the vector file if it changed, then close the database."""
        with contextlib.suppress(OSError, RuntimeError):
            if self._vectors is not None:
                self._vectors.flush()
        super().close()

    def probe(self) -> None:
        """Read the pages every command touches first; damage there raises the damaged error."""
        self._query("SELECT count(*), max(indexed_ns) FROM files")
        self._query("SELECT max(id) FROM chunks")

    def is_damaged(self, *, check: bool = False) -> bool:
        """Whether reading the file finds damage (*check*: every page, by SQLite's quick check).

        A busy or read-only file is not damage: that raises
        :class:`DocumentIndexError` instead of losing the index.
        """
        try:
            self.probe()
            if check:
                return [str(r[0]) for r in self._query("PRAGMA quick_check(5)")] != ["ok"]
        except DocumentIndexDamagedError:
            return True
        return False

    # -- the manifest ---------------------------------------------------------------
    def manifest(self) -> Manifest:
        """What the index holds, file by file, for the next scan to compare with."""
        rows = self._query("SELECT path, size, mtime_ns, sha256 FROM files")
        return Manifest({str(p): FileState(int(s), int(m), str(h)) for p, s, m, h in rows})

    # -- vectors --------------------------------------------------------------------
    @property
    def dim(self) -> int | None:
        value = self.get_meta("dim")
        return int(value) if value else None

    def vectors_match(self, embedder: TextEmbedder) -> bool:
        """Whether the stored vectors are *embedder*'s: another model's cannot be compared
        with its questions, even at the same width (MiniLM and multilingual-e5-small are
        both 384).  An index that never recorded its model is taken at its word (its width)."""
        stored = self.get_meta("model")
        return self.dim == embedder.dim and stored in (None, model_name(embedder))

    def vectors_of_another_model(self, embedder: TextEmbedder) -> bool:
        """Vectors are stored, and another model than *embedder* made them."""
        return self.dim is not None and not self.vectors_match(embedder)

    def use_embedder(self, dim: int, model: str) -> bool:
        """Prepare for vectors of *dim* from *model*; True if the index had to be emptied.

        Vectors from another model cannot be compared with the new model's,
        so a change of model empties the index and the next run rebuilds it.
        """
        if self.dim == dim and self.get_meta("model") == model:
            return False
        had_vectors = bool(self._query("SELECT 1 FROM chunk_vectors LIMIT 1"))
        with self.transaction() as db:
            if had_vectors:
                self._delete_everything(db)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(dim),))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('model', ?)", (model,))
        self._vectors = None
        if had_vectors:
            (self.folder / VECTORS_FILE).unlink(missing_ok=True)
        return had_vectors

    def _delete_everything(self, db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")
        for table in ("chunk_vectors", "chunks", "files"):
            db.execute(f"DELETE FROM {table}")
        self._bump(db)

    def vector_labels(self) -> set[int]:
        return {int(r[0]) for r in self._query("SELECT chunk_rowid FROM chunk_vectors")}

    def _blobs(self, labels: Iterable[int] | None) -> list[tuple[int, bytes]]:
        if labels is None:
            rows = self._query("SELECT chunk_rowid, vec FROM chunk_vectors ORDER BY chunk_rowid")
            return [(int(r), bytes(b)) for r, b in rows]
        out: list[tuple[int, bytes]] = []
        wanted = iter(labels)
        while part := list(itertools.islice(wanted, 500)):
            marks = ",".join("?" * len(part))
            rows = self._query(
                f"SELECT chunk_rowid, vec FROM chunk_vectors WHERE chunk_rowid IN ({marks})", part
            )
            out.extend((int(r), bytes(b)) for r, b in rows)
        return out

    def vectors(self) -> ChunkVectors | None:
        """The hnswlib index, in step with the stored vectors (None before any embedder)."""
        dim = self.dim
        if dim is None:
            return None
        fresh = self._vectors is None or self._vectors.dim != dim
        if self._vectors is None or fresh:
            self._vectors = ChunkVectors(self.folder, dim, self._blobs)
        generation = self.get_meta("generation")
        if fresh or generation != self._synced_generation:
            self._vectors.sync(self.vector_labels())
            self._synced_generation = generation
            if self._vectors.healed:
                self._vectors.flush()
        return self._vectors

    def flush(self) -> None:
        """Save the vector file now (the indexer does this every few files and at the end)."""
        if self._vectors is not None:
            self._vectors.flush()

    # -- writing --------------------------------------------------------------------
    @staticmethod
    def _bump(db: sqlite3.Connection) -> None:
        """Count a change, so a reader's vector index knows to look at the table again."""
        db.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT (key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def _drop_chunks(self, db: sqlite3.Connection, path: str) -> list[int]:
        """Delete a file's chunks, their FTS rows and vectors; returns the chunk rowids."""
        rows = db.execute("SELECT id, text, heading FROM chunks WHERE path = ?", (path,)).fetchall()
        db.executemany(
            "INSERT INTO chunks_fts (chunks_fts, rowid, body, where_) VALUES ('delete', ?, ?, ?)",
            [(rowid, *_fts_values(text, heading, path)) for rowid, text, heading in rows],
        )
        db.executemany("DELETE FROM chunk_vectors WHERE chunk_rowid = ?", [(r[0],) for r in rows])
        db.execute("DELETE FROM chunks WHERE path = ?", (path,))
        return [int(r[0]) for r in rows]

    def replace_file(self, entry: FileEntry, prepared: PreparedFile) -> int:
        """Swap a file's chunks for *prepared* in one transaction; returns chunks written."""
        vectors = self.vectors() if prepared.vectors is not None else None
        if prepared.vectors is not None and len(prepared.vectors) != len(prepared.chunks):
            raise ValueError("one vector per chunk is needed")
        added: list[int] = []
        with self.transaction() as db:
            dropped = self._drop_chunks(db, entry.path)
            for chunk in prepared.chunks:
                added.append(self._insert_chunk(db, chunk))
            if prepared.vectors is not None:
                db.executemany(
                    "INSERT INTO chunk_vectors (chunk_rowid, vec) VALUES (?, ?)",
                    [(r, to_blob(v)) for r, v in zip(added, prepared.vectors, strict=True)],
                )
            status = "failed" if prepared.reason is not None else "indexed"
            state = entry.state
            db.execute(
                "INSERT OR REPLACE INTO files (path, size, mtime_ns, sha256, status, reason,"
                " chunks, indexed_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.path,
                    state.size,
                    state.mtime_ns,
                    state.sha256,
                    status,
                    _storable(prepared.reason or ""),
                    len(added),
                    now_ns(),
                ),
            )
            self._bump(db)
        self._after_write(vectors, dropped, added, prepared.vectors)
        return len(added)

    def _after_write(
        self,
        vectors: ChunkVectors | None,
        dropped: list[int],
        added: list[int],
        new_vectors: FloatArray | None,
    ) -> None:
        """Bring the in-memory vector index in step with a commit (a crash here heals later)."""
        if vectors is None and self._vectors is not None and dropped:
            vectors = self.vectors()
        if vectors is None:
            return
        vectors.remove(dropped)
        if new_vectors is not None and added:
            vectors.add(added, new_vectors)
        self._synced_generation = self.get_meta("generation")

    def _insert_chunk(self, db: sqlite3.Connection, chunk: Chunk) -> int:
        text, heading, path = _storable(chunk.text), _storable(chunk.heading), chunk.path
        cur = db.execute(
            "INSERT INTO chunks (chunk_id, path, start_line, end_line, page, heading, text)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (chunk.id, path, chunk.start_line, chunk.end_line, chunk.page, heading, text),
        )
        rowid = cur.lastrowid
        assert rowid is not None
        db.execute(
            "INSERT INTO chunks_fts (rowid, body, where_) VALUES (?, ?, ?)",
            (rowid, *_fts_values(text, heading, path)),
        )
        return rowid

    def remove_file(self, path: str) -> int:
        """Forget a file (deleted on disk): its chunks, vectors and manifest entry."""
        vectors = self.vectors()
        with self.transaction() as db:
            dropped = self._drop_chunks(db, path)
            db.execute("DELETE FROM files WHERE path = ?", (path,))
            self._bump(db)
        self._after_write(vectors, dropped, [], None)
        return len(dropped)

    def touch(self, entries: Sequence[FileEntry]) -> None:
        """Refresh the manifest of files whose content did not change (a new mtime only)."""
        if not entries:
            return
        with self.transaction() as db:
            db.executemany(
                "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                [(e.state.size, e.state.mtime_ns, e.path) for e in entries],
            )

    def note_unreadable(self, files: Sequence[Unreadable]) -> None:
        """List files the scan could not look at, with the reason (never over an indexed one).

        Their state is unknown, so it is stored as impossible: when the file
        can be read again, the scan sees it as changed and indexes it.
        """
        if not files:
            return
        with self.transaction() as db:
            db.executemany(
                "INSERT INTO files (path, size, mtime_ns, sha256, status, reason, indexed_ns)"
                " VALUES (?, -1, -1, '', 'failed', ?, ?) ON CONFLICT (path) DO UPDATE"
                " SET reason = excluded.reason WHERE status = 'failed'",
                [(u.path, _storable(u.reason), now_ns()) for u in files],
            )

    def apply(
        self,
        plan: ScanPlan,
        prepare: Prepare,
        *,
        progress: Progress | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> ApplyResult:
        """Carry out *plan*: deletions, touches, then each file to index, one at a time.

        *prepare* reads, chunks and embeds one file (raising
        ``OperationCancelledError`` to stop inside a long file).  Stops
        between files when ``cancelled()``; what was done is kept.
        """
        result = ApplyResult()
        try:
            for path in plan.deleted:
                self.remove_file(path)
                result.deleted += 1
            self.touch(plan.touched)
            result.touched = len(plan.touched)
            self.note_unreadable([u for u in plan.unreadable if storable_name(u.path)])
            entries = [e for e in plan.to_index if storable_name(e.path)]
            result.bad_names = [e.path for e in plan.to_index if not storable_name(e.path)]
            self._index_files(entries, prepare, result, progress, cancelled)
        finally:
            self.flush()
        return result

    def _index_files(
        self,
        entries: Sequence[FileEntry],
        prepare: Prepare,
        result: ApplyResult,
        progress: Progress | None,
        cancelled: Callable[[], bool] | None,
    ) -> None:
        total = len(entries)
        for done, entry in enumerate(entries, 1):
            if cancelled is not None and cancelled():
                result.cancelled = True
                return
            try:
                prepared = prepare(entry)
            except OperationCancelledError:
                result.cancelled = True
                return
            result.chunks += self.replace_file(entry, prepared)
            if prepared.reason is None:
                result.indexed += 1
            else:
                result.failed += 1
            if progress is not None:
                progress(done, total)
            if done % FLUSH_EVERY_FILES == 0:
                self.flush()

    # -- reading --------------------------------------------------------------------
    def doc_freq(self, expr: str, cap: int) -> int:
        """Chunks matching one quoted FTS5 term, counted up to *cap* (for ``plan_match``)."""
        rows = self._query(
            "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
            (f"{FTS_COLUMNS} : {expr}", cap),
        )
        return int(rows[0][0])

    def keyword_ranked(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Best chunks for *query* by bm25 as (rowid, score), best first (higher is better)."""
        planned = plan_match(query, self.doc_freq, POSTINGS_BUDGET)
        if planned is None:
            return []
        rows = self._query(
            f"SELECT rowid, {RANK_SQL} AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
            " ORDER BY score LIMIT ?",
            (f"{FTS_COLUMNS} : ({planned.expr})", limit),
        )
        return [(int(rowid), -float(score)) for rowid, score in rows]

    def semantic_ranked(self, vector: FloatArray, limit: int) -> list[tuple[int, float]]:
        """Nearest chunks to *vector* as (rowid, cosine similarity), best first."""
        vectors = self.vectors()
        return [] if vectors is None else vectors.search(vector, limit)

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        out: dict[int, ChunkRow] = {}
        for start in range(0, len(rowids), 500):
            part = list(rowids[start : start + 500])
            marks = ",".join("?" * len(part))
            rows = self._query(f"SELECT {_CHUNK_COLS} FROM chunks WHERE id IN ({marks})", part)
            out.update({int(r[0]): ChunkRow(*r) for r in rows})
        return out

    def files(self) -> list[IndexedFile]:
        """Every file the index knows, by path (indexed ones and failed ones with why)."""
        rows = self._query(
            "SELECT path, size, mtime_ns, status, reason, chunks, indexed_ns FROM files"
            " ORDER BY path"
        )
        return [
            IndexedFile(str(p), int(s), int(m), str(st), str(r), int(c), int(t))
            for p, s, m, st, r, c, t in rows
        ]

    def file_chunks(self, path: str) -> list[ChunkRow]:
        """One file's chunks in reading order (page, then line)."""
        rows = self._query(
            "SELECT id FROM chunks WHERE path = ? ORDER BY coalesce(page, 0), start_line, id",
            (path,),
        )
        found = self.chunk_rows([int(r[0]) for r in rows])
        return [found[int(r[0])] for r in rows if int(r[0]) in found]

    def stats(self) -> IndexStats:
        """Files, chunks, vectors, failed files with reasons, and when it was last indexed."""
        files, last = self._query("SELECT count(*), max(indexed_ns) FROM files")[0]
        chunks = self._query("SELECT count(*) FROM chunks")[0][0]
        vectors = self._query("SELECT count(*) FROM chunk_vectors")[0][0]
        failed = self._query(
            "SELECT path, reason FROM files WHERE status = 'failed' ORDER BY path LIMIT 1000"
        )
        return IndexStats(
            files=int(files),
            chunks=int(chunks),
            vectors=int(vectors),
            failed=[FailedFile(str(p), str(r)) for p, r in failed],
            last_indexed_ns=int(last) if last is not None else None,
        )

    def rebuild_fts(self) -> None:
        """Recreate the derived full-text index from the chunk rows (the text rules changed)."""
        with self.transaction() as db:
            db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")
            cursor = db.execute("SELECT id, text, heading, path FROM chunks")
            rows = ((r, *_fts_values(t, h, p)) for r, t, h, p in cursor)
            while batch := list(itertools.islice(rows, 2000)):
                db.executemany(
                    "INSERT INTO chunks_fts (rowid, body, where_) VALUES (?, ?, ?)", batch
                )
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_text_version', ?)",
                (str(FTS_TEXT_VERSION),),
            )


def index_folder(documents: Path, collection: str) -> Path:
    """Where a collection's index lives: ``<documents>/<collection>/``."""
    return documents / collection


def open_document_index(
    folder: Path, collection: str = "", *, check: bool = False
) -> DocumentIndex:
    """Open a collection's index; a damaged one is set aside and a fresh one started.

    *check* also runs SQLite's quick check (every page read: meant for the
    indexer, which is a background job, not for a search).  The set-aside
    is announced in ``index.notices``.  Other failures (disk full, a newer
    app's file) raise :class:`DocumentIndexError`.
    """
    name = collection or folder.name
    try:
        index = DocumentIndex(folder, name)
    except DocumentIndexDamagedError:
        return _fresh(folder, name)
    if index.is_damaged(check=check):
        index.close()
        return _fresh(folder, name)
    return index


def _fresh(folder: Path, collection: str) -> DocumentIndex:
    aside = set_aside_database(folder / INDEX_FILE)
    (folder / VECTORS_FILE).unlink(missing_ok=True)
    index = DocumentIndex(folder, collection)
    index.notices.append(
        f"the index of collection {collection!r} was damaged and was set aside as"
        f" {aside.name}; index the collection again to rebuild it"
    )
    return index
