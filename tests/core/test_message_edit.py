"""Per-message actions: history.json, archive and vectors agree after each, and after a crash."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core import archive as archive_mod
from agenvoy_desktop.core import journal, lifecycle, message_edit
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.message_edit import MessageActionError, orphaned_with
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.turn_lock import TurnRunningError
from agenvoy_desktop.core.vectors import SessionVectors
from tests.conftest import SECOND, T0, StoreFactory, conversation, msg
from tests.core.consistency import assert_layers_agree, assert_never_found, timeline_texts

WORDS = ["alpaca", "bassoon", "cobalt", "dahlia", "emerald", "falcon", "granite", "harbor"]


def _seed(store: MemoryStore, sid: str = "s") -> list[Message]:
    """Eight messages, each with a word no other message has."""
    store.create_session("Trip", sid)
    messages = conversation([f"the {w} note number {i}" for i, w in enumerate(WORDS)])
    store.append(sid, messages)
    return messages


def _ids(store: MemoryStore, sid: str = "s") -> list[str]:
    return [m.id for m in store.history(sid).messages]


def _tool_exchange(store: MemoryStore, sid: str, start: int) -> list[Message]:
    """user, assistant calling two tools, two results, final answer."""
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": {}}},
        {"id": "c2", "type": "function", "function": {"name": "echo", "arguments": {}}},
    ]
    messages = [
        msg("user", "look up the weather", start),
        msg("assistant", "", start + SECOND, tool_calls=calls),
        msg("tool", "sunny", start + 2 * SECOND, tool_call_id="c1", name="echo"),
        msg("tool", "warm", start + 3 * SECOND, tool_call_id="c2", name="echo"),
        msg("assistant", "it is sunny and warm", start + 4 * SECOND),
    ]
    store.append(sid, messages)
    return messages


# -- delete ----------------------------------------------------------------------------
def test_delete_an_answer_takes_it_out_of_every_layer(store: MemoryStore) -> None:
    messages = _seed(store)
    gone = messages[3]
    deleted = message_edit.delete_message(store, "s", gone.id)
    assert deleted == [gone.id]
    assert _ids(store) == [m.id for m in messages if m.id != gone.id]
    assert store.archive.count("s") == 7
    assert store.archive.version_count("s") == 0  # a delete keeps nothing
    assert_layers_agree(store, "s")
    assert_never_found(store, ["dahlia"], {gone.id})
    assert "Deleted 1 message" in timeline_texts(store, "s")
    assert not list(journal.ops_dir(store).glob("*.json"))


def test_delete_fixes_the_keyword_context_of_the_next_message(store: MemoryStore) -> None:
    messages = _seed(store)
    # The answer after the question is found through the question's words (context).
    before = store.archive.keyword_search("cobalt", limit=5, with_context=True)
    assert messages[3].id in {h.message.id for h, _ in before}
    message_edit.delete_message(store, "s", messages[2].id)
    after = store.archive.keyword_search("cobalt", limit=5, with_context=True)
    assert after == []
    ranked = store.archive.keyword_search("note", limit=20, with_context=True)
    store.archive.rebuild_fts()  # the repaired entries equal a rebuild's
    assert store.archive.keyword_search("note", limit=20, with_context=True) == ranked


def test_deleting_a_user_message_or_answer_keeps_complete_tool_traffic(
    store: MemoryStore,
) -> None:
    store.create_session(None, "s")
    exchange = _tool_exchange(store, "s", T0)
    assert message_edit.delete_message(store, "s", exchange[0].id) == [exchange[0].id]
    assert message_edit.delete_message(store, "s", exchange[4].id) == [exchange[4].id]
    assert _ids(store) == [m.id for m in exchange[1:4]]
    assert_layers_agree(store, "s")


def test_deleting_tool_traffic_takes_what_it_would_orphan(store: MemoryStore) -> None:
    store.create_session(None, "s")
    exchange = _tool_exchange(store, "s", T0)
    caller, first, second = exchange[1], exchange[2], exchange[3]
    # One result of two: the call still has the other, nothing else goes.
    assert message_edit.delete_message(store, "s", first.id) == [first.id]
    # The last result: the call is left without results and goes with it.
    assert sorted(message_edit.delete_message(store, "s", second.id)) == sorted(
        [caller.id, second.id]
    )
    assert _ids(store) == [exchange[0].id, exchange[4].id]
    assert_layers_agree(store, "s")


def test_deleting_a_tool_call_takes_its_results() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": {}}}]
    caller = msg("assistant", "", T0, tool_calls=calls)
    result = msg("tool", "r", T0, tool_call_id="c1")
    stray = msg("tool", "already orphaned", T0, tool_call_id="zz")
    answer = msg("assistant", "done", T0)
    assert orphaned_with([caller, result, stray, answer], caller.id) == {caller.id, result.id}


def test_delete_the_first_history_message_moves_the_cut(store: MemoryStore) -> None:
    messages = _seed(store)
    message_edit.delete_message(store, "s", messages[0].id)
    assert_layers_agree(store, "s")
    store.append("s", conversation(["later question"], start=T0 + 100 * SECOND))
    assert_layers_agree(store, "s")


def _compacted(open_store: StoreFactory) -> tuple[MemoryStore, list[Message]]:
    store = open_store(max_history_bytes=4000)
    store.create_session("Long", "c")
    messages = conversation(
        [f"message {i} about topic{i} " + "lorem ipsum " * 10 for i in range(60)]
    )
    store.import_messages(messages, "c")
    assert len(store.history("c").messages) < 60
    return store, messages


def test_delete_a_compacted_message(open_store: StoreFactory) -> None:
    store, messages = _compacted(open_store)
    kept = _ids(store, "c")
    gone = messages[4]
    assert gone.id not in kept
    message_edit.delete_message(store, "c", gone.id)
    assert store.archive.message("c", gone.id) is None
    assert store.archive.count("c") == 59
    assert _ids(store, "c") == kept
    assert_layers_agree(store, "c")
    assert_never_found(store, ["topic4"], {gone.id})


def test_unknown_message_is_a_readable_error(store: MemoryStore) -> None:
    _seed(store)
    with pytest.raises(MessageActionError, match="no longer part"):
        message_edit.delete_message(store, "s", "nope")


# -- edit ---------------------------------------------------------------------------------
def test_edit_keeps_the_old_branch_out_of_sight(store: MemoryStore) -> None:
    messages = _seed(store)
    edited = messages[4]
    moved = message_edit.edit_truncate(store, "s", edited.id)
    assert moved == [m.id for m in messages[4:]]
    assert _ids(store) == [m.id for m in messages[:4]]
    assert store.archive.count("s") == 4
    assert store.archive.version_count("s") == 4
    assert_layers_agree(store, "s")
    assert_never_found(store, WORDS[4:], set(moved))
    texts = timeline_texts(store, "s")
    assert not any("emerald" in text for text in texts)
    assert "Message edited: 4 messages kept as an earlier branch" in texts
    # The new text is sent as a normal turn.
    store.append("s", conversation(["the edited question", "an answer"], start=T0 + 50 * SECOND))
    assert_layers_agree(store, "s")


def test_edit_refuses_an_answer(store: MemoryStore) -> None:
    messages = _seed(store)
    with pytest.raises(MessageActionError, match="only your own"):
        message_edit.edit_truncate(store, "s", messages[1].id)


def test_edit_a_compacted_message_empties_history(open_store: StoreFactory) -> None:
    store, messages = _compacted(open_store)
    message_edit.edit_truncate(store, "c", messages[10].id)
    assert _ids(store, "c") == []
    assert store.archive.count("c") == 10
    assert_layers_agree(store, "c")
    store.append("c", conversation(["new question", "new answer"], start=T0 + 500 * SECOND))
    assert_layers_agree(store, "c")


# -- regenerate -------------------------------------------------------------------------------
def test_regenerate_keeps_every_version_of_the_answer(store: MemoryStore) -> None:
    messages = _seed(store)
    question = messages[6]
    asked = message_edit.regenerate_truncate(store, "s", messages[7].id)
    assert asked == question.id
    assert _ids(store) == [m.id for m in messages[:7]]
    assert_layers_agree(store, "s")
    assert_never_found(store, ["harbor"], {messages[7].id})
    second = store.new_message("assistant", "the second harbour answer")
    store.append("s", [second])
    message_edit.regenerate_truncate(store, "s", second.id)
    third = store.new_message("assistant", "the third answer")
    store.append("s", [third])
    branches = store.archive.branches("s", question.id, "regenerate")
    assert [[r.message.id for r in rows] for rows in branches] == [[messages[7].id], [second.id]]
    assert_layers_agree(store, "s")
    texts = timeline_texts(store, "s")
    assert sum(text.startswith("Answer regenerated") for text in texts) == 2
    assert not any("harbor" in text or "second" in text for text in texts)


def test_regenerate_an_answer_in_the_middle_branches_what_follows(store: MemoryStore) -> None:
    messages = _seed(store)
    asked = message_edit.regenerate_truncate(store, "s", messages[3].id)
    assert asked == messages[2].id
    assert _ids(store) == [m.id for m in messages[:3]]
    rows = store.archive.branches("s", messages[2].id, "regenerate")
    assert [r.message.id for r in rows[0]] == [m.id for m in messages[3:]]
    assert_layers_agree(store, "s")


def test_regenerate_needs_the_question_in_history(open_store: StoreFactory) -> None:
    store, messages = _compacted(open_store)
    with pytest.raises(MessageActionError, match="fork"):
        message_edit.regenerate_truncate(store, "c", messages[1].id)


# -- fork -----------------------------------------------------------------------------------
def test_fork_copies_compacted_messages_with_new_ids(open_store: StoreFactory) -> None:
    store, messages = _compacted(open_store)
    target = messages[49]
    new = message_edit.fork_session(store, "c", target.id)
    copied = [r.message for r in store.archive.messages(new)]
    assert [m.content for m in copied] == [m.content for m in messages[:50]]
    assert not {m.id for m in copied} & {m.id for m in messages}
    assert store.archive.session(new).title == "Long (fork)"  # type: ignore[union-attr]
    assert 0 < len(store.history(new).messages) < 50  # compacted like an import
    assert_layers_agree(store, new)
    assert_layers_agree(store, "c")
    assert "Forked from session c (50 messages copied)" in timeline_texts(store, new)
    assert f"Forked into session {new} (50 messages copied)" in timeline_texts(store, "c")
    assert store.archive.count("c") == 60  # the source is untouched


# -- busy -----------------------------------------------------------------------------------
ACTIONS: dict[str, Any] = {
    "delete": message_edit.delete_message,
    "edit": message_edit.edit_truncate,
    "regenerate": message_edit.regenerate_truncate,
    "fork": message_edit.fork_session,
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_an_action_during_a_turn_is_refused(open_store: StoreFactory, action: str) -> None:
    store = open_store()
    messages = _seed(store)
    other = open_store()  # another process's turn looks the same
    for turn_holder in (store, other):
        with turn_holder.turns.turn("s"), pytest.raises(StoreBusyError, match="reply"):
            ACTIONS[action](store, "s", messages[4].id)
    assert isinstance(TurnRunningError("x"), StoreBusyError)
    assert _ids(store) == [m.id for m in messages]
    ACTIONS[action](store, "s", messages[4].id)  # free again


# -- crashes ----------------------------------------------------------------------------------
class Crash(Exception):
    pass


def _crash_on(patch: pytest.MonkeyPatch, target: object, name: str) -> None:
    def boom(*_args: object, **_kwargs: object) -> None:
        raise Crash(name)

    patch.setattr(target, name, boom)


STEPS: list[tuple[object, str]] = [
    (SessionVectors, "remove"),
    (Archive, "take_rows"),
    (message_edit, "_follow_history"),
    (journal, "close_entry"),
]


@pytest.mark.parametrize("action", ["delete", "edit", "regenerate"])
@pytest.mark.parametrize("step", STEPS, ids=[name for _, name in STEPS])
def test_interrupted_action_is_finished_at_next_open(
    open_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
    action: str,
    step: tuple[object, str],
) -> None:
    store = open_store()
    messages = _seed(store)
    target, kept = {"delete": (5, None), "edit": (4, 4), "regenerate": (5, 5)}[action]
    with monkeypatch.context() as patch:
        _crash_on(patch, *step)
        with pytest.raises(Crash):
            ACTIONS[action](store, "s", messages[target].id)
    assert list(journal.ops_dir(store).glob("*.json"))
    store.archive.close()  # the process is gone
    again = open_store()
    assert not list(journal.ops_dir(again).glob("*.json"))
    gone = {messages[target].id} if kept is None else {m.id for m in messages[kept:]}
    assert _ids(again) == [m.id for m in messages if m.id not in gone]
    assert_layers_agree(again, "s")
    assert_never_found(again, [WORDS[target]], gone)
    kinds = [kind for _, kind, _ in again.archive.events("s")]
    assert len([k for k in kinds if k in ("deleted", "edited", "regenerated")]) == 1


@pytest.mark.parametrize(
    "step",
    [(MemoryStore, "maybe_compact"), (Archive, "add_event"), (journal, "close_entry")],
    ids=["compact", "event", "close"],
)
def test_interrupted_fork_is_finished_at_next_open(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, step: tuple[object, str]
) -> None:
    store = open_store()
    messages = _seed(store)
    with monkeypatch.context() as patch:
        _crash_on(patch, *step)
        with pytest.raises(Crash):
            message_edit.fork_session(store, "s", messages[3].id, "Copy")
    store.archive.close()
    again = open_store()
    assert not list(journal.ops_dir(again).glob("*.json"))
    forks = [sid for sid in again.session_ids() if sid != "s"]
    assert len(forks) == 1
    assert [m.content for m in again.history(forks[0]).messages] == [
        m.content for m in messages[:4]
    ]
    assert_layers_agree(again, forks[0])
    assert_layers_agree(again, "s")
    assert len([k for _, k, _ in again.archive.events("s") if k == "fork"]) == 1


# -- schema --------------------------------------------------------------------------------
def _v3_profile(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2, 3):
        for statement in archive_mod.MIGRATIONS[version].split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("PRAGMA user_version = 3")
    db.execute(
        "INSERT INTO sessions (session_id, created_ns, updated_ns, next_seq)"
        " VALUES ('old', 1, 1, 3)"
    )
    for seq, (role, text) in enumerate([("user", "alpha"), ("assistant", "beta"), ("user", "c")]):
        db.execute(
            "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns)"
            " VALUES (?, 'old', ?, ?, ?, ?)",
            (f"m{seq}", seq, role, text, T0 + seq),
        )
    db.close()


def test_a_schema_3_archive_opens_and_keeps_every_message(tmp_path: Path) -> None:
    path = tmp_path / "archive.sqlite3"
    _v3_profile(path)
    archive = Archive(path)
    try:
        assert archive._query("PRAGMA user_version")[0][0] == archive_mod.SCHEMA_VERSION
        assert [r.message.id for r in archive.messages("old")] == ["m0", "m1", "m2"]
        assert archive.fts_ok()
        assert archive.version_count("old") == 0
        assert [h.message.id for h, _ in archive.keyword_search("beta", limit=5)] == ["m1"]
    finally:
        archive.close()


def test_a_schema_3_profile_opens_keeps_every_message_and_can_edit(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    messages = _seed(store)
    store.close()
    db = sqlite3.connect(store.paths.archive_db, isolation_level=None)
    db.execute("DROP TABLE message_versions")  # what a version-3 app wrote
    db.execute("PRAGMA user_version = 3")
    db.close()
    again = open_store()
    assert [r.message.id for r in again.archive.messages("s")] == [m.id for m in messages]
    assert _ids(again) == [m.id for m in messages]
    assert_layers_agree(again, "s")
    message_edit.edit_truncate(again, "s", messages[6].id)
    assert again.archive.version_count("s") == 2
    assert_layers_agree(again, "s")


def test_reset_forgets_earlier_versions_too(store: MemoryStore) -> None:
    messages = _seed(store)
    message_edit.edit_truncate(store, "s", messages[2].id)
    assert store.archive.version_count("s") == 6
    lifecycle.reset_session(store, "s")
    assert store.archive.version_count("s") == 0
