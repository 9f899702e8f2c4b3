"""``agenvoy-desktop models`` and ``setup``: the GGUF models the app runs.

``models`` lists, adds, removes, discovers and verifies them (``models``
alone lists the catalogue); ``setup`` prepares the default ones.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agenvoy_desktop.cli import common
from agenvoy_desktop.cli.common import (
    AddCommand,
    CliError,
    command_adder,
    emit_json,
    profile_options,
)
from agenvoy_desktop.llm.catalogue import ROLES, CatalogueEntry, CatalogueError, ModelCatalogue
from agenvoy_desktop.llm.discovery import DiscoveredModel, discover_gguf_files
from agenvoy_desktop.llm.gguf_info import GgufInfo, ModelFileError


def register_setup(add_command: AddCommand) -> None:
    """Add ``setup`` through build_parser's ``add`` helper."""
    add_command("setup", cmd_setup, "prepare the local models (done automatically on first use)")


def register(add_command: AddCommand) -> None:
    """Add the ``models`` command group through build_parser's ``add`` helper."""
    models = add_command("models", cmd_models_list, "list the chat and embedding models")
    models.add_argument("--json", action="store_true", help="machine-readable list")
    action = command_adder(
        models.add_subparsers(dest="models_command", metavar="ACTION"), profile_options()
    )

    lst = action("list", cmd_models_list, "list the catalogue (the default action)")
    lst.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    add = action("add", cmd_models_add, "add a GGUF file (used where it is unless --copy)")
    add.add_argument("path", type=Path)
    add.add_argument("--name", help="name to refer to it by (default: the file name)")
    add.add_argument("--role", choices=ROLES, default="chat")
    add.add_argument("--copy", action="store_true", help="copy it into the app's models folder")
    action(
        "remove", cmd_models_remove, "forget a model (deletes only the app's own copy)"
    ).add_argument("name")
    disc = action("discover", cmd_models_discover, "find GGUF files other apps downloaded")
    disc.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    action("verify", cmd_models_verify, "re-hash a model against its known sha256").add_argument(
        "name"
    )


# -- commands ----------------------------------------------------------------------
def cmd_setup(args: argparse.Namespace) -> int:
    from agenvoy_desktop.llm.buffer_probe import ensure_verdict
    from agenvoy_desktop.llm.starter import prepare_starter_model
    from agenvoy_desktop.paths import machine_cache_dir

    paths = common.profile_paths(args).ensure()
    common.close_embedder(common.load_embedder(paths))
    starter = prepare_starter_model(
        paths.models_dir, progress=common.fraction_report("starter chat model")
    )
    verdict = ensure_verdict(machine_cache_dir(), starter)  # here, not at the first chat
    print(f"models ready in {paths.models_dir}")
    if verdict is not None:
        state = "on" if verdict.enabled else "off"
        print(f"llama.cpp extra buffers (AMX / repacked kernels): {state} ({verdict.reason})")
    return 0


def cmd_models_list(args: argparse.Namespace) -> int:
    catalogue = _catalogue(args)
    entries = catalogue.entries()
    _note(catalogue)
    if getattr(args, "json", False):
        emit_json([entry_json(e) for e in entries])
        return 0
    if not any(e.source == "starter" for e in entries):
        print("(the starter chat model is not prepared yet: run `agenvoy-desktop setup`)")
    if not entries:
        return 0
    rows = [
        [
            e.name + ("" if e.status == "ok" else f" [{e.status}]"),
            e.role,
            e.source,
            _info_text(e.info, "architecture"),
            format_count(e.info.parameters if e.info else None),
            _info_text(e.info, "context_length"),
            _info_text(e.info, "quantisation"),
            format_size(e.info.size_bytes if e.info else None),
            (e.sha256[:12] + "…") if e.sha256 else "-",
            str(e.path),
        ]
        for e in entries
    ]
    header = ["NAME", "ROLE", "SOURCE", "ARCH", "PARAMS", "CONTEXT", "QUANT", "SIZE", "SHA256"]
    _print_table([[*header, "PATH"], *rows])
    for entry in entries:
        if entry.problem:
            print(f"{entry.name}: {entry.problem}", file=sys.stderr)
    return 0


def cmd_models_add(args: argparse.Namespace) -> int:
    catalogue = _catalogue(args)
    with _user_errors():
        entry = catalogue.add(
            args.path, name=args.name, role=args.role, copy=args.copy, progress=_progress()
        )
    _note(catalogue)
    _clear_progress()
    facts = _facts(entry.info)
    print(f"added {entry.name!r} ({facts}) -> {entry.path}")
    if entry.sha256 is None:
        print(
            f"its sha256 is not recorded yet: `agenvoy-desktop models verify {entry.name}` "
            "hashes it (takes a while for big files)"
        )
    return 0


def cmd_models_remove(args: argparse.Namespace) -> int:
    catalogue = _catalogue(args)
    with _user_errors():
        entry = catalogue.remove(args.name)
    if entry.copied:
        print(f"removed {entry.name!r} and deleted the app's copy {entry.path}")
    else:
        print(f"removed {entry.name!r}; the file {entry.path} was left where it is")
    return 0


def cmd_models_verify(args: argparse.Namespace) -> int:
    catalogue = _catalogue(args)
    with _user_errors():
        result = catalogue.verify(args.name, progress=_fraction_progress(args.name))
    _clear_progress()
    if result.outcome == "recorded":
        print(f"{result.name}: sha256 {result.sha256} recorded (checked against it from now on)")
    else:
        print(f"{result.name}: OK, sha256 {result.sha256} matches")
    return 0


