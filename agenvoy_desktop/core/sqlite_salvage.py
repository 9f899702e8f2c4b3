"""Reading every row SQLite can still reach in a table of a damaged file.

Both salvages of a damaged database, the archive's (:mod:`core.recovery`)
and the error memory's (:mod:`core.error_memory.salvage`), read their
tables the same careful way, so it lives here once and a fix to it reaches
both.  What differs between them is passed in: the SELECT's columns, how
large a range one query reads, how many failures end the reading, and how
to find a table's largest rowid when ``max(rowid)`` itself fails (the
archive scans the file's pages, :mod:`core.sqlite_pages`).

A damaged page makes SQLite raise for any query that touches it, including
a range read that only steps past it; so a failing range is split in
halves until only the unreadable rowids are left out, and afterwards every
rowid the ranges did not return is looked up alone: a damaged interior
page can send a range read past rows that a direct look-up still finds.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any

RawRow = tuple[Any, ...]
"""A row as the SELECT returns it; its first column is the rowid (or its alias)."""


class RangeReader:
    """Reads tables of one connection in rowid ranges, leaving out only what cannot be read.

    ``failed`` counts the reads SQLite refused (any at all means some rows
    may sit below a page no query reaches: the caller may scan the pages);
    ``lost`` counts the rowids whose page could not be read (some may never
    have held a row).  Both add up over every table the reader reads.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        *,
        max_failed_reads: int,
        max_gap_lookups: int,
        chunk: int | None = None,
        fallback_bound: Callable[[str], int] | None = None,
    ) -> None:
        """*chunk*: rowids per range read (None: the whole table in one, split only on damage).

        *max_failed_reads* ends the splitting on a file of nothing but bad
        pages; *max_gap_lookups* skips the one-by-one look-ups when more
        rowids than that are missing (each costs a query).
        *fallback_bound* gives a table's largest rowid when ``max(rowid)``
        fails; without it, the largest rowid a plain walk of the table
        reaches before the damage.
        """
        self.db = db
        self.max_failed_reads = max_failed_reads
        self.max_gap_lookups = max_gap_lookups
        self.chunk = chunk
        self.fallback_bound = fallback_bound or self._walked_bound
        self.failed = 0
        self.lost = 0

    def rows(self, table: str, cols: str) -> dict[int, RawRow]:
        """rowid -> (*cols) of every row that could be read; *cols* starts with the rowid."""
        select = f"SELECT {cols} FROM {table}"
        bound = self._bound(table)
        out: dict[int, RawRow] = {}
        step = self.chunk or max(bound, 1)
        for low in range(1, bound + 1, step):
            self._read(select, low, min(bound, low + step - 1), out)
        if bound - len(out) <= self.max_gap_lookups:
            for rowid in range(1, bound + 1):
                if rowid not in out:
                    self._lookup(select, rowid, out)
        return out

    def _bound(self, table: str) -> int:
        """The table's largest rowid: its own max, or the fallback's on a damaged tree."""
        try:
            top = self.db.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
            return int(top or 0)
        except sqlite3.DatabaseError:
            self.failed += 1
            return self.fallback_bound(table)

    def _walked_bound(self, table: str) -> int:
        """The largest rowid a walk of the table reaches, left to right, before it fails."""
        best = 0
        with contextlib.suppress(sqlite3.DatabaseError):
            for (rowid,) in self.db.execute(f"SELECT rowid FROM {table}"):
                best = max(best, int(rowid))
        return best

    def _read(self, select: str, low: int, high: int, out: dict[int, RawRow]) -> None:
        """Rows with ``low <= rowid <= high``: those before a bad page are kept, the rest
        of the range is split in halves until single unreadable rowids are left.

        A single rowid is looked up by ``=``: a range read steps past its last
        row to the next page, which may be the damaged one.
        """
        while low <= high and self.failed < self.max_failed_reads:
            if low == high:
                if not self._lookup(select, low, out):
                    self.lost += 1
                return
            try:
                for row in self.db.execute(f"{select} WHERE rowid BETWEEN ? AND ?", (low, high)):
                    out[int(row[0])] = row
                    low = max(low, int(row[0]) + 1)
                return
            except sqlite3.DatabaseError:
                self.failed += 1
                if low >= high:
                    continue  # what is left is one rowid (or none): look it up alone
                middle = (low + high) // 2
                self._read(select, low, middle, out)
                low = middle + 1
        self.lost += max(0, high - low + 1)

    def _lookup(self, select: str, rowid: int, out: dict[int, RawRow]) -> bool:
        """Look up one rowid; False when its page cannot be read (a missing row is no failure)."""
        try:
            found = self.db.execute(f"{select} WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            self.failed += 1
            return False
        if found is not None:
            out[rowid] = found
        return True
