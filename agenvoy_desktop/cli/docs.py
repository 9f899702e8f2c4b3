"""``agenvoy-desktop docs add|list|update|index|search|remove``: the user's document collections.

The same collections the window's Documents page shows and the assistant's
``search_rag`` tool searches (``documents/collections.json``, one index
folder per collection).  ``docs index`` runs the indexer in a child process
with a progress bar; Ctrl+C asks it to stop after the file in hand, and
every file finished so far stays indexed (a second Ctrl+C stops it at once;
the next run heals and resumes).  Bad input fails with one line before
anything is changed, so nothing indexed is ever lost to a typo.  ``--watch``
asks the window to re-index a collection by itself when its files change
(the CLI never watches: it runs and ends).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agenvoy_desktop.agent.doc_embedder import FACTORY
from agenvoy_desktop.cli import common
from agenvoy_desktop.cli.common import (
    AddCommand,
    CliError,
    clip,
    command_adder,
    emit_json,
    in_range,
    notice,
    profile_options,
    profile_paths,
    settings_of,
)
from agenvoy_desktop.cli.safe_text import shown_line
from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.locks import FileLock, program_name
from agenvoy_desktop.core.timeutil import format_iso, format_local
from agenvoy_desktop.operations import documents as docs_ops
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.index import DocumentIndex, index_folder
from agenvoy_desktop.rag.index_schema import INDEX_FILE, DocumentIndexError, IndexStats
from agenvoy_desktop.rag.indexer import IndexReport
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir
from agenvoy_desktop.rag.search import DOC_MODES, MAX_LIMIT, DocumentHit, search_documents
from agenvoy_desktop.rag.worker import IndexJob, JobOutcome

POLL_S = 0.2
"""How often ``docs index`` reads the child's progress."""
KILL_WAIT_S = 10.0
STAGES = {"scan": ("looking at files", "file"), "index": ("indexing", "file")}


def register(add_command: AddCommand) -> None:
    """Add the ``docs`` command (with its actions) through build_parser's ``add``."""
    parser = add_command("docs", _dispatch, "manage and search document collections")
    sub = parser.add_subparsers(dest="docs_action", metavar="ACTION", required=True)
    action = command_adder(sub, profile_options(), "docs_func")

    add = action("add", cmd_add, "add a collection of folders or files")
    add.add_argument("name")
    add.add_argument("paths", nargs="+", metavar="PATH")
    add.add_argument("--include", action="append", default=[], metavar="GLOB")
    add.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    add.add_argument(
        "--watch", action="store_true", help="re-index by itself when files change (in the window)"
    )
    add.add_argument("--json", action="store_true")
    upd = action("update", cmd_update, "change a collection's folders, patterns or watching")
    upd.add_argument("name")
    upd.add_argument("--add", nargs="+", default=[], metavar="PATH", help="folders or files to add")
    upd.add_argument("--drop", nargs="+", default=[], metavar="PATH", help="folders to leave out")
    upd.add_argument(
        "--include", nargs="+", metavar="GLOB", help="only files matching these (replaces)"
    )
    upd.add_argument("--exclude", nargs="+", metavar="GLOB", help="leave these out (replaces)")
    upd.add_argument("--no-include", action="store_true", help="every readable file counts")
    upd.add_argument("--no-exclude", action="store_true", help="leave nothing out")
    upd.add_argument(
        "--watch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="re-index by itself when files change (in the window)",
    )
    upd.add_argument("--json", action="store_true")
    lst = action("list", cmd_list, "list collections with their size and last indexing")
    lst.add_argument("--json", action="store_true")
    idx = action("index", cmd_index, "bring a collection's index up to date")
    idx.add_argument("name")
    idx.add_argument("--json", action="store_true")
    idx.add_argument("--embedder-factory", default=FACTORY, help=argparse.SUPPRESS)
    srch = action("search", cmd_search, "search one collection")
    srch.add_argument("name")
    srch.add_argument("query")
    srch.add_argument("--limit", type=int, default=8)
    srch.add_argument("--mode", choices=DOC_MODES, default="hybrid")
    srch.add_argument("--json", action="store_true")
    rm = action("remove", cmd_remove, "forget a collection and delete its index")
    rm.add_argument("name")


