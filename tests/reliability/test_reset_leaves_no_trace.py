"""Reset and Remove leave no byte of the session's text anywhere in the profile.

A secret planted in a session (its first message, so its title too; a later
message; a tool result; an earlier version of an answer; a recall record of
the timeline, its own or another session's; a search result another
session's turn stored, live or in an earlier version, also one stored before
results listed the ids they quote; a summary, and the
copy of it kept from before the last pass, when the reset clears it) must be gone from
every file of the profile after the operation: the archive and its
write-ahead log, the full-text index's segments, SQLite's free pages, the
session folder, leftovers such as a set-aside history file, and the app's log;
also from the archive copies the app set aside earlier, an upgrade backup of
an older schema and a damaged archive SQLite still reads (with its log).
Every other session keeps its messages, title and search hits.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent.builtin_tools import quoted_search
from agenvoy_desktop.core import lifecycle, message_edit
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.quoted_results import QUOTED_KEY, WITHDRAWN_KEY
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import (
    PREVIOUS_FILE,
    KeyDecision,
    Summary,
    load_previous_summary,
    load_summary,
    save_summary,
)
from agenvoy_desktop.operations import sessions as session_ops
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, FakeClock, msg
from tests.fakes import HashingEmbedder
from tests.set_aside import damaged_copy, upgrade_backup

SECRET = "quokkalock4721"
"""The planted secret: one token, found nowhere else (not even by chance in a binary file)."""
OTHER = "marguerite"
"""A word only the other session holds: it must stay findable."""


@pytest.fixture
def app_log(paths: AppPaths) -> Iterator[Path]:
    """Everything the app logs (DEBUG included) goes to the profile's log file, as in the app."""
    paths.log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(paths.log_file, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield paths.log_file
    root.removeHandler(handler)
    root.setLevel(previous)
    handler.close()


def _plant(store: MemoryStore, *, legacy: bool = False) -> tuple[str, str]:
    """A session holding the secret in every place a session's text goes, and one without it.

    *legacy*: the other session's stored search results list no ids (stored
    before results did), so only their text says what they quote.
    """
    sid = store.create_session(None, "secret")
    t = T0
    store.append(
        sid,
        [
            msg("user", f"My bike lock code is {SECRET}.", t),
            msg("assistant", "Noted, I will remember it.", t + SECOND),
            msg("user", "Check the lock file please", t + 2 * SECOND),
            msg("assistant", "", t + 3 * SECOND, tool_calls=[{"id": "c1", "name": "read"}]),
            msg("tool", f"lock.txt: code={SECRET}", t + 4 * SECOND, tool_call_id="c1", name="read"),
            msg("assistant", f"The file says {SECRET} as well.", t + 5 * SECOND),
            msg("user", "And what was it again?", t + 6 * SECOND),
            msg("assistant", f"It was {SECRET}, as you said.", t + 7 * SECOND),
        ],
    )
    session_ops.auto_title(store, sid)
    # An earlier version of the last answer (message_versions), and a new answer.
    message_edit.regenerate_truncate(store, sid, store.history(sid).messages[-1].id)
    store.append(sid, [msg("assistant", f"Your code: {SECRET}.", t + 8 * SECOND)])
    # What recall put in a prompt, as the timeline records it.
    store.archive.add_event(sid, t + 9 * SECOND, "recall", {"text": f"you said: {SECRET}"})
    # A history file a repair set aside.
    (store.folder(sid) / "history.json.corrupt-1-ab").write_text(SECRET, "utf-8")
    store.index_pending(sid)
    store.vectors(sid).flush()

    other = store.create_session(None, "other")
    store.append(
        other,
        [
            msg("user", f"The lighthouse keeper is called {OTHER.title()}", t + 20 * SECOND),
            msg("assistant", "A fine name for a keeper.", t + 21 * SECOND),
            msg("tool", f"keeper={OTHER}", t + 22 * SECOND, tool_call_id="c9", name="read"),
        ],
    )
    # A turn in the other session recalled the secret: its record of the block quotes it.
    quoted, kept = store.history(sid).messages[0], store.history(other).messages[0]
    block = f'Said before:\n- you said: "{quoted.content}"\n- you said: "{kept.content}"'
    store.archive.add_event(
        other, t + 23 * SECOND, "recall", {"text": block, "ids": [quoted.id, kept.id]}
    )
    # A turn's search_chat_history found the secret too: its stored result quotes it, and
    # the exchange, edited since, keeps an earlier version of the result as well.
    asked = _searched(store, other, t + 24 * SECOND, "bike lighthouse", legacy=legacy)
    message_edit.edit_truncate(store, other, asked)
    _searched(store, other, t + 30 * SECOND, "bike lighthouse", legacy=legacy)
    session_ops.auto_title(store, other)
    store.index_pending(other)
    store.vectors(other).flush()
    assert SECRET in str(store.archive.session(sid).title)  # type: ignore[union-attr]
    assert session_ops.content_matches(store, SECRET) == {sid: 3}
    return sid, other


def _searched(store: MemoryStore, sid: str, t: int, words: str, *, legacy: bool = False) -> str:
    """An exchange whose search_chat_history result is stored as the turn stores it
    (one keyword search per word, as the model might call it); the question's id.
    *legacy*: stored as a turn stored it before results listed the ids they quote.

    The answer does not repeat what was found: the answers stay as written
    (``core/quoted_results.py``), only the stored tool results lose the lines.
    """
    texts: list[str] = []
    quoted: list[str] = []
    for word in words.split():
        text, ids = quoted_search(search_chat_history(store, SearchQuery(word, mode="keyword")))
        texts.append(text)
        quoted += ids
    assert SECRET in texts[0]
    call = {"id": f"s{t}", "name": "search_chat_history", "arguments": {"query": words}}
    extra = {"tool_call_id": call["id"], "name": call["name"], "arguments": call["arguments"]}
    if not legacy:
        extra[QUOTED_KEY] = quoted
    question = msg("user", "What did I say before?", t)
    store.append(
        sid,
        [
            question,
            msg("assistant", "", t + SECOND, tool_calls=[call]),
            msg("tool", "\n\n".join(texts), t + 2 * SECOND, **extra),
            msg("assistant", "I found it in your earlier chat.", t + 3 * SECOND),
        ],
    )
    return question.id


def _stored_results(store: MemoryStore, sid: str) -> list[Message]:
    """The session's stored search results, as history.json and the archive hold them."""
    archived = [r.message for r in store.archive.messages(sid, 0) if r.message.role == "tool"]
    kept = [m for m in store.history(sid).messages if m.role == "tool"]
    return [m for m in [*archived, *kept] if m.extra.get("name") == "search_chat_history"]


def _traces(root: Path, secret: str = SECRET) -> list[str]:
    """Every file under *root* whose bytes hold *secret* (UTF-8), with the count."""
    needle = secret.encode("utf-8")
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            count = path.read_bytes().count(needle)
            if count:
                found.append(f"{path.relative_to(root)}: {count}")
    return sorted(found)


def _assert_no_trace(paths: AppPaths) -> None:
    assert _traces(paths.config_dir) == []
    assert _traces(paths.data_dir) == []


def _assert_other_intact(store: MemoryStore, other: str) -> None:
    assert store.archive.count(other) == 7
    results = _stored_results(store, other)
    assert len(results) == 2  # the archive's row and history.json's copy
    for result in results:  # the secret's lines went, the keeper's stayed
        assert SECRET not in result.content
        assert OTHER.title() in result.content
        assert result.extra[WITHDRAWN_KEY] >= 1
    assert store.history(other).messages[-1].content == "I found it in your earlier chat."
    first = store.history(other).messages[0]
    assert first.content.endswith(OTHER.title())
    meta = store.archive.session(other)
    assert meta is not None
    assert meta.title == first.content
    assert session_ops.content_matches(store, OTHER) == {other: 1}
    recalled = store.archive.last_event(other, "recall")
    assert recalled is not None
    assert OTHER.title() in recalled[1]["text"]  # its own line stays; the secret's line went
    hits = search_chat_history(store, SearchQuery(OTHER, mode="keyword", include_tool=True))
    assert {h.item.session_id for h in hits.hits} == {other}
    semantic = search_chat_history(store, SearchQuery(f"keeper {OTHER}", mode="semantic"))
    assert semantic.hits
    assert {h.item.session_id for h in semantic.hits} == {other}
    assert store.archive.fts_ok()
    assert store.archive.integrity_problems() == []


def _assert_secret_gone(store: MemoryStore) -> None:
    assert session_ops.content_matches(store, SECRET) == {}
    assert store.archive.keyword_search(SECRET, limit=10, include_tool=True) == []
    assert not any(SECRET in (m.title or "") for m in store.archive.sessions())


Operation = Callable[[MemoryStore, str], Any]


def _check(
    paths: AppPaths,
    operate: Operation,
    *,
    removed: bool,
    legacy: bool = False,
    set_aside: bool = False,
) -> None:
    """Plant, *operate*, then look for the secret in every file, app running and closed.

    *set_aside*: the profile also holds copies of the archive the app set
    aside after the secret was planted (:func:`_plant_set_aside`).
    """
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    sid, other = _plant(store, legacy=legacy)
    if removed:  # a reset keeps the summary by design; a remove takes it and its copies
        _plant_in_previous_summary(store.folder(sid))
    if set_aside:
        _plant_set_aside(paths)
    assert _traces(paths.config_dir)  # the check itself sees the secret before
    operate(store, sid)
    assert store.exists(sid) is not removed
    assert store.folder(sid).is_dir() is not removed  # a reset session stays, empty
    _assert_secret_gone(store)
    _assert_other_intact(store, other)
    _assert_no_trace(paths)  # while the app still runs
    store.close()
    _assert_no_trace(paths)
    reopened = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        _assert_secret_gone(reopened)
        _assert_other_intact(reopened, other)
    finally:
        reopened.close()
    _assert_no_trace(paths)


def _plant_set_aside(paths: AppPaths) -> None:
    """An upgrade backup (the archive of schema 4, as profile.back_up copies it) and a
    damaged archive SQLite still reads (with its write-ahead log), both holding the secret."""
    for copy in (upgrade_backup(paths), damaged_copy(paths)):
        held = [p for p in copy.parent.glob(copy.name + "*") if SECRET.encode() in p.read_bytes()]
        assert held, copy


@pytest.mark.parametrize("removed", [False, True], ids=["reset", "remove"])
def test_the_copies_set_aside_earlier_keep_no_trace(
    paths: AppPaths, app_log: Path, removed: bool
) -> None:
    """An upgrade backup and a damaged archive lose the session (and others' quotes of it)."""
    operate = session_ops.remove_session if removed else session_ops.reset_session
    _check(paths, operate, removed=removed, set_aside=True)


def test_reset_leaves_no_trace(paths: AppPaths, app_log: Path) -> None:
    _check(paths, session_ops.reset_session, removed=False)
    assert app_log.exists()


def test_a_typed_title_of_the_sessions_own_words_goes_with_a_reset(paths: AppPaths) -> None:
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid, _other = _plant(store)
        said = f"My bike lock code is {SECRET}."
        session_ops.rename_session(store, sid, said)  # typed, and the same as a message
        assert SECRET in (store.folder(sid) / "session.json").read_text("utf-8")
        session_ops.reset_session(store, sid)
        _assert_secret_gone(store)
    finally:
        store.close()
    _assert_no_trace(paths)


def test_reset_keeps_the_summary_unless_asked_to_clear_it(paths: AppPaths, app_log: Path) -> None:
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid, other = _plant(store)
        folder = store.folder(sid)
        earlier = Summary(key_decisions=(KeyDecision("use the red lock"),))
        summary = Summary(key_decisions=(KeyDecision("use the blue lock"),))
        save_summary(folder, earlier)
        save_summary(folder, summary)
        session_ops.reset_session(store, sid)
        assert load_summary(folder) == summary  # kept by design
        assert load_previous_summary(folder) == earlier  # and what it was before, with it
        _plant_in_previous_summary(folder)
        session_ops.reset_session(store, sid, clear_summary=True)
        assert load_summary(folder) is None
        assert load_previous_summary(folder) is None
        _assert_secret_gone(store)
        _assert_other_intact(store, other)
        _assert_no_trace(paths)
    finally:
        store.close()
    _assert_no_trace(paths)


def _plant_in_previous_summary(folder: Path) -> None:
    """The secret in the summary before the last pass only (the pass dropped it)."""
    save_summary(folder, Summary(key_decisions=(KeyDecision(SECRET),)))
    save_summary(folder, Summary(current_discussion="Locks."))
    assert SECRET in (folder / PREVIOUS_FILE).read_text("utf-8")


def test_remove_leaves_no_trace(paths: AppPaths, app_log: Path) -> None:
    _check(paths, session_ops.remove_session, removed=True)


@pytest.mark.parametrize("removed", [False, True], ids=["reset", "remove"])
def test_a_search_result_stored_without_ids_keeps_no_trace(
    paths: AppPaths, app_log: Path, removed: bool
) -> None:
    """Another session's stored result from before results listed ids quotes the secret:
    its lines are matched by text, and no file keeps them."""
    operate = session_ops.remove_session if removed else session_ops.reset_session
    _check(paths, operate, removed=removed, legacy=True)


def test_an_interrupted_remove_finished_at_start_leaves_no_trace(
    paths: AppPaths, app_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the journal was written: the next start finishes the job, traceless."""

    def crash(store: MemoryStore, op: str, session_id: str, **_options: object) -> None:
        raise KeyboardInterrupt

    def crashing_remove(store: MemoryStore, sid: str) -> None:
        with monkeypatch.context() as patch:
            patch.setattr(lifecycle, "_perform", crash)
            with pytest.raises(KeyboardInterrupt):
                lifecycle.remove_session(store, sid)
        assert lifecycle.finish_pending(store) == [f"finished interrupted remove of session {sid}"]

    _check(paths, crashing_remove, removed=True)


def test_remove_through_the_undo_window_leaves_no_trace(
    paths: AppPaths, app_log: Path, qapp: Any, qtbot: Any
) -> None:
    """The window's path: Remove starts the undo window; when it passes, the store deletes."""
    pending_ops = pytest.importorskip("agenvoy_desktop.ui.pending_ops")
    started: list[Any] = []

    class Storage:
        async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
            return fn(*args)

    class Services:
        storage = Storage()
        store: MemoryStore

        def forget_prompts(self) -> None:
            """No chat model here: nothing to forget."""

    class Runner:
        def run(self, coro: Any, what: str = "") -> None:
            started.append(coro)

        def broadcast(self, changes: object) -> None:
            pass

        def readable(self, exc: BaseException) -> str:
            return str(exc)

    def remove_after_the_window(store: MemoryStore, sid: str) -> None:
        services = Services()
        services.store = store
        ops = pending_ops.PendingOps(services, Runner(), delay_ms=1)
        op = ops.schedule("remove", sid, "title")
        assert store.exists(sid)  # nothing deleted inside the window
        qtbot.waitUntil(lambda: bool(started), timeout=10_000)  # the window passed
        asyncio.run(started.pop())
        assert op.state == "done"
        assert op.not_cleaned == ()  # every copy set aside was read and cleaned
        ops.deleteLater()

    _check(paths, remove_after_the_window, removed=True, set_aside=True)


def test_the_lock_name_a_reset_keeps_is_the_summarizers() -> None:
    from agenvoy_desktop.core.summarizer.runs import LOCK_FILE

    assert lifecycle.SUMMARIZER_LOCK == LOCK_FILE


def test_an_interrupted_reset_that_clears_the_summary_clears_it_at_start(
    paths: AppPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal remembers the choice: the roll-forward clears the summary too."""
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid, other = _plant(store)
        _plant_in_previous_summary(store.folder(sid))

        def crash(*_args: object, **_options: object) -> None:
            raise OSError("killed")

        with monkeypatch.context() as patch:
            patch.setattr(lifecycle, "_perform", crash)
            with pytest.raises(OSError, match="killed"):
                lifecycle.reset_session(store, sid, clear_summary=True)
        assert lifecycle.finish_pending(store) == [f"finished interrupted reset of session {sid}"]
        assert load_summary(store.folder(sid)) is None
        _assert_secret_gone(store)
        _assert_other_intact(store, other)
        _assert_no_trace(paths)
    finally:
        store.close()


def test_the_archive_zeroes_what_it_deletes(paths: AppPaths) -> None:
    """Debian's SQLite zeroes freed space by default; other builds do not: the archive asks."""
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        assert store.archive._query("PRAGMA secure_delete") == [(1,)]
    finally:
        store.close()


def test_a_title_the_person_typed_survives_a_reset(paths: AppPaths) -> None:
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid = store.create_session("Bike", "typed")
        store.append(sid, [msg("user", f"Bike code {SECRET}", T0), msg("assistant", "ok", T0 + 1)])
        session_ops.reset_session(store, sid)
        assert store.archive.session(sid).title == "Bike"  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_long_first_message_makes_a_cut_title_that_a_reset_clears(paths: AppPaths) -> None:
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid = store.create_session(None, "long")
        words = f"Please   remember that the code of the blue bike lock is {SECRET} for now"
        store.append(sid, [msg("user", words, T0), msg("assistant", "ok", T0 + 1)])
        title = session_ops.auto_title(store, sid).value
        assert title is not None
        assert title.endswith("…")
        session_ops.reset_session(store, sid)
        assert store.archive.session(sid).title is None  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_fork_of_an_automatic_title_loses_it_with_a_reset(paths: AppPaths) -> None:
    """A fork's title is its source's plus " (fork)": made of the same words, it goes too."""
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid = store.create_session(None, "source")
        said = f"My bike lock code is {SECRET}."
        store.append(sid, [msg("user", said, T0), msg("assistant", "ok", T0 + 1)])
        session_ops.auto_title(store, sid)
        last = store.history(sid).messages[-1].id
        fork = message_edit.fork_session(store, sid, last)
        assert SECRET in (store.archive.session(fork).title or "")  # type: ignore[union-attr]
        session_ops.reset_session(store, fork)
        assert store.archive.session(fork).title is None  # type: ignore[union-attr]
        assert SECRET not in (store.folder(fork) / "session.json").read_text("utf-8")
    finally:
        store.close()


@pytest.mark.parametrize("legacy", [False, True], ids=["ids", "without-ids"])
def test_deleting_one_message_leaves_no_trace_of_it(paths: AppPaths, legacy: bool) -> None:
    """A person who deletes the message with the code in it means it: not in any file."""
    store = open_memory(paths, HashingEmbedder(dim=32), clock=FakeClock())
    try:
        sid = store.create_session(None, "one")
        texts = [f"filler message {i} about the weather" for i in range(30)]
        texts[10] = f"My bike lock code is {SECRET}."
        store.append(sid, [msg("user", t, T0 + i * SECOND) for i, t in enumerate(texts)])
        other = store.create_session(None, "other")
        # Another turn's search found it (and stored the ids it quotes, or, before, did not).
        _searched(store, other, T0 + 100 * SECOND, "bike", legacy=legacy)
        assert _traces(paths.config_dir)
        planted = store.history(sid).messages[10]
        message_edit.delete_message(store, sid, planted.id)
        _assert_secret_gone(store)
        assert _traces(paths.config_dir) == []  # while the app is still open
        for result in _stored_results(store, other):
            assert result.extra[WITHDRAWN_KEY] == 1
            assert "filler message 9" in result.content  # its neighbours' lines stay
            assert planted.id not in result.extra.get(QUOTED_KEY, [])
    finally:
        store.close()
    _assert_no_trace(paths)
