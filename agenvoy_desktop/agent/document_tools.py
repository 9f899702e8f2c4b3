"""``list_rag`` and ``search_rag``: the user's document collections, offered to the model.

The collections are opt-in (Settings → Documents) and live in files of
their own, beside the conversation memory and never inside it, so
everything here stays off the storage thread: each search opens the
collection's index on a worker thread (``asyncio.to_thread``) and closes it
again, so a slow or damaged document index can only fail the document tool
that touched it.

Whether the tools are offered is decided when each round starts, on the
event loop, so :class:`DocumentLibrary` answers that from ``stat`` calls:
a collection's index is opened (read-only, with a short lock timeout) only
when its file changed since the last look.  A collection whose index is
damaged or unreadable is left out, logged once, and named by
:meth:`DocumentLibrary.problem` for the window; when no collection is left
with chunks, the tools are not offered at all.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.agent.tools import Tool, ToolArgumentError, ToolResult
from agenvoy_desktop.core.embedding import TextEmbedder, embed_queries
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.timeutil import format_local
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.index import DocumentIndex, index_folder
from agenvoy_desktop.rag.index_schema import (
    INDEX_FILE,
    SCHEMA_VERSION,
    DocumentIndexDamagedError,
)
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir, registry_file
from agenvoy_desktop.rag.search import DocumentHit, clean_query, hit_of, search_documents

log = logging.getLogger(__name__)

LIST_TOOL = "list_rag"
SEARCH_TOOL = "search_rag"
DEFAULT_LIMIT = 4
MAX_LIMIT = 10
PROBE_TIMEOUT_S = 0.25
"""How long the availability probe waits for a locked index (it runs on the event loop)."""
RESULT_CHARS = 3200
"""Characters of chunk text one search result may show (the registry clips at 4000)."""
CHUNK_CHARS = 900

Signature = tuple[int, int, int] | None
"""(inode, size, mtime_ns) of a file, or None when it is missing."""


class DocumentToolError(KnownError, RuntimeError):
    """A collection the tools cannot search now (damaged, locked, not indexed): one line."""


@dataclass(frozen=True, slots=True)
class CollectionState:
    """What one collection's index holds, as the availability probe last saw it."""

    name: str
    files: int = 0
    chunks: int = 0
    last_indexed_ns: int | None = None
    problem: str | None = None
    """Why the index cannot be searched (damaged, unreadable); None when it can."""

    @property
    def usable(self) -> bool:
        return self.problem is None and self.chunks > 0


def _signature(path: Path) -> Signature:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def probe_index(folder: Path, name: str) -> CollectionState:
    """Count what *folder*'s index holds, read-only, never waiting long for a lock.

    No index file yet is an empty collection, not a problem: it was never
    indexed.  Anything SQLite refuses (damaged, not a database, locked) is.
    """
    path = folder / INDEX_FILE
    if not path.is_file():
        return CollectionState(name)
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=PROBE_TIMEOUT_S)
    except sqlite3.Error as exc:
        return CollectionState(name, problem=_unreadable(name, exc))
    try:
        if int(db.execute("PRAGMA user_version").fetchone()[0]) > SCHEMA_VERSION:
            return CollectionState(
                name,
                problem=f"the index of collection {name!r} was written by a newer version"
                " of the app: update the app, or index the collection again",
            )
        files, last = db.execute("SELECT count(*), max(indexed_ns) FROM files").fetchone()
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    except sqlite3.Error as exc:
        return CollectionState(name, problem=_unreadable(name, exc))
    finally:
        db.close()
    return CollectionState(name, int(files), int(chunks), int(last) if last else None)


def _unreadable(name: str, exc: sqlite3.Error) -> str:
    reason = str(exc).rstrip(".") or type(exc).__name__
    return f"the index of collection {name!r} cannot be read ({reason}): index it again"


