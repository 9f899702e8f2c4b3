"""What each history.json held when it was last read: start-up's one stat per session.

Start-up reconciliation and the sessions list need two facts of every
history.json: how many messages it holds and the id of the last one.
Reading them costs a read of the whole file (up to 5 MiB); at 100 sessions
that is most of a cold start.  A stamp remembers them with the file's
signature (inode, size, mtime, ctime): while ``stat()`` still gives the same
signature, the file has not been written, so the facts still hold.  Any
write changes the signature (an append its size and times, a rewrite its
inode), and then the file is read again as before.

The stamps are a cache of the files, not a record of consistency: the
checks that compare them with the archive still run every time.  They live
in one small file, ``memory/history_stamps.json``; a missing, unreadable or
unknown-version file is an empty cache (every session read in full once),
so profiles need no migration and an older app's writes simply miss.

A signature taken within :data:`RACY_NS` of its mtime is not remembered: a
file system's clock ticks coarsely, so a second write in the same tick with
the same size could otherwise pass unseen (git's "racily clean" entries).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.history import Signature, file_signature

log = logging.getLogger(__name__)

STAMPS_FILE = "history_stamps.json"
STAMPS_VERSION = 1
RACY_NS = 2 * 10**9
"""A file written this recently may still change within its mtime's tick: not stamped."""

Tail = tuple[int, str | None]
"""(message count, id of the last message) of a history.json."""


class HistoryStamps:
    """The stamps of a profile's history files, loaded on first use, saved when changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, tuple[Signature, Tail]] | None = None
        self._dirty = False

    def _loaded(self) -> dict[str, tuple[Signature, Tail]]:
        if self._entries is None:
            self._entries = _read(self.path)
        return self._entries

    def tail(self, session_id: str, history: Path) -> tuple[Tail | None, Signature | None]:
        """The stamped tail if *history* is unchanged since (else None), and its signature now.

        Costs one ``stat()``.  The signature is for :meth:`record` after the
        caller read the file itself.
        """
        signature = file_signature(history)
        entry = self._loaded().get(session_id)
        if signature is not None and entry is not None and entry[0] == signature:
            return entry[1], signature
        return None, signature

    def record(self, session_id: str, signature: Signature | None, tail: Tail | None) -> None:
        """Remember that the file with *signature* holds *tail* (taken before it was read).

        Nothing is remembered without both, or for a file written within
        :data:`RACY_NS`; a changed entry marks the stamps for :meth:`save`.
        """
        entries = self._loaded()
        if signature is None or tail is None or _racy(signature):
            if entries.pop(session_id, None) is not None:
                self._dirty = True
            return
        if entries.get(session_id) != (signature, tail):
            entries[session_id] = (signature, tail)
            self._dirty = True

    def keep_only(self, session_ids: set[str]) -> None:
        """Forget the stamps of sessions that no longer exist."""
        entries = self._loaded()
        for gone in set(entries) - session_ids:
            del entries[gone]
            self._dirty = True

    def save(self) -> None:
        """Write the stamps if they changed; a failure only costs full reads next time."""
        if not self._dirty or self._entries is None:
            return
        body = {
            "version": STAMPS_VERSION,
            "sessions": {
                sid: [*signature, count, last]
                for sid, (signature, (count, last)) in sorted(self._entries.items())
            },
        }
        try:
            atomic_write_text(self.path, json.dumps(body, separators=(",", ":")))
        except OSError as exc:
            log.warning("could not save %s (the next start reads each history): %s", self.path, exc)
            return
        self._dirty = False


def _racy(signature: Signature) -> bool:
    """Whether the file was written (mtime, or ctime: any change) within :data:`RACY_NS`."""
    return time.time_ns() - max(signature[2], signature[3]) < RACY_NS


def _read(path: Path) -> dict[str, tuple[Signature, Tail]]:
    """The stamps in *path*; empty when it is missing, unreadable or of another version."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    if not isinstance(data, dict) or data.get("version") != STAMPS_VERSION:
        return {}
    sessions = data.get("sessions")
    out: dict[str, tuple[Signature, Tail]] = {}
    for sid, entry in sessions.items() if isinstance(sessions, dict) else ():
        parsed = _entry(entry)
        if isinstance(sid, str) and parsed is not None:
            out[sid] = parsed
    return out


def _entry(entry: object) -> tuple[Signature, Tail] | None:
    """One ``[ino, size, mtime_ns, ctime_ns, count, last_id]``, or None if malformed."""
    if not isinstance(entry, list) or len(entry) != 6:
        return None
    ino, size, mtime, ctime, count, last = entry
    numbers = (ino, size, mtime, ctime, count)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
        return None
    if not (last is None or isinstance(last, str)) or (last is None) != (count == 0):
        return None
    return (ino, size, mtime, ctime), (count, last)