def _dispatch(args: argparse.Namespace) -> int:
    result: int = args.docs_func(args)
    return result


def _folder(paths: AppPaths, name: str) -> Path:
    return index_folder(documents_dir(paths), name)


def _say_registry_notices(registry: CollectionRegistry) -> None:
    for text in registry.notices:
        notice(text)


# -- add ----------------------------------------------------------------------------------------
def cmd_add(args: argparse.Namespace) -> int:
    paths = profile_paths(args).ensure()
    roots = [_absolute(p) for p in args.paths]
    registry = CollectionRegistry(paths)
    collection = registry.add(args.name, roots, args.include, args.exclude, watch=args.watch)
    _say_registry_notices(registry)
    if not settings_of(args).documents.enabled:
        notice("the assistant searches collections only while Settings → Documents is on")
    if args.json:
        emit_json(collection.to_json())
    else:
        count = len(collection.roots)
        print(
            f"added collection {collection.name!r} ({count} folder{'s' if count > 1 else ''}"
            f" or file{'s' if count > 1 else ''}); index it with:"
            f" agenvoy-desktop docs index {collection.name}"
        )
    return 0


# -- update -------------------------------------------------------------------------------------
def cmd_update(args: argparse.Namespace) -> int:
    if args.include is not None and args.no_include:
        raise CliError("--include and --no-include contradict each other: give one")
    if args.exclude is not None and args.no_exclude:
        raise CliError("--exclude and --no-exclude contradict each other: give one")
    paths = profile_paths(args).ensure()
    update = docs_ops.update_collection(
        paths,
        args.name,
        add=[_absolute(p) for p in args.add],
        drop=[_absolute(p) for p in args.drop],
        include=[] if args.no_include else args.include,
        exclude=[] if args.no_exclude else args.exclude,
        watch=args.watch,
    ).value
    after = update.after
    if args.json:
        emit_json({**after.to_json(), "changed": update.changed, "reindex": update.reindex})
    elif not update.changed:
        print(f"collection {after.name!r} is unchanged")
    else:
        print(f"updated collection {after.name!r}: {_describe(after)}")
        if update.reindex:
            print(
                f"bring its index in line with: agenvoy-desktop docs index {after.name}"
                + (" (the window does it by itself while it runs)" if after.watch else "")
            )
    return 0


def _absolute(path: str) -> str:
    """A path as typed, made absolute (``~`` too); blank stays blank for the registry to refuse."""
    return os.path.abspath(os.path.expanduser(path)) if path.strip() else path


def _describe(collection: Collection) -> str:
    parts = [", ".join(str(root) for root in collection.roots)]
    if collection.include:
        parts.append(f"only {' '.join(collection.include)}")
    if collection.exclude:
        parts.append(f"leaving out {' '.join(collection.exclude)}")
    parts.append("watched" if collection.watch else "not watched")
    return clip("; ".join(parts), 160)


# -- list ---------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    paths = profile_paths(args)
    registry = CollectionRegistry(paths)
    collections = registry.list()
    _say_registry_notices(registry)
    listed = [(c, *_stats(_folder(paths, c.name), c.name)) for c in collections]
    if args.json:
        emit_json([_collection_row(*item) for item in listed])
        return 0
    if not listed:
        print("no document collections (add one with: agenvoy-desktop docs add NAME FOLDER)")
    for item in listed:
        print(_list_line(*item))
    return 0


