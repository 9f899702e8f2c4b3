"""Keyword ranking in the archive: a large session by its rowid span, bm25 by name."""

from __future__ import annotations

import pytest

import agenvoy_desktop.core.archive as archive_mod
from agenvoy_desktop.core.archive import Archive, ArchivedMessage
from tests.conftest import T0
from tests.core.conftest import add_texts, hit_ids

WORDS = ["lake", "ramen", "bicycle", "garden", "violin", "kyoto", "harbor", "lantern"]


def _texts(n: int, seed: int = 0) -> list[str]:
    """Varied chat lines, so bm25 scores differ between messages."""
    return [
        f"{WORDS[(i + seed) % 8]} and {WORDS[(3 * i + seed) % 8]} {'again ' * (i % 3)}{i}"
        for i in range(n)
    ]


@pytest.fixture(autouse=True)
def _small_sessions_count_as_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_mod, "SPAN_MIN_DOCS", 8)


def _scored(hits: list[tuple[ArchivedMessage, float]]) -> list[tuple[str, float]]:
    return [(h.message.id, round(score, 9)) for h, score in hits]


def _by_phrase(
    archive: Archive, monkeypatch: pytest.MonkeyPatch, query: str, session: str
) -> list[tuple[str, float]]:
    """The same search ranked with the session's phrase, as for an interleaved session."""
    with monkeypatch.context() as patch:
        patch.setattr(archive, "_session_span", lambda _sid: None)
        return _scored(archive.keyword_search(query, limit=10, session_id=session))


def test_a_contiguous_session_gets_the_same_hits_and_scores(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_texts(archive, _texts(12, seed=1), session="before")
    add_texts(archive, _texts(24), session="big", start=T0 + 10**12)
    add_texts(archive, _texts(12, seed=2), session="after", start=T0 + 2 * 10**12)
    rows = archive._query("SELECT min(id), max(id) FROM messages WHERE session_id = 'big'")
    assert archive._session_span("big") == (rows[0][0], rows[0][1])
    for query in ("lake ramen", "violin again", "kyoto harbor lantern"):
        hits = _scored(archive.keyword_search(query, limit=10, session_id="big"))
        assert hits, query
        assert hits == _by_phrase(archive, monkeypatch, query, "big")


def test_another_sessions_rows_inside_the_span_never_come_back(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_texts(archive, _texts(10), session="big")
    stray = add_texts(archive, ["violin violin violin"], session="other", start=T0 + 10**12)
    add_texts(archive, _texts(10, seed=3), session="big", start=T0 + 2 * 10**12)
    assert archive._session_span("big") is not None  # 21 rows for 20 of the session's
    hits = archive.keyword_search("violin", limit=10, session_id="big")
    assert hits
    assert {h.session_id for h, _ in hits} == {"big"}
    assert stray[0].id not in hit_ids(hits)
    assert _scored(hits) == _by_phrase(archive, monkeypatch, "violin", "big")


def test_an_interleaved_session_is_ranked_with_its_phrase(archive: Archive) -> None:
    for i, text in enumerate(_texts(20)):
        add_texts(archive, [text], session="a", start=T0 + 2 * i)
        add_texts(archive, [f"other {text}"], session="b", start=T0 + 2 * i + 1)
    assert archive._session_span("a") is None
    hits = archive.keyword_search("violin", limit=10, session_id="a")
    assert hits
    assert {h.session_id for h, _ in hits} == {"a"}


def test_a_small_session_is_ranked_with_its_phrase(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_texts(archive, _texts(6))
    assert archive._session_span("s1") is None
    monkeypatch.setattr(archive_mod, "SPAN_MIN_DOCS", 6)
    assert archive._session_span("s1") is not None


def test_a_message_said_after_other_sessions_wrote_is_found(archive: Archive) -> None:
    add_texts(archive, _texts(16), session="big")
    assert archive._session_span("big") is not None
    add_texts(archive, ["violin"], session="other", start=T0 + 10**12)
    new = add_texts(archive, ["we fly to zanzibar"], session="big", start=T0 + 2 * 10**12)
    hits = archive.keyword_search("zanzibar", limit=3, session_id="big")
    assert hit_ids(hits) == [new[0].id]


def test_scores_are_the_tables_configured_rank(archive: Archive) -> None:
    """RANK_SQL repeats the weights the schema gave ``rank``; they must not drift apart."""
    add_texts(archive, _texts(12))
    hits = archive.keyword_search("violin lake", limit=20, with_context=True)
    expr = archive.build_match("violin lake", with_context=True)
    rows = archive._query(
        "SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank",
        (f"{{body ctx}} : ({expr})",),
    )
    assert [(h.rowid, score) for h, score in hits] == [(r, -rank) for r, rank in rows]
