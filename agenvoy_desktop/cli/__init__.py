"""Headless entry points: ``agenvoy-desktop <command>``.

Every command takes ``--data-dir`` (the profile root; default: platformdirs,
or ``AGENVOY_DESKTOP_HOME``).  A failure the user can act on gets one line on
stderr and exit status 1; nothing already stored is altered by a failed
command.  Anything else is a bug: one line that says so and where the log
with its traceback is.  With no command, the window opens.

What a command prints on stdout goes through :mod:`output_guard`: control
characters from stored text are shown escaped, and a reader that closes the
pipe early (``| head``) ends the output quietly, exit status 141.

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
from types import ModuleType

from agenvoy_desktop.cli.common import CliError, command_adder, profile_options, run_repairing
from agenvoy_desktop.cli.output_guard import READER_GONE_STATUS, guarded_stdout, stderr_or_null
from agenvoy_desktop.cli.safe_text import shown_line
from agenvoy_desktop.cli.version import VersionAction
from agenvoy_desktop.core.errors import is_known, one_line
from agenvoy_desktop.llm.buffer_probe import PROBE_FLAG, probe_main
from agenvoy_desktop.paths import app_paths

__all__ = ["CliError", "build_parser", "main"]

log = logging.getLogger("agenvoy_desktop")

LOG_BYTES = 1 << 20
"""The log file rotates at this size, keeping LOG_BACKUPS old ones (as the window's)."""
LOG_BACKUPS = 3


REGISTRATIONS = (
    ("imports", "register"),
    ("search", "register"),
    ("sessions", "register"),
    ("doctor", "register"),
    ("models", "register_setup"),
    ("models", "register"),
    ("errors", "register"),
    ("chat", "register"),
    ("summary", "register"),
    ("docs", "register"),
)
"""(module of this package, its function that adds commands), in ``--help`` order."""
COMMAND_MODULES = {
    "import": "imports",
    "search": "search",
    "sessions": "sessions",
    "stats": "sessions",
    "reset": "sessions",
    "remove": "sessions",
    "doctor": "doctor",
    "chat": "chat",
    "summarize": "summary",
    "setup": "models",
    "models": "models",
    "errors": "errors",
    "docs": "docs",
}
"""The module that adds each command: only that one is imported to run the command.

Importing every command group costs most of a short command's time (the
document indexer, the error memory, the model catalogue each pull in their
libraries); ``sessions`` needs none of them.  ``--help``, ``--version`` and
a command not named here build the whole parser.
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of module *only*'s ("": none); each module adds its own."""
    options = profile_options()
    parser = argparse.ArgumentParser(
        prog="agenvoy-desktop", parents=[options], description="Offline assistant that remembers."
    )
    parser.add_argument("--version", action=VersionAction)
    add = command_adder(parser.add_subparsers(dest="command", metavar="COMMAND"), options)
    for module, function in REGISTRATIONS:
        if only is None or module == only:
            getattr(_command_module(module), function)(add)
    return parser


def _command_module(name: str) -> ModuleType:
    """The command module *name*, imported now.

    Plain import statements, not ``importlib``: the frozen build's analysis
    finds a module only through an import it can read.
    """
    match name:
        case "imports":
            from agenvoy_desktop.cli import imports

            return imports
        case "search":
            from agenvoy_desktop.cli import search

            return search
        case "sessions":
            from agenvoy_desktop.cli import sessions

            return sessions
        case "doctor":
            from agenvoy_desktop.cli import doctor

            return doctor
        case "models":
            from agenvoy_desktop.cli import models

            return models
        case "errors":
            from agenvoy_desktop.cli import errors

            return errors
        case "chat":
            from agenvoy_desktop.cli import chat

            return chat
        case "summary":
            from agenvoy_desktop.cli import summary

            return summary
        case "docs":
            from agenvoy_desktop.cli import docs

            return docs
    raise ValueError(f"no command module {name!r}")


def _parser_module(argv: Sequence[str]) -> str | None:
    """The one command module *argv* needs ("": none, the window), or None for all of them."""
    command = command_of(argv)
    if command is None:
        return None if {"-h", "--help", "--version"} & set(argv) else ""
    return COMMAND_MODULES.get(command)


def command_of(argv: Sequence[str]) -> str | None:
    """The command *argv* names (after any ``--data-dir``/``-v``), or None."""
    _known, rest = profile_options().parse_known_args(list(argv))
    return rest[0] if rest and not rest[0].startswith("-") else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (or open the window); returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stderr_or_null()
    if argv[:1] == [PROBE_FLAG]:  # the frozen app's executable is also the probe's child
        return probe_main(argv[1:])
    parser = build_parser(_parser_module(argv))
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
    with guarded_stdout() as stdout:
        status = _run(args)
    return READER_GONE_STATUS if stdout.reader_gone else status


def _run(args: argparse.Namespace) -> int:
    """The command's exit status; its failure said in one line on stderr."""
    try:
        return run_repairing(args)
    except KeyboardInterrupt:
        print("agenvoy-desktop: interrupted; what was finished is kept", file=sys.stderr)
        return 130
    except Exception as exc:  # the one place a command's failure becomes an exit status
        if is_known(exc):
            print(f"agenvoy-desktop: error: {shown_line(one_line(exc))}", file=sys.stderr)
        else:
            log.info("internal error", exc_info=True)  # on the terminal with -v
            _report_bug(args, exc)
    return 1


def _report_bug(args: argparse.Namespace, exc: Exception) -> None:
    """One line that says a bug stopped the command, and where its traceback is."""
    where = _log_bug(app_paths(args.data_dir).log_file, args.command, exc)
    details = f"details in {where}" if where else "details above"
    print(
        f"agenvoy-desktop: internal error: {type(exc).__name__}: {shown_line(one_line(exc))}"
        f" ({details})",
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
