"""The keyword route stems English (FTS5 porter), keeps CJK substring search for words,
and searches a CJK sentence bigram by bigram."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop.core import archive as archive_mod
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.retrieval.fts_text import index_text, query_terms
from tests.conftest import T0
from tests.core.conftest import add_texts as _add
from tests.core.conftest import hit_ids as _ids


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("painting", "she paints landscapes on weekends"),
        ("adopted", "we are adopting a puppy next month"),
        ("running", "I run every morning before work"),
        ("connections", "the connection to the server dropped"),
        ("families", "my family came over for dinner"),
    ],
)
def test_word_forms_find_each_other(archive: Archive, query: str, text: str) -> None:
    messages = _add(archive, [text, "an unrelated line about the weather"])
    assert _ids(archive.keyword_search(query, limit=5)) == [messages[0].id]


def test_stemming_keeps_cjk_bigram_search_exact(archive: Archive) -> None:
    messages = _add(
        archive,
        ["我們使用記憶系統來保存對話", "系統很穩定", "the memories were saved in 記憶系統"],
    )
    assert set(_ids(archive.keyword_search("記憶系統", limit=5))) == {
        messages[0].id,
        messages[2].id,
    }
    assert archive.keyword_search("統系", limit=5) == []
    assert _ids(archive.keyword_search("memory 記憶", limit=1)) == [messages[2].id]


def test_a_cjk_question_finds_the_statement_that_answers_it(archive: Archive) -> None:
    """Written without spaces, a question is one CJK run: as a phrase alone it matched only
    messages holding the whole question; its bigrams find what shares 护照 and 号码."""
    messages = _add(
        archive, ["我的护照号码是E39271846。", "我的电动车锁密码是6083。", "今天天气很好"]
    )
    assert _ids(archive.keyword_search("我的护照号码是多少？", limit=5))[0] == messages[0].id
    assert messages[2].id not in _ids(archive.keyword_search("我的护照号码是多少？", limit=5))


def test_cjk_question_terms_phrase_first_then_bigrams() -> None:
    terms = query_terms("护照号码是多少")
    assert terms[0].expr == '"护照 照号 号码 码是 是多 多少"'
    assert [t.expr for t in terms[1:3]] == ['"护照"', '"照号"']
    assert {t.expr for t in terms if t.is_stopword} == {'"是多"', '"多少"'}
    # A word typed in a search box stays one exact phrase.
    assert [t.expr for t in query_terms("記憶系統")] == ['"記憶 憶系 系統"']


@pytest.mark.parametrize(
    "query",
    ['"', "*", "NEAR(a b)", "a AND OR NOT b", "body : x", "sid : x", "^", "(((", "x'; DROP"],
)
def test_hostile_queries_stay_text(archive: Archive, query: str) -> None:
    _add(archive, ["plain text about a and b and x", "another line"])
    archive.keyword_search(query, limit=5)  # never an FTS5 syntax error
    for term in query_terms(query):
        assert term.expr.startswith('"')


def test_index_text_prepares_cjk_and_leaves_stemming_to_fts5() -> None:
    assert index_text("記憶系統") == "記憶 憶系 系統 統"
    assert index_text("Running Hotels") == "running hotel"


def test_schema_v2_database_migrates_to_stemmed_index_and_multi_part_vectors(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2):
        for statement in archive_mod.MIGRATIONS[version].split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("PRAGMA user_version = 2")
    db.execute(
        "INSERT INTO sessions (session_id, created_ns, updated_ns, next_seq)"
        " VALUES ('old', 1, 1, 2)"
    )
    for seq, text in enumerate(["we went painting by the lake", "記憶系統 works"]):
        db.execute(
            "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns)"
            " VALUES (?, 'old', ?, 'user', ?, 5)",
            (f"m{seq}", seq, text),
        )
        db.execute(
            "INSERT INTO messages_fts (rowid, body, sid) VALUES (?, ?, ?)",
            (seq + 1, index_text(text), archive_mod.sid_token("old")),
        )
    db.execute(
        "INSERT INTO vectors (message_rowid, session_id, model, vec) VALUES (1, 'old', 'm', x'00')"
    )
    db.execute("INSERT INTO meta (key, value) VALUES ('fts_text_version', '1')")
    db.close()
    archive = Archive(path)
    try:
        assert archive._query("PRAGMA user_version")[0][0] == archive_mod.SCHEMA_VERSION
        assert _ids(archive.keyword_search("paints", limit=5, session_id="old")) == ["m0"]
        assert _ids(archive.keyword_search("記憶系統", limit=5)) == ["m1"]
        assert archive.fts_ok()
        # Old single vectors were made from other text: dropped, embedded again later.
        assert archive.vector_rowids("old") == set()
        archive.add_vectors("old", "m", [(archive_mod.vector_label(1, 0), b"a")])
        archive.add_vectors("old", "m", [(archive_mod.vector_label(1, 1), b"b")])
        assert archive.vector_rowids("old") == {1}
        assert len(archive.vectors("old")) == 2
        archive.delete_vectors([1])
        assert archive.vectors("old") == []
    finally:
        archive.close()


def test_vector_labels_pack_message_and_part() -> None:
    label = archive_mod.vector_label(12345, 7)
    assert archive_mod.label_message(label) == 12345
    assert archive_mod.vector_label(1, 0) != archive_mod.vector_label(0, 1)
    with pytest.raises(ValueError, match="part"):
        archive_mod.vector_label(1, archive_mod.MAX_PARTS)


def test_session_scope_counts_frequencies_inside_the_session(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word common elsewhere but rare in the session still finds its answer there."""
    _add(archive, [f"the lake is common chatter {i}" for i in range(50)], session="noise")
    mine = _add(archive, ["we swam in the lake near Kyoto", "then we ate ramen"], session="s1")
    monkeypatch.setattr(archive_mod, "POSTINGS_BUDGET", 10)
    monkeypatch.setattr(archive_mod, "SESSION_POSTINGS_BUDGET", 10)
    # Archive-wide, "lake" (51 documents) would not fit the budget next to "ramen".
    hits = archive.keyword_search("lake ramen", limit=3, session_id="s1")
    assert set(_ids(hits)) == {mine[0].id, mine[1].id}
    assert "lake" in (archive.build_match("lake ramen", session_id="s1") or "")
    assert "lake" not in (archive.build_match("lake ramen") or "")


