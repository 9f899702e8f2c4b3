"""Hostile input, generated: search, import and session ids only fail the documented way.

Property-based (hypothesis): every text a user can type into a search — CJK,
right-to-left marks, NUL, lone surrogates (what a non-UTF-8 argv turns
into), FTS5 syntax, megabytes of it — and every ``--since``/``--until``/
``--limit`` either works or is refused with the documented error; every
file offered to ``import`` is refused with :class:`ImportFormatError` or
yields messages that are stored and read back identically; every accepted
session id is one safe folder name that round-trips through the store.

``AGENVOY_TORTURE_SEEDS`` (3 by default) scales the number of examples:
the nightly run (20) tries about seven times as many.
"""

from __future__ import annotations

import itertools
import json
import os
import string
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.history import HistoryFile
from agenvoy_desktop.core.importers import ImportFormatError, read_import_file
from agenvoy_desktop.core.messages import ROLES, Message
from agenvoy_desktop.core.search import MODES, SearchError, SearchQuery, search_chat_history
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import (
    InvalidSessionIdError,
    MemoryStore,
    SessionIdCaseError,
    check_session_id,
)
from agenvoy_desktop.core.timeutil import MAX_TIME_NS, MIN_TIME_NS
from agenvoy_desktop.paths import app_paths
from tests.conftest import T0, conversation
from tests.fakes import HashingEmbedder
from tests.reliability.torture import SEEDS_ENV

SCALE = max(1, int(os.environ.get(SEEDS_ENV, "3")) // 3)
# Hypothesis keeps caches (Unicode tables, constants) in ./.hypothesis: not in a checkout.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "agenvoy-hypothesis")


def fuzz(examples: int, *also: HealthCheck) -> settings:
    """Hypothesis settings for this file: no deadline (shared CPUs), no example database."""
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, *also],
    )


# -- strategies -------------------------------------------------------------------------
FTS_SYNTAX = ['"', "*", "^", ":", "(", ")", "{", "}", "-", "+", "NEAR", "AND", "OR", "NOT",
              "NEAR(a b, 2)", "body:", "sid:", '""', "'", "\\", "%", "_"]  # fmt: skip
SCRIPTS = ["記憶系統", "東京タワー", "메모리", "שלום עולם", "مرحبا", "\u202e\u202d", "e\u0301",
           "😀👍🏽", "\x00", "\ud800", "\udcff", "\ufeff", "\u2028", "\t\n\r", " "]  # fmt: skip
