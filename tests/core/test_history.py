"""history.json: atomic rewrites, in-place appends, torn tails, migration, the window."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenvoy_desktop.core.history import HistoryFile, encode_history, quick_tail, take_window
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.timeutil import format_iso, parse_iso, split_time_header
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, StoreFactory, conversation, msg, write_json


@pytest.fixture
def hist_path(tmp_path: Path) -> Path:
    return tmp_path / "s1" / "history.json"


def test_new_file_is_an_empty_array(hist_path: Path) -> None:
    hist = HistoryFile(hist_path, T0)
    assert hist.messages == []
    hist.rewrite([])
    assert json.loads(hist_path.read_bytes()) == []


def test_rewrite_goes_through_a_temp_file_and_rename(
    hist_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hist = HistoryFile(hist_path, T0)
    hist.rewrite(conversation(["a", "b"]))
    before = hist_path.read_bytes()
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str | Path, dst: str | Path) -> None:
        replaced.append((str(src), str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    hist.rewrite(conversation(["c", "d", "e"]))
    assert replaced
    assert replaced[0][1] == str(hist_path)
    assert replaced[0][0] != str(hist_path)

    # A crash while writing the temp file leaves the old file intact.
    def fail_fsync(fd: int) -> None:
        raise OSError("disk gone")

    after = hist_path.read_bytes()
    monkeypatch.setattr(os, "fsync", fail_fsync)
    with pytest.raises(OSError, match="disk gone"):
        hist.rewrite(conversation(["x"]))
    assert hist_path.read_bytes() == after != before
    assert [p.name for p in hist_path.parent.iterdir()] == ["history.json"]


def test_append_in_place_then_reload_equals(hist_path: Path) -> None:
    first = conversation(["hello", "hi there"])
    hist = HistoryFile(hist_path, T0)
    hist.append(first)
    more = [
        msg("user", 'quotes " and \\ backslash\nnewline 記憶', T0 + 5 * SECOND),
        msg("assistant", "", T0 + 6 * SECOND, tool_calls=[{"id": "c1", "name": "ls"}]),
        msg("tool", "result", T0 + 7 * SECOND, tool_call_id="c1", name="ls"),
    ]
    hist.append(more)
    hist.append(conversation(["last"], start=T0 + 8 * SECOND))
    assert hist.size_bytes == hist_path.stat().st_size
    data = hist_path.read_bytes()
    assert json.loads(data)  # valid JSON after appends
    assert data == encode_history(hist.messages)
    again = HistoryFile(hist_path, T0)
    assert again.messages == hist.messages
    assert again.last_report.torn_tail_dropped is False
    assert quick_tail(hist_path) == (6, hist.messages[-1].id)


def test_append_survives_short_writes_and_has_no_pwrite(
    hist_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows has no os.pwrite; any OS may write less than asked."""
    hist = HistoryFile(hist_path, T0)
    hist.append(conversation(["first"]))
    real_write = os.write

    def short_write(fd: int, data: bytes | memoryview) -> int:
        return real_write(fd, bytes(data[:7]))

    with monkeypatch.context() as patch:
        patch.delattr(os, "pwrite", raising=False)
        patch.setattr(os, "write", short_write)
        hist.append(conversation(["second message, written seven bytes at a time"], start=T0 + 9))
    assert hist_path.read_bytes() == encode_history(hist.messages)
    assert [m.content for m in HistoryFile(hist_path, T0).messages] == [
        "first",
        "second message, written seven bytes at a time",
    ]


def test_message_time_and_ids_are_stored(hist_path: Path) -> None:
    message = msg("user", "x", T0 + 123_456_000)
    HistoryFile(hist_path, T0).append([message])
    stored = json.loads(hist_path.read_text("utf-8"))[0]
    assert stored["id"] == message.id
    assert stored["time"] == "2023-11-14T22:13:20.123456Z"
    assert parse_iso(stored["time"]) == message.time_ns
    assert HistoryFile(hist_path, 0).messages[0] == message


def test_nanosecond_times_round_trip(hist_path: Path) -> None:
    message = msg("user", "x", T0 + 123_456_789)
    HistoryFile(hist_path, T0).append([message])
    assert HistoryFile(hist_path, 0).messages[0].time_ns == message.time_ns
    assert parse_iso(format_iso(T0 + 7)) == T0 + 7


def _torn_cases(full: bytes, last_line_start: int) -> Iterator[tuple[str, bytes]]:
    yield "cut mid last message", full[: last_line_start + 25]
    yield "cut right after comma", full[:last_line_start]
    yield "closing bracket lost", full[:-3]
    yield "garbage appended", full + b"\x00\x01garbage{"
    yield "half an append", full[:-3] + b',\n{"id": "zz", "role": "us'


