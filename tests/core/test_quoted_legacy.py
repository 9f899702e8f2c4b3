"""Stored search results that list no ids lose a gone message's lines by text.

A search result another session's turn stored before results listed the ids
they quote (no ``quoted`` field) still quotes the gone message's words.
Deleting the message, resetting its session or removing it takes the line out
of that session's archive row, full-text entry, earlier versions and
history.json; a line quoting a kept message stays.  Also: a search result
quoting a message an edit or regenerate has moved to the earlier versions
loses its line when that session is reset, and archive schema v5, whose
partial indexes find the stored results without a scan.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent.builtin_tools import quoted_search
from agenvoy_desktop.agent.tools import MAX_RESULT_CHARS, Tool, ToolRegistry, ToolResult
from agenvoy_desktop.core import archive as archive_mod
from agenvoy_desktop.core import message_edit
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.quoted_results import (
    DELETED_RESULT,
    QUOTED_KEY,
    SEARCH_TOOL,
    WITHDRAWN_KEY,
)
from agenvoy_desktop.core.search import NO_MATCHES, SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations import sessions as session_ops
from tests.conftest import SECOND, T0, msg

SECRET = "quokkalock4721"
KEEPER = "Marguerite"


def _search(store: MemoryStore, words: str) -> tuple[str, tuple[str, ...]]:
    """What search_chat_history answers for each word (keyword mode), joined as one result."""
    found = [
        quoted_search(search_chat_history(store, SearchQuery(word, mode="keyword")))
        for word in words.split()
    ]
    return "\n\n".join(t for t, _ in found), tuple(i for _, ids in found for i in ids)


def _store_result(
    store: MemoryStore, sid: str, t: int, content: str, quoted: tuple[str, ...] | None
) -> str:
    """An exchange whose search result is stored as a turn stores it; *quoted* None: as
    a turn stored it before results listed ids.  Returns the question's id."""
    call = {"id": f"s{t}", "name": SEARCH_TOOL, "arguments": {"query": "bike"}}
    extra: dict[str, Any] = {"tool_call_id": call["id"], "name": SEARCH_TOOL}
    extra["arguments"] = call["arguments"]
    if quoted is not None:
        extra[QUOTED_KEY] = list(quoted)
    question = msg("user", "What did I say before?", t)
    store.append(
        sid,
        [
            question,
            msg("assistant", "", t + SECOND, tool_calls=[call]),
            msg("tool", content, t + 2 * SECOND, **extra),
            msg("assistant", "I found it.", t + 3 * SECOND),
        ],
    )
    return question.id


def _plant(store: MemoryStore) -> tuple[str, str, Message]:
    """Session A with the secret; session B whose stored result (live, and an earlier
    version of it) lists no ids and quotes both the secret and B's own keeper."""
    a = store.create_session(None, "a")
    store.append(
        a,
        [
            msg("user", f"My bike lock code is {SECRET}.", T0),
            msg("assistant", "Noted, I will remember the bike lock.", T0 + SECOND),
        ],
    )
    b = store.create_session(None, "b")
    store.append(b, [msg("user", f"The bike shop keeper is called {KEEPER}", T0 + 10 * SECOND)])
    text, _ids = _search(store, "bike")
    assert SECRET in text
    assert KEEPER in text
    asked = _store_result(store, b, T0 + 20 * SECOND, text, None)
    message_edit.edit_truncate(store, b, asked)  # the result is an earlier version now
    _store_result(store, b, T0 + 30 * SECOND, text, None)
    return a, b, store.history(a).messages[0]


def _results(store: MemoryStore, sid: str) -> list[tuple[str, dict[str, Any]]]:
    """(content, extra) of every stored search result of *sid*: archive rows, earlier
    versions and history.json."""
    live = [r.message for r in store.archive.messages(sid)]
    files = list(store.history(sid).messages)
    rows = store.archive._query(
        "SELECT content, extra FROM message_versions WHERE session_id = ? AND role = 'tool'",
        (sid,),
    )
    earlier = [(str(c), json.loads(e)) for c, e in rows]
    shown = [(m.content, m.extra) for m in [*live, *files] if m.role == "tool"]
    return [(c, e) for c, e in [*shown, *earlier] if e.get("name") == SEARCH_TOOL]


def _assert_secret_gone_from(store: MemoryStore, b: str) -> None:
    results = _results(store, b)
    assert len(results) == 3  # archive row, history.json, earlier version
    for content, extra in results:
        assert SECRET not in content
        assert KEEPER in content  # the line quoting a kept message stays
        assert extra[WITHDRAWN_KEY] >= 1
        assert QUOTED_KEY not in extra
    assert SECRET not in (store.folder(b) / "history.json").read_text("utf-8")
    assert store.archive.keyword_search(SECRET, limit=10, include_tool=True) == []
    kept = store.archive.keyword_search(KEEPER, limit=10, include_tool=True)
    assert {h.session_id for h, _ in kept} == {b}
    assert store.archive.fts_ok()


