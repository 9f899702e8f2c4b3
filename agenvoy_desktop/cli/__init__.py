"""Headless entry points: ``agenvoy-desktop <command>``.

Every command takes ``--data-dir`` (the profile root; default: platformdirs,
or ``AGENVOY_DESKTOP_HOME``).  A failure the user can act on gets one line on
stderr and exit status 1; nothing already stored is altered by a failed
command.  Anything else is a bug: one line that says so and where the log
with its traceback is.  With no command, the window opens.

Each command group lives in its own module and adds its commands through
:func:`build_parser`'s ``add`` helper; what they share is in :mod:`common`.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import sys
from collections.abc import Sequence
from pathlib import Path

from agenvoy_desktop.cli import (
    chat,
    docs,
    doctor,
    errors,
    imports,
    models,
    search,
    sessions,
    summary,
)
from agenvoy_desktop.cli.common import CliError, command_adder, profile_options, run_repairing
from agenvoy_desktop.cli.version import VersionAction
from agenvoy_desktop.core.errors import is_known, one_line
from agenvoy_desktop.llm.buffer_probe import PROBE_FLAG, probe_main
from agenvoy_desktop.paths import app_paths

__all__ = ["CliError", "build_parser", "main"]

log = logging.getLogger("agenvoy_desktop")

LOG_BYTES = 1 << 20
"""The log file rotates at this size, keeping LOG_BACKUPS old ones (as the window's)."""
LOG_BACKUPS = 3


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each module adds its own through ``add``."""
    options = profile_options()
    parser = argparse.ArgumentParser(
        prog="agenvoy-desktop", parents=[options], description="Offline assistant that remembers."
    )
    parser.add_argument("--version", action=VersionAction)
    add = command_adder(parser.add_subparsers(dest="command", metavar="COMMAND"), options)

    imports.register(add)
    search.register(add)
    sessions.register(add)
    doctor.register(add)
    models.register_setup(add)
    models.register(add)
    errors.register(add)
    chat.register(add)
    summary.register(add)
    docs.register(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (or open the window); returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [PROBE_FLAG]:  # the frozen app's executable is also the probe's child
        return probe_main(argv[1:])
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
        return run_repairing(args)
    except KeyboardInterrupt:
        print("agenvoy-desktop: interrupted; what was finished is kept", file=sys.stderr)
        return 130
    except Exception as exc:  # the one place a command's failure becomes an exit status
        if is_known(exc):
            print(f"agenvoy-desktop: error: {one_line(exc)}", file=sys.stderr)
        else:
            log.info("internal error", exc_info=True)  # on the terminal with -v
            _report_bug(args, exc)
    return 1


def _report_bug(args: argparse.Namespace, exc: Exception) -> None:
    """One line that says a bug stopped the command, and where its traceback is."""
    where = _log_bug(app_paths(args.data_dir).log_file, args.command, exc)
    details = f"details in {where}" if where else "details above"
    print(
        f"agenvoy-desktop: internal error: {type(exc).__name__}: {one_line(exc)} ({details})",
        file=sys.stderr,
    )


def _log_bug(path: Path, command: str, exc: Exception) -> Path | None:
    """Write *exc* with its traceback to the app's log; None (traceback on stderr) if it cannot.

    The log is opened only now: a command that works leaves no file behind.
    """
    bugs = logging.getLogger("agenvoy_desktop.cli.bugs")
    bugs.propagate = False  # the traceback goes to the file, not the terminal
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        )
        written: Path | None = path
    except OSError:
        handler, written = logging.StreamHandler(sys.stderr), None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    bugs.addHandler(handler)
    try:
        bugs.error("internal error in `%s`", command, exc_info=exc)
    finally:
        bugs.removeHandler(handler)
        handler.close()
    return written
