"""What every command group of the CLI shares.

The error type a command raises for the user, the option checks, the
profile options every parser accepts, JSON and progress output, opening the
profile's memory (and the embedding model), and running a command with one
repair of an archive found damaged on the way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.cli.safe_text import json_shown, shown, shown_line
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.timeutil import now_ns, parse_iso_in_range
from agenvoy_desktop.paths import HOME_ENV, AppPaths, app_paths
from agenvoy_desktop.settings import Settings, load_settings

if TYPE_CHECKING:  # imported where used: a command loads only the libraries it needs
    from agenvoy_desktop.agent.services import AppServices
    from agenvoy_desktop.core.embedding import TextEmbedder
    from agenvoy_desktop.core.store import MemoryStore

Command = Callable[[argparse.Namespace], int]
"""A command's handler: the parsed arguments in, the exit status out."""
AddCommand = Callable[[str, Command, str], argparse.ArgumentParser]
"""``add(name, handler, help)``: how build_parser lets a module add its commands."""
Progress = Callable[[int, int], None]
"""``progress(done, total)``."""


class CliError(KnownError):
    """A user-facing failure: printed as one line, exit status 1."""


MAX_RESULTS = 1000
"""The most results a ``--limit`` may ask for: more is no longer a search."""
SQLITE_INT_MAX = 2**63 - 1
"""The largest id SQLite can store; a bigger one would be an overflow, not a miss."""
READ_ONLY_COMMANDS = frozenset({"search", "sessions", "stats"})
"""Commands that write nothing, so running them again after a repair repeats nothing."""


# -- options ----------------------------------------------------------------------
def command_adder(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    options: argparse.ArgumentParser,
    handler_key: str = "func",
) -> AddCommand:
    """``add(name, handler, help)`` for the commands (or one command's actions) of *sub*.

    Each shares *options* (``--data-dir``, ``-v``, ...) and stores its
    handler under *handler_key*, where the caller's dispatch looks for it.
    """

    def add(name: str, func: Command, text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[options], help=text, description=text)
        cmd.set_defaults(**{handler_key: func})
        return cmd

    return add


