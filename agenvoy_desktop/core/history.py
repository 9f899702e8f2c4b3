"""history.json: a session's hot history, the context window's layer.

The file is a plain JSON array, one message per line, readable by people and
by the reference implementation.  Whole-file writes (import, compaction,
migration) go through :func:`atomic_write_bytes`.  Appending a message to a
5 MiB file must stay in the low milliseconds, so an append overwrites only
the closing ``]`` with ``,<message>]`` and fsyncs; a crash in the middle of
that small tail write leaves a torn tail that :meth:`HistoryFile.load`
detects and cuts back to the last complete message (the prefix is never
touched), then rewrites atomically.

The in-place append writes at the cached end of the file, so it is only
correct while no other process writes: writers hold the session lock, and
the cache remembers the file's signature (inode, size, times) so a store
that takes the lock can tell that another process changed it meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agenvoy_desktop.core.atomic import atomic_write_bytes
from agenvoy_desktop.core.importers import (
    ImportFormatError,
    RawMessage,
    TimeOutOfRangeError,
    build_messages,
    raw_from_mapping,
)
from agenvoy_desktop.core.messages import Message

log = logging.getLogger(__name__)

_TAIL = b"\n]\n"


def _encode(message: Message) -> bytes:
    return json.dumps(message.to_json(), ensure_ascii=False).encode("utf-8")


def encode_history(messages: Sequence[Message]) -> bytes:
    """The canonical file form: ``[`` newline, one message per line, ``]``."""
    if not messages:
        return b"[\n]\n"
    return b"[\n" + b",\n".join(_encode(m) for m in messages) + _TAIL


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What :meth:`HistoryFile.load` had to fix, for the doctor report."""

    torn_tail_dropped: bool = False
    migrated: bool = False
    corrupt_moved_to: Path | None = None
    skipped: int = 0  # elements that are not messages we can read
    out_of_range: int = 0  # of those, messages whose time the archive cannot store
    original_kept_at: Path | None = None  # the file as it was, when something was left out
    tail_lost: bool = False
    """The torn tail that was cut off held something (half a message, garbage): not just
    the closing bracket a crash mid-append leaves off."""


