"""The offline tools every turn offers: memory search, time, and allowed files.

Each handler checks what the schema cannot (dates that parse, paths inside
the folders the user allowed) and raises :class:`ToolArgumentError` or a
plain exception with a message the model can act on; the registry turns
those into tool errors, which is what the error memory learns from.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import os
import re
import stat
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolArgumentError, ToolResult
from agenvoy_desktop.agent.turn import current_session
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.quoted_results import EXCERPT_HEADER, QUOTE_PREFIX
from agenvoy_desktop.core.search import (
    MODES,
    NO_MATCHES,
    NOTHING_WITHHELD,
    SearchQuery,
    SearchResult,
    Withheld,
    search_chat_history,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import format_local, parse_iso_in_range

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

MAX_READ_CHARS = 20_000
MAX_LISTING = 200


class NotTextFileError(KnownError, ValueError):
    """A file the read tool will not read: binary, or a pipe or device that may never end."""


# -- search_chat_history --------------------------------------------------------
def search_tool(
    storage: Storage,
    store: MemoryStore,
    window_messages: Callable[[], int],
    *,
    window_step: int = 0,
    withheld: Callable[[], Withheld] = lambda: NOTHING_WITHHELD,
) -> Tool:
    """``search_chat_history``: the three memory layers, minus the current window.

    *window_step* is the agent's (``AgentConfig.window_step``), so the window
    left out is the one the prompt shows.  *withheld* names the sessions and
    messages in the window's undo window (asked at each call, on the event
    loop): the search leaves them out as proactive recall does.
    """

    async def handler(args: dict[str, Any]) -> ToolResult:
        sid = current_session.get(None)
        scope = args.get("scope", "current")
        query = SearchQuery(
            text=args["query"],
            mode=args.get("mode", "hybrid"),
            limit=int(args.get("limit", 5)),
            session_id=sid if scope == "current" else None,
            time_from_ns=_time_arg(args, "since"),
            time_to_ns=_time_arg(args, "until"),
            exclude_window=window_messages(),
            window_step=window_step,
            current_session=sid,
            withheld=withheld(),
        )
        result = await storage.run(search_chat_history, store, query)
        note = ""
        if not result.hits and _narrowed(query):
            wide = dataclasses.replace(query, session_id=None, time_from_ns=None, time_to_ns=None)
            result = await storage.run(search_chat_history, store, wide)
            if result.hits:
                note = WIDENED_NOTE
        text, quoted = quoted_search(result)
        return ToolResult(text + note, empty=not result.hits, data=result, quoted=quoted)

    return Tool(
        name="search_chat_history",
        description=(
            "Search everything said in earlier conversations (not the messages you can "
            "already see). Use it when the user refers to something from before."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 500},
                "mode": {"type": "string", "enum": list(MODES)},
                "scope": {"type": "string", "enum": ["current", "all"]},
                "since": {"type": "string", "description": "ISO date or time, local"},
                "until": {"type": "string", "description": "ISO date or time, local"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        handler=handler,
    )


WIDENED_NOTE = "\n(Found by searching all sessions at any time; the filters given matched nothing.)"


def _narrowed(query: SearchQuery) -> bool:
    """Filters a small model often sets by reflex (scope, dates, keyword-only)."""
    return bool(
        query.session_id or query.time_from_ns or query.time_to_ns or query.mode != "hybrid"
    )


_LEADING_TIME = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}:\d{2}(?::\d{2})?))?")
DAY_NS = 86_400 * 10**9


def _time_arg(args: dict[str, Any], key: str) -> int | None:
    """Local ISO date/time; extra text after it (a copied weekday) is ignored.

    A date-only ``until`` means the end of that day, as a person means it.
    """
    value = args.get(key)
    if value in (None, ""):
        return None
    match = _LEADING_TIME.match(str(value))
    if match is None:
        raise ToolArgumentError(f"{key} must be an ISO date like 2026-11-29, got {value!r}")
    date_part, time_part = match.groups()
    try:
        moment = parse_iso_in_range(f"{date_part}T{time_part}" if time_part else date_part)
    except ValueError as exc:
        raise ToolArgumentError(f"{key} must be an ISO date like 2026-11-29: {exc}") from exc
    return moment + DAY_NS if key == "until" and not time_part else moment


def format_search(result: SearchResult) -> str:
    """Excerpts as the model reads them: one block per excerpt, hits marked."""
    return quoted_search(result)[0]


def quoted_search(result: SearchResult) -> tuple[str, tuple[str, ...]]:
    """:func:`format_search`'s text, and the id of the message each of its lines quotes.

    The turn stores the ids with the result, so deleting a message takes its
    line out of every stored result (``core/quoted_results.py``, which reads
    this shape: a header per excerpt, one line per message, the text as a
    JSON string so that it never spans lines).
    """
    if not result.hits:
        return NO_MATCHES, ()
    blocks: list[str] = []
    quoted: list[str] = []
    for excerpt in result.excerpts:
        lines = [f"{EXCERPT_HEADER}{excerpt.session_id}:"]
        for item in excerpt.messages:
            message = item.message
            who = SPEAKERS.get(message.role, f"{message.role} said")
            match = " (match)" if message.id in excerpt.hit_ids else ""
            when = format_local(message.time_ns)[:16]
            said = json.dumps(message.content, ensure_ascii=False)
            lines.append(f"{QUOTE_PREFIX}{when}, {who}: {said}{match}")
            quoted.append(message.id)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks), tuple(quoted)


SPEAKERS = {"user": "the user said", "assistant": "you answered", "tool": "a tool returned"}
"""Who spoke, phrased so a small model reads an excerpt as a fact, not a script."""


# -- time -------------------------------------------------------------------------
def time_tools(clock: Callable[[], int]) -> list[Tool]:
    """``current_time`` and ``date_calc`` (add days / difference between dates)."""

    async def now(_args: dict[str, Any]) -> str:
        moment = datetime.fromtimestamp(clock() / 1e9).astimezone()
        return f"{moment.isoformat(timespec='seconds')} ({moment:%A}, week {moment:%V})"

    async def calc(args: dict[str, Any]) -> str:
        start = _parse_date(args["date"], "date")
        if "days" in args:
            result = start + timedelta(days=int(args["days"]))
            return f"{result.isoformat()} ({result:%A})"
        if "until" in args:
            other = _parse_date(args["until"], "until")
            return f"{(other - start).days} days from {start.isoformat()} to {other.isoformat()}"
        raise ToolArgumentError("give either 'days' (to add) or 'until' (to measure)")

    return [
        Tool(
            "current_time",
            "The current local date, time, weekday and week number.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            now,
        ),
        Tool(
            "date_calc",
            "Date arithmetic: add 'days' (may be negative) to 'date', "
            "or count the days from 'date' to 'until'. Dates are YYYY-MM-DD.",
            {
                "type": "object",
                "properties": {
                    "date": {"type": "string"},
                    "days": {"type": "integer", "minimum": -100000, "maximum": 100000},
                    "until": {"type": "string"},
                },
                "required": ["date"],
                "additionalProperties": False,
            },
            calc,
        ),
    ]


def _parse_date(text: str, name: str) -> date:
    try:
        return date.fromisoformat(text.strip()[:10])
    except ValueError as exc:
        raise ToolArgumentError(f"{name} must be a date like 2026-11-29, got {text!r}") from exc


# -- files ------------------------------------------------------------------------
# The model chooses the paths, so every access is checked twice: the path is
# resolved and must lie inside an allowed folder, and then the file actually
# opened (by descriptor, O_NOFOLLOW, never blocking) must still lie inside one.
# Between the two a symlink in the folder can be swapped for one pointing
# elsewhere; the second check is what stops that from leaking an outside file.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # a last component swapped for a symlink: ELOOP
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting for a writer
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def file_tools(allowed_folders: Callable[[], Sequence[str]]) -> list[Tool]:
    """``list_files`` and ``read_text_file``, confined to the folders the user allowed."""

    async def listing(args: dict[str, Any]) -> ToolResult:
        allowed = allowed_folders()
        roots = _roots(allowed)
        folder = _allowed_path(args.get("path", ""), roots)
        if folder is None:
            return ToolResult("allowed folders:\n" + "\n".join(allowed))
        return await asyncio.to_thread(_list_folder, folder, roots)

    async def reading(args: dict[str, Any]) -> ToolResult:
        roots = _roots(allowed_folders())
        path = _allowed_path(args["path"], roots)
        limit = int(args.get("max_chars", MAX_READ_CHARS))
        return await asyncio.to_thread(_read_text, path, roots, limit)

    return [
        Tool(
            "list_files",
            "List a folder the user allowed (empty path: the allowed folders themselves).",
            {
                "type": "object",
                "properties": {"path": {"type": "string", "maxLength": 4096}},
                "additionalProperties": False,
            },
            listing,
            timeout_s=10.0,
            available=lambda: bool(allowed_folders()),
        ),
        Tool(
            "read_text_file",
            "Read a text file inside a folder the user allowed.",
            {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096},
                    "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_READ_CHARS},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            reading,
            timeout_s=10.0,
            available=lambda: bool(allowed_folders()),
        ),
    ]


def _roots(allowed: Sequence[str]) -> list[Path]:
    """The allowed folders, resolved; a permission error when there are none."""
    roots = [Path(f).expanduser().resolve() for f in allowed if f]
    if not roots:
        raise PermissionError(
            "permission denied: the user has not allowed any folder (Settings → Allowed folders)"
        )
    return roots


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _denied(path: Path, roots: Sequence[Path]) -> PermissionError:
    shown = ", ".join(str(r) for r in roots)
    return PermissionError(f"permission denied: {path} is outside the allowed folders ({shown})")


def _allowed_path(raw: str, roots: Sequence[Path]) -> Path | None:
    """Resolve ``raw`` (absolute, or relative to the first allowed folder); None = roots."""
    if not raw.strip():
        return None
    candidate = Path(raw).expanduser()
    path = (candidate if candidate.is_absolute() else roots[0] / candidate).resolve()
    if not _inside(path, roots):
        raise _denied(path, roots)
    return path


def _open_inside(path: Path, roots: Sequence[Path], *, folder: bool = False) -> int:
    """Open *path* by descriptor and check that what was opened lies inside *roots*.

    The caller owns (and closes) the descriptor.
    """
    flags = _OPEN_FLAGS | (getattr(os, "O_DIRECTORY", 0) if folder else 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"not found: {path}") from None
    except OSError as exc:
        # ELOOP (or ENOTDIR with O_DIRECTORY): *path* was resolved a moment ago,
        # so a symlink there now means it was swapped in between.
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise PermissionError(f"permission denied: {path} changed while opening it") from None
        if isinstance(exc, NotADirectoryError):
            raise NotADirectoryError(f"not a folder: {path} (use read_text_file)") from None
        raise
    try:
        real = _fd_path(fd, path)
        if real is None or not _inside(real, roots):
            raise _denied(real or path, roots)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fd_path(fd: int, opened: Path) -> Path | None:
    """Where the open descriptor *fd* really is (None when that cannot be told).

    Linux names it in /proc, macOS through ``F_GETPATH``; elsewhere the file
    still at *opened* must be the very file that was opened.
    """
    proc = Path(f"/proc/self/fd/{fd}")
    if proc.is_symlink():
        return Path(os.readlink(proc))
    getpath: int | None = getattr(fcntl, "F_GETPATH", None)
    if fcntl is not None and getpath is not None:
        raw = fcntl.fcntl(fd, getpath, bytes(1024))
        return Path(os.fsdecode(raw.split(b"\0", 1)[0]))
    try:
        same = os.path.samestat(os.fstat(fd), os.stat(opened, follow_symlinks=False))
    except OSError:
        return None
    return opened if same else None


def _list_folder(folder: Path, roots: Sequence[Path]) -> ToolResult:
    fd = _open_inside(folder, roots, folder=True)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise NotADirectoryError(f"not a folder: {folder} (use read_text_file)")
        with os.scandir(fd if os.scandir in os.supports_fd else folder) as scan:
            entries = sorted(scan, key=lambda e: (not _is_dir(e), e.name.lower()))
        lines = [_entry_line(e, folder, roots) for e in entries[:MAX_LISTING]]
    finally:
        os.close(fd)
    if len(entries) > MAX_LISTING:
        lines.append(f"… and {len(entries) - MAX_LISTING} more")
    return ToolResult("\n".join(lines) or "(empty folder)", empty=not entries)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _entry_line(entry: os.DirEntry[str], folder: Path, roots: Sequence[Path]) -> str:
    """One listing line, from the entry itself: a symlink's target is never stat'ed.

    A link is shown as a link; where it points is the model's to ask for (and
    read_text_file then applies the same checks as to any path).
    """
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return f"{entry.name}  (unreadable)"
    if stat.S_ISLNK(info.st_mode):
        inside = _inside((folder / entry.name).resolve(), roots)
        return f"{entry.name}  (link{'' if inside else ' to outside the allowed folders'})"
    if stat.S_ISDIR(info.st_mode):
        return f"{entry.name}/"
    if not stat.S_ISREG(info.st_mode):
        return f"{entry.name}  (not a regular file)"
    return f"{entry.name}  ({info.st_size} bytes)"


def _read_text(path: Path | None, roots: Sequence[Path], limit: int) -> ToolResult:
    if path is None:
        raise FileNotFoundError("not found: give a file path")
    fd = _open_inside(path, roots)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{path} is a folder (use list_files)")
        if not stat.S_ISREG(mode):  # FIFO, socket, device: reading could block or never end
            raise NotTextFileError(
                f"{path.name} is not a regular file (a pipe or device); not read"
            )
        head = _read_up_to(fd, limit * 4 + 4)
    finally:
        os.close(fd)
    if b"\x00" in head[:8192]:
        raise NotTextFileError(f"{path.name} is a binary file, not text")
    text = head.decode("utf-8", errors="replace")
    clipped = text[:limit]
    more = "" if len(text) <= limit and len(head) <= limit * 4 else "\n[… file continues]"
    return ToolResult(clipped + more, empty=not clipped.strip())


def _read_up_to(fd: int, size: int) -> bytes:
    """At most *size* bytes from the start of a regular file."""
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 16))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
