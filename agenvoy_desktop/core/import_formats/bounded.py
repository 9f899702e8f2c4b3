"""Reading files, folders and zips someone else made, without trusting them.

An import path can be anything: a FIFO or ``/dev/zero`` (reading never
ends), a 2 GB file, a folder with a million entries, or a zip whose headers
promise a small member that inflates to terabytes.  Every read here is
bounded by :class:`~.model.Limits` twice: by what the metadata says before
reading (so a too-large file gets one line at once) and again while reading
(so a file that grows, or a zip header that lies, cannot push past it).
Failures are :class:`ImportFormatError` with one line naming the file.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO, Protocol

from agenvoy_desktop.core.import_formats.model import MIB, Limits
from agenvoy_desktop.core.importers import ImportFormatError

_CHUNK = MIB


class ImportLimitError(ImportFormatError):
    """A path over one of the :class:`~.model.Limits`.

    Its own type so a reader that skips one broken file among many (a folder
    of LM Studio chats) still stops at a hostile one.
    """


_RATIO_FLOOR = MIB
"""Members up to this size are never called bombs: a short, repetitive text
compresses far past any ratio, and 1 MiB is harmless anyway."""


def _size(n: int) -> str:
    """Bytes in readable units for error lines."""
    if n >= 1024 * MIB:
        return f"{n / 1024 / MIB:.1f} GiB"
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.0f} KiB"


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a pipe (FIFO)"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None


def require_regular(path: Path) -> os.stat_result:
    """*path*'s stat when it is a regular file; a pipe or device would block or never end."""
    info = _stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ImportFormatError(f"{path}: is {_kind(info.st_mode)}, not a file to import")
    return info


