"""search_documents: keyword, semantic and hybrid hits with citations; hostile queries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.index import DocumentIndex, index_folder, open_document_index
from agenvoy_desktop.rag.indexer import index_collection
from agenvoy_desktop.rag.registry import documents_dir
from agenvoy_desktop.rag.search import DocumentSearchError, search_documents
from tests.fakes import HashingEmbedder, OtherHashingEmbedder
from tests.rag.index_support import FILES, make_tree

EMBEDDER = HashingEmbedder()
CJK_FILE = "我們使用記憶系統來保存對話。\n"


@pytest.fixture
def index(paths: AppPaths, tmp_path: Path) -> Iterator[DocumentIndex]:
    collection = make_tree(tmp_path / "root", {**FILES, "cjk.txt": CJK_FILE})
    index_collection(paths, collection, EMBEDDER)
    opened = open_document_index(index_folder(documents_dir(paths), "docs"))
    yield opened
    opened.close()


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_each_mode_finds_the_right_chunk(index: DocumentIndex, mode: str) -> None:
    hits = search_documents(index, "dough rise", mode, 3, EMBEDDER)
    assert hits
    top = hits[0]
    assert top.path == "root/kitchen.md"
    assert top.heading == "Recipes > Bread"
    assert top.citation == f"root/kitchen.md:{top.start_line}-{top.end_line}"
    assert "Knead the dough" in top.text
    assert top.collection == "docs"


def test_keyword_finds_stems_and_cjk_inside_a_run(index: DocumentIndex) -> None:
    assert search_documents(index, "tomato", "keyword")[0].path == "root/garden.md"
    hits = search_documents(index, "記憶系統", "keyword")
    assert [h.path for h in hits] == ["root/cjk.txt"]
    assert hits[0].citation == "root/cjk.txt:1"


def test_hybrid_adds_what_only_meaning_finds(index: DocumentIndex) -> None:
    """Keyword search drops the stopword and finds nothing; the vectors still share 'the'."""
    assert search_documents(index, "the zzzunknown", "keyword") == []
    hybrid = search_documents(index, "the zzzunknown", "hybrid", 2, EMBEDDER)
    assert {h.path for h in hybrid} == {"root/kitchen.md", "root/notes.txt"}


def test_hybrid_ranks_a_hit_of_both_routes_first(index: DocumentIndex) -> None:
    hybrid = search_documents(index, "quarterly budget", "hybrid", 5, EMBEDDER)
    assert hybrid[0].path == "root/notes.txt"
    assert hybrid[0].score > hybrid[-1].score


def test_hybrid_without_embedder_is_keyword(index: DocumentIndex) -> None:
    hits = search_documents(index, "checksum", "hybrid", 5, None)
    assert [h.path for h in hits] == ["root/tool.py"]
    assert hits[0].citation == "root/tool.py:1-2"


def test_semantic_needs_an_embedder_and_the_same_model(index: DocumentIndex) -> None:
    with pytest.raises(DocumentSearchError, match="embedding model"):
        search_documents(index, "bread", "semantic", 5, None)
    with pytest.raises(DocumentSearchError, match="another embedding model"):
        search_documents(index, "bread", "semantic", 5, HashingEmbedder(dim=32))


def test_another_model_of_the_same_width_is_not_compared(index: DocumentIndex) -> None:
    other = OtherHashingEmbedder(dim=EMBEDDER.dim)
    assert index.vectors_match(EMBEDDER)
    assert not index.vectors_match(other)
    assert index.vectors_of_another_model(other)
    with pytest.raises(DocumentSearchError, match="another embedding model"):
        search_documents(index, "bread", "semantic", 5, other)
    by_words = search_documents(index, "quarterly budget", "keyword", 5)
    assert search_documents(index, "quarterly budget", "hybrid", 5, other) == by_words


@pytest.mark.parametrize(
    "query",
    ["", "   ", "\x00", "\x00\x01\n\t"],
)
def test_empty_queries_are_one_line_errors(index: DocumentIndex, query: str) -> None:
    with pytest.raises(DocumentSearchError) as caught:
        search_documents(index, query, "keyword")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "query",
    [
        'NEAR(bread dough) OR "',
        "body : bread",
        "* AND NOT ^ (",
        "{body where_} : x",
        "bread\x00dough",
        "dough " * 50_000,
        '"""""',
        "😀 ' ; DROP TABLE chunks; --",
    ],
)
def test_hostile_queries_never_reach_sql_as_syntax(index: DocumentIndex, query: str) -> None:
    for mode in ("keyword", "hybrid", "semantic"):
        search_documents(index, query, mode, 5, EMBEDDER)
    assert index.stats().chunks > 0


def test_bad_mode_and_limit(index: DocumentIndex) -> None:
    with pytest.raises(DocumentSearchError, match="mode"):
        search_documents(index, "bread", "fuzzy")
    with pytest.raises(DocumentSearchError, match="between"):
        search_documents(index, "bread", "keyword", 0)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=200))
def test_any_text_is_hits_or_a_known_error(index: DocumentIndex, query: str) -> None:
    error = ""
    hits = []
    try:
        hits = search_documents(index, query, "hybrid", 5, EMBEDDER)
    except KnownError as exc:
        error = str(exc)
    assert "\n" not in error
    assert all(h.citation.startswith(h.path) for h in hits)


def test_an_empty_collection_has_no_hits(tmp_path: Path) -> None:
    with open_document_index(tmp_path / "empty") as index:
        assert search_documents(index, "anything", "hybrid", 5, EMBEDDER) == []
        assert search_documents(index, "anything", "semantic", 5, EMBEDDER) == []