def _collection_row(
    collection: Collection, stats: IndexStats | None, problem: str | None
) -> dict[str, Any]:
    """One collection with what its index holds (or why it cannot be read)."""
    return {
        **collection.to_json(),
        "indexed": stats is not None and stats.last_indexed_ns is not None,
        "files": stats.files if stats else 0,
        "chunks": stats.chunks if stats else 0,
        "vectors": stats.vectors if stats else 0,
        "failed": [dataclasses.asdict(f) for f in stats.failed] if stats else [],
        "last_indexed": format_iso(stats.last_indexed_ns)
        if stats and stats.last_indexed_ns
        else None,
        "problem": problem,
    }


def _stats(folder: Path, name: str) -> tuple[IndexStats | None, str | None]:
    """The index's stats without creating or repairing anything (a listing changes nothing)."""
    if not (folder / INDEX_FILE).is_file():
        return None, None
    try:
        index = DocumentIndex(folder, name)
    except DocumentIndexError as exc:
        return None, f"{exc}: index the collection again"
    try:
        return index.stats(), None
    except DocumentIndexError as exc:
        return None, f"{exc}: index the collection again"
    finally:
        index.close()


def _list_line(collection: Collection, stats: IndexStats | None, problem: str | None) -> str:
    roots = clip(", ".join(str(root) for root in collection.roots), 80)
    if problem:
        state = problem
    elif stats is None or stats.last_indexed_ns is None:
        state = "not indexed yet"
    else:
        failed = f", {len(stats.failed)} unreadable" if stats.failed else ""
        when = format_local(stats.last_indexed_ns)
        state = f"{stats.files} files, {stats.chunks} chunks{failed}, last indexed {when}"
    watching = ", watched" if collection.watch else ""
    return f"{shown_line(collection.name)}: {shown_line(state)}{watching}  [{roots}]"


# -- index --------------------------------------------------------------------------------------
def cmd_index(args: argparse.Namespace) -> int:
    paths = profile_paths(args).ensure()
    registry = CollectionRegistry(paths)
    collection = registry.get(args.name)  # an unknown name fails here, before a process starts
    _say_registry_notices(registry)
    job = IndexJob(paths, collection.name, factory=args.embedder_factory)
    interrupted = False
    with _bars(collection.name) as show:
        job.start()
        try:
            outcome = _follow(job, show)
        except KeyboardInterrupt:
            interrupted = True
            outcome = _cancel(job, show)
    return _finish(args, outcome, interrupted=interrupted)


def _follow(job: IndexJob, show: Any) -> JobOutcome:
    while (outcome := job.poll(POLL_S)) is None:
        if job.progress is not None:
            show(*job.progress)
    return outcome


def _cancel(job: IndexJob, show: Any) -> JobOutcome:
    """First Ctrl+C: stop after the file in hand; a second one: stop the child at once."""
    job.cancel()
    print(
        "\nagenvoy-desktop: stopping after the file in hand (Ctrl+C again stops at once)",
        file=sys.stderr,
    )
    try:
        return _follow(job, show)
    except KeyboardInterrupt:
        job.kill()
        outcome = job.wait(KILL_WAIT_S)
        return outcome or JobOutcome("crashed", message="the indexer was stopped")


@contextlib.contextmanager
def _bars(name: str) -> Iterator[Any]:
    """A tqdm bar per stage on stderr (only on a terminal), fed ``(stage, done, total)``."""
    from tqdm import tqdm

    current: dict[str, Any] = {}

    def show(stage: str, done: int, total: int) -> None:
        if current.get("stage") != stage:
            if "bar" in current:
                current["bar"].close()
            label, unit = STAGES.get(stage, (stage, "file"))
            current["stage"] = stage
            current["bar"] = tqdm(
                total=total, desc=f"{label} {name}", unit=unit, file=sys.stderr, disable=None
            )
        bar = current["bar"]
        bar.total = total
        bar.update(done - bar.n)

    try:
        yield show
    finally:
        if "bar" in current:
            current["bar"].close()


def _finish(args: argparse.Namespace, outcome: JobOutcome, *, interrupted: bool) -> int:
    if outcome.status in ("failed", "crashed"):
        raise CliError(outcome.message)
    for text in outcome.notices:
        notice(text)
    report = outcome.report
    if args.json:
        emit_json({"status": outcome.status, **(dataclasses.asdict(report) if report else {})})
    else:
        print(_report_line(args.name, outcome.status, report))
    if outcome.status == "cancelled":
        return 130 if interrupted else 1
    return 0


