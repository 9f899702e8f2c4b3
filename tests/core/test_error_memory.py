"""The error memory: records, TTL, lookup ranking, hints, safety."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from agenvoy_desktop.core.error_memory import (
    DAY_NS,
    SCHEMA_VERSION,
    ErrorMemory,
    ErrorMemoryError,
    ErrorRecordInvalid,
    ErrorRecordNotFound,
    format_hints,
)
from agenvoy_desktop.core.error_types import QUERY_CLIP, classify_error, lookup_query, text_terms
from tests.conftest import FakeClock
from tests.fakes import HashingEmbedder

ERR = "FileNotFoundError: [Errno 2] No such file or directory: '/home/u/notes.txt'"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory" / "errors.sqlite3"


@pytest.fixture
def mem(db_path: Path, clock: FakeClock) -> Iterator[ErrorMemory]:
    with ErrorMemory(db_path, HashingEmbedder(dim=256), clock=clock) as memory:
        yield memory


def _ids(hints: Sequence[object]) -> list[int]:
    return [h.record.id for h in hints]  # type: ignore[attr-defined]


# -- add, validate, merge -----------------------------------------------------------
def test_add_round_trip(mem: ErrorMemory) -> None:
    rec = mem.add(
        "read_file",
        "No such file or directory when reading notes.txt",
        cause="wrong folder",
        action="list the folder first",
        outcome="resolved",
        keywords=["Notes.TXT", "notes.txt", "  Path   Missing "],
        session_id="s1",
    )
    assert rec.id > 0
    assert rec.error_type == "not_found"
    assert rec.keywords == ("notes.txt", "path missing", "error_type:not_found")
    assert rec.expires_ns == rec.created_ns + 90 * DAY_NS
    assert (rec.hits, rec.last_hit_ns, rec.source, rec.session_id) == (0, None, "agent", "s1")
    assert rec.has_vector
    assert mem.get(rec.id) == rec
    assert mem.get(rec.id + 1) is None
    assert mem.count() == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tool": "  "}, "tool"),
        ({"symptom": " \n"}, "symptom"),
        ({"symptom": "x" * 2001}, "symptom"),
        ({"cause": "x" * 2001}, "cause"),
        ({"action": "y" * 2001}, "action"),
        ({"outcome": "maybe"}, "outcome"),
        ({"keywords": [f"k{i}" for i in range(21)]}, "keywords"),
        ({"keywords": ["k" * 65]}, "keyword"),
        ({"keywords": [""]}, "keyword"),
        ({"keywords": "one string"}, "keywords"),
        ({"source": "robot"}, "source"),
        ({"error_type": "weird"}, "error_type"),
    ],
)
def test_add_validates(mem: ErrorMemory, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"tool": "t", "symptom": "it broke", "outcome": "failed"}
    args.update(kwargs)
    with pytest.raises(ErrorRecordInvalid, match=rf"^{field}\b"):
        mem.add(**args)  # type: ignore[arg-type]
    assert mem.count(include_expired=True) == 0


def test_duplicate_updates_instead_of_adding(mem: ErrorMemory, clock: FakeClock) -> None:
    first = mem.add(
        "read_file",
        "Permission denied: /etc/shadow",
        cause="system file",
        action="asked for sudo",
        outcome="failed",
        keywords=["shadow"],
        session_id="s1",
    )
    clock.start += 10 * DAY_NS
    again = mem.add(
        " read_file ",
        "permission   DENIED: /etc/shadow.",
        action="read a copy in the allowed folder",
        outcome="resolved",
        keywords=["Shadow", "etc"],
        session_id="s2",
        source="user",
    )
    assert again.id == first.id
    assert mem.count() == 1
    assert again.keywords == ("shadow", "etc", "error_type:permission")
    assert again.cause == "system file"  # an empty cause keeps the old one
    assert again.action == "read a copy in the allowed folder"
    assert again.outcome == "resolved"
    assert again.created_ns == first.created_ns
    assert again.expires_ns > first.expires_ns + 9 * DAY_NS
    assert (again.session_id, again.source, again.symptom) == ("s1", "agent", first.symptom)
    assert mem.find("read_file", "PERMISSION DENIED: /etc/shadow") == again
    other_tool = mem.add("list_dir", "Permission denied: /etc/shadow", outcome="failed")
    assert other_tool.id != first.id


def test_merged_keywords_keep_the_newest_twenty(mem: ErrorMemory) -> None:
    mem.add("t", "boom", outcome="failed", keywords=[f"old{i}" for i in range(15)])
    rec = mem.add("t", "boom", outcome="failed", keywords=[f"new{i}" for i in range(10)])
    assert len(rec.keywords) == 21  # 20 user keywords + error_type
    assert rec.keywords[0] == "old5"
    assert rec.keywords[-2] == "new9"


# -- classification ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (FileNotFoundError(2, "No such file or directory"), "not_found"),
        ("[Errno 2] No such file or directory: 'a.txt'", "not_found"),
        ("HTTP 404 page not found", "not_found"),
        (PermissionError(13, "Permission denied"), "permission"),
        ("Access denied to C:\\Windows", "permission"),
        ("path is outside the allowed folders", "permission"),
        (TimeoutError(), "timeout"),
        ("the tool timed out after 30 s", "timeout"),
        ("missing required argument 'path'", "required_param"),
        (TypeError("f() missing 1 required positional argument: 'x'"), "required_param"),
        ("limit is required", "required_param"),
        ("invalid value for limit", "invalid_param"),
        ("limit must be a positive integer", "invalid_param"),
        ("expected str, got int", "invalid_param"),
        (ValueError("bad"), "invalid_param"),
        (IsADirectoryError(21, "Is a directory"), "invalid_param"),
        ("", "no_result"),
        (None, "no_result"),
        ("   ", "no_result"),
        ("search returned no results", "no_result"),
        ("unknown tool 'fly'", "tool_not_exist"),
        ("No such tool: teleport", "tool_not_exist"),
        ("tool 'teleport' not found", "tool_not_exist"),
        ("read_file failed: file not found", "not_found"),
        ("something odd happened", "other"),
        (RuntimeError("unexpected failure"), "other"),
    ],
)
def test_classification(error: BaseException | str | None, expected: str) -> None:
    assert classify_error(error) == expected


def test_text_terms_cover_ngrams_and_cjk() -> None:
    terms = text_terms("Errno 2: 無法讀取記憶檔案")
    assert {"errno", "errno 2", "記憶", "記憶檔案"} <= terms


# -- TTL, renewal, purge ----------------------------------------------------------
def test_expiry_and_renewal_on_lookup(mem: ErrorMemory, clock: FakeClock) -> None:
    rec = mem.add("read_file", "No such file or directory: notes.txt", outcome="resolved")
    clock.start += 60 * DAY_NS
    hints = mem.lookup_for_failure("read_file", ERR)
    assert _ids(hints) == [rec.id]
    renewed = hints[0].record
    assert renewed.hits == 1
    assert renewed.last_hit_ns is not None
    assert renewed.expires_ns == renewed.last_hit_ns + 90 * DAY_NS
    clock.start += 60 * DAY_NS  # 120 days after creation, 60 after the hit
    assert mem.count() == 1
    clock.start += 31 * DAY_NS
    assert mem.count() == 0
    assert mem.list() == []
    assert [r.id for r in mem.list(include_expired=True)] == [rec.id]
    assert mem.lookup_for_failure("read_file", ERR) == []
    assert mem.search("notes") == []
    assert mem.purge_expired() == 1
    assert mem.count(include_expired=True) == 0


def test_search_renews_and_renew_does_not_count_a_hit(mem: ErrorMemory, clock: FakeClock) -> None:
    rec = mem.add("web_fetch", "connection timed out fetching example.org", outcome="failed")
    clock.start += 80 * DAY_NS
    found = mem.search("timed out example.org")
    assert _ids(found) == [rec.id]
    assert found[0].record.hits == 1
    clock.start += 80 * DAY_NS
    renewed = mem.renew(rec.id)
    assert renewed.hits == 1
    assert renewed.expires_ns > clock.start + 89 * DAY_NS
    with pytest.raises(ErrorRecordNotFound, match="#999"):
        mem.renew(999)


def test_purge_on_open_and_once_per_day(db_path: Path, clock: FakeClock) -> None:
    with ErrorMemory(db_path, None, clock=clock) as mem:
        mem.add("t", "gone soon", outcome="failed")
        mem.add("t", "kept", outcome="failed")
        assert mem.purge_if_due() is None  # purged when opened
    clock.start += 91 * DAY_NS
    with ErrorMemory(db_path, None, clock=clock, purge_on_open=False) as mem:
        assert mem.count(include_expired=True) == 2  # an inspector may show them
    with ErrorMemory(db_path, None, clock=clock) as mem:
        assert mem.count(include_expired=True) == 0
        mem.add("t", "new one", outcome="failed")
        clock.start += 23 * 3600 * 10**9
        assert mem.purge_if_due() is None
        clock.start += 2 * 3600 * 10**9
        assert mem.purge_if_due() == 0
        assert mem.purge_if_due() is None
        clock.start += 91 * DAY_NS
        assert mem.purge_if_due() == 1


def test_ttl_is_configurable(db_path: Path, clock: FakeClock) -> None:
    with ErrorMemory(db_path, None, clock=clock, ttl_days=7) as mem:
        rec = mem.add("t", "x", outcome="failed")
        assert rec.expires_ns == rec.created_ns + 7 * DAY_NS
    with pytest.raises(ValueError, match="ttl_days"):
        ErrorMemory(db_path, None, ttl_days=0)


# -- lookup ranking and hints --------------------------------------------------------
def _ranking_fixture(mem: ErrorMemory) -> dict[str, int]:
    ids = {
        "close": mem.add(
            "read_file",
            "FileNotFoundError: No such file or directory: notes.txt",
            action="look in ~/Documents",
            outcome="resolved",
        ).id,
        "near": mem.add(
            "read_file",
            "No such file or directory when reading notes.txt",
            action="guess the path again",
            outcome="failed",
        ).id,
        "same_type": mem.add(
            "read_file", "the folder does not exist", action="create it", outcome="abandoned"
        ).id,
        "keywords": mem.add(
            "read_file",
            "cannot open the archive",
            action="unzip first",
            outcome="resolved",
            keywords=["notes.txt"],
        ).id,
        "unrelated": mem.add("read_file", "output garbled", outcome="failed").id,
        "other_tool": mem.add(
            "list_dir", "FileNotFoundError: No such file or directory: notes.txt", outcome="failed"
        ).id,
    }
    return ids


def test_lookup_ranks_vector_then_error_type_then_keywords(mem: ErrorMemory) -> None:
    ids = _ranking_fixture(mem)
    hints = mem.lookup_for_failure("read_file", ERR, limit=10)
    assert _ids(hints) == [ids["close"], ids["near"], ids["same_type"], ids["keywords"]]
    assert [h.reason for h in hints] == ["similar", "similar", "error_type", "keywords"]
    assert hints[0].score > hints[1].score >= 0.45
    assert hints[2].score == 0.0
    top = mem.lookup_for_failure("read_file", ERR)
    assert _ids(top) == [ids["close"], ids["near"], ids["same_type"]]
    assert mem.lookup_for_failure("no_such_tool", ERR) == []


def test_lookup_top_three_similar_win_over_keywords(mem: ErrorMemory) -> None:
    similar = [
        mem.add("read_file", f"No such file or directory: notes.txt (try {i})", outcome="failed").id
        for i in range(4)
    ]
    mem.add("read_file", "odd", outcome="failed", keywords=["notes.txt", "errno 2"])
    hints = mem.lookup_for_failure("read_file", ERR)
    assert len(hints) == 3
    assert {h.reason for h in hints} == {"similar"}
    assert set(_ids(hints)) <= set(similar)


def test_lookup_keyword_tier_orders_by_overlap(mem: ErrorMemory) -> None:
    one = mem.add("t", "alpha broke", outcome="failed", keywords=["quota"]).id
    two = mem.add("t", "beta broke", outcome="failed", keywords=["disk", "quota", "x y"]).id
    mem.add("t", "gamma broke", outcome="failed")  # "other" like the error: no reason to return
    hints = mem.lookup_for_failure("t", "disk quota exceeded on /data")
    assert _ids(hints) == [two, one]
    assert [h.reason for h in hints] == ["keywords", "keywords"]


def test_hints_and_their_text(mem: ErrorMemory) -> None:
    _ranking_fixture(mem)
    hints = mem.lookup_for_failure("read_file", ERR)
    assert hints[0].instruction == "apply this fix: look in ~/Documents"
    assert hints[1].instruction == "do not repeat this: guess the path again"
    assert hints[2].instruction == "do not repeat this: create it"
    block = format_hints(hints, tool="read_file")
    assert block.startswith("Error memory: past failures of the tool `read_file`")
    assert "apply this fix: look in ~/Documents" in block
    assert "do not repeat this: guess the path again" in block
    assert f"record #{hints[0].record.id}" in block
    assert format_hints([]) == ""


def test_empty_result_looks_up_no_result_records(mem: ErrorMemory) -> None:
    rec = mem.add("search_rag", "search returned no results", action="widen", outcome="resolved")
    mem.add("search_rag", "timed out", outcome="failed")
    assert _ids(mem.lookup_for_failure("search_rag", None)) == [rec.id]
    assert _ids(mem.lookup_for_failure("search_rag", "")) == [rec.id]


# -- without a model, model changes, a broken model -------------------------------------------
def test_works_without_an_embedder(db_path: Path, clock: FakeClock) -> None:
    with ErrorMemory(db_path, None, clock=clock) as mem:
        ids = _ranking_fixture(mem)
        assert not mem.get(ids["close"]).has_vector  # type: ignore[union-attr]
        hints = mem.lookup_for_failure("read_file", ERR, limit=10)
        assert set(_ids(hints)) == {ids["close"], ids["near"], ids["same_type"], ids["keywords"]}
        assert {h.reason for h in hints} == {"error_type", "keywords"}
        assert ids["keywords"] in _ids(mem.search("notes.txt"))
        assert mem.missing_vectors() == 0
        assert mem.backfill_vectors() == 0


def test_backfill_after_adding_without_a_model(db_path: Path, clock: FakeClock) -> None:
    with ErrorMemory(db_path, None, clock=clock) as mem:
        ids = _ranking_fixture(mem)
    with ErrorMemory(db_path, HashingEmbedder(dim=256), clock=clock) as mem:
        assert mem.missing_vectors() == len(ids)
        before = mem.lookup_for_failure("read_file", ERR)
        assert all(h.reason != "similar" for h in before)
        assert mem.backfill_vectors(limit=2) == 2
        assert mem.backfill_vectors() == len(ids) - 2
        assert mem.missing_vectors() == 0
        hints = mem.lookup_for_failure("read_file", ERR)
        assert _ids(hints)[:2] == [ids["close"], ids["near"]]
    with ErrorMemory(db_path, HashingEmbedder(dim=128), clock=clock) as mem:
        assert mem.missing_vectors() == len(ids)  # another model's vectors are not used
    with ErrorMemory(db_path, HashingEmbedder(dim=256), clock=clock) as mem:
        mem.backfill_vectors()
    with ErrorMemory(db_path, _SameWidthOtherModel(dim=256), clock=clock) as mem:
        assert mem.missing_vectors() == len(ids)  # the same width under another name neither


class _SameWidthOtherModel(HashingEmbedder):
    model_name = "multilingual-e5-small"


class _BrokenEmbedder(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise RuntimeError("model crashed")

    def submit(self, texts: Sequence[str]) -> Future[npt.NDArray[np.float32]]:
        raise RuntimeError("model crashed")


def test_a_broken_model_loses_nothing(db_path: Path, clock: FakeClock) -> None:
    with ErrorMemory(db_path, _BrokenEmbedder(), clock=clock) as mem:
        rec = mem.add("t", "No such file: a.txt", outcome="failed")
        assert not rec.has_vector
        assert _ids(mem.lookup_for_failure("t", "No such file: b.txt")) == [rec.id]
        assert _ids(mem.search("a.txt")) == [rec.id]


# -- update, delete, list ------------------------------------------------------------------
def test_update_and_delete(mem: ErrorMemory) -> None:
    rec = mem.add("t", "timed out", outcome="failed", keywords=["slow"])
    other = mem.add("t", "access denied", outcome="failed")
    changed = mem.update(rec.id, outcome="resolved", action="raise the timeout", keywords=["Net"])
    assert (changed.outcome, changed.action) == ("resolved", "raise the timeout")
    assert changed.keywords == ("net", "error_type:timeout")
    moved = mem.update(rec.id, symptom="no such file")
    assert moved.error_type == "not_found"
    with pytest.raises(ErrorRecordInvalid, match=rf"^symptom: record #{other.id}"):
        mem.update(rec.id, symptom="Access denied.")
    with pytest.raises(ErrorRecordInvalid, match=r"^outcome"):
        mem.update(rec.id, outcome="done")
    with pytest.raises(ErrorRecordNotFound, match="#424242"):
        mem.update(424242, outcome="failed")
    mem.delete(rec.id)
    assert mem.get(rec.id) is None
    with pytest.raises(ErrorRecordNotFound):
        mem.delete(rec.id)
    assert mem.search("file") == []
    assert _ids(mem.lookup_for_failure("t", "Access denied")) == [other.id]


def test_list_filters_and_orders(mem: ErrorMemory, clock: FakeClock) -> None:
    a = mem.add("read_file", "alpha", outcome="failed")
    b = mem.add("read_file", "beta", outcome="resolved")
    c = mem.add("list_dir", "gamma", outcome="failed")
    assert _ids(mem.search("beta")) == [b.id]
    assert [r.id for r in mem.list()] == [c.id, b.id, a.id]
    assert [r.id for r in mem.list(order_by="created")] == [a.id, b.id, c.id]
    assert [r.id for r in mem.list(order_by="-hits", limit=1)] == [b.id]
    assert [r.id for r in mem.list(tool="read_file", outcome="failed")] == [a.id]
    with pytest.raises(ValueError, match="order_by"):
        mem.list(order_by="symptom; DROP TABLE errors")
    with pytest.raises(ErrorRecordInvalid, match="outcome"):
        mem.list(outcome="nope")


def test_index_stays_in_step_with_writes(db_path: Path, clock: FakeClock) -> None:
    """The in-memory index after adds, deletes and updates ranks like a fresh load."""
    with ErrorMemory(db_path, HashingEmbedder(dim=256), clock=clock) as mem:
        mem.lookup_for_failure("t", "warm the index")
        recs = [
            mem.add("t", f"No such file number {i} notes.txt", outcome="failed", keywords=[f"k{i}"])
            for i in range(12)
        ]
        recs += [mem.add("v", f"filler {i}", outcome="failed") for i in range(70)]  # grows
        for rec in recs[::3]:
            mem.delete(rec.id)
        mem.update(recs[4].id, symptom="permission denied on notes.txt")
        mem.add("u", "No such file number 1 notes.txt", outcome="failed")
        live = [
            _ids(mem.lookup_for_failure("t", f"No such file number {i} k{i}", limit=5))
            for i in range(12)
        ]
    with ErrorMemory(db_path, HashingEmbedder(dim=256), clock=clock) as fresh:
        reloaded = [
            _ids(fresh.lookup_for_failure("t", f"No such file number {i} k{i}", limit=5))
            for i in range(12)
        ]
    assert live == reloaded
    assert all(recs[0].id not in ids for ids in live)


# -- the file ------------------------------------------------------------------------------
def test_schema_version_and_wal(mem: ErrorMemory, db_path: Path) -> None:
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"meta", "errors", "error_keywords", "errors_fts"} <= tables
    finally:
        db.close()


def test_newer_database_is_refused_untouched(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE future (x)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    before = db_path.read_bytes()
    with pytest.raises(ErrorMemoryError, match="newer"):
        ErrorMemory(db_path, None)
    assert db_path.read_bytes() == before
    assert not db_path.with_name(db_path.name + "-wal").exists()


@pytest.mark.parametrize(
    "content", [b"this is not a database" * 100, b"SQLite format 3\x00" + b"\xff" * 4000]
)
def test_corrupt_file_is_a_clear_error_and_untouched(db_path: Path, content: bytes) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(content)
    with pytest.raises(ErrorMemoryError, match=r"errors\.sqlite3: the file is"):
        ErrorMemory(db_path, None)
    assert db_path.read_bytes() == content


@pytest.mark.parametrize(
    "query", ['"', "*", "NEAR(", "%", "_", "\\", "'; DROP TABLE errors; --", 'a" OR "1', "-x:y"]
)
def test_hostile_search_strings_are_harmless(mem: ErrorMemory, query: str) -> None:
    mem.add("t", "plain failure text", cause="c", action="a", outcome="failed")
    assert mem.search(query) == []
    assert mem.search(query, tool="t") == []
    mem.lookup_for_failure("t", query)
    mem.lookup_for_failure(query, query)
    assert mem.count() == 1


def test_like_fallback_matches_literal_percent(mem: ErrorMemory) -> None:
    rec = mem.add("t", "disk at 100% usage", outcome="failed")
    mem.add("t", "disk at 100 usage", outcome="failed")
    assert _ids(mem.search("%"))[:1] == [rec.id]


def test_empty_search_is_refused(mem: ErrorMemory) -> None:
    with pytest.raises(ValueError, match="empty"):
        mem.search("  ")


# -- the embedded query -------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            "read_file failed: PermissionError: permission denied: /etc/secret.txt is "
            "outside the allowed folders (/home/me/notes, /media/usb/backup)",
            "permission denied: is outside the allowed folders",
        ),
        ("not found: C:\\Users\\me\\notes\\todo.md", "not found:"),
        ("cannot open ~/a/b.txt or ./x/y/z.md today", "cannot open or today"),
        ("see docs/guide/intro.md and/or 1/2", "see and/or 1/2"),  # one slash is no path
        ("other_tool failed: x", "other_tool failed: x"),  # only the looked-up tool's prefix
        ("KeyError: 'session'", "KeyError: 'session'"),  # the class is the message here
        (
            FileNotFoundError(2, "No such file or directory", "/srv/data/x.csv"),
            "[Errno 2] No such file or directory:",
        ),
        ("  many\n\n   spaces\there  ", "many spaces here"),
    ],
)
def test_lookup_query_keeps_the_kind_of_failure(error: BaseException | str, expected: str) -> None:
    assert lookup_query("read_file", error) == expected


def test_lookup_query_is_clipped_head_and_tail() -> None:
    text = "Traceback (most recent call last): " + "frame " * 200 + "KeyError: 'session'"
    query = lookup_query("t", text)
    assert len(query) <= QUERY_CLIP + 3
    assert query.startswith("Traceback")
    assert query.endswith("KeyError: 'session'")


def test_lookup_matches_despite_paths(mem: ErrorMemory) -> None:
    """Paths leave the embedded query; a record about the same kind still ranks first."""
    outside = mem.add(
        "read_file",
        "permission denied: /etc/hosts is outside the allowed folders",
        outcome="failed",
    )
    mem.add("read_file", "not found: notes.txt", outcome="resolved")
    error = (
        "read_file failed: PermissionError: permission denied: /srv/a/b.txt is outside"
        " the allowed folders (/home/me)"
    )
    assert _ids(mem.lookup_for_failure("read_file", error))[0] == outside.id


def test_a_search_longer_than_any_record_finds_nothing_quietly(tmp_path: Path) -> None:
    """SQLite refuses LIKE patterns over 50,000 bytes; such text is never sent."""
    with ErrorMemory(tmp_path / "errors.sqlite3", None, clock=FakeClock()) as memory:
        memory.add("read_file", "no such file: notes.txt", outcome="failed")
        assert memory.search("x" * 100_000) == []
