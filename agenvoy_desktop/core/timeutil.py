"""Time conversions: every stored timestamp is UTC Unix nanoseconds.

History files and the CLI speak ISO 8601; the reference implementation wrote
``當前時間: YYYY-MM-DD HH:MM:SS`` headers in *local* time.  Naive times are
therefore read as local time everywhere, consistently.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from agenvoy_desktop.core.errors import KnownError

Clock = Callable[[], int]
"""Returns the current UTC time in Unix nanoseconds (injectable in tests)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SUB_MICRO = re.compile(r"(?<=\.\d{6})(\d{1,3})(?!\d)")
HEADER_RE = re.compile(r"^\s*當前時間[:：]\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)\s*\n?")

MIN_TIME_NS = 0
"""1970-01-01T00:00:00Z, the earliest time a message may carry.

No conversation predates the Unix epoch, and negative stamps break
``datetime.fromtimestamp`` on Windows, which the CLI and the window use to
show local times.
"""
MAX_TIME_NS = 9_214_646_400 * 1_000_000_000
"""2262-01-01T00:00:00Z (exclusive), the latest time a message may carry.

Times are stored as SQLite INTEGER nanoseconds, a signed 64-bit number that
ends at 2262-04-11; stopping at the start of that year leaves room for the
day-sized arithmetic search does on a bound (``until`` a date means the end of
that day) without ever reaching the overflow that used to brick a profile.
"""


class TimeRangeError(KnownError, ValueError):
    """A time the archive cannot store; ``str()`` names the time and the range."""


class TimeFormatError(KnownError, ValueError):
    """Text that is not an ISO 8601 time; ``str()`` quotes it."""


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

    Raises :class:`TimeFormatError` with the offending text on anything else.
    """
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    sub_micro = 0
    if match := _SUB_MICRO.search(cleaned):  # datetime stops at microseconds
        sub_micro = int(match.group(1).ljust(3, "0"))
        cleaned = cleaned[: match.start()] + cleaned[match.end() :]
    try:
        return _to_ns(datetime.fromisoformat(cleaned)) + sub_micro
    except (ValueError, OverflowError):  # overflow: year 1 or 9999 shifted by its offset
        raise TimeFormatError(f"not an ISO 8601 time: {text!r}") from None


def check_time_ns(ns: int, shown: str | None = None) -> int:
    """Return *ns* if the archive can store it, else raise :class:`TimeRangeError`.

    *shown* is how the caller's input spelled the time (for the message).
    """
    if MIN_TIME_NS <= ns < MAX_TIME_NS:
        return ns
    what = repr(shown) if shown is not None else f"{ns} ns"
    raise TimeRangeError(
        f"time {what} is out of range: times must lie between 1970-01-01 and 2261-12-31 (UTC)"
    )


def parse_iso_in_range(text: str) -> int:
    """:func:`parse_iso`, refusing times outside what the archive can store."""
    return check_time_ns(parse_iso(text), text)


def format_iso(ns: int) -> str:
    """UTC ns as ISO 8601 with a ``Z`` (the history.json form).

    Microseconds always; nanoseconds only when there are any, so a message
    read back from history.json has exactly the time the archive holds.
    """
    moment = _EPOCH + timedelta(microseconds=ns // 1000)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return f"{text}{ns % 1000:03d}Z" if ns % 1000 else f"{text}Z"


def format_local(ns: int) -> str:
    """Human-readable local time, for CLI output and excerpts."""
    return datetime.fromtimestamp(ns / 1e9).astimezone().strftime("%Y-%m-%d %H:%M")


def local_date(ns: int) -> date:
    """The local calendar day of a UTC ns time (the day the user saw it happen)."""
    return datetime.fromtimestamp(ns / 1e9).astimezone().date()


def split_time_header(content: str) -> tuple[int | None, str]:
    """Strip a reference-implementation ``當前時間:`` header, returning (UTC ns, rest)."""
    match = HEADER_RE.match(content)
    if match is None:
        return None, content
    stamp = match.group(1).replace("T", " ")
    fmt = "%Y-%m-%d %H:%M:%S" if stamp.count(":") == 2 else "%Y-%m-%d %H:%M"
    try:
        return _to_ns(datetime.strptime(stamp, fmt)), content[match.end() :]
    except (ValueError, OverflowError):
        return None, content