def _report_line(name: str, status: str, report: IndexReport | None) -> str:
    if report is None:
        return f"indexing {name!r} was cancelled while looking at the files; nothing was changed"
    counts = (
        f"{report.new} new, {report.changed} changed, {report.deleted} deleted,"
        f" {report.unreadable} unreadable; {report.chunks} chunks written"
        f" in {report.seconds:.1f} s"
    )
    if status == "cancelled":
        return f"indexing {name!r} was cancelled ({counts}); what was indexed is kept"
    return f"indexed {name!r}: {counts}"


# -- search -------------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError("empty query: type some words to search for")
    limit = in_range("--limit", args.limit, 1, MAX_LIMIT)
    paths = profile_paths(args)
    registry = CollectionRegistry(paths)
    collection = registry.get(args.name)
    folder = _folder(paths, collection.name)
    if not (folder / INDEX_FILE).is_file():
        raise CliError(
            f"collection {collection.name!r} is not indexed yet:"
            f" run `agenvoy-desktop docs index {collection.name}` first"
        )
    index = DocumentIndex(folder, collection.name)
    try:
        with _embedder_for(args, paths, index) as embedder:
            hits = search_documents(index, args.query, args.mode, limit, embedder)
    finally:
        index.close()
    if args.json:
        emit_json([hit_json(hit) for hit in hits])
    else:
        _print_hits(hits)
    return 0


@contextlib.contextmanager
def _embedder_for(
    args: argparse.Namespace, paths: AppPaths, index: DocumentIndex
) -> Iterator[TextEmbedder | None]:
    """The embedding model for a search by meaning; None for keywords (or nothing embedded)."""
    embedder: TextEmbedder | None = None
    if args.mode != "keyword" and index.dim is not None:
        try:
            embedder = common.load_embedder(paths)
        except (KnownError, OSError) as exc:
            if args.mode == "semantic":
                raise
            notice(f"searching by keywords only: the embedding model is not available ({exc})")
    try:
        yield embedder
    finally:
        common.close_embedder(embedder)


def hit_json(hit: DocumentHit) -> dict[str, Any]:
    """A hit with stable keys (the citation is the form an answer quotes)."""
    return {
        "collection": hit.collection,
        "path": hit.path,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "page": hit.page,
        "heading": hit.heading,
        "text": hit.text,
        "score": round(hit.score, 6),
        "citation": hit.citation,
    }


def _print_hits(hits: list[DocumentHit]) -> None:
    if not hits:
        print("no results")
    for rank, hit in enumerate(hits, start=1):
        heading = f" ({clip(hit.heading, 60)})" if hit.heading else ""
        print(f"{rank:>2}. {hit.score:7.4f}  {shown_line(hit.citation)}{heading}")
        print(f"    {clip(hit.text)}")


# -- remove -------------------------------------------------------------------------------------
def cmd_remove(args: argparse.Namespace) -> int:
    paths = profile_paths(args)
    registry = CollectionRegistry(paths)
    collection = registry.get(args.name)
    folder = _folder(paths, collection.name)
    lock = FileLock(folder / "index.lock", f"the index of {collection.name!r}", program_name())
    if folder.is_dir():  # not while an indexer is writing it
        lock.acquire("remove a document collection", shared=False, wait_s=0)
    try:
        registry.remove(collection.name)
    finally:
        if lock.held:
            lock.release()
    try:
        if folder.is_dir():
            shutil.rmtree(folder)
    except OSError as exc:
        notice(f"could not delete the index folder {folder} ({exc.strerror}): delete it by hand")
    when = format_local(collection.created_ns) if collection.created_ns else "earlier"
    print(f"removed collection {collection.name!r} (added {when}); its files were not touched")
    return 0