@pytest.mark.parametrize("case", range(5))
def test_torn_tail_is_cut_back_and_rewritten(hist_path: Path, case: int) -> None:
    messages = conversation(["one", "two", "three", "four"])
    hist = HistoryFile(hist_path, T0)
    hist.rewrite(messages)
    full = hist_path.read_bytes()
    last_line_start = full.rfind(b"\n", 0, len(full) - 3) + 1
    name, torn = list(_torn_cases(full, last_line_start))[case]
    hist_path.write_bytes(torn)

    loaded = HistoryFile(hist_path, T0)
    kept = loaded.messages
    expected = messages[:3] if case < 2 else messages
    assert kept == expected, name
    assert loaded.last_report.torn_tail_dropped
    assert hist_path.read_bytes() == encode_history(expected)
    # The repaired file takes appends again.
    loaded.append(conversation(["five"], start=T0 + 10 * SECOND))
    assert len(HistoryFile(hist_path, T0).messages) == len(expected) + 1


def test_non_json_file_is_moved_aside_and_session_works(hist_path: Path) -> None:
    hist_path.parent.mkdir(parents=True)
    hist_path.write_bytes(b"\xff\xfe not json at all")
    hist = HistoryFile(hist_path, T0)
    assert hist.messages == []
    moved = hist.last_report.corrupt_moved_to
    assert moved is not None
    assert moved.exists()
    assert moved.read_bytes() == b"\xff\xfe not json at all"
    assert not hist_path.exists()
    hist.append(conversation(["fresh start"]))
    assert [m.content for m in HistoryFile(hist_path, T0).messages] == ["fresh start"]


def test_json_object_instead_of_array_is_moved_aside(hist_path: Path) -> None:
    write_json(hist_path, {"role": "user"})
    hist = HistoryFile(hist_path, T0)
    assert hist.messages == []
    assert hist.last_report.corrupt_moved_to is not None


def test_readonly_never_touches_the_file(hist_path: Path) -> None:
    hist_path.parent.mkdir(parents=True)
    hist_path.write_bytes(b"garbage")
    ro = HistoryFile(hist_path, T0, readonly=True)
    assert ro.messages == []
    assert hist_path.read_bytes() == b"garbage"
    write_json(hist_path, [{"role": "user", "content": "hi"}])
    before = hist_path.read_bytes()
    ro = HistoryFile(hist_path, T0, readonly=True)
    assert ro.messages[0].content == "hi"
    assert ro.last_report.migrated
    assert hist_path.read_bytes() == before