Operation = Callable[[MemoryStore, str, Message], Any]


def _delete(store: MemoryStore, sid: str, secret: Message) -> None:
    message_edit.delete_message(store, sid, secret.id)


def _reset(store: MemoryStore, sid: str, _secret: Message) -> None:
    session_ops.reset_session(store, sid)


def _remove(store: MemoryStore, sid: str, _secret: Message) -> None:
    session_ops.remove_session(store, sid)


@pytest.mark.parametrize("operate", [_delete, _reset, _remove], ids=["delete", "reset", "remove"])
def test_a_result_without_ids_loses_the_gone_lines_everywhere(
    store: MemoryStore, operate: Operation
) -> None:
    a, b, secret = _plant(store)
    assert any(SECRET in content for content, _ in _results(store, b))
    operate(store, a, secret)
    _assert_secret_gone_from(store, b)
    neighbour = "Noted, I will remember the bike lock."
    kept = [neighbour in content for content, _ in _results(store, b)]
    assert all(kept) if operate is _delete else not any(kept)


def test_a_result_cut_by_the_tool_limit_loses_its_cut_line(store: MemoryStore) -> None:
    """The registry clips a long result mid-line: the cut line still goes with its message."""
    a = store.create_session(None, "a")
    long = f"My bike lock code is {SECRET}. " + "la " * MAX_RESULT_CHARS
    store.append(a, [msg("user", "Where is my bike?", T0), msg("user", long, T0 + SECOND)])
    text, _ids = _search(store, "bike")

    async def search(_args: dict[str, Any]) -> ToolResult:
        return ToolResult(text)

    tool = Tool(SEARCH_TOOL, "search", {"type": "object", "properties": {}}, search)
    clipped = asyncio.run(ToolRegistry([tool]).call(SEARCH_TOOL, {})).content
    assert "more characters not shown]" in clipped
    assert not clipped.split("\n")[-2].endswith('"')  # the long message's line is cut
    b = store.create_session(None, "b")
    _store_result(store, b, T0 + 10 * SECOND, clipped, None)
    message_edit.delete_message(store, a, store.history(a).messages[1].id)
    results = _results(store, b)
    assert len(results) == 2  # the archive's row and history.json's copy
    for content, extra in results:
        assert SECRET not in content
        assert '"Where is my bike?"' in content
        assert extra[WITHDRAWN_KEY] == 1
    assert store.archive.keyword_search(SECRET, limit=10, include_tool=True) == []


def test_a_reset_takes_lines_quoting_the_sessions_earlier_versions_too(
    store: MemoryStore,
) -> None:
    """A search quoted an answer that a regenerate has since moved to the earlier versions:
    the answer is still the session's, so its line goes with a reset (by id here)."""
    a = store.create_session(None, "a")
    store.append(
        a,
        [msg("user", "Which lock?", T0), msg("assistant", f"The bike lock, {SECRET}.", T0 + 1)],
    )
    b = store.create_session(None, "b")
    text, ids = _search(store, "lock")
    assert SECRET in text
    _store_result(store, b, T0 + 10 * SECOND, text, ids)
    message_edit.regenerate_truncate(store, a, store.history(a).messages[-1].id)
    assert store.archive.version_count(a) == 1
    session_ops.reset_session(store, a)
    results = _results(store, b)
    assert len(results) == 2
    for content, extra in results:
        assert SECRET not in content
        assert extra[WITHDRAWN_KEY] == 2
    assert store.archive.keyword_search(SECRET, limit=10, include_tool=True) == []


def test_texts_are_read_only_while_a_result_without_ids_shows_a_line(store: MemoryStore) -> None:
    """A search that found nothing, or a result whose lines all went, is nothing to match:
    a profile without such results never reads the gone messages' texts."""
    a = store.create_session(None, "a")
    store.append(a, [msg("user", f"My bike lock code is {SECRET}.", T0)])
    b = store.create_session(None, "b")
    text, ids = _search(store, "bike")
    _store_result(store, b, T0 + 10 * SECOND, text, ids)
    _store_result(store, b, T0 + 20 * SECOND, NO_MATCHES, None)
    assert not store.archive.gone(a).has_texts
    _store_result(store, b, T0 + 30 * SECOND, text, None)
    assert store.archive.gone(a).has_texts
    session_ops.reset_session(store, a)
    assert [c for c, _ in _results(store, b)].count(DELETED_RESULT) == 4  # both, both copies
    assert not store.archive.gone(b).has_texts


