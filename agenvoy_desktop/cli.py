"""Headless entry points: ``agenvoy-desktop <command>``.

Every command takes ``--data-dir`` (the profile root; default: platformdirs,
or ``AGENVOY_DESKTOP_HOME``).  Bad input gets one line on stderr and exit
status 1; nothing already stored is altered by a failed command.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agenvoy_desktop import __version__
from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.search import MODES, SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore, SessionInfo, check_session_id
from agenvoy_desktop.core.timeutil import format_iso, format_local, now_ns, parse_iso_in_range
from agenvoy_desktop.paths import HOME_ENV, AppPaths, app_paths
from agenvoy_desktop.settings import Settings, load_settings

log = logging.getLogger("agenvoy_desktop")

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    KeyError,
    RuntimeError,
)


class CliError(KnownError):
    """A user-facing failure: printed as one line, exit status 1."""


MAX_RESULTS = 1000
"""The most results a ``--limit`` may ask for: more is no longer a search."""
SQLITE_INT_MAX = 2**63 - 1
"""The largest id SQLite can store; a bigger one would be an overflow, not a miss."""


def in_range(name: str, value: int, low: int, high: int) -> int:
    """Return *value* if ``low <= value <= high``, else a one-line :class:`CliError`.

    argparse's ``type=int`` takes any size of integer; a range check at the
    command keeps ``--limit 99999999999999999999`` from reaching SQLite.
    """
    if not low <= value <= high:
        raise CliError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _time_option(name: str, text: str | None) -> int | None:
    """An ISO 8601 ``--since``/``--until``, parsed and range-checked (None when absent)."""
    if text is None:
        return None
    try:
        return parse_iso_in_range(text)
    except ValueError as exc:
        raise CliError(f"{name}: {exc}") from None


# -- plumbing -------------------------------------------------------------------
def _progress_bar(desc: str) -> Callable[[int, int], None]:
    """A tqdm bar on stderr, created on first call (quiet for tiny jobs)."""
    from tqdm import tqdm

    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = tqdm(
                total=total,
                desc=desc,
                unit="msg",
                file=sys.stderr,
                disable=total < 200,
                leave=False,
            )
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def _embedder(paths: AppPaths) -> TextEmbedder:
    """The embedding model the window would use: settings.json's choice and thread count."""
    from agenvoy_desktop.llm.catalogue import ModelCatalogue
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.llm.model_prep import prepare_embedding_model

    models = load_settings(paths.settings_file).models
    if models.embedding_model:
        model = ModelCatalogue(paths.models_dir).resolve(models.embedding_model, "embedding")
    else:
        progress = _fraction_report("embedding model")
        model = prepare_embedding_model(paths.models_dir, progress=progress)
    return Embedder(model, n_threads=models.threads)


def _settings(args: argparse.Namespace) -> Settings:
    """The profile's settings.json, as the window reads it (defaults when absent)."""
    return load_settings(app_paths(args.data_dir).settings_file)


@contextlib.contextmanager
def _store(
    args: argparse.Namespace,
    *,
    embed: bool,
    reconcile: bool = True,
    settings: Settings | None = None,
    top_up: Sequence[str | None] = (),
    repair_damage: bool = True,
    say_notices: bool = True,
) -> Iterator[MemoryStore]:
    """The profile's memory for one command; what opening repaired is said on stderr.

    *top_up*: sessions (None: all) whose messages still lacking a vector are
    embedded first, so a semantic search sees them (an import killed halfway
    leaves such messages; the window embeds them in the background).
    """
    paths = app_paths(args.data_dir)
    settings = settings or _settings(args)
    embedder = _embedder(paths) if embed else None
    try:
        with MemoryStore(
            paths,
            embedder,
            max_history_bytes=settings.memory.max_history_bytes,
            reconcile=reconcile,
            repair_damage=repair_damage,
        ) as store:
            for notice in store.notices if say_notices else ():
                print(f"agenvoy-desktop: notice: {notice}", file=sys.stderr)
            if embedder is not None and top_up:
                _top_up_vectors(store, top_up)
            yield store
    finally:
        close = getattr(embedder, "close", None)
        if close is not None:
            close()


