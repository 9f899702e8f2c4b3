"""A short command imports only its own command group, and no heavy library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agenvoy_desktop import cli

HEAVY = ("numpy", "hnswlib", "llama_cpp", "PySide6", "qasync")


def _subcommands(parser: object) -> set[str]:
    actions = getattr(parser, "_subparsers")._group_actions  # noqa: B009 - argparse internals
    return {name for action in actions for name in action.choices}


def test_each_command_is_registered_by_the_module_named_for_it() -> None:
    full = _subcommands(cli.build_parser())
    assert set(cli.COMMAND_MODULES) == full
    for command, module in cli.COMMAND_MODULES.items():
        assert command in _subcommands(cli.build_parser(module)), command


@pytest.mark.parametrize(
    "argv",
    [
        ["--data-dir", "D", "sessions", "--json"],
        ["sessions", "list", "-v"],
        ["-v", "stats", "--session", "s1"],
        ["remove", "s1", "--data-dir", "D"],
        ["search", "kyoto", "--limit", "3"],
        ["doctor", "--repair"],
    ],
)
def test_the_one_module_parser_parses_like_the_whole_one(argv: list[str]) -> None:
    only = cli.build_parser(cli.COMMAND_MODULES[cli.command_of(argv) or ""])
    assert vars(only.parse_args(argv)) == vars(cli.build_parser().parse_args(argv))


def test_command_of_skips_the_profile_options() -> None:
    assert cli.command_of(["--data-dir", "sessions", "stats"]) == "stats"
    assert cli.command_of(["--data-dir=x", "-v", "sessions"]) == "sessions"
    assert cli.command_of(["--help"]) is None
    assert cli.command_of([]) is None


def test_the_window_builds_no_command_parser_and_help_builds_all() -> None:
    assert cli._parser_module(["--data-dir", "x", "-v"]) == ""
    assert cli._parser_module(["--help"]) is None
    assert cli._parser_module(["--version"]) is None
    assert cli._parser_module(["sesions"]) is None  # a typo gets the whole parser's error
    assert cli._parser_module(["stats", "-h"]) == "sessions"


def test_sessions_loads_no_heavy_library(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from agenvoy_desktop.cli import main\n"
        f"status = main(['--data-dir', {str(tmp_path)!r}, 'sessions'])\n"
        f"print(status, sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.splitlines()[-1] == "0 []"
