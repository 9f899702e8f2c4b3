"""A torn history.json is cut back; what the cut-off tail held is never lost without a copy.

An append crash mid-write of the closing bracket leaves a tail that held
nothing: it is cut back and no file is left behind (that would be one per
crash).  A tail that held something unreadable (half a message, garbage
before more messages) is cut back too, but the file as it was is kept as
``history.json.corrupt-*`` first — the archive may not have those messages,
for instance when it is damaged as well and rebuilt from this very file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop.core.history import HistoryFile, encode_history
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import T0, conversation

SID = "s1"


def _kept(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


def _others(path: Path) -> list[str]:
    """Files next to history.json other than itself."""
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


@pytest.fixture
def hist_path(tmp_path: Path) -> Path:
    return tmp_path / "s" / "history.json"


def _write(path: Path, messages: list[Message], tail: bytes) -> bytes:
    """The canonical file without its closing ``\\n]\\n``, then *tail*."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = encode_history(messages)[: -len(b"\n]\n")] + tail
    path.write_bytes(raw)
    return raw


@pytest.mark.parametrize("tail", [b"", b"\n", b",", b",\n", b"\n]"])
def test_a_tail_that_held_nothing_leaves_no_file(hist_path: Path, tail: bytes) -> None:
    messages = conversation(["one", "two"], start=T0)
    _write(hist_path, messages, tail)
    hist = HistoryFile(hist_path, T0)
    assert [m.id for m in hist.messages] == [m.id for m in messages]
    assert hist.last_report.original_kept_at is None
    assert not hist.last_report.tail_lost
    assert _others(hist_path) == []
    assert hist_path.read_bytes() == encode_history(messages)


@pytest.mark.parametrize(
    "tail",
    [
        b',\n{"id": "half", "role": "user", "content": "a message cut in the mi',
        b",\n{garbage}\n]\n",
        b"\n]\ntrailing words\n",
    ],
)
def test_a_tail_that_held_content_is_kept_as_corrupt(hist_path: Path, tail: bytes) -> None:
    messages = conversation(["one", "two"], start=T0)
    original = _write(hist_path, messages, tail)
    hist = HistoryFile(hist_path, T0)
    assert [m.id for m in hist.messages] == [m.id for m in messages]
    report = hist.last_report
    assert report.torn_tail_dropped
    assert report.tail_lost
    assert _kept(hist_path) == [report.original_kept_at]
    assert report.original_kept_at is not None
    assert report.original_kept_at.read_bytes() == original
    assert hist_path.read_bytes() == encode_history(messages)


def test_messages_after_garbage_are_kept_in_the_copy(hist_path: Path) -> None:
    """The parser stops at the garbage: what follows it is only in the copy, never gone."""
    first, later = conversation(["first", "later"], start=T0)
    raw = (
        b"[\n"
        + json.dumps(first.to_json()).encode()
        + b",\n{not json},\n"
        + json.dumps(later.to_json()).encode()
        + b"\n]\n"
    )
    hist_path.parent.mkdir(parents=True)
    hist_path.write_bytes(raw)
    hist = HistoryFile(hist_path, T0)
    assert [m.id for m in hist.messages] == [first.id]
    [copy] = _kept(hist_path)
    assert later.id.encode() in copy.read_bytes()


def test_a_read_only_load_writes_nothing(hist_path: Path) -> None:
    messages = conversation(["one"], start=T0)
    original = _write(hist_path, messages, b',\n{"id": "cut')
    hist = HistoryFile(hist_path, T0, readonly=True)
    assert [m.id for m in hist.messages] == [messages[0].id]
    assert hist.last_report.tail_lost
    assert hist_path.read_bytes() == original
    assert _others(hist_path) == []


def _damage_archive(paths: AppPaths) -> None:
    db = sqlite3.connect(paths.archive_db)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = paths.archive_db.read_bytes()
    paths.archive_db.write_bytes(data[: len(data) // 2])


def test_torn_history_with_a_damaged_archive_keeps_the_original(tmp_path: Path) -> None:
    paths = app_paths(tmp_path / "profile")
    messages = conversation(["one", "two", "three"], start=T0)
    with open_memory(paths, None) as store:
        store.import_messages(messages, SID)
    path = paths.sessions_dir / SID / "history.json"
    torn = encode_history(messages)[: -len(b"\n]\n")] + b',\n{"id": "cut", "role": "us'
    path.write_bytes(torn)
    _damage_archive(paths)

    with open_memory(paths, None) as store:
        assert any("archive was damaged" in n for n in store.notices)
        assert [m.id for m in store.history(SID).messages] == [m.id for m in messages]
        assert {m.id for m in messages} <= set(store.archive.all_msg_ids(SID))
        [finding] = [f for f in store.findings if "torn tail" in f.detail]
        assert "kept as" in finding.detail
    [copy] = _kept(path)
    assert copy.read_bytes() == torn
