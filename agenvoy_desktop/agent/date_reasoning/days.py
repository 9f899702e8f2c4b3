"""The calendar arithmetic the date modules share: a timestamp's local day, months.

Both reading a message's dates (:mod:`.mentions`) and wording a span of time
(:mod:`.wording`) step by calendar months, and both must read a timestamp's
day the way the rest of the agent does; one place keeps them in step.
"""

from __future__ import annotations

import datetime as dt


def local_date(ns: int) -> dt.date:
    """The local calendar day of a UTC-ns timestamp, read as ``agent/context.py`` reads it."""
    return dt.datetime.fromtimestamp(ns / 1e9).astimezone().date()


def add_months(day: dt.date, months: int) -> dt.date:
    """*day* moved by calendar months, clamped to the month's end (Jan 31 + 1 = Feb 28)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return dt.date(year, month + 1, min(day.day, month_length(year, month + 1)))


def month_length(year: int, month: int) -> int:
    following = dt.date(year + month // 12, month % 12 + 1, 1)
    return (following - dt.timedelta(days=1)).day