# -- schema v5 -----------------------------------------------------------------------------
QUOTING_INDEXES = {
    "messages_quoting",
    "message_versions_quoting",
    "messages_unmarked",
    "message_versions_unmarked",
}


def _v4_archive(path: Path) -> None:
    """An archive as schema 4 wrote it: a question, a result listing ids, one without,
    and a search that found nothing."""
    db = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2, 3, 4):
        for statement in archive_mod.MIGRATIONS[version].split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("PRAGMA user_version = 4")
    db.execute(
        "INSERT INTO sessions (session_id, created_ns, updated_ns, next_seq)"
        " VALUES ('old', 1, 1, 4)"
    )
    listed = {"name": SEARCH_TOOL, QUOTED_KEY: ["m0"]}
    quote = f'From session old:\n- 2026-01-01 10:00, the user said: "code {SECRET}"'
    rows = [("user", f"code {SECRET}", None), ("tool", quote, listed)]
    rows.append(("tool", quote, {"name": SEARCH_TOOL}))
    rows.append(("tool", "no matching messages", {"name": SEARCH_TOOL}))
    for seq, (role, text, extra) in enumerate(rows):
        db.execute(
            "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns, tool, extra)"
            " VALUES (?, 'old', ?, ?, ?, ?, ?, ?)",
            (f"m{seq}", seq, role, text, T0 + seq, int(role == "tool"), _json(extra)),
        )
    db.close()


def _json(extra: dict[str, Any] | None) -> str | None:
    return None if extra is None else json.dumps(extra, sort_keys=True)


def _plans(archive: Archive) -> list[str]:
    """The query plan of each read of the stored results (as :func:`_stored_results` and
    :func:`_any_unmarked` of ``core/archive.py`` run them)."""
    queries = [
        query
        for table in ("messages", "message_versions")
        for query in (
            archive_mod._quoting_sql(table, archive_mod._QUOTING, "id, extra"),
            archive_mod._quoting_sql(table, archive_mod._UNMARKED),
            archive_mod._quoting_sql(table, archive_mod._UNMARKED, "1") + " LIMIT 1",
        )
    ]
    return [
        str(row[-1]) for query in queries for row in archive._query(f"EXPLAIN QUERY PLAN {query}")
    ]


def test_a_schema_4_archive_gets_the_indexes_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "archive.sqlite3"
    _v4_archive(path)
    archive = Archive(path)
    try:
        assert archive._query("PRAGMA user_version")[0][0] == archive_mod.SCHEMA_VERSION == 5
        assert [r.message.id for r in archive.messages("old")] == ["m0", "m1", "m2", "m3"]
        assert archive.fts_ok()
        names = archive._query("SELECT name FROM sqlite_master WHERE type = 'index'")
        assert {str(r[0]) for r in names} >= QUOTING_INDEXES
        # Each index lists exactly its rows: the result with ids, the one without
        # (a search that found nothing shows no line to match).
        listed = [
            archive._query(f"SELECT msg_id FROM messages INDEXED BY {name} WHERE {condition}")
            for name, condition in [
                ("messages_quoting", archive_mod._QUOTING),
                ("messages_unmarked", archive_mod._UNMARKED),
            ]
        ]
        assert listed == [[("m1",)], [("m2",)]]
    finally:
        archive.close()


def test_each_read_of_the_stored_results_uses_its_partial_index(tmp_path: Path) -> None:
    """A query uses a partial index only when its WHERE repeats the index's condition:
    a change to ``_QUOTING`` or ``_UNMARKED`` that the schema does not follow fails here.
    Also with the statistics ``PRAGMA optimize`` gathers at close."""
    archive = Archive(tmp_path / "archive.sqlite3")
    try:
        archive.ensure_session("s", T0)
        plain = [msg("user", f"words {i}", T0 + i) for i in range(300)]
        extra = {"name": SEARCH_TOOL, QUOTED_KEY: [plain[0].id]}
        results = [msg("tool", "From session s:\n- x", T0 + 400, **extra)]
        results.append(msg("tool", "From session s:\n- x", T0 + 401, name=SEARCH_TOOL))
        archive.add_messages("s", [*plain, *results], T0)
        expected = [
            f"SCAN {table} USING INDEX {table}_{index}"
            for table in ("messages", "message_versions")
            for index in ("quoting", "unmarked", "unmarked")
        ]
        assert _plans(archive) == expected
        archive._query("ANALYZE")
        assert _plans(archive) == expected
    finally:
        archive.close()