def _top_up_vectors(store: MemoryStore, sessions: Sequence[str | None]) -> None:
    """Embed the messages of *sessions* (None: every session) that have no vector yet."""
    wanted = None if None in sessions else set(sessions)
    todo = {sid: n for sid, n in store.missing_vectors.items() if wanted is None or sid in wanted}
    if todo:
        progress = _progress_bar("embedding messages that lack a vector")
        total, done = sum(todo.values()), 0
        for sid in todo:
            done += store.index_pending(sid, progress=_offset(progress, done, total))
            store.missing_vectors.pop(sid, None)
        progress(total, total)


def _offset(
    progress: Callable[[int, int], None], base: int, total: int
) -> Callable[[int, int], None]:
    """One session's ``(done, _)`` reported as part of a job of *total* (after *base*)."""
    return lambda done, _total: progress(base + done, total)


def _emit_json(data: object) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def _clip(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# -- commands -------------------------------------------------------------------
def cmd_import(args: argparse.Namespace) -> int:
    from agenvoy_desktop.core.importers import read_import_file
    from agenvoy_desktop.core.messages import message_limit

    if args.session is not None:
        check_session_id(args.session)
    settings = _settings(args)
    limit = message_limit(settings.memory.max_history_bytes)
    # Validates everything before the profile is opened: a bad file writes nothing.
    messages = read_import_file(args.file, now_ns(), max_message_bytes=limit)
    with _store(args, embed=True, settings=settings) as store:
        sid = store.import_messages(
            messages,
            args.session,
            title=args.title or args.file.stem,
            progress=_progress_bar("embedding"),
        )
    print(sid)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError("empty query")
    if args.session is not None:
        check_session_id(args.session)  # an empty id is a mistake, not "all sessions"
    query = SearchQuery(
        text=args.query,
        mode=args.mode,
        limit=in_range("--limit", args.limit, 1, MAX_RESULTS),
        session_id=args.session,
        time_from_ns=_time_option("--since", args.since),
        time_to_ns=_time_option("--until", args.until),
        include_tool=args.include_tool,
    )
    semantic = args.mode != "keyword"
    with _store(args, embed=semantic, top_up=[args.session]) as store:
        result = search_chat_history(store, query)
    if args.json:
        _emit_json(
            [
                {
                    "session_id": hit.item.session_id,
                    "message_id": hit.item.message.id,
                    "ref": hit.item.message.ref,
                    "role": hit.item.message.role,
                    "time": format_iso(hit.item.message.time_ns),
                    "content": hit.item.message.content,
                    "score": round(hit.score, 6),
                }
                for hit in result.hits
            ]
        )
        return 0
    if not result.hits:
        print("no results")
    for rank, hit in enumerate(result.hits, start=1):
        msg = hit.item.message
        print(
            f"{rank:>2}. {hit.score:7.4f}  {hit.item.session_id}  "
            f"{format_local(msg.time_ns)}  {msg.role}: {_clip(msg.content)}"
        )
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    with _store(args, embed=False) as store:
        infos = store.sessions()
    if args.json:
        _emit_json([_info_json(i) for i in infos])
        return 0
    if not infos:
        print("no sessions")
    for info in infos:
        print(
            f"{info.session_id:<14} {format_local(info.updated_ns) if info.updated_ns else '-':<17}"
            f" {info.history_messages:>6} recent {info.archived_messages:>7} archived "
            f"{info.history_bytes / 1024:>8.1f} KiB  {info.title or ''}"
        )
    return 0


def _info_json(info: SessionInfo) -> dict[str, Any]:
    return dataclasses.asdict(info)


def cmd_stats(args: argparse.Namespace) -> int:
    if args.session is not None:
        check_session_id(args.session)
    with _store(args, embed=False) as store:
        if args.session is not None:
            data: dict[str, Any] = _info_json(store.info(args.session))
            data["events"] = [
                {"time": format_iso(t), "kind": k, **d}
                for t, k, d in store.archive.events(args.session)
            ]
        else:
            infos = store.sessions()
            data = {
                "sessions": len(infos),
                "history_messages": sum(i.history_messages for i in infos),
                "archived_messages": store.archive.count(),
                "vectors": sum(i.vectors for i in infos),
                "archive_bytes": store.paths.archive_db.stat().st_size,
                "data_dir": str(
                    store.paths.config_dir.parent
                    if os.environ.get(HOME_ENV) or args.data_dir
                    else store.paths.config_dir
                ),
            }
    if args.json:
        _emit_json(data)
    else:
        for key, value in data.items():
            if key != "events":
                print(f"{key:>18}: {value}")
        for event in data.get("events", []):
            print(f"{'event':>18}: {event}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    with _store(args, embed=False) as store:
        store.reset(args.session_id)
    print(f"reset {args.session_id}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    with _store(args, embed=False) as store:
        store.remove(args.session_id)
    print(f"removed {args.session_id}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check every store; with ``--repair`` fix them.  Exit 3: something is (still) wrong."""
    from agenvoy_desktop.core.archive import ArchiveDamagedError
    from agenvoy_desktop.core.error_memory import error_db_path
    from agenvoy_desktop.core.reconcile import Finding, check_error_memory, doctor

    paths = app_paths(args.data_dir)
    findings: list[Finding] = []
    try:
        with _store(args, embed=args.repair, reconcile=False, repair_damage=args.repair) as store:
            findings += [Finding(None, "archive", n, True) for n in store.notices]
            findings += doctor(store, repair=args.repair, error_db=error_db_path(paths))
    except ArchiveDamagedError as exc:  # only without --repair: reported, not touched
        findings.append(Finding(None, "archive", _one_line(exc), False))
        findings += check_error_memory(error_db_path(paths), repair=False)
    if args.json:
        _emit_json(
            [
                {
                    "session_id": f.session_id,
                    "kind": f.kind,
                    "detail": f.detail,
                    "repaired": f.repaired,
                }
                for f in findings
            ]
        )
    elif not findings:
        print("all layers consistent: nothing to repair")
    else:
        for finding in findings:
            print(finding)
        if not args.repair:
            print("run `agenvoy-desktop doctor --repair` to fix these")
    left = [f for f in findings if not f.repaired] if args.repair else findings
    if args.repair and left and not args.json:
        print(f"{len(left)} problem(s) left unrepaired", file=sys.stderr)
    return 3 if left else 0


def cmd_setup(args: argparse.Namespace) -> int:
    from agenvoy_desktop.llm.starter import prepare_starter_model

    paths = app_paths(args.data_dir).ensure()
    embedder = _embedder(paths)
    close = getattr(embedder, "close", None)
    if close is not None:
        close()
    prepare_starter_model(paths.models_dir, progress=_fraction_report("starter chat model"))
    print(f"models ready in {paths.models_dir}")
    return 0


def _fraction_report(label: str) -> Callable[[float, str], None]:
    """Progress on a terminal: one rewritten line (silent when stderr is not a tty)."""

    def report(fraction: float, what: str) -> None:
        if sys.stderr.isatty():
            end = "\n" if fraction >= 1 else ""
            print(f"\rpreparing {label}: {what} {fraction:4.0%}", end=end, file=sys.stderr)

    return report


# -- parser -----------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help=f"profile folder (default: platform dirs, or ${HOME_ENV})",
    )
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="agenvoy-desktop", parents=[common], description="Offline assistant that remembers."
    )
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(
        name: str, func: Callable[[argparse.Namespace], int], text: str
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=text, description=text)
        cmd.set_defaults(func=func)
        return cmd

    from pathlib import Path

    imp = add("import", cmd_import, "import JSON Lines or a history.json; prints the session id")
    imp.add_argument("file", type=Path)
    imp.add_argument("--session", help="session id (created if new, appended to if it exists)")
    imp.add_argument("--title")

    srch = add("search", cmd_search, "search conversation memory")
    srch.add_argument("query")
    scope = srch.add_mutually_exclusive_group()
    scope.add_argument("--session")
    scope.add_argument("--all", action="store_true", help="all sessions (the default)")
    srch.add_argument("--mode", choices=MODES, default="hybrid")
    srch.add_argument("--limit", type=int, default=10)
    srch.add_argument("--since", help="ISO 8601 time (naive = local)")
    srch.add_argument("--until", help="ISO 8601 time (naive = local)")
    srch.add_argument("--include-tool", action="store_true", help="also search tool traffic")
    srch.add_argument("--json", action="store_true")

    ses = add("sessions", cmd_sessions, "list sessions")
    ses.add_argument("--json", action="store_true")
    sts = add("stats", cmd_stats, "memory statistics")
    sts.add_argument("--session")
    sts.add_argument("--json", action="store_true")
    for name, func, text in (
        ("reset", cmd_reset, "clear a session's history, vectors and archive (keeps its summary)"),
        ("remove", cmd_remove, "delete a session and everything of it"),
    ):
        add(name, func, text).add_argument("session_id")
    doc = add("doctor", cmd_doctor, "check history, archive and vectors against each other")
    doc.add_argument("--repair", action="store_true")
    doc.add_argument("--json", action="store_true")
    add("setup", cmd_setup, "prepare the local models (done automatically on first use)")
    from agenvoy_desktop.cli_models import register as register_models

    register_models(add)
    from agenvoy_desktop.cli_errors import register as register_errors

    register_errors(add)
    from agenvoy_desktop.cli_chat import register as register_chat

    register_chat(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.data_dir = getattr(args, "data_dir", None)
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not verbose:  # llama.cpp's own warnings are about model files, not the user's work
        logging.getLogger("agenvoy_desktop.llm.llama_cpp").setLevel(logging.ERROR)
    if args.command is None:  # no subcommand: the window
        from agenvoy_desktop.ui.app import main as gui_main

        gui_args = ["--data-dir", str(args.data_dir)] if args.data_dir else []
        return gui_main(gui_args + (["-v"] if verbose else []))
    try:
        result: int = _run_repairing(args)
        return result
    except CliError as exc:
        print(f"agenvoy-desktop: error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("agenvoy-desktop: interrupted; what was finished is kept", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as exc:
        print(f"agenvoy-desktop: error: {_one_line(exc)}", file=sys.stderr)
    except Exception as exc:  # last resort: one line, details with -v
        log.info("unexpected failure", exc_info=True)
        print(
            f"agenvoy-desktop: internal error: {type(exc).__name__}: {_one_line(exc)}"
            " (run with -v for details)",
            file=sys.stderr,
        )
    return 1


READ_ONLY_COMMANDS = frozenset({"search", "sessions", "stats"})
"""Commands that write nothing, so running them again after a repair repeats nothing."""


def _run_repairing(args: argparse.Namespace) -> int:
    """Run the command; if it hits a damaged archive, rebuild the archive and say so.

    The check at open catches most damage; a bad page deeper in shows only
    when a query reaches it.  Then the archive is set aside and rebuilt at
    once, and a command that writes nothing runs again; one that writes is
    not repeated (part of it may be done), the user is told to run it again.
    """
    from agenvoy_desktop.core.archive import ArchiveDamagedError

    try:
        result: int = args.func(args)
        return result
    except ArchiveDamagedError as exc:
        if args.command == "doctor":
            raise
        notice = _repair_archive(args, exc)
        print(f"agenvoy-desktop: notice: {notice}", file=sys.stderr)
        if args.command not in READ_ONLY_COMMANDS:
            raise CliError("the archive was repaired; run the command again") from exc
    result = args.func(args)
    return result


def _repair_archive(args: argparse.Namespace, exc: BaseException) -> str:
    from agenvoy_desktop.core.recovery import damage_reason, rebuild_archive

    paths = app_paths(args.data_dir).ensure()
    archive, report = rebuild_archive(
        paths.archive_db, paths.sessions_dir, now_ns, damage_reason(exc)
    )
    archive.close()
    return report.notice()


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    return " ".join(text.split()) or type(exc).__name__
