"""How the loaded pages of the sessions list take in pages, reloads and changed rows (no Qt)."""

from __future__ import annotations

from agenvoy_desktop.core.store import SessionInfo
from agenvoy_desktop.operations.sessions import SessionPage, page_key
from agenvoy_desktop.ui.session_listing import Listing


def info(sid: str, updated: int, messages: int = 0) -> SessionInfo:
    return SessionInfo(sid, None, 0, updated, 0, 0, messages, 0, 0)


def page(*infos: SessionInfo, total: int, more: bool) -> SessionPage:
    return SessionPage(list(infos), total, more)


def ids(listing: Listing) -> list[str]:
    return [i.session_id for i in listing.infos]


def test_a_next_page_skips_a_row_already_shown() -> None:
    listing = Listing(page(info("c", 30), info("b", 20), total=4, more=True))
    listing.extend(page(info("b", 20), info("a", 10), total=4, more=False))
    assert ids(listing) == ["c", "b", "a"]
    assert not listing.more


def test_a_reload_keeps_rows_below_its_end() -> None:
    listing = Listing(page(info("c", 30), info("b", 20), total=5, more=True))
    through = listing.last_key()
    assert through == (20, "b")
    listing.extend(page(info("a", 10), total=5, more=True))  # came while the reload ran
    listing.reload(page(info("d", 40), info("c", 30), info("b", 20), total=6, more=True), through)
    assert ids(listing) == ["d", "c", "b", "a"]
    assert listing.total == 6
    assert listing.more


def test_a_changed_row_moves_to_its_place_or_waits_for_its_page() -> None:
    listing = Listing(page(info("c", 30), info("b", 20), total=5, more=True))
    listing.update(page(info("b", 50, messages=2), total=5, more=False), {"b"}, add=True)
    assert ids(listing) == ["b", "c"]
    assert listing.infos[0].archived_messages == 2
    listing.update(page(info("z", 5), total=5, more=False), {"z"}, add=True)
    assert ids(listing) == ["b", "c"]  # below the last loaded row: its page brings it
    listing.update(page(total=4, more=False), {"c"}, add=True)  # gone from the store
    assert ids(listing) == ["b"]
    assert listing.total == 4


def test_a_search_keeps_its_own_rows_and_total() -> None:
    found = Listing(page(info("c", 30), total=1, more=False))
    found.update(page(info("n", 90), info("c", 35), total=9, more=False), {"n", "c"}, add=False)
    assert ids(found) == ["c"]
    assert found.infos[0].updated_ns == 35
    assert found.total == 1


def test_a_removed_session_leaves_the_rows_and_the_total() -> None:
    listing = Listing(page(info("c", 30), info("b", 20), total=5, more=True))
    listing.drop("b", counted=True)
    assert ids(listing) == ["c"]
    assert listing.total == 4
    assert listing.last_key() == page_key(info("c", 30))
