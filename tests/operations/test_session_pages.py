"""The sessions list a page at a time: same order as the whole list, sized per page only."""

from __future__ import annotations

import pytest

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations import sessions as session_ops
from agenvoy_desktop.operations.sessions import page_key, session_page
from tests.conftest import conversation


@pytest.fixture
def many(store: MemoryStore) -> list[str]:
    """23 sessions with titles "chat 00".."chat 22", the newest activity last."""
    return [store.create_session(f"chat {n:02d}") for n in range(23)]


def ids(page: session_ops.SessionPage) -> list[str]:
    return [info.session_id for info in page.infos]


def walk(store: MemoryStore, limit: int, **search: object) -> list[str]:
    """Every page, each continuing after the last row of the one before."""
    seen: list[str] = []
    after = None
    while True:
        page = session_page(store, after, limit, **search)  # type: ignore[arg-type]
        seen += ids(page)
        if not page.more:
            return seen
        after = page_key(page.infos[-1])


def test_pages_follow_the_whole_list_and_say_the_total(store: MemoryStore, many: list[str]) -> None:
    whole = [info.session_id for info in session_ops.list_sessions(store)]
    first = session_page(store, limit=5)
    assert ids(first) == whole[:5] == list(reversed(many))[:5]
    assert first.total == 23
    assert first.more
    assert first.infos == session_ops.list_sessions(store, vectors=False)[:5]  # sizes included
    assert walk(store, 5) == whole
    assert not session_page(store, limit=23).more


def test_a_page_continues_after_its_key_when_a_session_moved_to_the_top(
    store: MemoryStore, many: list[str]
) -> None:
    first = session_page(store, limit=5)
    moved = many[3]  # not loaded yet: it would shift an offset by one
    store.append(moved, conversation(["a", "b"]))
    second = session_page(store, page_key(first.infos[-1]), 5)
    assert moved not in ids(second)
    assert ids(second) == list(reversed(many))[5:10]
    assert session_page(store, limit=1).infos[0].session_id == moved


def test_a_window_reloads_every_row_down_to_the_last_loaded(
    store: MemoryStore, many: list[str]
) -> None:
    loaded = ids(session_page(store, limit=8))
    created = store.create_session("brand new")
    window = session_ops.session_window(store, page_key(store.info(loaded[-1])))
    assert ids(window) == [created, *loaded]
    assert window.total == 24
    assert window.more


def test_search_finds_sessions_beyond_the_first_page_by_title_and_content(
    store: MemoryStore, many: list[str]
) -> None:
    store.append(many[0], conversation(["the lighthouse keeper", "ok"]))
    store.archive.set_title(many[1], "Lighthouse trip")
    store.append(many[2], conversation(["nothing relevant", "ok"]))
    found = session_ops.search_sessions(store, "lighthouse", limit=1)
    assert found.total == 2
    assert found.more
    assert set(found.hits) == {many[0]}
    rest = session_page(store, page_key(found.infos[0]), 1, title="lighthouse", matches=found.hits)
    assert {*ids(found), *ids(rest)} == {many[0], many[1]}
    assert not rest.more
    assert walk(store, 2, title="CHAT 2") == [many[22], many[21], many[20]]


def test_an_untitled_session_is_found_by_the_name_the_list_gives_it(store: MemoryStore) -> None:
    sid = store.create_session()
    assert ids(session_page(store, title="new conv")) == [sid]


def test_rows_by_id_leave_out_removed_sessions_and_count_the_rest(
    store: MemoryStore, many: list[str]
) -> None:
    session_ops.remove_session(store, many[5])
    page = session_ops.sessions_by_id(store, {many[5], many[6], many[7]})
    assert ids(page) == [many[7], many[6]]
    assert page.total == 22
    assert not page.more


def test_a_folder_without_an_archive_row_is_listed_last(
    store: MemoryStore, many: list[str]
) -> None:
    store.folder("zz-orphan").mkdir()
    (store.paths.sessions_dir / "not valid!").mkdir()
    whole = [info.session_id for info in session_ops.list_sessions(store)]
    assert walk(store, 6) == whole
    assert whole[-1] == "zz-orphan"
    assert session_page(store).total == 24
