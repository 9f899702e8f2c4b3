"""The pages of the sessions list loaded so far, and how each kind of reload merges in.

Plain Python (no Qt): the list model keeps one :class:`Listing` for every
session and one for a search's results, and shows whichever is current.
Rows stay in list order (newest activity first); a reload never throws
away rows the person scrolled to, it updates or moves them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from agenvoy_desktop.core.store import SessionInfo
from agenvoy_desktop.operations.sessions import PageKey, SessionPage, page_key


def _rank(info: SessionInfo) -> tuple[int, str]:
    return (-info.updated_ns, info.session_id)


class Listing:
    """Sessions of one listing loaded so far, the listing's total and whether more follow."""

    def __init__(self, page: SessionPage | None = None) -> None:
        self.infos: list[SessionInfo] = []
        self.total = 0
        self.more = False
        self.hits: dict[str, int] = {}
        """A search's hit counts (all of its sessions, loaded or not)."""
        if page is not None:
            self.replace(page)

    def last_key(self) -> PageKey | None:
        """Where the next page starts (None: nothing loaded yet)."""
        return page_key(self.infos[-1]) if self.infos else None

    def find(self, session_id: str) -> SessionInfo | None:
        return next((i for i in self.infos if i.session_id == session_id), None)

    def replace(self, page: SessionPage) -> None:
        """The first page (or the whole list): what was loaded before goes."""
        self.infos = list(page.infos)
        self.total, self.more = page.total, page.more
        if page.hits:  # a reload of a search's rows does not search again
            self.hits = dict(page.hits)

    def extend(self, page: SessionPage) -> None:
        """The next page: appended, without rows already shown (one may have moved up)."""
        shown = {i.session_id for i in self.infos}
        self.infos += [i for i in page.infos if i.session_id not in shown]
        self.total, self.more = page.total, page.more

    def reload(self, page: SessionPage, through: PageKey) -> None:
        """The rows down to *through* again; rows below it (a page that came meanwhile) stay."""
        fresh = {i.session_id for i in page.infos}
        limit = (-through[0], through[1])
        below = [i for i in self.infos if _rank(i) > limit and i.session_id not in fresh]
        self.infos = list(page.infos) + below
        self.total, self.more = page.total, self.more if below else page.more

    def update(self, page: SessionPage, session_ids: Collection[str], *, add: bool) -> None:
        """New rows for *session_ids* (from :func:`sessions_by_id`), each put in its place.

        A session missing from *page* is gone.  ``add`` also places sessions
        not shown yet (the list of every session; a search keeps its results
        and its own total).  A row that now sorts below the last loaded row
        waits for its page.
        """
        present = {i.session_id for i in self.infos}
        self.infos = [i for i in self.infos if i.session_id not in session_ids]
        for info in page.infos:
            if add or info.session_id in present:
                self._place(info)
        if add:
            self.total = page.total

    def _place(self, info: SessionInfo) -> None:
        rank = _rank(info)
        row = next((n for n, i in enumerate(self.infos) if _rank(i) > rank), len(self.infos))
        if row < len(self.infos) or not self.more:
            self.infos.insert(row, info)

    def drop(self, session_id: str, *, counted: bool) -> None:
        """A session the store no longer has; ``counted``: the total included it."""
        kept = [i for i in self.infos if i.session_id != session_id]
        if counted or len(kept) < len(self.infos):
            self.total = max(len(kept), self.total - 1)
        self.infos = kept

    def patch(self, change: Callable[[SessionInfo], SessionInfo]) -> None:
        """Every loaded row through *change* (counts the store has before a reload says so)."""
        self.infos = [change(info) for info in self.infos]
