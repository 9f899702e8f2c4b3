"""list_rag / search_rag: offered per turn only when enabled and readable, results that cite."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenvoy_desktop.agent.context import DOCUMENTS_GUIDANCE, tool_guidance
from agenvoy_desktop.agent.document_tools import DocumentLibrary, probe_index
from agenvoy_desktop.agent.policy import document_tools_needed
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.index import index_folder
from agenvoy_desktop.rag.index_schema import INDEX_FILE
from agenvoy_desktop.rag.indexer import index_collection
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir, registry_file
from tests.fakes import HashingEmbedder, OtherHashingEmbedder
from tests.rag.index_support import make_tree
from tests.scripted_chat import Call, ScriptedChatModel

DOC_TOOLS = {"list_rag", "search_rag"}


def _index(paths: AppPaths, root: Path, name: str = "docs") -> None:
    make_tree(root)
    collection = CollectionRegistry(paths).add(name, [root])
    index_collection(paths, collection, HashingEmbedder())


def _damage(paths: AppPaths, name: str = "docs") -> None:
    index = index_folder(documents_dir(paths), name) / INDEX_FILE
    for end in ("-wal", "-shm"):
        index.with_name(index.name + end).unlink(missing_ok=True)
    index.write_bytes(b"this is not a database" * 200)


def _offered(services: AppServices) -> set[str]:
    return {spec["function"]["name"] for spec in services.tools.specs()}


@pytest.fixture
def open_services(paths: AppPaths) -> Iterator[list[AppServices]]:
    opened: list[AppServices] = []
    yield opened
    for services in opened:
        services.close()


def _services(
    opened: list[AppServices],
    paths: AppPaths,
    script: list[list[object]] | None = None,
    *,
    enabled: bool = True,
    dim: int = 64,
) -> AppServices:
    services = AppServices.open(
        paths, embedder=HashingEmbedder(dim=dim), chat_model=ScriptedChatModel(script or [])
    )
    opened.append(services)
    services.settings.documents.enabled = enabled
    return services


def test_not_offered_while_disabled(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths, enabled=False)
    assert not DOC_TOOLS & _offered(services)
    assert services.documents_status() is None  # off is not a problem
    services.settings.documents.enabled = True  # takes effect at the next turn
    assert _offered(services) >= DOC_TOOLS
    assert services.documents_status() is None


def test_not_offered_without_an_indexed_collection(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    services = _services(open_services, paths)
    assert not DOC_TOOLS & _offered(services)
    assert "no document collection is indexed" in (services.documents_status() or "")
    make_tree(tmp_path / "notes")
    CollectionRegistry(paths).add("docs", [tmp_path / "notes"])
    assert not DOC_TOOLS & _offered(services)  # added but not indexed yet
    collection = CollectionRegistry(paths).get("docs")
    index_collection(paths, collection, HashingEmbedder())
    assert _offered(services) >= DOC_TOOLS  # indexed meanwhile: seen at the next check


def test_a_damaged_index_is_left_out_logged_once_and_explained(
    paths: AppPaths,
    tmp_path: Path,
    open_services: list[AppServices],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths)
    assert _offered(services) >= DOC_TOOLS
    _damage(paths)
    with caplog.at_level(logging.WARNING, "agenvoy_desktop.agent.document_tools"):
        assert not DOC_TOOLS & _offered(services)
        assert not DOC_TOOLS & _offered(services)
    assert len([r for r in caplog.records if "cannot be read" in r.getMessage()]) == 1
    status = services.documents_status() or ""
    assert "'docs'" in status
    assert "index it again" in status
    assert "\n" not in status


def test_one_damaged_collection_leaves_the_others_searchable(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "a", "good")
    _index(paths, tmp_path / "b", "bad")
    _damage(paths, "bad")
    services = _services(open_services, paths)
    assert _offered(services) >= DOC_TOOLS
    listing = asyncio.run(services.tools.call("list_rag", {}))
    assert "good: 4 files" in listing.content
    assert "bad: cannot be searched now" in listing.content
    hits = asyncio.run(services.tools.call("search_rag", {"query": "tomatoes sun"}))
    assert not hits.is_error
    assert "garden.md:" in hits.content
    named = asyncio.run(services.tools.call("search_rag", {"query": "x", "collection": "bad"}))
    assert named.is_error
    assert "index it again" in named.content


def test_search_results_are_numbered_and_cite_their_lines(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths)
    outcome = asyncio.run(
        services.tools.call("search_rag", {"query": "tomatoes sun", "collection": "docs"})
    )
    assert not outcome.is_error
    first = outcome.content.splitlines()[0]
    assert first.startswith("[1] notes/garden.md:1-3")
    assert "(Garden)" in first
    assert "Tomatoes need full sun" in outcome.content
    assert "Cite the passages you use" in outcome.content
    listing = asyncio.run(services.tools.call("list_rag", {}))
    assert listing.content.startswith("- docs: 4 files, 4 passages, last indexed 20")


def test_search_by_words_when_the_embedder_differs(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths, dim=32)  # indexed with 64 dimensions
    outcome = asyncio.run(services.tools.call("search_rag", {"query": "quarterly budget"}))
    assert not outcome.is_error
    assert "notes.txt:1" in outcome.content


def test_another_model_of_the_same_width_searches_by_words_only(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = AppServices.open(
        paths, embedder=OtherHashingEmbedder(), chat_model=ScriptedChatModel([])
    )  # the model was switched in Settings; the collection is not indexed again yet
    open_services.append(services)
    services.settings.documents.enabled = True
    passages = services.documents.passages("quarterly budget", 5)
    assert passages
    assert all(p.cosine is None for p in passages)  # never compared with another model's
    outcome = asyncio.run(services.tools.call("search_rag", {"query": "quarterly budget"}))
    assert "notes.txt:1" in outcome.content


def test_bad_search_arguments_are_errors_the_model_can_fix(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths)
    unknown = asyncio.run(services.tools.call("search_rag", {"query": "x", "collection": "zz"}))
    assert unknown.is_error
    assert "collections: docs" in unknown.content
    blank = asyncio.run(services.tools.call("search_rag", {"query": "   "}))
    assert blank.is_error


def test_search_never_waits_for_the_memory_storage_thread(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths)
    release = threading.Event()

    async def scenario() -> str:
        blocked = asyncio.ensure_future(services.storage.run(release.wait, 30))
        try:
            outcome = await asyncio.wait_for(
                services.tools.call("search_rag", {"query": "bread dough"}), 15
            )
        finally:
            release.set()
            await blocked
        return outcome.content

    assert "kitchen.md" in asyncio.run(scenario())


def test_small_model_turn_offers_search_and_tells_it_to_cite(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    script: list[list[object]] = [
        [Call("search_rag", {"query": "tomatoes"})],
        ["Full sun (garden.md:1-3)."],
    ]
    services = _services(open_services, paths, script)
    assert services.agent is not None
    services.agent.config.small_model = True
    services.agent.documents = None  # no passages up front: the tool path alone
    sid = services.store.create_session("t")
    result = asyncio.run(services.agent.run_turn(sid, "What do my notes say about tomatoes?"))
    model = services.agent.model
    assert isinstance(model, ScriptedChatModel)
    assert "search_rag" in result.tools_offered
    assert "list_rag" not in result.tools_offered
    assert DOCUMENTS_GUIDANCE in model.seen[0].messages[0]["content"]
    second = "\n".join(str(m.get("content", "")) for m in model.seen[1].messages)
    assert "notes/garden.md:1-3" in second  # the result, with its citation, reached the model


def test_small_model_greeting_gets_no_document_tools(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths, [["Hello!"]])
    assert services.agent is not None
    services.agent.config.small_model = True
    sid = services.store.create_session("t")
    result = asyncio.run(services.agent.run_turn(sid, "Hello, how are you?"))
    assert result.tools_offered == []


def test_capable_model_gets_both_tools_only_while_available(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths, [["Hi."], ["Hi."]])
    assert services.agent is not None
    sid = services.store.create_session("t")
    first = asyncio.run(services.agent.run_turn(sid, "Hi"))
    assert set(first.tools_offered) >= DOC_TOOLS
    _damage(paths)
    second = asyncio.run(services.agent.run_turn(sid, "Hi"))
    assert not DOC_TOOLS & set(second.tools_offered)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What do my notes say about the budget?", {"search_rag"}),
        ("According to the paper, what limits the yield?", {"search_rag"}),
        ("What is photosynthesis?", {"search_rag"}),
        ("Which collections do I have?", {"list_rag"}),
        ("我的筆記裡關於預算寫了什麼？", {"search_rag"}),
        ("文档里怎么说？", {"search_rag"}),
        ("Was steht in meinen Notizen zum Urlaub?", {"search_rag"}),
        ("Hello, how are you?", set()),
        ("Thanks, that was helpful.", set()),
        ("What time is it?", set()),
        ("What is my name?", set()),  # a question about the conversation: memory's
        ("你好！", set()),
    ],
)
def test_document_cues(text: str, expected: set[str]) -> None:
    assert document_tools_needed(text) == expected


def test_guidance_names_documents_only_when_offered() -> None:
    assert DOCUMENTS_GUIDANCE in tool_guidance(["search_rag"])
    assert DOCUMENTS_GUIDANCE not in tool_guidance(["list_rag", "current_time"])


def test_probe_of_a_missing_index_is_empty_not_a_problem(tmp_path: Path) -> None:
    state = probe_index(tmp_path / "never", "never")
    assert state.problem is None
    assert not state.usable


def test_library_rereads_only_changed_indexes(paths: AppPaths, tmp_path: Path) -> None:
    _index(paths, tmp_path / "notes")
    library = DocumentLibrary(paths, lambda: True)
    assert library.available()
    first = library.states()
    assert library.states()[0] is first[0]  # unchanged files: the cached probe


def test_an_index_from_a_newer_app_is_left_out(
    paths: AppPaths, tmp_path: Path, open_services: list[AppServices]
) -> None:
    _index(paths, tmp_path / "notes")
    services = _services(open_services, paths)
    index = index_folder(documents_dir(paths), "docs") / INDEX_FILE
    with contextlib.closing(sqlite3.connect(index)) as db:
        db.execute("PRAGMA user_version = 99")
    assert not DOC_TOOLS & _offered(services)
    assert "newer version" in (services.documents_status() or "")


def test_a_damaged_collections_file_is_explained(
    paths: AppPaths, open_services: list[AppServices]
) -> None:
    services = _services(open_services, paths)
    registry = registry_file(paths)
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text("{not json", encoding="utf-8")
    assert not DOC_TOOLS & _offered(services)
    assert "set aside" in (services.documents_status() or "")