def open_regular(path: Path) -> IO[bytes]:
    """Open a regular file for reading, refusing anything else.

    Checked before opening (a FIFO's ``open`` blocks until a writer comes)
    and again on the open descriptor, since the path may have been swapped
    in between; ``O_NONBLOCK`` keeps that second open from blocking.
    """
    require_regular(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot open ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ImportFormatError(f"{path}: is {_kind(mode)}, not a file to import")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(read: Callable[[int], bytes], cap: int, too_big: Callable[[], str]) -> bytearray:
    """Read until end of data, raising ``ImportFormatError(too_big())`` past *cap* bytes."""
    buf = bytearray()
    while chunk := read(min(_CHUNK, cap + 1 - len(buf))):
        buf += chunk
        if len(buf) > cap:
            raise ImportLimitError(too_big())
    return buf


def read_file(path: Path, limits: Limits) -> bytearray:
    """The bytes of a regular file within ``limits.max_file_bytes``."""
    cap = limits.max_file_bytes
    size = require_regular(path).st_size
    if size > cap:
        raise ImportLimitError(
            f"{path}: {_size(size)} is larger than the import limit of {_size(cap)}"
        )
    with open_regular(path) as handle:
        try:
            return read_capped(
                handle.read, cap, lambda: f"{path}: grew past the import limit of {_size(cap)}"
            )
        except OSError as exc:
            raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None


# -- trees: a folder or a zip, read the same way -------------------------------------
class Tree(Protocol):
    """A set of named files (a folder or a zip), read within the limits.

    Names are relative POSIX paths; ``where`` turns one into the text an
    error line or a :class:`~.model.Skip` shows.
    """

    def names(self) -> list[str]: ...

    def read(self, name: str) -> bytearray: ...

    def where(self, name: str) -> str: ...


class _Budget:
    """The bytes one import may still read in total (``limits.max_total_bytes``)."""

    def __init__(self, limits: Limits, label: Path) -> None:
        self.left = limits.max_total_bytes
        self._limit = limits.max_total_bytes
        self._label = label

    @property
    def line(self) -> str:
        """What to say when the budget runs out."""
        return f"{self._label}: more than {_size(self._limit)} to read in one import"

    def check(self, n: int) -> None:
        """Refuse *n* more bytes before reading them."""
        if n > self.left:
            raise ImportLimitError(self.line)

    def take(self, n: int) -> None:
        """Count *n* bytes read."""
        self.check(n)
        self.left -= n


class FolderTree:
    """The regular files under a folder, walked without following linked folders."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self._limits = limits
        self._budget = _Budget(limits, root)
        self._names = self._walk()

    def _walk(self) -> list[str]:
        found: list[str] = []
        seen = 0
        stack: list[tuple[Path, int]] = [(self.root, 0)]
        while stack:
            folder, depth = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError as exc:
                raise ImportFormatError(f"{folder}: cannot list ({exc.strerror})") from None
            seen += len(entries)
            if seen > self._limits.max_entries:
                raise ImportLimitError(
                    f"{self.root}: more than {self._limits.max_entries:,} entries; "
                    "choose the export folder itself"
                )
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if depth < self._limits.max_depth:
                        stack.append((Path(entry.path), depth + 1))
                else:  # pipes and devices too: reading one then says what it is
                    found.append(Path(entry.path).relative_to(self.root).as_posix())
        return sorted(found)

    def names(self) -> list[str]:
        return list(self._names)

    def read(self, name: str) -> bytearray:
        self._budget.check(require_regular(self.root / name).st_size)
        data = read_file(self.root / name, self._limits)
        self._budget.take(len(data))
        return data

    def where(self, name: str) -> str:
        return str(self.root / name)


class ZipTree:
    """The members of a zip, streamed from it without extracting anything to disk."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = path
        self._limits = limits
        self._budget = _Budget(limits, path)
        self._handle = handle = open_regular(path)
        try:
            self._zip = _open_zip(handle, path, limits)
        except BaseException:
            handle.close()
            raise
        infos = self._zip.infolist()
        if len(infos) > limits.max_entries:
            self.close()
            raise ImportLimitError(
                f"{path}: more than {limits.max_entries:,} members; not a chat export"
            )
        self._infos = {
            PurePosixPath(info.filename.replace("\\", "/")).as_posix().lstrip("/"): info
            for info in infos
            if not info.is_dir()
        }

    def close(self) -> None:
        """Close the zip (and the file it came from)."""
        self._zip.close()
        self._handle.close()

    def names(self) -> list[str]:
        return sorted(self._infos)

    def where(self, name: str) -> str:
        return f"{self.path} ({name})"

    def _cap(self, name: str, info: zipfile.ZipInfo) -> tuple[int, str]:
        """The most *name* may inflate to, and what to say past it.

        Checked against the header first; the same cap then bounds the
        stream, because a header's sizes are only the zip's word (CPython's
        zipfile stops at the declared size today, but that is its choice,
        not a promise this code should rest on).
        """
        where = self.where(name)
        limit = self._limits.max_file_bytes
        if info.file_size > limit:
            raise ImportLimitError(
                f"{where}: {_size(info.file_size)} is larger than the import limit of "
                f"{_size(limit)}"
            )
        bomb = max(info.compress_size * self._limits.max_ratio, _RATIO_FLOOR)
        bomb_line = f"{where}: expands more than {self._limits.max_ratio}× (a zip bomb?)"
        if info.file_size > bomb:
            raise ImportLimitError(bomb_line)
        self._budget.check(info.file_size)
        if self._budget.left < min(bomb, limit):
            return self._budget.left, self._budget.line
        if bomb < limit:
            return bomb, bomb_line
        return limit, f"{where}: inflates past the import limit of {_size(limit)}"

    def read(self, name: str) -> bytearray:
        info = self._infos.get(name)
        if info is None:
            raise ImportFormatError(f"{self.where(name)}: no such member")
        cap, line = self._cap(name, info)
        try:
            with self._zip.open(info) as member:
                data = read_capped(member.read, cap, lambda: line)
        except ImportFormatError:
            raise
        except RuntimeError as exc:  # encrypted
            raise ImportFormatError(f"{self.where(name)}: cannot read ({exc})") from None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
            raise ImportFormatError(f"{self.where(name)}: damaged member ({exc})") from None
        self._budget.take(len(data))
        return data


_EOCD = b"PK\x05\x06"
_EOCD_SIZE = 22
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20
_ZIP64_EOCD = b"PK\x06\x06"
_MAX_COMMENT = 65_535


def zip_index(handle: IO[bytes]) -> tuple[int, int]:
    """(member count, table-of-contents bytes) from a zip's end records.

    Read here, before :class:`zipfile.ZipFile` loads the whole table into
    objects (a few hundred bytes of memory per member), so a zip listing
    millions of members is refused before it costs anything.  Zip64 archives
    keep both numbers in a second record that the first one points to.
    """
    end = handle.seek(0, os.SEEK_END)
    window = min(end, _EOCD_SIZE + _MAX_COMMENT)
    handle.seek(end - window)
    tail = handle.read(window)
    at = tail.rfind(_EOCD)
    if at < 0 or window - at < _EOCD_SIZE:
        raise zipfile.BadZipFile("no end-of-archive record")
    count, size = struct.unpack_from("<HI", tail, at + 10)
    if count != 0xFFFF and size != 0xFFFFFFFF:
        return count, size
    locator_at = end - window + at - _ZIP64_LOCATOR_SIZE
    if locator_at < 0:
        raise zipfile.BadZipFile("no zip64 end-of-archive locator")
    handle.seek(locator_at)
    locator = handle.read(_ZIP64_LOCATOR_SIZE)
    if locator[:4] != _ZIP64_LOCATOR:
        raise zipfile.BadZipFile("no zip64 end-of-archive locator")
    (record_at,) = struct.unpack_from("<Q", locator, 8)
    handle.seek(record_at)
    record = handle.read(56)
    if record[:4] != _ZIP64_EOCD or len(record) < 56:
        raise zipfile.BadZipFile("no zip64 end-of-archive record")
    count, size = struct.unpack_from("<QQ", record, 32)
    return count, size


def _check_index(handle: IO[bytes], path: Path, limits: Limits) -> None:
    """Refuse a zip whose table of contents alone is over the limits, then rewind."""
    count, size = zip_index(handle)
    if count > limits.max_entries:
        raise ImportLimitError(
            f"{path}: more than {limits.max_entries:,} members; not a chat export"
        )
    if size > limits.max_zip_index_bytes:
        raise ImportLimitError(
            f"{path}: its list of members is {_size(size)}, over the limit of "
            f"{_size(limits.max_zip_index_bytes)}"
        )
    handle.seek(0)


def _open_zip(handle: IO[bytes], path: Path, limits: Limits) -> zipfile.ZipFile:
    """The zip in *handle*, once its table of contents is known to be within the limits."""
    try:
        _check_index(handle, path, limits)
        return zipfile.ZipFile(handle)
    except ImportFormatError:
        raise
    except (
        zipfile.BadZipFile,
        OSError,
        EOFError,
        ValueError,
        NotImplementedError,
        struct.error,
    ) as exc:
        raise ImportFormatError(f"{path}: not a readable zip ({exc})") from None


def is_zip(path: Path) -> bool:
    """Whether *path* is a zip by its content (the end-of-archive record), not its name."""
    require_regular(path)
    with open_regular(path) as handle:
        try:
            return zipfile.is_zipfile(handle)
        except OSError:
            return False