def test_context_column_follows_readable_messages_and_deletes_cleanly(archive: Archive) -> None:
    """A reply is found through the message it follows; tool traffic and blanks are skipped."""
    first = [
        Message("q1", "user", "which hiking trail did you pick", T0),
        Message("t1", "assistant", "", T0 + 1, extra={"tool_calls": [{"id": "c"}]}),
        Message("t2", "tool", "trail data", T0 + 2, extra={"tool_call_id": "c"}),
    ]
    archive.add_messages("s1", first, T0)
    # Appended later, in another call: its context comes from the rows already stored.
    archive.add_messages("s1", [Message("b1", "assistant", "\n", T0 + 3)], T0)
    archive.add_messages("s1", [Message("a1", "assistant", "the northern ridge one", T0 + 4)], T0)
    own = archive.keyword_search("hiking trail", limit=5)
    assert _ids(own) == ["q1"]
    hits = archive.keyword_search("hiking trail", limit=5, with_context=True)
    assert _ids(hits) == ["q1", "a1"]
    assert hits[0][1] > hits[1][1]
    archive.rebuild_fts()
    assert _ids(archive.keyword_search("hiking trail", limit=5, with_context=True)) == ["q1", "a1"]
    archive.delete_session_rows("s1", drop_session=False)
    assert archive.fts_ok()
    vocab = archive._query("SELECT count(*) FROM messages_vocab")[0][0]
    assert vocab == 0, "every posting (bodies and contexts) was deleted"