class HistoryFile:
    """One session's history.json, cached in memory after the first load."""

    def __init__(
        self,
        path: Path,
        fallback_ns: int,
        *,
        readonly: bool = False,
        may_repair: Callable[[], bool] | None = None,
    ) -> None:
        self.path = path
        self.readonly = readonly
        self._fallback_ns = fallback_ns
        # Repairs rewrite the file: only safe while no other process can be mid-append.
        self._may_repair = may_repair
        self._messages: list[Message] | None = None
        self._size = 0
        self._signature: Signature | None = None
        self._stale = False
        self.last_report = LoadReport()

    # -- reading -----------------------------------------------------------
    @property
    def messages(self) -> list[Message]:
        """All messages, oldest first (loads on first use)."""
        if self._messages is None:
            self.load()
        assert self._messages is not None
        return self._messages

    @property
    def size_bytes(self) -> int:
        self.messages  # noqa: B018 - ensure loaded
        return self._size

    def counted(self) -> tuple[int, int]:
        """(messages, bytes) — without parsing a file whose canonical tail already says it.

        A session list shows these for every session; parsing each history
        (up to 5 MiB of JSON) for a count made ``sessions`` take seconds.
        A loaded cache, or a file not in canonical form, is counted the full way.
        """
        if self._messages is None and (tail := quick_tail(self.path)) is not None:
            with contextlib.suppress(OSError):
                return tail[0], self.path.stat().st_size
        return len(self.messages), self.size_bytes

    def tail_stamp(self) -> tuple[Signature, tuple[int, str | None]] | None:
        """(signature, (count, last id)) of the file as cached, for :mod:`history_stamps`.

        None unless the cache is loaded, canonical and still matches the file.
        """
        if self._messages is None or self._stale or self._signature is None:
            return None
        if file_signature(self.path) != self._signature:
            return None
        last = self._messages[-1].id if self._messages else None
        return self._signature, (len(self._messages), last)

    def exists(self) -> bool:
        return self.path.exists()

    @property
    def loaded(self) -> bool:
        return self._messages is not None

    def is_current(self) -> bool:
        """Whether the cache still matches the file (no other process changed it).

        Compares the file's (inode, size, mtime, ctime) with what this object
        saw after its last load or write; nothing cached counts as current.
        """
        if self._messages is None:
            return True
        return not self._stale and file_signature(self.path) == self._signature

    def forget(self) -> None:
        """Drop the cache (the file is untouched); the next use loads it again."""
        self._messages, self._size, self._signature, self._stale = None, 0, None, False

    def _loaded(
        self,
        messages: list[Message],
        size: int,
        *,
        stale: bool = False,
        signature: Signature | None = None,
    ) -> list[Message]:
        """Cache what was read or written, with the file signature it belongs to."""
        self._messages, self._size = messages, size
        self._signature = signature if signature is not None else file_signature(self.path)
        self._stale = stale
        return messages

    def _read(self) -> tuple[bytes, Signature, bool] | None:
        """(content, its signature, whether it grew while being read); None when missing.

        The signature comes from the open file, so it describes exactly
        these bytes even if another process renames a new file into place
        meanwhile; an append in progress shows as a size mismatch.
        """
        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                raw = handle.read()
        except FileNotFoundError:
            return None
        return raw, _signature_of(stat), len(raw) != stat.st_size

    def load(self) -> list[Message]:
        """Read the file, repairing a torn tail and migrating foreign formats.

        Without the right to repair (read-only, or another process may be
        writing), what is readable is returned and the cache is marked stale,
        so the next load under the session lock repairs it.
        """
        self.last_report = LoadReport()
        repair = not self.readonly and (self._may_repair is None or self._may_repair())
        read = self._read()
        if read is None:
            return self._loaded([], 0)
        raw, signature, moving = read
        items, torn, tail_lost = _parse_array(raw)
        if items is None:
            if not repair:
                self.last_report = LoadReport(corrupt_moved_to=self.path)
                return self._loaded([], 0, stale=True, signature=signature)
            moved = self._move_aside()
            log.error("%s is not a JSON array; moved to %s", self.path, moved)
            self.last_report = LoadReport(corrupt_moved_to=moved)
            return self._loaded([], 0)
        messages, migrated, skipped, out_of_range = self._to_messages(items)
        needs_repair = torn or migrated or skipped > 0 or not _canonical_tail(raw, messages)
        stale = moving or (needs_repair and not repair)
        self._loaded(messages, len(raw), stale=stale, signature=signature)
        kept_at = None
        if repair and needs_repair:
            if skipped or tail_lost:  # a rewrite is never the only copy of what we could not read
                kept_at = self._keep_copy(raw, "corrupt" if tail_lost else "orig")
            self.rewrite(messages)
        self.last_report = LoadReport(
            torn_tail_dropped=torn,
            migrated=migrated,
            skipped=skipped,
            out_of_range=out_of_range,
            original_kept_at=kept_at,
            tail_lost=tail_lost,
        )
        return messages

    def _keep_copy(self, raw: bytes, kind: str) -> Path:
        """Write *raw* next to the file as ``history.json.<kind>-…`` before a lossy rewrite.

        ``orig``: elements were skipped as unreadable; ``corrupt``: a torn tail
        that held something was cut off (the name moved-aside files have).
        """
        kept_at = self.path.with_name(f"{self.path.name}.{kind}-{os.getpid()}-{id(self):x}")
        atomic_write_bytes(kept_at, raw)
        return kept_at

    def _to_messages(self, items: list[object]) -> tuple[list[Message], bool, int, int]:
        """Our own elements pass straight through; anything else is migrated.

        Returns (messages, migrated, elements skipped as unreadable, how many
        of those only had a time out of range).  A file of our own elements,
        some unreadable, is not migrated: it only loses those.
        """
        ours = all(isinstance(i, dict) and "id" in i and "time" in i for i in items)
        try:
            if ours:
                return [Message.from_json(i) for i in items if isinstance(i, dict)], False, 0, 0
        except (KeyError, ValueError, TypeError):
            pass
        raws: list[RawMessage] = []
        out_of_range = 0
        for index, item in enumerate(items):
            try:
                raws.append(_raw_element(self.path, index, item))
            except ImportFormatError as exc:
                out_of_range += isinstance(exc, TimeOutOfRangeError)
                log.warning("skipping invalid message: %s", exc)
        messages = build_messages(raws, self._fallback_ns)
        return messages, not ours, len(items) - len(raws), out_of_range

    def _move_aside(self) -> Path:
        target = self.path.with_name(f"{self.path.name}.corrupt-{os.getpid()}-{id(self):x}")
        os.replace(self.path, target)
        return target

    # -- writing -----------------------------------------------------------
    def rewrite(self, messages: Sequence[Message]) -> None:
        """Replace the whole file atomically."""
        data = encode_history(messages)
        atomic_write_bytes(self.path, data)
        self._loaded(list(messages), len(data))

    def append(self, messages: Sequence[Message]) -> None:
        """Append in place: overwrite the closing bracket, fsync.

        The caller holds the session lock; should the file still differ from
        the cache (a writer that takes no lock), it is read again first, so
        the write lands after the last message actually in the file.
        """
        if self._messages is not None and not self.is_current():
            log.warning("%s changed behind this process's back; reloading", self.path)
            self.forget()
        current = self.messages
        if not messages:
            return
        if not current or not self.path.exists():
            self.rewrite([*current, *messages])
            return
        body = b",\n" + b",\n".join(_encode(m) for m in messages) + _TAIL
        # O_BINARY: no newline translation on Windows; lseek+write: no os.pwrite there.
        fd = os.open(self.path, os.O_WRONLY | getattr(os, "O_BINARY", 0))
        try:
            offset = self._size - len(_TAIL)
            os.lseek(fd, offset, os.SEEK_SET)
            view = memoryview(body)
            while view:  # a short write must not pass for a complete one
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            stat = os.fstat(fd)
        finally:
            os.close(fd)
        current.extend(messages)
        self._size = offset + len(body)
        self._signature = _signature_of(stat)

    def delete(self) -> None:
        """Remove the file (reset)."""
        self.path.unlink(missing_ok=True)
        self._loaded([], 0)