def profile_options() -> argparse.ArgumentParser:
    """A parent parser with ``--data-dir`` and ``-v``, accepted before or after a command.

    Defaults are suppressed so an option given early is not overwritten by
    a subcommand's default.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help=f"profile folder (default: platform dirs, or ${HOME_ENV})",
    )
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
    return common


def in_range(name: str, value: int, low: int, high: int) -> int:
    """Return *value* if ``low <= value <= high``, else a one-line :class:`CliError`.

    argparse's ``type=int`` takes any size of integer; a range check at the
    command keeps ``--limit 99999999999999999999`` from reaching SQLite.
    """
    if not low <= value <= high:
        raise CliError(f"{name} must be between {low} and {high}, got {value}")
    return value


def time_option(name: str, text: str | None) -> int | None:
    """An ISO 8601 ``--since``/``--until``, parsed and range-checked (None when absent)."""
    if text is None:
        return None
    try:
        return parse_iso_in_range(text)
    except ValueError as exc:
        raise CliError(f"{name}: {exc}") from None


def profile_paths(args: argparse.Namespace) -> AppPaths:
    """The profile the command works on (``--data-dir``, else the default one)."""
    return app_paths(getattr(args, "data_dir", None))


def writable_profile(args: argparse.Namespace) -> AppPaths:
    """The profile, for a command about to write into it outside the memory store.

    As :func:`~agenvoy_desktop.core.startup.open_memory` does it: owner-only
    (0700 / 0600, not the umask's 0644), and stamped with its format, an
    older profile backed up first.  A profile first written by ``errors`` or
    ``models use`` was left readable by others and unstamped, so the next
    command took it for one from before the stamp: "This profile was
    upgraded" on a brand-new profile, and a backup of nothing to upgrade.
    """
    from agenvoy_desktop.core.profile import prepare_profile

    paths = profile_paths(args).ensure()
    backup = prepare_profile(paths)
    if backup is not None:
        notice(f"This profile was upgraded; its earlier files are kept in {backup}.")
    return paths


def settings_of(args: argparse.Namespace) -> Settings:
    """The profile's settings.json, as the window reads it (defaults when absent)."""
    return load_settings(profile_paths(args).settings_file)


# -- output -----------------------------------------------------------------------
def emit_json(data: object) -> None:
    """*data* as indented JSON on stdout (non-ASCII kept readable, controls escaped)."""
    sys.stdout.write(json_shown(json.dumps(data, ensure_ascii=False, indent=2)) + "\n")


def clip(text: str, width: int = 160) -> str:
    """*text* on one line, cut to *width* characters with an ellipsis, ready to print.

    Control characters are escaped after the cut (:func:`~.safe_text.shown_line`).
    """
    flat = " ".join(text.split())
    return shown_line(flat if len(flat) <= width else flat[: width - 1] + "…")


def notice(text: str) -> None:
    """Something the user should know that is not the command's output (stderr)."""
    print(f"agenvoy-desktop: notice: {shown(text)}", file=sys.stderr)


def progress_bar(desc: str) -> Progress:
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


def fraction_report(label: str) -> Callable[[float, str], None]:
    """Progress on a terminal: one rewritten line (silent when stderr is not a tty)."""

    def report(fraction: float, what: str) -> None:
        if sys.stderr.isatty():
            end = "\n" if fraction >= 1 else ""
            print(f"\rpreparing {label}: {what} {fraction:4.0%}", end=end, file=sys.stderr)

    return report


# -- models and stores --------------------------------------------------------------
def load_embedder(paths: AppPaths) -> TextEmbedder:
    """The embedding model the window would use: settings.json's choice and thread count."""
    from agenvoy_desktop.llm.catalogue import ModelCatalogue
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.llm.model_prep import prepare_embedding_model

    models = load_settings(paths.settings_file).models
    if models.embedding_model:
        model = ModelCatalogue(paths.models_dir).resolve(models.embedding_model, "embedding")
    else:
        progress = fraction_report("embedding model")
        model = prepare_embedding_model(paths.models_dir, progress=progress)
    return Embedder(model, n_threads=models.threads)


def close_embedder(embedder: TextEmbedder | None) -> None:
    """Stop the model's thread, for embedders that have one."""
    close = getattr(embedder, "close", None)
    if close is not None:
        close()


@contextlib.contextmanager
def open_store(
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
    from agenvoy_desktop.core.startup import open_memory

    paths = profile_paths(args)
    settings = settings or settings_of(args)
    embedder = load_embedder(paths) if embed else None
    try:
        with open_memory(
            paths,
            embedder,
            max_history_bytes=settings.memory.max_history_bytes,
            reconcile=reconcile,
            repair_damage=repair_damage,
        ) as store:
            for text in store.notices if say_notices else ():
                notice(text)
            if embedder is not None and top_up:
                _top_up_vectors(store, top_up)
            yield store
    finally:
        close_embedder(embedder)


def _top_up_vectors(store: MemoryStore, sessions: Sequence[str | None]) -> None:
    """Embed the messages of *sessions* (None: every session) that have no vector yet."""
    wanted = None if None in sessions else set(sessions)
    todo = {sid: n for sid, n in store.missing_vectors.items() if wanted is None or sid in wanted}
    if todo:
        progress = progress_bar("embedding messages that lack a vector")
        total, done = sum(todo.values()), 0
        for sid in todo:
            done += store.index_pending(sid, progress=_offset(progress, done, total))
            store.missing_vectors.pop(sid, None)
        progress(total, total)


def _offset(progress: Progress, base: int, total: int) -> Progress:
    """One session's ``(done, _)`` reported as part of a job of *total* (after *base*)."""
    return lambda done, _total: progress(base + done, total)


@contextlib.contextmanager
def open_services(args: argparse.Namespace) -> Iterator[AppServices]:
    """The window's services (models, memory, agent) for ``chat`` and ``summarize``."""
    from agenvoy_desktop.agent.services import AppServices

    services = AppServices.start(profile_paths(args), progress=fraction_report("models"))
    try:
        if services.chat_model is None:
            problem = services.chat_problem
            raise CliError(f"{problem.message} {problem.fix}" if problem else "no chat model")
        yield services
    finally:
        services.close()


# -- running ------------------------------------------------------------------------
def run_repairing(args: argparse.Namespace) -> int:
    """Run the command; if it hits a damaged archive, rebuild the archive and say so.

    The check at open catches most damage; a bad page deeper in shows only
    when a query reaches it.  Then the archive is set aside and rebuilt at
    once, and a command that writes nothing runs again; one that writes is
    not repeated (part of it may be done), the user is told to run it again.
    """
    from agenvoy_desktop.core.archive import ArchiveDamagedError
    from agenvoy_desktop.core.profile import check_profile

    check_profile(profile_paths(args))  # a newer profile: one line, and nothing touched
    try:
        result: int = args.func(args)
        return result
    except ArchiveDamagedError as exc:
        if args.command == "doctor":
            raise
        notice(_repair_archive(args, exc))
        if args.command not in READ_ONLY_COMMANDS:
            raise CliError("the archive was repaired; run the command again") from exc
    result = args.func(args)
    return result


def _repair_archive(args: argparse.Namespace, exc: BaseException) -> str:
    from agenvoy_desktop.core.recovery import damage_reason, rebuild_archive

    paths = profile_paths(args).ensure()
    archive, report = rebuild_archive(
        paths.archive_db, paths.sessions_dir, now_ns, damage_reason(exc)
    )
    archive.close()
    return report.notice()