class DocumentLibrary:
    """The profile's collections as the document tools see them (see the module docstring).

    *enabled* is read at every check (the setting may change while the app
    runs); *embedder* gives the app's embedding model, or None for keyword
    search only.  Thread-safe: checks come from the event loop, searches
    from a worker thread.
    """

    def __init__(
        self,
        paths: AppPaths,
        enabled: Callable[[], bool],
        embedder: Callable[[], TextEmbedder | None] = lambda: None,
    ) -> None:
        self.paths = paths
        self._enabled = enabled
        self._embedder = embedder
        self._lock = threading.Lock()
        self._registry_sig: Signature | tuple[str, ...] = ("never read",)
        self._names: list[str] = []
        self._notices: list[str] = []
        self._probed: dict[str, tuple[tuple[Signature, Signature], CollectionState]] = {}
        self._logged: set[str] = set()

    # -- state ------------------------------------------------------------------------
    def states(self) -> list[CollectionState]:
        """Every collection's state, re-probing only the indexes whose files changed."""
        with self._lock:
            self._read_registry()
            return [self._state(name) for name in self._names]

    def _read_registry(self) -> None:
        sig = _signature(registry_file(self.paths))
        if sig == self._registry_sig:
            return
        registry = CollectionRegistry(self.paths)
        try:
            self._names = [c.name for c in registry.list()]
            self._notices = list(registry.notices)
        except (KnownError, OSError) as exc:  # a set-aside that could not be written back
            self._names, self._notices = [], [f"the document collections cannot be read: {exc}"]
        self._registry_sig = _signature(registry_file(self.paths))  # after a set-aside

    def _state(self, name: str) -> CollectionState:
        folder = index_folder(documents_dir(self.paths), name)
        index = folder / INDEX_FILE
        key = (_signature(index), _signature(index.with_name(index.name + "-wal")))
        cached = self._probed.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        state = probe_index(folder, name)
        self._probed[name] = (key, state)
        if state.problem is not None and state.problem not in self._logged:
            self._logged.add(state.problem)
            log.warning("document tools: %s", state.problem)
        return state

    def _mark_damaged(self, name: str, problem: str) -> None:
        """A search found damage the probe missed: leave the collection out until it changes."""
        with self._lock:
            cached = self._probed.get(name)
            key = cached[0] if cached is not None else (None, None)
            self._probed[name] = (key, CollectionState(name, problem=problem))

    def available(self) -> bool:
        """Whether the document tools are offered now: enabled, and a collection has chunks."""
        return self._enabled() and any(state.usable for state in self.states())

    def problem(self) -> str | None:
        """One line on why documents cannot be searched now, for the window (None: fine/off)."""
        if not self._enabled():
            return None
        states = self.states()
        problems = [s.problem for s in states if s.problem is not None]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return problems[0] + more
        if self._notices:
            return self._notices[0]
        if not any(s.usable for s in states):
            return "no document collection is indexed yet: add a collection and index it"
        return None

    # -- searching --------------------------------------------------------------------
    def search(self, collection: str | None, query: str, limit: int) -> list[DocumentHit]:
        """Worker thread: the best *limit* chunks of one collection, or of every usable one."""
        text = clean_query(query)
        states = self.states()
        usable = [s for s in states if s.usable]
        if collection:
            chosen = [s for s in states if s.name.lower() == collection.strip().lower()]
            if not chosen:
                names = ", ".join(s.name for s in usable) or "none"
                raise ToolArgumentError(
                    f"no document collection {collection!r}; collections: {names}"
                    " (or leave out 'collection' to search them all)"
                )
            if not chosen[0].usable:
                raise DocumentToolError(
                    chosen[0].problem or f"collection {chosen[0].name!r} has nothing indexed yet"
                )
            usable = chosen
        ranked = [self._search_one(s.name, text, limit) for s in usable]
        return _interleave(ranked, limit)

    def passages(self, message: str, limit: int) -> list[Passage]:
        """Worker thread: chunks of every usable collection near *message* (for proactive recall).

        The message is embedded once; a collection indexed with another model
        is searched by words only.  A collection that fails is skipped: the
        turn goes on without it.
        """
        try:
            text = clean_query(message)
        except KnownError:
            return []
        embedder = self._embedder()
        vector = None
        found: list[Passage] = []
        for state in self.states():
            if not state.usable:
                continue
            try:
                index = DocumentIndex(
                    index_folder(documents_dir(self.paths), state.name), state.name
                )
            except (KnownError, OSError, sqlite3.Error):
                log.info("document recall: collection %s skipped", state.name, exc_info=True)
                continue
            try:
                matches = embedder is not None and index.vectors_match(embedder)
                usable = embedder if matches else None
                if usable is not None and vector is None:
                    vector = embed_queries(usable, [text])[0]
                found += _passages_of(index, text, vector if usable is not None else None, limit)
            except (KnownError, OSError, sqlite3.Error):
                log.info("document recall: collection %s skipped", state.name, exc_info=True)
            finally:
                index.close()
        return found

    def _search_one(self, name: str, text: str, limit: int) -> list[DocumentHit]:
        folder = index_folder(documents_dir(self.paths), name)
        if not (folder / INDEX_FILE).is_file():
            raise DocumentToolError(f"collection {name!r} is not indexed any more")
        try:
            index = DocumentIndex(folder, name)
        except DocumentIndexDamagedError:
            problem = f"the index of collection {name!r} is damaged: index it again"
            self._mark_damaged(name, problem)
            raise DocumentToolError(problem) from None
        try:
            embedder = self._embedder()
            if embedder is not None and not index.vectors_match(embedder):
                embedder = None  # indexed by another model (or not embedded): by words only
            return search_documents(index, text, "hybrid", limit, embedder)
        except DocumentIndexDamagedError:
            problem = f"the index of collection {name!r} is damaged: index it again"
            self._mark_damaged(name, problem)
            raise DocumentToolError(problem) from None
        finally:
            index.close()


