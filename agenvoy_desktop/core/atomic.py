"""Crash-safe file writes: temp file + fsync + rename, then fsync the folder.

A reader either sees the old file or the new one, never a mix, even when the
power goes in the middle of the write.  New files are owner-only (0600 on
POSIX): what the app writes is someone's conversations and settings.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

FILE_MODE = 0o600
"""Owner read/write only, whatever the process umask."""


def fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in *folder* durable (no-op where unsupported)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace *path* with *data* atomically and durably."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Process and thread in the name: two threads replacing the same file never share a temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)  # no \r\n on Windows
    fd = os.open(tmp, flags, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8 text flavour of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temp path next to *path* for a writer that wants a file name.

    On success the temp file is fsynced and renamed over *path*; on any
    failure it is removed and *path* is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