any_char = st.characters(categories=["L", "M", "N", "P", "S", "Z", "C"])  # surrogates (Cs) too
pieces = st.one_of(st.text(any_char, max_size=12), st.sampled_from(FTS_SYNTAX + SCRIPTS))
short_text = st.one_of(
    st.lists(pieces, max_size=8).map(" ".join), st.lists(pieces, max_size=8).map("".join)
)
hostile_text = st.one_of(
    short_text, st.builds(lambda piece, times: piece * times, pieces, st.integers(1, 200_000))
)
"""Short mixed text, or one piece repeated up to megabytes."""
times_ns = st.one_of(
    st.none(), st.integers(MIN_TIME_NS, MAX_TIME_NS), st.integers(-(2**63), 2**63 - 1)
)
"""A time range bound as the core receives it: the CLI and the agent's tool range-check text."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStore]:
    """One profile for the whole file (hypothesis runs many examples per test)."""
    texts = [
        "we should book a hotel in Kyoto",
        "記憶系統 works for CJK",
        "שלום עולם",
        'quotes " and NEAR(a b) and *stars*',
        "nul \x00 inside",
        "e\u0301 combining",
    ]
    with open_memory(app_paths(tmp_path_factory.mktemp("fuzz")), HashingEmbedder(64)) as opened:
        for sid in ("s1", "s2"):
            opened.create_session("t", sid)
            opened.append(sid, conversation([f"{sid}: {t}" for t in texts], start=T0))
        yield opened


# -- search ---------------------------------------------------------------------------------
queries = st.builds(
    SearchQuery,
    text=hostile_text,
    mode=st.sampled_from(MODES),
    limit=st.integers(1, 50),
    session_id=st.sampled_from([None, "s1", "s2"]),
    time_from_ns=times_ns,
    time_to_ns=times_ns,
    include_tool=st.booleans(),
)
keyword_options = st.fixed_dictionaries(
    {
        "limit": st.integers(1, 100),
        "session_id": st.sampled_from([None, "s1", "s2"]),
        "time_from_ns": times_ns,
        "time_to_ns": times_ns,
        "include_tool": st.booleans(),
        "with_context": st.booleans(),
    }
)


def _refusal(call: Any, *args: Any, error: type[Exception]) -> tuple[Any, str | None]:
    """``(call(*args), None)``, or ``(None, message)`` when it raised *error*."""
    try:
        return call(*args), None
    except error as exc:
        return None, str(exc)


@fuzz(60)
@given(query=queries)
@example(query=SearchQuery("\ud800", "hybrid", 5))
@example(query=SearchQuery("記憶 hotel " * 100_000, "hybrid", 5))  # a megabyte pasted
def test_search_takes_any_text(store: MemoryStore, query: SearchQuery) -> None:
    result, refused = _refusal(search_chat_history, store, query, error=SearchError)
    if refused is not None:
        assert not query.text.strip()  # the one documented refusal of a well-formed query
        return
    surrogate = any(0xD800 <= ord(c) <= 0xDFFF for c in query.text)
    event("has a lone surrogate" if surrogate else "valid text")
    assert len(result.hits) <= query.limit
    for hit in result.hits:
        assert query.session_id in (None, hit.item.session_id)
        assert store.archive.rowids_for([hit.item.message.id])


@fuzz(80)
@given(text=hostile_text, options=keyword_options)
@example(
    text='NEAR("' * 200_000,
    options={"limit": 5, "session_id": "s1", "time_from_ns": None, "time_to_ns": None,
             "include_tool": True, "with_context": True},
)  # fmt: skip
def test_keyword_search_takes_any_text(
    store: MemoryStore, text: str, options: dict[str, Any]
) -> None:
    archive: Archive = store.archive
    hits = archive.keyword_search(text, **options)
    assert len(hits) <= options["limit"]
    since, until = options["time_from_ns"], options["time_to_ns"]
    for item, _score in hits:
        assert options["session_id"] in (None, item.session_id)
        assert since is None or item.message.time_ns >= since
        assert until is None or item.message.time_ns <= until


# -- the CLI's argument checks ------------------------------------------------------------------
@fuzz(200)
@given(value=st.integers())
def test_limit_check_takes_any_integer(value: int) -> None:
    checked, refused = _refusal(
        common.in_range, "--limit", value, 1, common.MAX_RESULTS, error=common.CliError
    )
    if 1 <= value <= common.MAX_RESULTS:
        assert checked == value
    else:
        assert refused is not None
        assert "\n" not in refused


@fuzz(200)
@given(text=st.one_of(hostile_text, st.datetimes().map(lambda d: d.isoformat())))
def test_time_option_takes_any_text(text: str) -> None:
    ns, refused = _refusal(common.time_option, "--since", text, error=common.CliError)
    if refused is not None:
        assert "\n" not in refused.strip()
        return
    assert ns is not None
    assert MIN_TIME_NS <= ns <= MAX_TIME_NS


@pytest.fixture(scope="module")
def cli_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("cli") / "profile"
    with open_memory(app_paths(data_dir), HashingEmbedder(256)) as opened:
        opened.create_session("t", "s1")
        opened.append("s1", conversation(["a hotel in Kyoto", "the Granvia", "記憶系統"]))
    return data_dir


def _search_argv(text: str, mode: str, since: str | None, limit: str | None) -> list[str]:
    """``search`` arguments as a shell would pass them (``--x=value``: a value may start with -)."""
    argv = ["search", "--mode", mode]
    argv += [f"--since={since}"] if since is not None else []
    argv += [f"--limit={limit}"] if limit is not None else []
    return [*argv, "--", text]


search_argvs = st.builds(
    _search_argv,
    text=short_text.map(lambda t: t.replace("\x00", "")),  # argv cannot hold a NUL
    mode=st.sampled_from(MODES),
    since=st.one_of(st.none(), st.datetimes().map(lambda d: d.isoformat()), short_text),
    limit=st.one_of(
        st.none(), st.integers(-5, 2000).map(str), st.integers().map(str), st.text(max_size=5)
    ),
)


@fuzz(40, HealthCheck.function_scoped_fixture)  # capsys is read after every example
@given(argv=search_argvs)
def test_search_command_answers_in_one_line(
    cli_profile: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    """The whole command, in-process: results, or one line and exit status 1 (argparse: 2)."""
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=256))
    try:
        code = cli.main([*argv[:-2], "--data-dir", str(cli_profile), *argv[-2:]])
    except SystemExit as exc:  # argparse refusing --limit=abc
        code = exc.code if isinstance(exc.code, int) else -1
    _out, err = capsys.readouterr()
    event(f"exit status {code}")
    assert code in (0, 1, 2), err
    assert "internal error" not in err
    if code == 1:
        assert len(err.strip().splitlines()) == 1, err


# -- import -------------------------------------------------------------------------------------
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(any_char, max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
times_text = st.one_of(
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.datetimes().map(lambda d: d.isoformat()),
    st.text(max_size=30),
)
message_objects = st.fixed_dictionaries(
    {
        "role": st.one_of(st.sampled_from(sorted(ROLES)), st.text(max_size=8)),
        "content": st.one_of(st.text(max_size=40), st.text(any_char, max_size=40), json_values),
    },
    optional={
        "time": st.one_of(times_text, json_values),
        "id": json_values,
        "ref": st.one_of(st.text(max_size=10), st.integers()),
        "tool_calls": json_values,
        "name": st.text(max_size=10),
    },
)
message_objects = message_objects | message_objects.map(
    lambda m: {**m, "content": f"當前時間: 2024-03-01 10:00:00\n{m['content']}"}
)


def _encode(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


import_files = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(message_objects, json_values), max_size=6).map(
        lambda rows: b"\n".join(_encode(r) for r in rows)
    ),
    st.lists(st.one_of(message_objects, json_values), max_size=6).map(_encode),
    st.lists(message_objects, max_size=4).map(
        lambda rows: _encode({"format": "agenvoy-session", "messages": rows})
    ),
    json_values.map(_encode),
)
_import_number = itertools.count()


@fuzz(150)
@given(data=import_files)
def test_import_refuses_or_round_trips(
    store: MemoryStore, tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.getbasetemp() / f"import-{next(_import_number)}.jsonl"
    path.write_bytes(data)
    messages, refused = _refusal(read_import_file, path, T0, error=ImportFormatError)
    if refused is not None:
        assert refused.startswith(str(path))  # says which file (and line)
        event("refused")
        return
    event("imported")
    sid = store.import_messages(messages, f"imp{next(_import_number)}")
    archived = [a.message for a in store.archive.messages(sid)]
    reread = HistoryFile(store.folder(sid) / "history.json", T0, readonly=True).load()
    assert _comparable(archived) == _comparable(messages)
    assert _comparable(reread) == _comparable(messages)


def _comparable(messages: list[Message]) -> list[tuple[object, ...]]:
    return [
        (m.id, m.role, m.content, m.time_ns, m.ref, json.dumps(m.extra, sort_keys=True))
        for m in messages
    ]


# -- session ids ------------------------------------------------------------------------------
SAFE = frozenset(string.ascii_letters + string.digits + "._-")


@fuzz(300)
@given(
    session_id=st.one_of(
        st.text(any_char, max_size=70),
        st.text(st.sampled_from([*sorted(SAFE), "/", "\\", "\n", "\x00", ":", " "]), max_size=70),
    )
)
@example(session_id="s1\n")
@example(session_id="..")
@example(session_id="a/../b")
def test_session_ids_are_one_safe_folder(store: MemoryStore, session_id: str) -> None:
    _, refused = _refusal(check_session_id, session_id, error=InvalidSessionIdError)
    if refused is not None:
        assert "\n" not in refused
        event("refused")
        return
    event("accepted")
    assert set(session_id) <= SAFE
    assert session_id not in (".", "..")
    assert not session_id.startswith(".")
    assert Path(session_id).name == session_id
    assert 1 <= len(session_id) <= 64
    existing = store.session_ids()
    if session_id not in existing and session_id.lower() in {s.lower() for s in existing}:
        with pytest.raises(SessionIdCaseError):  # Windows and macOS would share one folder
            store.create_session(None, session_id)
        event("refused: differs from an existing id only in case")
        return
    assert store.create_session(None, session_id) == session_id
    folder = store.folder(session_id)
    assert folder.parent == store.paths.sessions_dir
    assert folder.is_dir()
    assert session_id in store.session_ids()


WINDOWS_RESERVED = ["CON", "nul", "com1", "LPT9", "aux.txt", "prn", "s1."]
"""Names Windows cannot hold as folders: devices (any case, any extension), a trailing dot."""


@pytest.mark.parametrize("session_id", WINDOWS_RESERVED)
def test_windows_reserved_names_are_refused(session_id: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        check_session_id(session_id)
