"""Fetch ranked candidates until enough of them survive the caller's filters.

A store ranks in SQL with a LIMIT and filters the short list afterwards
(expiry, time range, excluded ids, another tool).  Asking for exactly
*limit* rows would come back short whenever some are filtered out; asking
for everything would rank everything.  So the fetch starts a few times
*limit* and grows eightfold until enough survive or the index has no more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

GROWTH = 8
"""Each retry fetches this many times more candidates than the last."""

Page = Callable[[int], tuple[Sequence[T], bool]]
"""``page(fetch)``: (the survivors among the best *fetch* candidates, best first;
whether the index returned fewer than *fetch*, i.e. has no more to give)."""


def fetch_enough(page: Page[T], limit: int, first_fetch: int) -> list[T]:
    """The best *limit* survivors, widening the fetch from *first_fetch* until enough."""
    fetch = first_fetch
    while True:
        survivors, exhausted = page(fetch)
        if len(survivors) >= limit or exhausted:
            return list(survivors[:limit])
        fetch *= GROWTH
