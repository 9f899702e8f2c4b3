"""Time conversions: every stored timestamp is UTC Unix nanoseconds.

History files and the CLI speak ISO 8601; the reference implementation wrote
``當前時間: YYYY-MM-DD HH:MM:SS`` headers in *local* time.  Naive times are
therefore read as local time everywhere, consistently.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], int]
"""Returns the current UTC time in Unix nanoseconds (injectable in tests)."""

HEADER_RE = re.compile(r"^\s*當前時間[:：]\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)\s*\n?")


def now_ns() -> int:
    """The default clock."""
    return time.time_ns()


def _to_ns(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.astimezone()  # naive = local wall time
    delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def parse_iso(text: str) -> int:
    """Parse an ISO 8601 timestamp (``Z`` allowed; naive = local) into UTC ns.

    Raises ValueError with the offending text on anything else.
    """
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        return _to_ns(datetime.fromisoformat(cleaned))
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {text!r}") from None


def format_iso(ns: int) -> str:
    """UTC ns as ISO 8601 with microseconds and a ``Z`` (the history.json form)."""
    moment = datetime.fromtimestamp(ns // 1000 / 1_000_000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_local(ns: int) -> str:
    """Human-readable local time, for CLI output and excerpts."""
    return datetime.fromtimestamp(ns / 1e9).astimezone().strftime("%Y-%m-%d %H:%M")


def split_time_header(content: str) -> tuple[int | None, str]:
    """Strip a reference-implementation ``當前時間:`` header, returning (UTC ns, rest)."""
    match = HEADER_RE.match(content)
    if match is None:
        return None, content
    stamp = match.group(1).replace("T", " ")
    fmt = "%Y-%m-%d %H:%M:%S" if stamp.count(":") == 2 else "%Y-%m-%d %H:%M"
    try:
        moment = datetime.strptime(stamp, fmt)
    except ValueError:
        return None, content
    return _to_ns(moment), content[match.end() :]
