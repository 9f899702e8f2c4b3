"""The Documents tab: opt-in, add, re-index in a child process, files, chunks, search, citations.

The indexer child builds the instant hashing embedder (``tests.rag.index_support``);
everything waits on conditions, never on time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox, QMessageBox
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.operations import documents as ops
from agenvoy_desktop.operations.changes import MODELS_CHANGED
from agenvoy_desktop.rag.registry import CollectionRegistry
from agenvoy_desktop.settings import load_settings
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.document_viewer import DocumentViewer
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.inspector.document_render import marked_terms, reflow
from agenvoy_desktop.ui.inspector.documents_tab import DocumentsTab
from agenvoy_desktop.ui.markdown_view import MarkdownView, ProseLabel, link_citations
from agenvoy_desktop.ui.settings_dialog import SettingsDialog
from tests.fakes import OtherHashingEmbedder
from tests.rag.index_support import make_tree, write
from tests.ui.conftest import ServicesFactory, Wait, delete_now

FAST = "tests.rag.index_support:hashing_embedder"
SLOW = "tests.rag.index_support:slow_embedder"
INDEX_MS = 120_000


@pytest.fixture
def services(make_services: ServicesFactory) -> AppServices:
    services = make_services()
    services.settings.documents.enabled = True
    return services


def open_panel(qtbot: QtBot, services: AppServices, runner: AsyncRunner) -> DocumentsTab:
    panel = InspectorPanel(services, runner)
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    panel.show_tab("documents")
    tab = panel.documents_tab
    tab.embedder_factory = FAST
    return tab


def docs_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    make_tree(root)
    write(root / "broken.pdf", "this is not a PDF at all")
    return root


def add(tab: DocumentsTab, root: Path, wait_for: Wait) -> None:
    dialog = tab.open_add_dialog()
    dialog.add_root(str(root))
    assert dialog.name_edit.text() == "root"
    dialog.name_edit.setText("docs")
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    wait_for(lambda: tab.current_name() == "docs")


def reindex(qtbot: QtBot, tab: DocumentsTab) -> None:
    op = tab.reindex()
    assert op is not None
    qtbot.waitUntil(lambda: op.done, timeout=INDEX_MS)
    assert op.error is None, op.error


def status_of(tab: DocumentsTab, path: str) -> str:
    for row in range(tab.files.topLevelItemCount()):
        item = tab.files.topLevelItem(row)
        if item.text(0) == path:
            return item.text(1)
    raise AssertionError(f"{path} is not listed")


def test_collections_are_off_until_turned_on(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner, wait_for: Wait
) -> None:
    services = make_services()
    tab = open_panel(qtbot, services, runner)
    assert tab.stack.currentIndex() == 0
    tab.enable_button.click()
    wait_for(lambda: tab.stack.currentIndex() == 1)
    assert load_settings(services.paths.settings_file).documents.enabled
    wait_for(tab.details.isHidden)
    assert tab.empty_label.isVisible()


def test_the_settings_dialog_switches_collections(
    qtbot: QtBot, make_services: ServicesFactory
) -> None:
    services = make_services()
    dialog = SettingsDialog(services)
    qtbot.addWidget(dialog)
    assert not dialog.documents_check.isChecked()
    dialog.documents_check.setChecked(True)
    dialog.accept()
    assert services.settings.documents.enabled
    assert load_settings(services.paths.settings_file).documents.enabled


def test_add_index_files_chunks_and_search(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    tab = open_panel(qtbot, services, runner)
    add(tab, docs_root(tmp_path), wait_for)
    assert "not indexed yet" in tab.collection_list.currentItem().text()
    wait_for(lambda: tab.files.topLevelItemCount() == 5)
    assert status_of(tab, "root/garden.md") == "not indexed yet"
    reindex(qtbot, tab)
    assert "Indexed 'docs'" in tab.status.text()
    wait_for(lambda: "5 files" in tab.collection_list.currentItem().text())
    assert "1 failed" in tab.collection_list.currentItem().text()
    wait_for(lambda: tab.files.topLevelItemCount() == 5 and "failed" in tab.files_label.text())
    assert status_of(tab, "root/garden.md") == "indexed"
    failed = status_of(tab, "root/broken.pdf")
    assert failed.startswith("failed: ")
    assert len(failed) > len("failed: ")
    kitchen = next(
        tab.files.topLevelItem(r)
        for r in range(tab.files.topLevelItemCount())
        if tab.files.topLevelItem(r).text(0) == "root/kitchen.md"
    )
    tab.files.setCurrentItem(kitchen)
    wait_for(lambda: "Knead" in tab.chunks.toPlainText())
    assert "lines" in tab.chunks.toPlainText() or "line " in tab.chunks.toPlainText()
    tab.details.setCurrentIndex(1)
    qtbot.keyClicks(tab.query_edit, "dough")
    qtbot.keyClick(tab.query_edit, "\r")
    wait_for(lambda: "found" in tab.search_label.text())
    html = tab.results.toHtml()
    assert "root/kitchen.md:" in tab.results.toPlainText()
    assert "#ffe082" in html  # the query's word is marked
    assert "fused" in tab.results.toPlainText()  # the hybrid score, named


def test_a_bad_collection_is_refused_with_a_reason(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    tab = open_panel(qtbot, services, runner)
    tab.add_collection("../bad", [str(tmp_path)], [], [])
    wait_for(lambda: tab.status.is_error)
    assert "invalid collection name" in tab.status.text()


def test_remove_asks_first(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = docs_root(tmp_path)
    tab = open_panel(qtbot, services, runner)
    add(tab, root, wait_for)
    box = tab.ask_remove()
    assert box is not None
    assert box.isVisible()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert [c.name for c in CollectionRegistry(services.paths).list()] == ["docs"]
    box = tab.ask_remove()
    assert box is not None
    box.button(QMessageBox.StandardButton.Yes).click()
    wait_for(lambda: tab.collection_list.count() == 0)
    assert CollectionRegistry(services.paths).list() == []
    assert (root / "garden.md").exists()
    assert "Removed 'docs'" in tab.status.text()


def test_a_killed_indexer_is_reported_and_the_tab_goes_on(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = tmp_path / "root"
    make_tree(root, {f"n{i:02d}.md": f"# Note {i}\n\nword{i} dough\n" for i in range(40)})
    tab = open_panel(qtbot, services, runner)
    add(tab, root, wait_for)
    tab.embedder_factory = SLOW
    op = tab.reindex()
    assert op is not None
    assert not tab.index_button.isEnabled()
    assert tab.cancel_button.isVisible()
    qtbot.waitUntil(
        lambda: (
            tab.index_job is not None
            and tab.index_job.progress is not None
            and tab.index_job.progress[0] == "index"
        ),
        timeout=INDEX_MS,
    )
    assert tab.index_job is not None
    assert tab.index_job.pid is not None
    os.kill(tab.index_job.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: op.done, timeout=INDEX_MS)
    wait_for(lambda: tab.status.is_error)
    assert "stopped unexpectedly" in tab.status.text()
    assert runner.property("test_errors") == []
    wait_for(lambda: tab.index_button.isEnabled() and not tab.jobs.busy("load"))
    tab.details.setCurrentIndex(1)
    tab.mode_combo.setCurrentIndex(tab.mode_combo.findData("keyword"))
    tab.query_edit.setText("dough")
    tab.search()
    wait_for(lambda: "found" in tab.search_label.text())
    tab.embedder_factory = FAST
    assert ops.interrupted_collections(services.paths) == ["docs"]
    tab.resume_interrupted()  # what the window does at start
    wait_for(lambda: tab.index_op is not op)
    resumed = tab.index_op
    assert resumed is not None
    qtbot.waitUntil(lambda: resumed.done, timeout=INDEX_MS)
    assert "Indexed 'docs'" in tab.status.text()
    assert ops.interrupted_collections(services.paths) == []


def test_cancel_keeps_what_was_indexed(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = tmp_path / "root"
    make_tree(root, {f"n{i:02d}.md": f"# Note {i}\n\nword{i}\n" for i in range(40)})
    tab = open_panel(qtbot, services, runner)
    add(tab, root, wait_for)
    tab.embedder_factory = SLOW
    op = tab.reindex()
    assert op is not None
    qtbot.waitUntil(
        lambda: (
            tab.index_job is not None
            and tab.index_job.progress is not None
            and tab.index_job.progress[0] == "index"
        ),
        timeout=INDEX_MS,
    )
    tab.cancel_button.click()
    qtbot.waitUntil(lambda: op.done, timeout=INDEX_MS)
    assert op.error is None
    assert "cancelled" in tab.status.text()
    assert not tab.status.is_error


def test_link_citations_only_links_known_files() -> None:
    def known(path: str) -> bool:
        return path.startswith("root/")

    text = "From `root/a.md:3-5` and root/b.pdf p. 2, not other/c.md:1 or [x](root/d.md:1)."
    linked = link_citations(text, known)
    assert "[`root/a.md:3-5`](cite:root/a.md%3A3-5)" in linked
    assert "[root/b.pdf p. 2](cite:root/b.pdf%20p.%202)" in linked
    assert "other/c.md:1 or" in linked
    assert "(root/d.md:1)" in linked


def test_a_citation_in_the_chat_opens_the_file_at_its_lines(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = docs_root(tmp_path)
    write(tmp_path / "secret.md", "# Secret\n")
    tab = open_panel(qtbot, services, runner)
    add(tab, root, wait_for)
    wait_for(lambda: "root" in tab.citations.roots)
    view = MarkdownView(links=tab.citations)  # as the chat gives its messages
    qtbot.addWidget(view)
    view.set_markdown("Knead it (`root/kitchen.md:3-5`); see also ../secret.md:1.")
    (label,) = view.findChildren(ProseLabel)
    assert "cite:root/kitchen.md" in label.text()
    assert label.text().count("cite:") == 1, "a path outside the collections stays text"
    label.linkActivated.emit("cite:root/kitchen.md%3A3-5")
    wait_for(lambda: tab.citations.viewers)
    viewer = tab.citations.viewers[-1]
    assert isinstance(viewer, DocumentViewer)
    wait_for(lambda: viewer.marked == (3, 5))
    assert "Bread" in viewer.text.toPlainText()
    assert viewer.text.textCursor().blockNumber() == 2
    viewer.close()
    outside = tab.citations.open("root/../../secret.md:1", tab)
    assert outside is not None
    wait_for(lambda: "Cannot show" in outside.where.text())
    assert outside.text.toPlainText() == ""
    outside.close()
    delete_now(view)


def test_excerpts_reflow_prose_and_mark_whole_words_only() -> None:
    text = "- **A setting**: x, the\n  form in y.\n\n    code line\n    more\npara one\npara two"
    assert reflow(text, "a.md") == (
        "- **A setting**: x, the form in y.\n\n    code line\n    more\npara one para two"
    )
    assert reflow("def f():\nreturn 1", "a.py") == "def f():\nreturn 1"
    assert marked_terms("what changed, not who to refresh") == [
        "changed",
        "refresh",
        "what",
        "not",
        "who",
    ]


def test_turning_collections_on_in_settings_shows_them(
    qtbot: QtBot, make_services: ServicesFactory, runner: AsyncRunner, wait_for: Wait
) -> None:
    services = make_services()
    tab = open_panel(qtbot, services, runner)
    assert tab.stack.currentIndex() == 0
    services.settings.documents.enabled = True
    runner.broadcast(MODELS_CHANGED)  # what the window says after Settings → OK
    wait_for(lambda: tab.stack.currentIndex() == 1)
    wait_for(tab.details.isHidden)


def test_a_citation_in_plain_brackets_is_linked() -> None:
    linked = link_citations("Source: [root/a.md:3-5]", lambda path: path.startswith("root/"))
    assert linked == "Source: [[root/a.md:3-5](cite:root/a.md%3A3-5)]"


def test_edit_opens_filled_in_and_saving_indexes_again(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    root = docs_root(tmp_path)
    more = tmp_path / "more"
    write(more / "extra.md", "# Extra\n\nMore about the dough.\n")
    tab = open_panel(qtbot, services, runner)
    add(tab, root, wait_for)
    assert CollectionRegistry(services.paths).get("docs").watch  # the add dialog's default
    reindex(qtbot, tab)
    first = tab.index_op
    wait_for(lambda: "5 files" in tab.collection_list.currentItem().text())
    dialog = tab.open_edit_dialog()
    assert dialog is not None
    assert dialog.windowTitle() == "Edit the collection"
    assert (dialog.name_edit.text(), dialog.name_edit.isReadOnly()) == ("docs", True)
    assert dialog.root_paths() == [str(root)]
    assert dialog.watch_check.isChecked()
    assert dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).text() == "Save"
    dialog.add_root(str(more))
    dialog.exclude_edit.setText("*.py, *.pdf")
    dialog.watch_check.setChecked(False)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    wait_for(lambda: tab.index_op is not first)  # what it covers changed: indexed again
    again = tab.index_op
    assert again is not None
    qtbot.waitUntil(lambda: again.done, timeout=INDEX_MS)
    assert "Indexed 'docs': 1 new" in tab.status.text()
    assert "2 removed" in tab.status.text()
    saved = CollectionRegistry(services.paths).get("docs")
    assert (saved.roots, saved.exclude, saved.watch) == ((root, more), ("*.py", "*.pdf"), False)
    wait_for(lambda: tab.files.topLevelItemCount() == 4 and not tab.jobs.busy("files"))
    listed = {tab.files.topLevelItem(r).text(0) for r in range(tab.files.topLevelItemCount())}
    assert listed == {"root/garden.md", "root/kitchen.md", "root/notes.txt", "more/extra.md"}
    dialog = tab.open_edit_dialog()
    assert dialog is not None
    assert dialog.exclude_edit.text() == "*.py *.pdf"
    assert not dialog.watch_check.isChecked()
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    wait_for(lambda: "unchanged" in tab.status.text())
    assert tab.index_op is again


def test_an_edit_that_is_refused_says_why(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    tab = open_panel(qtbot, services, runner)
    add(tab, docs_root(tmp_path), wait_for)
    dialog = tab.open_edit_dialog()
    assert dialog is not None
    dialog.add_root(str(tmp_path / "gone"))
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    wait_for(lambda: tab.status.is_error)
    assert "Could not change 'docs': folder or file not found" in tab.status.text()
    assert CollectionRegistry(services.paths).get("docs").roots == (tmp_path / "root",)


def test_a_switched_embedding_model_indexes_the_collection_again(
    qtbot: QtBot, services: AppServices, runner: AsyncRunner, tmp_path: Path, wait_for: Wait
) -> None:
    tab = open_panel(qtbot, services, runner)
    add(tab, docs_root(tmp_path), wait_for)
    reindex(qtbot, tab)
    first = tab.index_op
    tab.reindex_other_models()  # the same model: nothing to do
    wait_for(lambda: not tab.jobs.busy("models"))
    assert tab.index_op is first
    services.embedder = OtherHashingEmbedder()  # what a restart after the switch opens
    tab.reindex_other_models()  # what the window does at start
    wait_for(lambda: tab.index_op is not first)
    again = tab.index_op
    assert again is not None
    assert "indexing 'docs' again" in tab.status.text()
    qtbot.waitUntil(lambda: again.done, timeout=INDEX_MS)
    assert again.error is None
