"""The offline tools every turn offers: memory search, time, and allowed files.

Each handler checks what the schema cannot (dates that parse, paths inside
the folders the user allowed) and raises :class:`ToolArgumentError` or a
plain exception with a message the model can act on; the registry turns
those into tool errors, which is what the error memory learns from.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolArgumentError, ToolResult
from agenvoy_desktop.agent.turn import current_session
from agenvoy_desktop.core.search import MODES, SearchQuery, SearchResult, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import format_local, parse_iso

MAX_READ_CHARS = 20_000
MAX_LISTING = 200


# -- search_chat_history --------------------------------------------------------
def search_tool(storage: Storage, store: MemoryStore, window_messages: Callable[[], int]) -> Tool:
    """``search_chat_history``: the three memory layers, minus the current window."""

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
            current_session=sid,
        )
        result = await storage.run(search_chat_history, store, query)
        note = ""
        if not result.hits and _narrowed(query):
            wide = dataclasses.replace(query, session_id=None, time_from_ns=None, time_to_ns=None)
            result = await storage.run(search_chat_history, store, wide)
            if result.hits:
                note = WIDENED_NOTE
        return ToolResult(format_search(result) + note, empty=not result.hits, data=result)

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
        moment = parse_iso(f"{date_part}T{time_part}" if time_part else date_part)
    except ValueError as exc:
        raise ToolArgumentError(f"{key} must be an ISO date like 2026-11-29: {exc}") from exc
    return moment + DAY_NS if key == "until" and not time_part else moment


def format_search(result: SearchResult) -> str:
    """Excerpts as the model reads them: one block per excerpt, hits marked."""
    if not result.hits:
        return "no matching messages"
    blocks: list[str] = []
    for excerpt in result.excerpts:
        lines = [f"From session {excerpt.session_id}:"]
        for item in excerpt.messages:
            message = item.message
            who = SPEAKERS.get(message.role, f"{message.role} said")
            match = " (match)" if message.id in excerpt.hit_ids else ""
            when = format_local(message.time_ns)[:16]
            lines.append(
                f"- {when}, {who}: {json.dumps(message.content, ensure_ascii=False)}{match}"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


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
def file_tools(allowed_folders: Callable[[], Sequence[str]]) -> list[Tool]:
    """``list_files`` and ``read_text_file``, confined to the folders the user allowed."""

    async def listing(args: dict[str, Any]) -> ToolResult:
        allowed = allowed_folders()
        folder = _allowed_path(args.get("path", ""), allowed)
        if folder is None:
            return ToolResult("allowed folders:\n" + "\n".join(allowed))
        return await asyncio.to_thread(_list_folder, folder)

    async def reading(args: dict[str, Any]) -> ToolResult:
        path = _allowed_path(args["path"], allowed_folders())
        limit = int(args.get("max_chars", MAX_READ_CHARS))
        return await asyncio.to_thread(_read_text, path, limit)

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


def _allowed_path(raw: str, allowed: Sequence[str]) -> Path | None:
    """Resolve ``raw`` (absolute, or relative to the first allowed folder); None = roots."""
    roots = [Path(f).expanduser().resolve() for f in allowed if f]
    if not roots:
        raise PermissionError(
            "permission denied: the user has not allowed any folder (Settings → Allowed folders)"
        )
    if not raw.strip():
        return None
    candidate = Path(raw).expanduser()
    path = (candidate if candidate.is_absolute() else roots[0] / candidate).resolve()
    if not any(path == root or path.is_relative_to(root) for root in roots):
        shown = ", ".join(str(r) for r in roots)
        raise PermissionError(f"permission denied: {path} is outside the allowed folders ({shown})")
    return path


def _list_folder(folder: Path) -> ToolResult:
    if not folder.exists():
        raise FileNotFoundError(f"not found: {folder}")
    if not folder.is_dir():
        raise NotADirectoryError(f"not a folder: {folder} (use read_text_file)")
    entries = sorted(os.scandir(folder), key=lambda e: (not e.is_dir(), e.name.lower()))
    lines = [
        f"{e.name}/" if e.is_dir() else f"{e.name}  ({e.stat().st_size} bytes)"
        for e in entries[:MAX_LISTING]
    ]
    if len(entries) > MAX_LISTING:
        lines.append(f"… and {len(entries) - MAX_LISTING} more")
    return ToolResult("\n".join(lines) or "(empty folder)", empty=not entries)


def _read_text(path: Path | None, limit: int) -> ToolResult:
    if path is None or not path.exists():
        raise FileNotFoundError(f"not found: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder (use list_files)")
    with path.open("rb") as handle:
        head = handle.read(limit * 4 + 4)
    if b"\x00" in head[:8192]:
        raise ValueError(f"{path.name} is a binary file, not text")
    text = head.decode("utf-8", errors="replace")
    clipped = text[:limit]
    more = "" if len(text) <= limit and len(head) <= limit * 4 else "\n[… file continues]"
    return ToolResult(clipped + more, empty=not clipped.strip())