@pytest.fixture
def taipei() -> Iterator[None]:
    """Local time = Asia/Taipei (UTC+8, no DST) for the duration of a test."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is Unix-only")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "Asia/Taipei")
        time.tzset()
        yield
    time.tzset()


def _taipei_ns(text: str) -> int:
    moment = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo("Asia/Taipei"))
    return int(moment.timestamp()) * SECOND


REFERENCE = [
    {"role": "user", "content": "當前時間: 2024-03-01 10:00:00\n我們使用記憶系統來保存對話"},
    {"role": "assistant", "content": "好的，記住了。"},
    {"role": "user", "content": "當前時間: 2024-03-01 10:05:30\nWhat about the hotel in Kyoto?"},
    {"role": "assistant", "content": "We booked the ryokan."},
]


@pytest.mark.usefixtures("taipei")
def test_header_is_parsed_in_local_time() -> None:
    stamp, rest = split_time_header("當前時間: 2024-03-01 10:00:00\nhello")
    assert rest == "hello"
    assert stamp == _taipei_ns("2024-03-01T10:00:00")
    assert stamp == parse_iso("2024-03-01T02:00:00Z")
    assert split_time_header("no header") == (None, "no header")
    assert split_time_header("當前時間: 2024-13-45 99:99:99\nx")[0] is None


@pytest.mark.usefixtures("taipei")
def test_reference_file_is_migrated_and_backfilled_at_open(
    paths: AppPaths, open_store: StoreFactory
) -> None:
    path = paths.sessions_dir / "legacy" / "history.json"
    write_json(path, REFERENCE)
    store = open_store()
    messages = store.history("legacy").messages
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0].content == "我們使用記憶系統來保存對話"
    assert len({m.id for m in messages}) == 4
    first, second = _taipei_ns("2024-03-01T10:00:00"), _taipei_ns("2024-03-01T10:05:30")
    assert [m.time_ns for m in messages] == [first, first, second, second]
    # The file was rewritten in our format.
    on_disk = json.loads(path.read_text("utf-8"))
    assert [m["id"] for m in on_disk] == [m.id for m in messages]
    assert on_disk[0]["time"] == "2024-03-01T02:00:00.000000Z"
    # ... and back-filled into the archive with the same ids and times.
    rows = store.archive.messages("legacy")
    assert [r.message for r in rows] == messages
    assert store.archive.session("legacy") is not None
    hits = store.archive.keyword_search("記憶系統", limit=5)
    assert [h.message.id for h, _ in hits] == [messages[0].id]
    assert store.archive.vector_rowids("legacy") == {r.rowid for r in rows}
    store.close()
    # A second open finds nothing to do and keeps the ids.
    again = open_store()
    assert [m.id for m in again.history("legacy").messages] == [m.id for m in messages]
    assert again.archive.count("legacy") == 4


def _u(text: str = "q") -> Message:
    return msg("user", text, T0)


def _a(text: str = "a") -> Message:
    return msg("assistant", text, T0)


def _call() -> Message:
    return msg("assistant", "", T0, tool_calls=[{"id": "c", "function": {"name": "ls"}}])


def _tool() -> Message:
    return msg("tool", "out", T0, tool_call_id="c")


WINDOW_CASES: list[tuple[str, str, int, str]] = [
    # (name, roles as letters, N, expected window as letters)
    ("fits entirely", "ua", 16, "ua"),
    ("exact pairs", "uauaua", 4, "uaua"),
    ("odd N never splits a pair", "uauaua", 3, "ua"),
    ("N=1 keeps the whole last pair", "uauaua", 1, "ua"),
    ("tool group kept whole", "uaUctta", 4, "Uctta"),
    ("tool group not split at its tools", "uauctta", 3, "uctta"),
    ("window may not start with a tool", "ttua", 4, "ua"),
    ("zero", "uaua", 0, ""),
    ("empty", "", 5, ""),
    ("trailing user message", "uau", 2, "u"),
    ("no user message at all", "aaaa", 2, "aa"),
    ("system message first", "suaua", 5, "suaua"),
]


def _build(letters: str) -> list[Message]:
    make: dict[str, Callable[[], Message]] = {
        "u": _u,
        "U": _u,
        "a": _a,
        "c": _call,
        "t": _tool,
        "s": lambda: msg("system", "s", T0),
    }
    return [make[ch]() for ch in letters]


def _letters(messages: list[Message], source: list[Message], spec: str) -> str:
    index = {m.id: i for i, m in enumerate(source)}
    return "".join(spec[index[m.id]] for m in messages)


@pytest.mark.parametrize(("name", "spec", "n", "expected"), WINDOW_CASES)
def test_take_window(name: str, spec: str, n: int, expected: str) -> None:
    messages = _build(spec)
    window = take_window(messages, n)
    assert _letters(window, messages, spec) == expected, name
    if window:
        assert window == messages[-len(window) :]  # always a suffix


STEPPED_CASES: list[tuple[str, str, int, int, str]] = [
    # (name, roles as letters, N, step, expected window as letters)
    ("fits entirely", "uau", 4, 4, "uau"),
    ("grid point on a user message", "uauauau", 4, 2, "uauau"),
    ("holds up to N + step - 1", "uauauauauau", 4, 4, "uauauau"),
    ("jumps once N + step is reached", "uauauauauaua", 4, 4, "uaua"),
    ("grid point inside a tool group: the previous one's start", "uaUcttau", 3, 2, "Ucttau"),
    ("an exchange longer than the step kept whole", "uaucttttau", 2, 2, "ucttttau"),
    ("no user message at all", "aaaaa", 2, 2, "aaa"),
    ("zero N", "uaua", 0, 4, ""),
]


@pytest.mark.parametrize(("name", "spec", "n", "step", "expected"), STEPPED_CASES)
def test_take_window_in_steps(name: str, spec: str, n: int, step: int, expected: str) -> None:
    messages = _build(spec)
    window = take_window(messages, n, step)
    assert _letters(window, messages, spec) == expected, name
    if window:
        assert window == messages[-len(window) :]


_EXCHANGES = st.lists(
    st.sampled_from(["ua", "ua", "ua", "uca", "ucta", "uctta", "u"]), min_size=1, max_size=30
)


@settings(max_examples=150, deadline=None)
@given(exchanges=_EXCHANGES, n=st.integers(1, 20), step=st.integers(1, 10))
def test_stepped_window_properties(exchanges: list[str], n: int, step: int) -> None:
    """Grown one message at a time: N or more, a user message first, a start that only
    moves forwards, and at most the step plus one exchange more than N."""
    messages = _build("".join(exchanges))
    longest = max(len(e) for e in exchanges)
    previous = 0
    for end in range(1, len(messages) + 1):
        grown = messages[:end]
        window = take_window(grown, n, step)
        start = end - len(window)
        assert window == grown[start:]
        assert len(window) >= min(n, end)
        assert len(window) <= max(n, n + step - 1 + longest - 1)
        if end > n:
            assert grown[start].role == "user"  # never a pair or a tool group split
        assert start >= previous  # the start never moves back
        previous = start


@settings(max_examples=60, deadline=None)
@given(pairs=st.integers(1, 40), n=st.integers(1, 20), half_step=st.integers(1, 5))
def test_stepped_window_of_pairs_jumps_every_step(pairs: int, n: int, half_step: int) -> None:
    """Plain user/answer pairs and an even step: N to N + step - 1 messages, and the start
    moves only in jumps of the step, once every step messages."""
    step = 2 * half_step
    messages = _build("ua" * pairs)
    sizes = [len(take_window(messages[:end], n, step)) for end in range(1, len(messages) + 1)]
    starts = [end - size for end, size in enumerate(sizes, start=1)]
    for end, size in enumerate(sizes, start=1):
        assert min(n, end) <= size <= n + step - 1
    moves = [(end, b - a) for end, (a, b) in enumerate(itertools.pairwise(starts)) if b != a]
    assert all(size == step for _, size in moves)
    assert all(b[0] - a[0] == step for a, b in itertools.pairwise(moves))


def test_plain_window_is_unchanged_by_step_zero() -> None:
    messages = _build("uauaUcttauau")
    for n in range(0, 14):
        assert take_window(messages, n, 0) == take_window(messages, n)


def test_unreadable_elements_are_never_lost(hist_path: Path) -> None:
    data = [
        {"role": "user", "content": "epoch time", "time": 1709258400},
        {"role": "function", "content": "old OpenAI role"},
        "not even an object",
        {"role": "user", "content": "當前時間: 2024-03-01 10:00:00\nreadable"},
    ]
    write_json(hist_path, data)
    original = hist_path.read_bytes()
    hist = HistoryFile(hist_path, T0)
    assert [m.content for m in hist.messages] == ["readable"]
    report = hist.last_report
    assert report.migrated
    assert report.skipped == 3
    assert report.original_kept_at is not None
    assert report.original_kept_at.read_bytes() == original
    assert [m.content for m in HistoryFile(hist_path, T0).messages] == ["readable"]


def test_an_element_of_ours_with_a_role_we_do_not_know_is_left_out(hist_path: Path) -> None:
    """An id and a time made it pass as ours unchecked: the role reached the server as it was
    (``"us\\x1b[2Jer"``), which refuses the whole request."""
    good = msg("user", "kept", T0).to_json()
    bad = {**msg("user", "odd", T0 + SECOND).to_json(), "role": "us\x1b[2Jer"}
    write_json(hist_path, [good, bad, {**bad, "role": ["user"]}])
    original = hist_path.read_bytes()
    hist = HistoryFile(hist_path, T0)
    assert [(m.role, m.content) for m in hist.messages] == [("user", "kept")]
    assert hist.last_report.skipped == 2
    assert hist.last_report.original_kept_at is not None
    assert hist.last_report.original_kept_at.read_bytes() == original


def test_migration_without_skips_keeps_no_copy(hist_path: Path) -> None:
    write_json(hist_path, REFERENCE)
    hist = HistoryFile(hist_path, T0)
    assert len(hist.messages) == 4
    assert hist.last_report.original_kept_at is None
    assert [p.name for p in hist_path.parent.iterdir()] == ["history.json"]


def test_counted_reads_a_canonical_file_without_parsing_it(tmp_path: Path) -> None:
    """The session list's count and size come from the tail; the numbers match a full load."""
    path = tmp_path / "history.json"
    messages = [msg("user", f"line {i}", T0 + i * SECOND) for i in range(5)]
    path.write_bytes(encode_history(messages))
    quick = HistoryFile(path, 0)
    assert quick.counted() == (5, path.stat().st_size)
    assert not quick.loaded  # counted without parsing
    full = HistoryFile(path, 0)
    assert (len(full.messages), full.size_bytes) == quick.counted()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert HistoryFile(foreign, 0).counted()[0] == 1  # not canonical: counted the full way