Signature = tuple[int, int, int, int]
"""(inode, size, mtime_ns, ctime_ns) of a file: changes with every write to it."""


def _signature_of(stat: os.stat_result) -> Signature:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def file_signature(path: Path) -> Signature | None:
    """The file's :data:`Signature`, or None when it does not exist."""
    try:
        return _signature_of(path.stat())
    except FileNotFoundError:
        return None


def _canonical_tail(raw: bytes, messages: Sequence[Message]) -> bool:
    return raw.endswith(_TAIL) if messages else raw == b"[\n]\n"


def quick_tail(path: Path) -> tuple[int, str | None] | None:
    """(message count, last message id) of a canonical file without parsing it all.

    Returns None when the file is missing or not in canonical form; start-up
    reconciliation then falls back to a full check of that session.
    """
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if raw == b"[\n]\n":
        return 0, None
    if not raw.startswith(b"[\n") or not raw.endswith(_TAIL):
        return None
    start = raw.rfind(b"\n", 0, len(raw) - len(_TAIL)) + 1
    try:
        last = json.loads(raw[start : len(raw) - len(_TAIL)])
    except ValueError:
        return None
    if not isinstance(last, dict) or "id" not in last:
        return None
    return raw.count(b"\n") - 2, str(last["id"])


def _raw_element(path: Path, index: int, item: object) -> RawMessage:
    """One element of a history array: ours keeps its id, foreign ones get one."""
    if isinstance(item, dict) and "id" in item and "time" in item:
        try:
            msg = Message.from_json(item)
        except (KeyError, ValueError, TypeError):
            pass
        else:
            return RawMessage(msg.role, msg.content, msg.time_ns, msg.ref, msg.extra, msg.id)
    return raw_from_mapping(item, f"{path}: message {index + 1}")


