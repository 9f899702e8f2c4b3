"""The SQLite archive: schema, WAL, FTS5 for CJK and English, hostile queries."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop.core import archive as archive_mod
from agenvoy_desktop.core.archive import SCHEMA_VERSION, Archive, ArchiveError
from agenvoy_desktop.core.retrieval.fts_text import index_text, query_terms, stem
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation, msg
from tests.core.conftest import add_texts as _add
from tests.core.conftest import hit_ids as _ids


def test_wal_and_schema_version(archive: Archive) -> None:
    db = sqlite3.connect(archive.path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        db.close()


def test_reopen_keeps_data(tmp_path: Path) -> None:
    arc = Archive(tmp_path / "a.sqlite3")
    _add(arc, ["persisted message"])
    arc.close()
    arc = Archive(tmp_path / "a.sqlite3")
    try:
        assert arc.count("s1") == 1
        assert len(arc.keyword_search("persisted", limit=3)) == 1
    finally:
        arc.close()


def test_newer_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE future (x)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(ArchiveError, match="newer"):
        Archive(path)
    assert path.read_bytes() == before


def test_not_a_database_is_a_friendly_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ArchiveError, match=r"junk\.sqlite3"):
        Archive(path)


def test_timestamps_are_utc_ns_and_messages_round_trip(archive: Archive) -> None:
    message = msg("assistant", "x", T0 + 123_456_789, tool_calls=[{"id": "1"}])
    archive.add_messages("s1", [message], T0)
    row = archive.messages("s1")[0]
    assert row.message == message
    assert row.message.time_ns == T0 + 123_456_789
    db = sqlite3.connect(archive.path)
    try:
        assert db.execute("SELECT time_ns, tool FROM messages").fetchone() == (
            T0 + 123_456_789,
            1,
        )
    finally:
        db.close()


def test_cjk_substring_and_single_characters(archive: Archive) -> None:
    messages = _add(archive, ["我們使用記憶系統來保存對話", "今天天氣很好", "系統管理員", "記憶"])
    assert _ids(archive.keyword_search("記憶系統", limit=5)) == [messages[0].id]
    assert set(_ids(archive.keyword_search("系統", limit=5))) == {
        messages[0].id,
        messages[2].id,
    }
    # Single characters: in the middle, at the end of a run, and a whole run.
    assert set(_ids(archive.keyword_search("氣", limit=5))) == {messages[1].id}
    assert set(_ids(archive.keyword_search("話", limit=5))) == {messages[0].id}
    assert set(_ids(archive.keyword_search("憶", limit=5))) == {messages[0].id, messages[3].id}
    assert archive.keyword_search("統系", limit=5) == []
    # Full-width and mixed scripts.
    assert _ids(archive.keyword_search("使用記憶", limit=5)) == [messages[0].id]


def test_cjk_mixed_with_latin(archive: Archive) -> None:
    messages = _add(archive, ["用SQLite的FTS5做全文檢索", "unrelated"])
    assert _ids(archive.keyword_search("全文檢索", limit=5)) == [messages[0].id]
    assert _ids(archive.keyword_search("sqlite", limit=5)) == [messages[0].id]
    assert _ids(archive.keyword_search("FTS5 檢索", limit=5)) == [messages[0].id]


def test_english_ranked_by_relevance(archive: Archive) -> None:
    filler = [f"generic filler message number {i} about the weather" for i in range(30)]
    messages = _add(
        archive,
        [
            *filler,
            "the hotel was fine",
            "the hotel in Kyoto near the station, a hotel with onsen in Kyoto",
            "Kyoto trip planning",
        ],
    )
    hits = archive.keyword_search("hotel Kyoto", limit=3)
    assert _ids(hits)[0] == messages[31].id
    assert set(_ids(hits)) == {m.id for m in messages[30:]}
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)


def test_plural_and_case_insensitive(archive: Archive) -> None:
    messages = _add(archive, ["We compared three HOTELS", "Cities of Japan"])
    assert _ids(archive.keyword_search("hotel", limit=5)) == [messages[0].id]
    assert _ids(archive.keyword_search("city", limit=5)) == [messages[1].id]
    assert stem("boxes") == "box"
    assert stem("class") == "class"
    assert stem("is") == "is"


def test_diacritics_and_identifiers(archive: Archive) -> None:
    messages = _add(archive, ["Un café crème à Paris", "call load_user_ids() first"])
    assert _ids(archive.keyword_search("café", limit=5)) == [messages[0].id]
    assert _ids(archive.keyword_search("cafe", limit=5)) == [messages[0].id]
    assert _ids(archive.keyword_search("load_user_ids", limit=5)) == [messages[1].id]
    assert _ids(archive.keyword_search("user ids", limit=5)) == [messages[1].id]


def test_natural_language_question_finds_the_right_message(archive: Archive) -> None:
    topics = ["budget", "weather", "meeting", "python", "groceries", "train", "music"]
    filler = [
        f"What did we say about the {topics[i % len(topics)]} on day {i}? "
        f"We decided nothing yet about it."
        for i in range(300)
    ]
    messages = _add(
        archive,
        [
            *filler[:150],
            "Final choice: the Kyoto hotel is the Hotel Granvia next to the station.",
            *filler[150:],
        ],
    )
    hits = archive.keyword_search("What did we decide about the hotel in Kyoto?", limit=3)
    assert _ids(hits)[0] == messages[150].id


HOSTILE = [
    '"',
    '""',
    "*",
    "NEAR(",
    "NEAR(a b, 2)",
    "AND",
    "OR NOT",
    '"unbalanced',
    "col:term",
    "body:hotel",
    "^start",
    "a -b",
    "hotel*",
    "(hotel",
    "hotel)",
    "{body}: x",
    "'; DROP TABLE messages; --",
    "\x00",
    "hotel\x00kyoto",
    "x" * 10_000,
    "hotel " * 2_000,
    "記" * 10_000,
    "🙂🙂",
    "\u200b",
    "   ",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_raise(archive: Archive, query: str) -> None:
    _add(archive, ["a hotel in kyoto", "start AND end", "記憶系統", "col term near", "記記記", "x"])
    result = archive.keyword_search(query, limit=5)
    assert isinstance(result, list)
    match = archive.build_match(query)
    assert match is None or isinstance(match, str)


def test_hostile_queries_match_as_plain_text(archive: Archive) -> None:
    messages = _add(archive, ["start AND end", "col term", "nothing here"])
    assert _ids(archive.keyword_search("^start", limit=5)) == [messages[0].id]
    assert _ids(archive.keyword_search("col:term", limit=5)) == [messages[1].id]
    assert _ids(archive.keyword_search('"unbalanced end', limit=5)) == [messages[0].id]


def test_stopword_only_query_still_works(archive: Archive) -> None:
    messages = _add(archive, ["to be or not to be", "question"])
    assert _ids(archive.keyword_search("to be", limit=5)) == [messages[0].id]
    # Stopwords are dropped when real words are present.
    match = archive.build_match("what about the question")
    assert match == '"question"'


def test_postings_budget_drops_the_most_frequent_terms(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [f"common frequent entry {i}" for i in range(50)]
    texts += [f"frequent entry {i}" for i in range(20)]
    texts += ["rare common frequent"]
    _add(archive, texts)
    assert archive.build_match("common frequent rare") == '"rare" OR "common" OR "frequent"'
    monkeypatch.setattr(archive_mod, "POSTINGS_BUDGET", 60)
    assert archive.build_match("common frequent rare") == '"rare" OR "common"'
    monkeypatch.setattr(archive_mod, "POSTINGS_BUDGET", 10)
    assert archive.build_match("common frequent rare") == '"rare"'
    # The single rarest term is always kept, even when it alone is over budget.
    monkeypatch.setattr(archive_mod, "POSTINGS_BUDGET", 1)
    assert archive.build_match("frequent") == '"frequent"'
    # Terms that occur nowhere are dropped; nothing left means no query.
    assert archive.build_match("absent") is None
    hits = archive.keyword_search("common frequent rare", limit=1)
    assert hits[0][0].message.content == "rare common frequent"


def test_query_terms_are_quoted() -> None:
    terms = query_terms('NEAR("x" AND 記憶系統')
    assert [t.expr for t in terms] == ['"near"', '"x"', '"and"', '"記憶 憶系 系統"']
    assert [t.is_stopword for t in terms] == [False, False, True, False]
    assert query_terms("記")[0].expr == '"記" *'
    assert index_text("記憶系統 Hotels").split() == ["記憶", "憶系", "系統", "統", "hotel"]


def test_filters_session_time_and_tool(archive: Archive) -> None:
    first = _add(archive, ["kyoto one", "kyoto two"], start=T0)
    second = _add(archive, ["kyoto three"], session="s2", start=T0 + 100 * SECOND)
    tool = msg("tool", "kyoto tool output", T0 + 200 * SECOND, tool_call_id="c")
    archive.add_messages("s2", [tool], T0)
    all_ids = set(_ids(archive.keyword_search("kyoto", limit=10)))
    assert all_ids == {first[0].id, first[1].id, second[0].id}
    assert set(_ids(archive.keyword_search("kyoto", limit=10, session_id="s2"))) == {second[0].id}
    with_tool = archive.keyword_search("kyoto", limit=10, include_tool=True)
    assert tool.id in _ids(with_tool)
    ranged = archive.keyword_search(
        "kyoto", limit=10, time_from_ns=T0 + SECOND, time_to_ns=T0 + 100 * SECOND
    )
    assert set(_ids(ranged)) == {first[1].id, second[0].id}
    excluded = archive.keyword_search("kyoto", limit=2, exclude_msg_ids=frozenset({first[0].id}))
    assert len(excluded) == 2
    assert first[0].id not in _ids(excluded)


def test_session_meta_start_at(archive: Archive) -> None:
    _add(archive, ["a", "b", "c"])
    meta = archive.session("s1")
    assert meta is not None
    assert meta.start_at_ns == 0
    assert meta.next_seq == 3
    archive.set_cut("s1", 2, T0 + 2 * SECOND)
    meta = archive.session("s1")
    assert meta is not None
    assert (meta.cut_seq, meta.start_at_ns) == (2, T0 + 2 * SECOND)
    assert archive.count_from("s1", 2) == 1


def test_delete_session_rows_updates_fts(archive: Archive) -> None:
    _add(archive, ["kyoto alpha"])
    kept = _add(archive, ["kyoto beta"], session="s2")
    archive.delete_session_rows("s1", drop_session=False)
    assert _ids(archive.keyword_search("kyoto", limit=5)) == [kept[0].id]
    assert archive.session("s1") is not None
    assert archive.fts_ok()
    archive.delete_session_rows("s2", drop_session=True)
    assert archive.session("s2") is None
    assert archive.keyword_search("kyoto", limit=5) == []
    assert archive.fts_ok()


def test_rebuild_fts_and_version_bump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arc = Archive(tmp_path / "a.sqlite3")
    messages = _add(arc, ["rebuild me please"])
    arc.set_meta("fts_text_version", "0")
    arc.close()
    calls: list[int] = []
    real = Archive.rebuild_fts

    def spy(self: Archive, progress: object = None) -> None:
        calls.append(1)
        real(self)

    monkeypatch.setattr(Archive, "rebuild_fts", spy)
    arc = Archive(tmp_path / "a.sqlite3")
    try:
        assert calls == [1]
        assert _ids(arc.keyword_search("rebuild", limit=5)) == [messages[0].id]
        assert arc.fts_ok()
    finally:
        arc.close()


def test_store_uses_archive_for_all_messages(store: MemoryStore) -> None:
    sid = store.create_session("t")
    store.append(sid, conversation(["kyoto hotel", "ok"]))
    assert store.archive.count(sid) == 2


def test_write_failures_are_friendly_and_roll_back(archive: Archive) -> None:
    _add(archive, ["kept"])
    archive._db.execute("PRAGMA query_only = 1")  # as if the disk refused writes
    with pytest.raises(ArchiveError, match="read-only"):
        archive.add_messages("s1", conversation(["lost"]), T0)
    archive._db.execute("PRAGMA query_only = 0")
    assert [r.message.content for r in archive.messages("s1")] == ["kept"]
    archive.add_messages("s1", conversation(["works again"]), T0)
    assert archive.count("s1") == 2


def test_schema_v1_database_migrates_forward_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in archive_mod.MIGRATIONS[1].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO sessions (session_id, created_ns, updated_ns, next_seq)"
        " VALUES ('old', 1, 1, 1)"
    )
    db.execute(
        "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns)"
        " VALUES ('m1', 'old', 0, 'user', '我們使用記憶系統來保存對話', 5)"
    )
    db.close()
    archive = Archive(path)
    try:
        version = archive._query("PRAGMA user_version")[0][0]
        assert version == archive_mod.SCHEMA_VERSION
        hits = archive.keyword_search("記憶系統", limit=5, session_id="old")
        assert [h.message.id for h, _ in hits] == ["m1"]
        assert archive.fts_ok()
    finally:
        archive.close()


def test_over_budget_terms_rank_the_newest_matches_and_still_honour_time_ranges(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = _add(archive, [f"common word number {i}" for i in range(60)])
    monkeypatch.setattr(archive_mod, "POSTINGS_BUDGET", 10)
    hits = archive.keyword_search("common", limit=5)
    assert len(hits) == 5
    newest = {h.message.content for h, _ in hits}
    assert newest <= {f"common word number {i}" for i in range(50, 60)}
    cutoff = messages[5].time_ns
    old = archive.keyword_search("common", limit=5, time_to_ns=cutoff)
    assert len(old) == 5, "a time range older than the newest matches still finds them"
    assert all(h.message.time_ns <= cutoff for h, _ in old)


def test_a_damaged_file_during_a_write_is_an_archive_error(tmp_path: Path) -> None:
    """SQLITE_CORRUPT in the middle of a write reads as a damaged file, not a raw sqlite3 error."""
    path = tmp_path / "archive.sqlite3"
    with Archive(path) as arc:
        _add(arc, [f"message number {i} " * 20 for i in range(300)])
        arc.checkpoint()
    db = sqlite3.connect(path)
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with path.open("r+b") as handle:  # smash the messages table's root page
        handle.seek((root - 1) * page)
        handle.write(b"\xff" * page)
    with Archive(path) as arc, pytest.raises(ArchiveError, match="the file is damaged"):
        _add(arc, ["after the damage"], start=T0 + 10_000 * SECOND)