@dataclass(frozen=True, slots=True)
class Passage:
    """A chunk near a message, with what proactive document recall weighs it by."""

    hit: DocumentHit
    cosine: float | None
    """Similarity of the message's embedding to the chunk's (None: not among the nearest)."""
    keyword_rank: int | None
    """0-based place in the keyword search (None: not found by words)."""


def _passages_of(index: DocumentIndex, text: str, vector: Any, limit: int) -> list[Passage]:
    """One collection's nearest chunks by meaning and by words, merged by chunk."""
    nearest = index.semantic_ranked(vector, limit) if vector is not None else []
    words = index.keyword_ranked(text, limit)
    cosine = dict(nearest)
    rank = {rowid: place for place, (rowid, _score) in enumerate(words)}
    rowids = list(dict.fromkeys([*cosine, *rank]))
    rows = index.chunk_rows(rowids)
    return [
        Passage(hit_of(index.collection, rows[r]), cosine.get(r), rank.get(r))
        for r in rowids
        if r in rows
    ]


def _interleave(ranked: Sequence[list[DocumentHit]], limit: int) -> list[DocumentHit]:
    """Hits of several collections, best of each first (their scores are not comparable)."""
    if len(ranked) == 1:
        return ranked[0][:limit]
    rounds = itertools.zip_longest(*ranked)
    return [hit for row in rounds for hit in row if hit is not None][:limit]


# -- what the model reads ---------------------------------------------------------------
def format_hits(hits: Sequence[DocumentHit], *, with_collection: bool) -> str:
    """Numbered chunks with their citation and heading, clipped to fit the result budget."""
    if not hits:
        return "no matching passages in the documents"
    budget = min(CHUNK_CHARS, RESULT_CHARS // len(hits))
    blocks: list[str] = []
    for number, hit in enumerate(hits, 1):
        where = f"{hit.collection}: {hit.citation}" if with_collection else hit.citation
        heading = f" ({hit.heading})" if hit.heading else ""
        body = " ".join(hit.text.split())
        if len(body) > budget:
            body = body[: budget - 1] + "…"
        blocks.append(f"[{number}] {where}{heading}\n{body}")
    blocks.append("Cite the passages you use by their source, e.g. (" + hits[0].citation + ").")
    return "\n\n".join(blocks)


def format_collections(states: Sequence[CollectionState]) -> str:
    """One line per collection: size and when it was last indexed, or why it cannot be used."""
    if not states:
        return "the user has no document collections"
    lines: list[str] = []
    for state in states:
        if state.problem is not None:
            lines.append(f"- {state.name}: cannot be searched now ({state.problem})")
        elif not state.chunks:
            lines.append(f"- {state.name}: not indexed yet")
        else:
            when = format_local(state.last_indexed_ns) if state.last_indexed_ns else "unknown"
            lines.append(
                f"- {state.name}: {state.files} files, {state.chunks} passages, last indexed {when}"
            )
    return "\n".join(lines)


def document_tools(library: DocumentLibrary) -> list[Tool]:
    """``list_rag`` and ``search_rag``, offered while :meth:`DocumentLibrary.available`."""

    async def listing(_args: dict[str, Any]) -> ToolResult:
        states = await asyncio.to_thread(library.states)
        return ToolResult(format_collections(states), empty=not states)

    async def searching(args: dict[str, Any]) -> ToolResult:
        collection = str(args.get("collection") or "").strip() or None
        limit = int(args.get("limit", DEFAULT_LIMIT))
        hits = await asyncio.to_thread(library.search, collection, str(args["query"]), limit)
        several = len({hit.collection for hit in hits}) > 1
        return ToolResult(format_hits(hits, with_collection=several), empty=not hits, data=hits)

    return [
        Tool(
            LIST_TOOL,
            "List the user's document collections: how many files and passages, last indexed.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            listing,
            timeout_s=10.0,
            available=library.available,
        ),
        Tool(
            SEARCH_TOOL,
            "Search the user's documents (notes, files, papers). Cite each passage you use by"
            " its source, e.g. (notes.md:12-30). Leave out collection to search all.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 500},
                    "collection": {"type": "string", "maxLength": 64},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            searching,
            available=library.available,
        ),
    ]
