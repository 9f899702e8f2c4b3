"""The window's watch on document folders: changes become index passes, one run at a time.

Real watchdog observers on tmp folders, the real indexer child with the
instant hashing embedder; every wait is on a condition.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations.changes import DOCUMENTS_CHANGED, MODELS_CHANGED
from agenvoy_desktop.rag.registry import CollectionRegistry
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.document_watch import DocumentWatch
from agenvoy_desktop.ui.inspector.documents_tab import DocumentsTab
from tests.rag.index_support import make_tree, write
from tests.ui.conftest import ServicesFactory, Wait, WindowFactory, wait_op
from tests.ui.test_documents_tab import FAST, INDEX_MS, SLOW, open_panel

QUIET_S = 1.0
"""Long enough that a burst written by a test on a loaded machine stays one burst."""


@pytest.fixture
def services(make_services: ServicesFactory) -> AppServices:
    services = make_services()
    services.settings.documents.enabled = True
    return services


def count_passes(tab: DocumentsTab) -> list[str]:
    """The names every index run the tab starts is for."""
    passes: list[str] = []
    reindex = tab.reindex

    def counted(name: str | None = None) -> Operation | None:
        op = reindex(name)
        if op is not None:
            passes.append(str(tab.indexing))
        return op

    tab.reindex = counted  # type: ignore[method-assign]
    return passes


def settled(tab: DocumentsTab, watch: DocumentWatch, name: str = "docs") -> bool:
    """No run in progress or queued, and no change waiting for its quiet spell."""
    watcher = watch.watches.watcher(name)
    running = tab.index_op is not None and not tab.index_op.done
    return not running and not tab._queued and (watcher is None or watcher.idle)


def test_a_burst_of_changes_makes_one_index_pass(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = tmp_path / "root"
    make_tree(root)
    CollectionRegistry(services.paths).add("docs", [root], watch=True)
    tab = open_panel(qtbot, services, runner)
    passes = count_passes(tab)
    watch = DocumentWatch(services, runner, tab, quiet_s=QUIET_S)
    watch.start()
    try:
        qtbot.waitUntil(lambda: passes == ["docs"], timeout=INDEX_MS)  # the catch-up pass
        qtbot.waitUntil(lambda: settled(tab, watch), timeout=INDEX_MS)
        assert "4 new" in tab.status.text()
        wait_for(lambda: "· watching" in tab.collection_list.item(0).text())
        for number in range(5):
            write(root / "burst" / f"n{number}.md", f"# Note {number}\n\nword{number}\n")
        (root / "garden.md").write_text("# Garden\n\nNow with roses as well.\n")
        (root / "tool.py").unlink()
        qtbot.waitUntil(lambda: len(passes) == 2, timeout=INDEX_MS)
        qtbot.waitUntil(lambda: settled(tab, watch), timeout=INDEX_MS)
        assert passes == ["docs", "docs"]
        assert "5 new, 1 changed, 1 removed" in tab.status.text()
    finally:
        watch.stop()
    assert watch.names == set()
    assert runner.property("test_errors") == []


def test_a_change_during_a_run_makes_one_more_pass_after_it(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    make_tree(root, {f"n{i:02d}.md": f"# Note {i}\n\nword{i}\n" for i in range(40)})
    CollectionRegistry(services.paths).add("docs", [root], watch=True)
    tab = open_panel(qtbot, services, runner)
    tab.embedder_factory = SLOW
    passes = count_passes(tab)
    watch = DocumentWatch(services, runner, tab, quiet_s=QUIET_S)
    watch.start()
    try:
        qtbot.waitUntil(
            lambda: (
                tab.index_job is not None
                and tab.index_job.progress is not None
                and tab.index_job.progress[0] == "index"
            ),
            timeout=INDEX_MS,
        )
        write(root / "late.md", "# Late\n\nwritten while the first pass ran\n")
        qtbot.waitUntil(lambda: tab._queued == ["docs"], timeout=INDEX_MS)
        assert passes == ["docs"]  # never two runs at once
        tab.embedder_factory = FAST
        qtbot.waitUntil(lambda: len(passes) == 2, timeout=INDEX_MS)
        qtbot.waitUntil(lambda: settled(tab, watch), timeout=INDEX_MS)
        assert passes == ["docs", "docs"]
    finally:
        watch.stop()
    assert runner.property("test_errors") == []


def test_watching_follows_the_collections_and_the_settings(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = tmp_path / "root"
    make_tree(root)
    registry = CollectionRegistry(services.paths)
    registry.add("docs", [root])
    tab = open_panel(qtbot, services, runner)
    passes = count_passes(tab)
    watch = DocumentWatch(services, runner, tab, quiet_s=QUIET_S)
    watch.start()
    try:
        wait_for(lambda: watch._sync_op is not None and watch._sync_op.done)
        assert watch.names == set()  # watch is off for this one
        registry.update("docs", watch=True)
        runner.broadcast(DOCUMENTS_CHANGED)
        wait_for(lambda: watch.names == {"docs"})
        qtbot.waitUntil(lambda: passes == ["docs"] and settled(tab, watch), timeout=INDEX_MS)
        services.settings.documents.enabled = False
        runner.broadcast(MODELS_CHANGED)  # what the window says after Settings → OK
        wait_for(lambda: watch.names == set() and tab.watching == set())
    finally:
        watch.stop()


def test_the_window_watches_and_closes_without_waiting(
    qtbot: QtBot, make_window: WindowFactory, services: AppServices, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    make_tree(root)
    CollectionRegistry(services.paths).add("docs", [root], watch=True)
    window = make_window(services, start=False)
    tab = window.inspector.documents_tab
    tab.embedder_factory = FAST
    wait_op(qtbot, window.start())
    watch = window.document_watch
    assert watch is not None
    qtbot.waitUntil(lambda: watch.names == {"docs"}, timeout=INDEX_MS)
    qtbot.waitUntil(lambda: tab.index_op is not None and settled(tab, watch), timeout=INDEX_MS)
    window.close()  # joins the watcher's threads (the fixture fails on one left running)
    assert watch.names == set()
