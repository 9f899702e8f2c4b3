"""The store refuses what it cannot keep, before any layer is written.

The CLI validates imports itself (with line numbers); these tests hold the
store to the same rules for every other writer (the agent, the window).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agenvoy_desktop.core.messages import (
    MAX_MESSAGE_BYTES,
    MIN_MESSAGE_LIMIT,
    InvalidMessageError,
    message_limit,
)
from agenvoy_desktop.core.store import InvalidSessionIdError, MemoryStore, check_session_id
from agenvoy_desktop.core.timeutil import (
    MAX_TIME_NS,
    MIN_TIME_NS,
    TimeRangeError,
    check_time_ns,
    format_iso,
    parse_iso,
    parse_iso_in_range,
)
from agenvoy_desktop.settings import load_settings
from tests.conftest import T0, archive_counts, conversation, msg

BAD_MESSAGES = {
    "far future": msg("user", "x", parse_iso("2300-01-01T00:00:00Z")),
    "before 1970": msg("user", "x", -1),
    "int64 overflow": msg("user", "x", 2**63),
    "content not text": dataclasses.replace(msg("user", "x", T0), content=12345),  # type: ignore[arg-type]
    "unknown role": msg("wizard", "x", T0),
    "lone surrogate": msg("user", "broken \ud800", T0),
    "surrogate in extra": msg("tool", "ok", T0, name="\udfff"),
    "nan in extra": msg("tool", "ok", T0, score=float("nan")),
    "too large": msg("user", "x" * MAX_MESSAGE_BYTES, T0),
}


def _snapshot(store: MemoryStore, sid: str) -> tuple[bytes, dict[str, int]]:
    history = store.folder(sid) / "history.json"
    return history.read_bytes(), archive_counts(store.paths)


@pytest.mark.parametrize("name", list(BAD_MESSAGES))
def test_append_refuses_before_writing(store: MemoryStore, name: str) -> None:
    sid = store.create_session("t", "s1")
    store.append(sid, conversation(["hello", "hi"]))
    before = _snapshot(store, sid)
    good = msg("user", "fine", T0 + 5)
    with pytest.raises(InvalidMessageError, match="message 2: "):
        store.append(sid, [good, BAD_MESSAGES[name]])
    assert _snapshot(store, sid) == before


@pytest.mark.parametrize("name", list(BAD_MESSAGES))
def test_import_refuses_without_leaving_a_session(store: MemoryStore, name: str) -> None:
    with pytest.raises(InvalidMessageError):
        store.import_messages([BAD_MESSAGES[name]], "fresh")
    with pytest.raises(InvalidMessageError):
        store.import_messages([BAD_MESSAGES[name]])
    assert store.session_ids() == []
    assert not (store.paths.sessions_dir / "fresh").exists()


@pytest.mark.parametrize("bad", ["x\n", "x\r", "", "..", "a b", "-x", "x" * 65, "é"])
def test_session_ids_are_matched_whole(store: MemoryStore, bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        check_session_id(bad)
    if bad:  # an empty id asks create_session for a fresh one
        with pytest.raises(InvalidSessionIdError):
            store.create_session(None, bad)


def test_a_stray_folder_with_a_newline_is_not_a_session(store: MemoryStore) -> None:
    (store.paths.sessions_dir / "x\n").mkdir()
    assert store.session_ids() == []


def test_time_range_is_what_sqlite_can_store() -> None:
    assert check_time_ns(MIN_TIME_NS) == 0
    assert MAX_TIME_NS < 2**63 - 86_400 * 10**9  # room for a day's arithmetic
    assert format_iso(MAX_TIME_NS - 1).startswith("2261-12-31T23:59:59")
    with pytest.raises(TimeRangeError, match="'2262-01-01' is out of range"):
        parse_iso_in_range("2262-01-01")
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        parse_iso("0001-01-01T00:00:00+01:00")  # used to raise OverflowError


def test_message_limit_follows_the_history_budget() -> None:
    assert message_limit(5 * 1024 * 1024) == MAX_MESSAGE_BYTES
    assert message_limit(1_000_000) == 250_000
    assert message_limit(16 * 1024) == MIN_MESSAGE_LIMIT


def test_store_refuses_a_message_over_a_quarter_of_a_small_budget(
    open_store: object,
) -> None:
    store = open_store(max_history_bytes=400_000)  # type: ignore[operator]
    sid = store.create_session("t", "s1")
    store.append(sid, conversation([f"message {i}" for i in range(20)]))
    with pytest.raises(InvalidMessageError, match="limit is 98 KiB"):
        store.append(sid, [msg("user", "z" * 150_000, T0 + 99)])
    assert len(store.history(sid).messages) == 20


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        ({"max_history_bytes": 0}, 5 * 1024 * 1024),
        ({"max_history_bytes": -5}, 5 * 1024 * 1024),
        ({"max_history_bytes": 2**70}, 5 * 1024 * 1024),
        ({"max_history_bytes": 50_000}, 50_000),
        ({"window_messages": 0}, 16),
    ],
)
def test_settings_numbers_out_of_range_take_the_default(
    tmp_path: Path, memory: dict[str, int], expected: int
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"memory": memory}), "utf-8")
    settings = load_settings(path)
    key = next(iter(memory))
    assert getattr(settings.memory, key) == expected


def test_settings_nan_temperature_takes_the_default(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"models": {"temperature": NaN, "threads": 0}}', "utf-8")
    settings = load_settings(path)
    assert settings.models.temperature == 0.7
    assert settings.models.threads >= 1
