"""Table rows read straight from a SQLite file's pages, for salvaging a damaged database.

SQLite reaches a row through its table's b-tree.  When an interior page is
lost (a truncated file loses the pages written last, and a table's upper
levels are written late, when the tree grows), every row below it is
unreachable although its leaf page is intact.  Like the sqlite3 shell's
``.recover``, this reads every page of the file (the newest committed copy
of each from the write-ahead log, if any), decodes the cells of table-leaf
pages (following overflow chains), and skips the pages on the freelist,
which hold deleted rows.  Which table a row belongs to is for the caller to
decide from its shape; the file format is described at
https://www.sqlite.org/fileformat2.html.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from pathlib import Path

Value = int | float | str | bytes | None

_LEAF_TABLE = 0x0D
_WAL_MAGIC = (0x377F0682, 0x377F0683)


class _Bad(ValueError):
    """A cell or record that does not decode: skipped."""


def leaf_rows(path: Path) -> Iterator[tuple[int, list[Value]]]:
    """(rowid, column values) of every decodable cell on every live table-leaf page."""
    pages = _Pages(path)
    free = pages.freelist()
    for number in range(1, pages.count + 1):
        if number in free:
            continue
        page = pages.get(number)
        start = 100 if number == 1 else 0
        if page is None or len(page) < start + 8 or page[start] != _LEAF_TABLE:
            continue
        cells = int.from_bytes(page[start + 3 : start + 5], "big")
        for index in range(min(cells, (len(page) - start - 8) // 2)):
            at = start + 8 + 2 * index
            with contextlib.suppress(_Bad, IndexError, struct.error):
                rowid, payload = _cell(pages, page, int.from_bytes(page[at : at + 2], "big"))
                yield rowid, _record(payload)


class _Pages:
    """The pages of a database file, overlaid with the committed frames of its log."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        size = int.from_bytes(self.data[16:18], "big") if len(self.data) >= 100 else 0
        size = 65536 if size == 1 else size
        if size < 512 or size > 65536 or size & (size - 1):
            size = 4096
        self.size = size
        reserved = self.data[20] if len(self.data) >= 100 else 0
        self.usable = size - reserved
        self.log: dict[int, bytes] = {}
        with contextlib.suppress(OSError):
            self._read_log(path.with_name(path.name + "-wal"))
        self.count = max([-(-len(self.data) // size), *self.log])

    def _read_log(self, wal: Path) -> None:
        if not wal.exists():
            return
        data = wal.read_bytes()
        if len(data) < 32 or int.from_bytes(data[0:4], "big") not in _WAL_MAGIC:
            return
        if int.from_bytes(data[8:12], "big") != self.size:
            return
        salts = data[16:24]
        pending: dict[int, bytes] = {}
        for at in range(32, len(data) - 24 - self.size + 1, 24 + self.size):
            header = data[at : at + 24]
            if header[8:16] != salts:
                break  # frames from an older log generation
            number = int.from_bytes(header[0:4], "big")
            pending[number] = data[at + 24 : at + 24 + self.size]
            if int.from_bytes(header[4:8], "big"):  # a commit: its frames count
                self.log.update(pending)
                pending = {}

    def get(self, number: int) -> bytes | None:
        if number in self.log:
            return self.log[number]
        start = (number - 1) * self.size
        page = self.data[start : start + self.size]
        # A file cut short inside a page: SQLite reads the missing end as zeros.
        return page.ljust(self.size, b"\0") if page else None

    def freelist(self) -> set[int]:
        """Page numbers on the freelist (trunks and leaves), as far as it can be read."""
        first = self.get(1)
        if first is None or len(first) < 40:
            return set()
        trunk = int.from_bytes(first[32:36], "big")
        out: set[int] = set()
        while 0 < trunk <= self.count and trunk not in out:
            out.add(trunk)
            page = self.get(trunk)
            if page is None:
                break
            leaves = int.from_bytes(page[4:8], "big")
            for index in range(min(leaves, (len(page) - 8) // 4)):
                out.add(int.from_bytes(page[8 + 4 * index : 12 + 4 * index], "big"))
            trunk = int.from_bytes(page[0:4], "big")
        return out


def _cell(pages: _Pages, page: bytes, at: int) -> tuple[int, bytes]:
    """(rowid, whole payload) of the table-leaf cell at offset *at*."""
    if not 8 <= at < len(page):
        raise _Bad("cell offset out of the page")
    size, at = varint(page, at)
    rowid, at = varint(page, at)
    usable = pages.usable
    most = usable - 35
    if size <= most:
        local = size
    else:
        least = (usable - 12) * 32 // 255 - 23
        local = least + (size - least) % (usable - 4)
        local = local if local <= most else least
    payload = bytearray(page[at : at + local])
    if len(payload) != local:
        raise _Bad("cell runs past the page")
    following = int.from_bytes(page[at + local : at + local + 4], "big") if size > local else 0
    seen: set[int] = set()
    while len(payload) < size:
        overflow = pages.get(following) if following not in seen else None
        if overflow is None:
            raise _Bad("overflow chain broken")
        seen.add(following)
        payload += overflow[4:usable][: size - len(payload)]
        following = int.from_bytes(overflow[0:4], "big")
    return rowid, bytes(payload)


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def _record(payload: bytes) -> list[Value]:
    """The column values of one record (SQLite's record format)."""
    header_size, at = varint(payload, 0)
    if not 0 < header_size <= len(payload):
        raise _Bad("record header out of range")
    types: list[int] = []
    while at < header_size:
        kind, at = varint(payload, at)
        types.append(kind)
    body = header_size
    values: list[Value] = []
    for kind in types:
        value, body = _value(payload, body, kind)
        values.append(value)
    if body != len(payload):
        raise _Bad("record length does not match its header")
    return values


def _value(payload: bytes, at: int, kind: int) -> tuple[Value, int]:
    if kind == 0:
        return None, at
    if kind in _INT_SIZES:
        width = _INT_SIZES[kind]
        if at + width > len(payload):
            raise _Bad("integer runs past the record")
        return int.from_bytes(payload[at : at + width], "big", signed=True), at + width
    if kind == 7:
        return float(struct.unpack(">d", payload[at : at + 8])[0]), at + 8
    if kind in (8, 9):
        return kind - 8, at
    if kind < 12:
        raise _Bad("reserved serial type")
    length = (kind - 12) // 2
    raw = payload[at : at + length]
    if len(raw) != length:
        raise _Bad("value runs past the record")
    if kind % 2:
        try:
            return raw.decode("utf-8"), at + length
        except UnicodeDecodeError as exc:
            raise _Bad("text is not UTF-8") from exc
    return bytes(raw), at + length


def varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint at *at*: (value, offset after it)."""
    value = 0
    for index in range(9):
        if at + index >= len(data):
            raise _Bad("varint runs past the data")
        byte = data[at + index]
        if index == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + index + 1
    return value, at + 9
