"""Keeping what a damaged error-memory file can still give before a fresh one replaces it.

The python sqlite3 module has neither ``sqlite_dbpage`` nor the recover
API, so the rows are read the careful way, from a working copy (the
set-aside file stays exactly as it was found):

1. the ``errors`` and ``error_vectors`` tables through SQLite, in rowid
   ranges; a range that hits a bad page is split in halves until only the
   unreadable rowids are left out, then every rowid the ranges skipped is
   looked up alone (a damaged interior page can hide rows a direct look-up
   still finds): the reading the archive's salvage does too
   (:mod:`core.sqlite_salvage`);
2. when any read failed, every page of the file is scanned for rows of the
   two tables (:mod:`core.sqlite_pages`; their shapes tell them apart from
   every other table here), for the rows below an unreachable interior page.

Only rows whose every column has the type the schema writes are kept; the
keyword rows and the full-text index are derived and written again.  The
records the damaged file still names anywhere readable (a vector, a
full-text entry) count as known, so the notice says how many of them came
back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agenvoy_desktop.core.error_memory import writes
from agenvoy_desktop.core.sqlite_db import COMPANIONS
from agenvoy_desktop.core.sqlite_pages import Value, leaf_rows
from agenvoy_desktop.core.sqlite_salvage import RangeReader, RawRow

log = logging.getLogger(__name__)

ERROR_COLUMNS = (
    "id, tool, symptom, symptom_key, cause, action, outcome, error_type, keywords, source,"
    " session_id, created_ns, updated_ns, expires_ns, hits, last_hit_ns"
)
"""Every ``errors`` column, in the schema's order (the order a row sits on its page)."""
VECTOR_COLUMNS = "record_id, model, symptom_vec, detail_vec"

MAX_FAILED_READS = 100_000
"""A salvage stops splitting ranges after this many failed reads (a file of bad pages)."""
MAX_GAP_LOOKUPS = 1_000_000
"""Rowids looked up one by one after the range reads (well under a second per 100,000)."""


_TEXT = (str,)
_ERROR_TYPES: tuple[tuple[type, ...], ...] = (
    (int,),  # id
    *(_TEXT,) * 9,  # tool .. source
    (str, type(None)),  # session_id
    *((int,),) * 4,  # created_ns, updated_ns, expires_ns, hits
    (int, type(None)),  # last_hit_ns
)


@dataclass(slots=True)
class Salvaged:
    """What could be read from a damaged error-memory file."""

    records: dict[int, RawRow] = field(default_factory=dict)
    """id -> the ``errors`` row (ERROR_COLUMNS), every column checked."""
    vectors: dict[int, RawRow] = field(default_factory=dict)
    """record id -> the ``error_vectors`` row (VECTOR_COLUMNS)."""
    known: set[int] = field(default_factory=set)
    """Every record id some readable row names: the records the file held, as far as is known."""


def salvage(path: Path) -> Salvaged:
    """Every readable record of the damaged error-memory file *path* (left unchanged).

    A copy that cannot be made or opened (a full disk, not a database at
    all) salvages nothing: the caller starts fresh as before.
    """
    work = path.with_name(path.name + ".salvage")
    if not path.is_file():
        return Salvaged()
    try:
        for end in ("", "-wal"):
            if path.with_name(path.name + end).exists():
                shutil.copyfile(path.with_name(path.name + end), work.with_name(work.name + end))
        return _salvage_copy(work)
    except (OSError, sqlite3.Error) as exc:
        log.warning("could not salvage the error memory %s: %s", path, exc)
        return Salvaged()
    finally:
        for end in ("", *COMPANIONS):
            work.with_name(work.name + end).unlink(missing_ok=True)


def _salvage_copy(work: Path) -> Salvaged:
    db = sqlite3.connect(work, isolation_level=None)
    try:
        with contextlib.suppress(sqlite3.DatabaseError):
            db.execute("PRAGMA writable_schema = ON")  # read the tables past a damaged entry
            db.execute("PRAGMA cell_size_check = ON")
        reader = RangeReader(db, max_failed_reads=MAX_FAILED_READS, max_gap_lookups=MAX_GAP_LOOKUPS)
        errors = reader.rows("errors", ERROR_COLUMNS)
        vectors = reader.rows("error_vectors", VECTOR_COLUMNS)
        fts_ids = set(reader.rows("errors_fts_docsize", "id"))
    finally:
        db.close()
    if reader.failed:  # some pages were unreachable through the tables' trees
        scanned_errors, scanned_vectors = _scan(work)
        for rowid, row in scanned_errors.items():
            errors.setdefault(rowid, row)
        for rowid, row in scanned_vectors.items():
            vectors.setdefault(rowid, row)
    found = Salvaged(known=set(errors) | set(vectors) | fts_ids)
    found.records = {rowid: row for rowid, row in errors.items() if _is_record(row)}
    found.vectors = {
        rowid: row for rowid, row in vectors.items() if rowid in found.records and _is_vector(row)
    }
    return found


def _is_record(row: RawRow) -> bool:
    """Whether an ``errors`` row has every column of the type the store writes."""
    if len(row) != len(_ERROR_TYPES):
        return False
    if not all(isinstance(value, kinds) for value, kinds in zip(row, _ERROR_TYPES, strict=True)):
        return False
    try:
        keywords = json.loads(row[8])
    except ValueError:
        return False
    return isinstance(keywords, list) and all(isinstance(k, str) for k in keywords)


def _is_vector(row: RawRow) -> bool:
    """Whether an ``error_vectors`` row holds two float32 vectors of one width."""
    if len(row) != 4 or not isinstance(row[1], str):
        return False
    first, second = row[2], row[3]
    if not (isinstance(first, bytes) and isinstance(second, bytes)):
        return False
    return len(first) == len(second) and len(first) > 0 and len(first) % 4 == 0


def _scan(work: Path) -> tuple[dict[int, RawRow], dict[int, RawRow]]:
    """(errors rows, vector rows) found on the file's table-leaf pages, by their shape.

    An ``errors`` row is the only one here with sixteen columns; a vector
    row the only one with four whose last two are blobs.  A rowid alias is
    stored as NULL on the page: the cell's rowid stands in for it.
    """
    errors: dict[int, RawRow] = {}
    vectors: dict[int, RawRow] = {}
    try:
        for rowid, values in leaf_rows(work):
            if len(values) == 16 and values[0] is None:
                errors.setdefault(rowid, (rowid, *values[1:]))
            elif len(values) == 4 and values[0] is None and _blobs(values[2:]):
                vectors.setdefault(rowid, (rowid, *values[1:]))
    except OSError as exc:
        log.warning("could not scan the pages of %s: %s", work, exc)
    return errors, vectors


def _blobs(values: Sequence[Value]) -> bool:
    return all(isinstance(value, bytes) for value in values)


def restore(db: sqlite3.Connection, found: Salvaged) -> int:
    """Write the salvaged records into a fresh store's open transaction *db*; how many went in.

    Records are written by id, in id order; of two that hold the same tool
    and symptom (a stale copy found on a page), the first stays.
    """
    kept = writes.restore_records(db, [found.records[i] for i in sorted(found.records)])
    writes.restore_vectors(db, [found.vectors[i] for i in sorted(found.vectors) if i in kept])
    writes.rebuild_fts(db)
    return len(kept)