def _parse_array(raw: bytes) -> tuple[list[object] | None, bool, bool]:
    """Parse a JSON array; on failure keep the complete leading elements.

    Returns (items, torn, tail_lost).  ``items`` is None when the data is not
    an array at all (the caller moves the file aside rather than destroying
    it).  ``tail_lost`` says whether the text after the last complete element
    held anything but separators and the closing bracket: a crash mid-append
    that only left the bracket off loses nothing, and keeps no copy.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, False, False
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        pass
    else:
        return (data, False, False) if isinstance(data, list) else (None, False, False)
    decoder = json.JSONDecoder()
    index = _skip_ws(text, 0)
    if not text.startswith("[", index):
        return None, False, False
    index += 1
    items: list[object] = []
    while True:
        index = _skip_ws(text, index)
        if index >= len(text) or text[index] == "]":
            break
        try:
            item, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            break
        items.append(item)
        index = _skip_ws(text, index)
        if index < len(text) and text[index] == ",":
            index += 1
    return items, True, bool(text[index:].strip(" \t\r\n,]"))


def _skip_ws(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def take_window(messages: Sequence[Message], n: int, step: int = 0) -> list[Message]:
    """The last-N context window, never splitting a pair or a tool-call group.

    The window starts at a user message (the start of a complete exchange);
    when the last exchange alone is longer than N it is kept whole.

    With *step* > 0 the start moves in jumps (:func:`stepped_start`), so the
    window holds between N and N + step - 1 messages and keeps its first
    message while the conversation grows: the model's KV cache of the
    window stays valid from turn to turn.  ``step = 0`` is the plain last N.
    """
    if n <= 0 or not messages:
        return []
    if len(messages) <= n:
        start = 0
    elif step > 0:
        start = stepped_start(messages, n, step)
    else:
        start = _plain_start(messages, n)
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    return list(messages[start:])


def _plain_start(messages: Sequence[Message], n: int) -> int:
    start = len(messages) - n
    while start < len(messages) and messages[start].role != "user":
        start += 1
    if start == len(messages):
        start = len(messages) - n
        while start > 0 and messages[start].role != "user":
            start -= 1
        if messages[start].role != "user":  # no user message at all: plain last N
            start = len(messages) - n
    return start


def stepped_start(messages: Sequence[Message], n: int, step: int) -> int:
    """Where a window of at least *n* messages starts when its start moves *step* at a time.

    The candidates are grid points, multiples of *step*: the window starts
    at the first user message at or after the last grid point that leaves
    at least *n* messages, or, while that one is not yet *n* messages from
    the end, at the previous grid point's.  The start depends only on
    messages already written, so it stays put until the next grid point's
    user message is *n* from the end, then jumps about *step* messages on.
    The window holds N to N + step - 1 messages, plus the rest of an
    exchange that straddles a grid point.  A history without a user message
    that early falls back to its first user message, or to the grid point.
    """
    latest = len(messages) - n  # the last start that still leaves n messages
    grid = latest - latest % step
    end = latest + 1
    for point in range(grid, -1, -step):
        user = _first_user(messages, point, end)  # [end, latest] was searched already
        if user is not None:
            return user
        end = point
    first = _first_user(messages, 0, len(messages))
    return grid if first is None else first


def _first_user(messages: Sequence[Message], begin: int, end: int) -> int | None:
    return next((i for i in range(begin, end) if messages[i].role == "user"), None)
