"""A session's own settings: round trip, damaged files, and the session's lifecycle."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agenvoy_desktop.core.lifecycle import remove_session, reset_session
from agenvoy_desktop.core.session_settings import (
    DEFAULT_SETTINGS,
    MAX_PROMPT_CHARS,
    SETTINGS_FILE,
    SessionSettings,
    SessionSettingsError,
    load_session_settings,
    read_settings_file,
    save_session_settings,
    session_settings,
    store_session_settings,
)
from agenvoy_desktop.core.store import MemoryStore, UnknownSessionError
from agenvoy_desktop.operations import session_settings as ops
from tests.conftest import conversation


def test_round_trip_through_the_session_folder(store: MemoryStore) -> None:
    sid = store.create_session()
    assert session_settings(store, sid) == DEFAULT_SETTINGS  # no file yet
    wanted = SessionSettings(system_prompt="You are a pirate. Say arr.", tools=False)
    assert store_session_settings(store, sid, wanted) == wanted
    assert session_settings(store, sid) == wanted
    data = json.loads((store.folder(sid) / SETTINGS_FILE).read_text("utf-8"))
    assert data == {"system_prompt": "You are a pirate. Say arr.", "tools": False, "version": 1}


def test_a_title_given_at_creation_is_kept_beside_the_settings(store: MemoryStore) -> None:
    """An archive rebuilt from history.json gets the title back from here."""
    sid = store.create_session("Trip to Graz")
    data = json.loads((store.folder(sid) / SETTINGS_FILE).read_text("utf-8"))
    assert data["title"] == "Trip to Graz"
    assert session_settings(store, sid) == DEFAULT_SETTINGS
    assert store.create_session("Another title", sid) == sid  # an existing session keeps its own
    assert json.loads((store.folder(sid) / SETTINGS_FILE).read_text("utf-8")) == data


def test_blank_prompt_means_the_default_and_text_is_trimmed(tmp_path: Path) -> None:
    stored = save_session_settings(tmp_path, SessionSettings("  \n "))
    assert stored.system_prompt is None
    assert stored.base_prompt("the default") == "the default"
    assert load_session_settings(tmp_path) == stored
    stored = save_session_settings(tmp_path, SessionSettings("  Be brief.\n"))
    assert stored.system_prompt == "Be brief."
    assert load_session_settings(tmp_path).base_prompt("the default") == "Be brief."


def test_too_long_a_prompt_is_refused_and_nothing_written(store: MemoryStore) -> None:
    sid = store.create_session()
    with pytest.raises(SessionSettingsError, match="shorten it"):
        store_session_settings(store, sid, SessionSettings("x" * (MAX_PROMPT_CHARS + 1)))
    assert not (store.folder(sid) / SETTINGS_FILE).exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\x00\xff{garbled", "cannot be read"),
        (b'{"system_prompt": "cut in the mid', "cannot be read"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"system_prompt": 5, "tools": "yes"}', "system_prompt, tools of the wrong type"),
    ],
)
def test_a_damaged_file_gives_defaults_and_a_warning(
    store: MemoryStore, caplog: pytest.LogCaptureFixture, content: bytes, problem: str
) -> None:
    sid = store.create_session("t")
    (store.folder(sid) / SETTINGS_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert session_settings(store, sid) == DEFAULT_SETTINGS
    assert problem in caplog.text
    reading = ops.read_session_settings(store, sid)
    assert reading.settings == DEFAULT_SETTINGS
    assert problem in reading.problem
    # saving over a damaged file writes a fresh one
    ops.save_session_settings(store, sid, SessionSettings("Be brief."))
    assert read_settings_file(store.folder(sid)).problem == ""
    assert session_settings(store, sid).system_prompt == "Be brief."


def test_one_bad_field_keeps_the_good_one(store: MemoryStore) -> None:
    sid = store.create_session("t")
    (store.folder(sid) / SETTINGS_FILE).write_text('{"system_prompt": "Hi.", "tools": 1}')
    reading = read_settings_file(store.folder(sid))
    assert reading.settings == SessionSettings("Hi.", tools=True)
    assert "tools of the wrong type" in reading.problem


def test_keys_of_a_newer_version_survive_a_save(store: MemoryStore) -> None:
    sid = store.create_session("t")
    newer = {"version": 3, "system_prompt": None, "tools": True, "temperature": 0.2}
    (store.folder(sid) / SETTINGS_FILE).write_text(json.dumps(newer))
    store_session_settings(store, sid, SessionSettings(tools=False))
    data = json.loads((store.folder(sid) / SETTINGS_FILE).read_text("utf-8"))
    assert data == {**newer, "tools": False}


def test_save_names_the_session_and_refuses_an_unknown_one(store: MemoryStore) -> None:
    sid = store.create_session("t")
    changed = ops.save_session_settings(store, sid, SessionSettings(tools=False))
    assert changed.value == SessionSettings(tools=False)
    assert changed.changes.session_settings
    assert changed.changes.affects(sid, "session_settings")
    assert not changed.changes.affects("other", "session_settings")
    with pytest.raises(UnknownSessionError):
        ops.save_session_settings(store, "nope", SessionSettings(tools=False))
    assert not store.folder("nope").exists()


def test_reset_keeps_the_settings_and_remove_deletes_them(store: MemoryStore) -> None:
    sid = store.create_session("t")
    store.append(sid, conversation(["hi", "hello"]))
    wanted = SessionSettings("You are terse.", tools=False)
    store_session_settings(store, sid, wanted)
    reset_session(store, sid)
    assert not (store.folder(sid) / "history.json").exists()
    assert session_settings(store, sid) == wanted
    remove_session(store, sid)
    assert not store.folder(sid).exists()
    assert session_settings(store, sid) == DEFAULT_SETTINGS
