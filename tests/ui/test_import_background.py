"""An import's embedding runs in the background after it: keyword search works meanwhile.

The window stores every imported conversation first (one short storage job
each) and embeds afterwards in small batches, as its own cancellable
operation.  These tests hold the embedding model at a gate so "meanwhile" is
an order of events, not a race: a search queued while a batch is held runs
as soon as that batch ends, long before the rest is embedded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.search import SearchQuery
from agenvoy_desktop.operations.search import RecallAnswer, run_search
from tests.fakes import HashingEmbedder
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, wait_op

MESSAGES = 10_000
GATE_S = 30.0
"""How long a held batch waits for the test at most (a failing test must not hang)."""


class GatedEmbedder(HashingEmbedder):
    """Embeds only when the test lets a batch through (:meth:`let_one`), once gated."""

    def __init__(self) -> None:
        super().__init__()
        self.gated = False
        self.waiting = threading.Event()
        self._permits = threading.Semaphore(0)

    def let_one(self) -> None:
        self.waiting.clear()
        self._permits.release()

    def open(self) -> None:
        self.gated = False
        self._permits.release(1_000)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.gated:
            self.waiting.set()
            self._permits.acquire(timeout=GATE_S)
        return super().embed(texts)


def write_history(path: Path, count: int) -> None:
    """A JSON Lines history of *count* messages; message 7 names the parking spot."""
    lines = []
    for i in range(count):
        text = "I park on level B2, spot 47" if i == 7 else f"small talk number {i}"
        lines.append(json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": text}))
    path.write_text("\n".join(lines), "utf-8")


def search_in_thread(services: AppServices) -> tuple[threading.Thread, list[RecallAnswer]]:
    """Queue a keyword search on the storage thread from a helper thread (the test's thread
    keeps the event loop turning); its answer lands in the returned list."""
    found: list[RecallAnswer] = []
    query = SearchQuery("parking spot level", mode="keyword", limit=5)

    def ask() -> None:
        found.append(services.storage.run_sync(run_search, services.store, query))

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread, found


def test_keyword_search_finds_an_import_while_its_embedding_runs(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    embedder = GatedEmbedder()
    services = make_services(ScriptedChatModel([]), embedder=embedder)
    window = make_window(services)
    source = tmp_path / "big-chat.jsonl"
    write_history(source, MESSAGES)
    embedder.gated = True
    try:
        wait_op(qtbot, window.import_file(source))
        indexing = window.session_actions.indexing
        assert indexing is not None
        assert not indexing.done
        qtbot.waitUntil(embedder.waiting.is_set)  # the first batch is held at the gate

        thread, found = search_in_thread(services)
        while not found:  # each permit lets one batch end; the search is queued behind it
            embedder.let_one()
            qtbot.waitUntil(lambda: bool(found) or embedder.waiting.is_set())
            thread.join(0.05)
        assert any("spot 47" in hit.item.message.content for hit in found[0].result.hits)
        sid = window.session_id
        assert sid is not None
        info = services.storage.run_sync(services.store.info, sid)
        assert info.archived_messages == MESSAGES
        assert (info.vectors or 0) < MESSAGES  # most of the embedding is still ahead
        assert services.missing_vectors() > 0

        indexing.cancel()
    finally:
        embedder.open()
    wait_op(qtbot, indexing)
    info = services.storage.run_sync(services.store.info, sid)
    assert info.archived_messages == MESSAGES  # a cancel stops the embedding, never the import
    assert (info.vectors or 0) < MESSAGES


def test_the_embedding_after_an_import_finishes_on_its_own(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    services = make_services(ScriptedChatModel([]))
    window = make_window(services)
    source = tmp_path / "old-chat.jsonl"
    write_history(source, 300)
    wait_op(qtbot, window.import_file(source))
    indexing = window.session_actions.indexing
    wait_op(qtbot, indexing)
    sid = window.session_id
    assert sid is not None
    info = services.storage.run_sync(services.store.info, sid)
    assert (info.archived_messages, info.vectors) == (300, 300)
    assert services.missing_vectors() == 0