def cmd_models_discover(args: argparse.Namespace) -> int:
    found = discover_gguf_files()
    known = _catalogued_files(_catalogue(args).entries())
    if getattr(args, "json", False):
        emit_json([discovered_json(m, _catalogued_as(known, m.path)) for m in found])
        return 0
    if not found:
        print("no GGUF files found in the usual folders of LM Studio, GPT4All, Jan, Ollama,")
        print("llama.cpp or the Hugging Face cache")
        return 0
    rows = [
        [
            m.app,
            m.display_name,
            _info_text(m.info, "architecture") if m.info else "unreadable",
            format_count(m.info.parameters if m.info else None),
            _info_text(m.info, "quantisation"),
            format_size(m.size_bytes),
            _catalogued_as(known, m.path) or "-",
            str(m.path),
        ]
        for m in found
    ]
    _print_table(
        [["APP", "MODEL", "ARCH", "PARAMS", "QUANT", "SIZE", "CATALOGUED AS", "PATH"], *rows]
    )
    for model in found:
        if model.error:
            print(f"{model.path}: {model.error}", file=sys.stderr)
    print(
        "\nuse one (read in place, never modified):  agenvoy-desktop models add PATH [--name NAME]"
    )
    return 0


# -- JSON shapes -----------------------------------------------------------------------
def entry_json(entry: CatalogueEntry) -> dict[str, Any]:
    """The keys of the ``models`` table (plus status details), for ``--json``."""
    info = entry.info
    return {
        "name": entry.name,
        "role": entry.role,
        "source": entry.source,
        "status": entry.status,
        "architecture": info.architecture if info else None,
        "parameters": info.parameters if info else None,
        "size_label": info.size_label if info else None,
        "context_length": info.context_length if info else None,
        "quantisation": info.quantisation if info else None,
        "has_chat_template": info.has_chat_template if info else None,
        "size_bytes": info.size_bytes if info else None,
        "path": str(entry.path),
        "sha256": entry.sha256,
        "copied": entry.copied,
        "problem": entry.problem,
    }


def discovered_json(model: DiscoveredModel, catalogued_as: str | None) -> dict[str, Any]:
    info = model.info
    return {
        "app": model.app,
        "name": model.display_name,
        "path": str(model.path),
        "size_bytes": model.size_bytes,
        "architecture": info.architecture if info else None,
        "parameters": info.parameters if info else None,
        "context_length": info.context_length if info else None,
        "quantisation": info.quantisation if info else None,
        "has_chat_template": info.has_chat_template if info else None,
        "error": model.error,
        "catalogued_as": catalogued_as,
    }


# -- formatting -------------------------------------------------------------------------
def format_count(n: int | None) -> str:
    """630167424 -> '630M', 22565376 -> '22.6M', 7241732096 -> '7.2B'."""
    if n is None:
        return "-"
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)


def format_size(n: int | None) -> str:
    """491400064 -> '469 MiB', 4.2e9 -> '3.9 GiB'."""
    if n is None:
        return "-"
    size, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}" if unit != "B" and size < 10 else f"{size:.0f} {unit}"


def _facts(info: GgufInfo | None) -> str:
    if info is None:
        return "no header facts"
    parts = [
        info.architecture or "unknown architecture",
        f"{format_count(info.parameters)} parameters",
        info.quantisation or "unknown quantisation",
        f"context {info.context_length}" if info.context_length else "context unknown",
    ]
    if not info.has_chat_template:
        parts.append("no chat template")
    return ", ".join(parts)


def _info_text(info: GgufInfo | None, field: str) -> str:
    value = getattr(info, field, None) if info is not None else None
    return "-" if value is None else str(value)


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]))


# -- plumbing ----------------------------------------------------------------------------
def _catalogue(args: argparse.Namespace) -> ModelCatalogue:
    return ModelCatalogue(common.profile_paths(args).models_dir)


def _note(catalogue: ModelCatalogue) -> None:
    if catalogue.last_problem:
        print(f"agenvoy-desktop: note: {catalogue.last_problem}", file=sys.stderr)


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Catalogue and model-file problems are the user's to fix: one line, exit 1."""
    try:
        yield
    except (CatalogueError, ModelFileError) as exc:
        raise CliError(str(exc)) from exc


def _progress() -> Callable[[float, str], None] | None:
    if not sys.stderr.isatty():
        return None

    def report(fraction: float, what: str) -> None:
        print(f"\r{what} {fraction:4.0%}", end="", file=sys.stderr)

    return report


def _fraction_progress(name: str) -> Callable[[float], None] | None:
    report = _progress()
    if report is None:
        return None
    return lambda fraction: report(fraction, f"hashing {name}")


def _clear_progress() -> None:
    if sys.stderr.isatty():
        print("\r" + " " * 60 + "\r", end="", file=sys.stderr)


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _catalogued_as(known: dict[tuple[int, int], str], path: Path) -> str | None:
    file_id = _file_id(path)
    return None if file_id is None else known.get(file_id)


def _catalogued_files(entries: list[CatalogueEntry]) -> dict[tuple[int, int], str]:
    """(device, inode) -> catalogue name, so a file reached by another path is recognised."""
    known: dict[tuple[int, int], str] = {}
    for entry in entries:
        file_id = _file_id(entry.path)
        if file_id is not None:
            known[file_id] = entry.name
    return known
