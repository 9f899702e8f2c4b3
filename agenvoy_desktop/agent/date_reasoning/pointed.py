"""The past time a question or a search names, as a range to search first.

"What did I do with Rachel on the Wednesday two months ago?" names a day;
the message that answers it was most likely said on that day, and its words
("I just started ukulele lessons with Rachel today") share little with the
question but the name.  The search is told that day (``SearchQuery.points_at``)
and ranks what was said then higher; what was told later still ranks by the
whole search.  Only a time before today counts: "tonight" or "this week" in a
request for advice points at no memory.
"""

from __future__ import annotations

import datetime as dt

from agenvoy_desktop.agent.date_reasoning.mentions import located_mentions

_DAY_NS = 86_400 * 1_000_000_000


def pointed_days(text: str, today: dt.date) -> tuple[dt.date, dt.date] | None:
    """The first and last day of the first date phrase in *text* that ends before *today*."""
    for _at, mention in located_mentions(text, today):
        if mention.last < today:
            return mention.first, mention.last
    return None


def pointed_span(text: str, today: dt.date) -> tuple[int, int] | None:
    """:func:`pointed_days` as UTC ns from the first day's local midnight to the last's end."""
    days = pointed_days(text, today)
    if days is None:
        return None
    first, last = days
    return local_midnight_ns(first), local_midnight_ns(last) + _DAY_NS - 1


def local_midnight_ns(day: dt.date) -> int:
    """The UTC ns of *day*'s local midnight."""
    moment = dt.datetime(day.year, day.month, day.day).astimezone()
    return int(moment.timestamp()) * 1_000_000_000
