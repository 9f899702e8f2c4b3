"""Offline tools: search over memory, dates, and files limited to allowed folders."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent import builtin_tools
from agenvoy_desktop.agent.builtin_tools import file_tools, search_tool, time_tools
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolOutcome, ToolRegistry
from agenvoy_desktop.agent.turn import current_session
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation


def _call(tools: list[Tool], name: str, args: dict[str, Any], sid: str = "") -> ToolOutcome:
    registry = ToolRegistry(tools)

    async def main() -> ToolOutcome:
        token = current_session.set(sid)
        try:
            return await registry.call(name, args)
        finally:
            current_session.reset(token)

    return asyncio.run(main())


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "sub").mkdir(parents=True)
    (root / "todo.txt").write_text("buy milk\n", encoding="utf-8")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    return root


def test_read_and_list_inside_allowed_folder(allowed: Path) -> None:
    tools = file_tools(lambda: [str(allowed)])
    listing = _call(tools, "list_files", {"path": str(allowed)})
    assert not listing.is_error
    assert listing.content.splitlines()[0] == "sub/"
    assert "todo.txt" in listing.content
    read = _call(tools, "read_text_file", {"path": "todo.txt"})
    assert read.content == "buy milk\n"
    roots = _call(tools, "list_files", {})
    assert str(allowed) in roots.content


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"path": "/etc/passwd"}, "permission denied"),
        ({"path": "../outside.txt"}, "permission denied"),
        ({"path": "missing.txt"}, "not found"),
        ({"path": "blob.bin"}, "binary file"),
        ({"path": "sub"}, "is a folder"),
    ],
)
def test_file_errors_are_clear(allowed: Path, args: dict[str, str], expected: str) -> None:
    outcome = _call(file_tools(lambda: [str(allowed)]), "read_text_file", args)
    assert outcome.is_error
    assert expected in outcome.content


def test_no_allowed_folder_is_a_permission_error() -> None:
    outcome = _call(file_tools(list), "list_files", {"path": "x"})
    assert outcome.is_error
    assert "has not allowed any folder" in outcome.content


def test_symlink_out_of_the_folder_is_refused(allowed: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s", encoding="utf-8")
    (allowed / "link.txt").symlink_to(secret)
    outcome = _call(file_tools(lambda: [str(allowed)]), "read_text_file", {"path": "link.txt"})
    assert "permission denied" in outcome.content


def test_date_calc() -> None:
    tools = time_tools(lambda: T0)
    assert _call(tools, "date_calc", {"date": "2026-11-29", "days": 3}).content == (
        "2026-12-02 (Wednesday)"
    )
    assert _call(tools, "date_calc", {"date": "2026-01-01", "until": "2026-03-01"}).content == (
        "59 days from 2026-01-01 to 2026-03-01"
    )
    bad = _call(tools, "date_calc", {"date": "soon", "days": 1})
    assert bad.is_error
    assert "must be a date like" in bad.content
    neither = _call(tools, "date_calc", {"date": "2026-01-01"})
    assert "either 'days'" in neither.content
    assert "2023-11-14" in _call(tools, "current_time", {}).content


def test_search_tool_excludes_window_and_reports_empty(store: MemoryStore) -> None:
    sid = store.create_session("s")
    old = conversation(["the wifi password is tulip42", "noted"], start=T0)
    recent = conversation(["what is new", "nothing"], start=T0 + 100 * SECOND)
    store.append(sid, [*old, *recent])
    storage = Storage()
    try:
        tools = [search_tool(storage, store, lambda: 2)]
        found = _call(tools, "search_chat_history", {"query": "wifi password"}, sid)
        assert not found.empty
        assert ', the user said: "the wifi password is tulip42" (match)' in found.content
        assert "tulip42" in found.content
        hidden = _call(tools, "search_chat_history", {"query": "nothing new"}, sid)
        assert "what is new" not in hidden.content
        none = _call(tools, "search_chat_history", {"query": "zeppelin", "mode": "keyword"}, sid)
        assert none.empty
        other = store.create_session("other")
        wide = _call(
            tools,
            "search_chat_history",
            {"query": "wifi", "mode": "keyword", "scope": "current"},
            other,
        )
        assert wide.content.endswith("the filters given matched nothing.)")
        assert "tulip42" in wide.content
        copied = {"query": "wifi", "since": "2023-11-14 00:00 (Tuesday, UTC+00:00)"}
        assert "tulip42" in _call(tools, "search_chat_history", copied, sid).content
        bad = _call(tools, "search_chat_history", {"query": "x", "since": "yesterday"}, sid)
        assert bad.is_error
        assert "since must be an ISO date" in bad.content
        future = _call(tools, "search_chat_history", {"query": "x", "since": "2300-01-01"}, sid)
        assert future.is_error
        assert "since must be an ISO date" in future.content
    finally:
        storage.close()


# -- file tools against a hostile folder ---------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_is_refused_without_blocking(allowed: Path) -> None:
    os.mkfifo(allowed / "pipe")
    tools = file_tools(lambda: [str(allowed)])
    outcome = _call(tools, "read_text_file", {"path": "pipe"})
    assert outcome.is_error
    assert "not a regular file" in outcome.content  # not the tool's timeout
    listing = _call(tools, "list_files", {"path": str(allowed)})
    assert "pipe  (not a regular file)" in listing.content


def test_listing_does_not_stat_symlink_targets_outside(allowed: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"s" * 12345)
    (allowed / "out").symlink_to(secret)
    (allowed / "in").symlink_to(allowed / "todo.txt")
    listing = _call(file_tools(lambda: [str(allowed)]), "list_files", {"path": str(allowed)})
    assert "12345" not in listing.content
    assert "out  (link to outside the allowed folders)" in listing.content
    assert "in  (link)" in listing.content


def test_a_final_component_swapped_after_resolving_is_refused(
    allowed: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    roots = [allowed.resolve()]
    path = builtin_tools._allowed_path("note.txt", roots)  # resolved while it was a file
    assert path is not None
    path.symlink_to(tmp_path / "secret.txt")  # then swapped for a link
    with pytest.raises(PermissionError, match="permission denied"):
        builtin_tools._read_text(path, roots, 100)


def test_a_folder_swapped_after_resolving_is_refused(allowed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "todo.txt").write_text("secret", encoding="utf-8")
    roots = [allowed.resolve()]
    (allowed / "sub" / "todo.txt").write_text("fine", encoding="utf-8")
    path = builtin_tools._allowed_path("sub/todo.txt", roots)
    assert path is not None
    (allowed / "sub").rename(tmp_path / "moved")
    (allowed / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PermissionError, match="outside the allowed folders"):
        builtin_tools._read_text(path, roots, 100)
    with pytest.raises(PermissionError):  # listing the folder resolved before the swap
        builtin_tools._list_folder(allowed / "sub", roots)


@pytest.mark.skipif(os.name != "posix", reason="atomic symlink replacement")
def test_a_symlink_swapped_in_a_loop_never_leaks(allowed: Path, tmp_path: Path) -> None:
    """The race from the bug report (18 leaks in 3,000 tries before the fix)."""
    (tmp_path / "secret.txt").write_text("SECRET", encoding="utf-8")
    link = allowed / "flip.txt"
    link.symlink_to(allowed / "todo.txt")
    stop = threading.Event()

    def flip() -> None:
        targets = [tmp_path / "secret.txt", allowed / "todo.txt"]
        n = 0
        while not stop.is_set():
            tmp = allowed / f".flip{n % 2}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(targets[n % 2])
            tmp.replace(link)
            n += 1

    registry = ToolRegistry(file_tools(lambda: [str(allowed)]))

    async def reads() -> list[ToolOutcome]:
        return [await registry.call("read_text_file", {"path": "flip.txt"}) for _ in range(1500)]

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        outcomes = asyncio.run(reads())
    finally:
        stop.set()
        flipper.join()
    assert not [o for o in outcomes if "SECRET" in o.content]
    assert any(o.content == "buy milk\n" for o in outcomes)
