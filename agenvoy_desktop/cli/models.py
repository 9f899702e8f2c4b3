"""``agenvoy-desktop models`` and ``setup``: the GGUF models the app runs, and endpoints.

``models`` lists, adds, removes, discovers and verifies them (``models``
alone lists the catalogue); ``setup`` prepares the default ones.  Chat
endpoints (OpenAI-compatible servers) are added, removed and looked for
here too (``add-endpoint``, ``remove-endpoint``, ``find-servers``), and
``use`` picks the chat model, local or endpoint.  The endpoint code (and
httpx) is imported only by the commands that need it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.cli import common
from agenvoy_desktop.cli.common import (
    AddCommand,
    CliError,
    command_adder,
    emit_json,
    profile_options,
)
from agenvoy_desktop.cli.safe_text import shown_line
from agenvoy_desktop.llm.catalogue import ROLES, CatalogueEntry, CatalogueError, ModelCatalogue
from agenvoy_desktop.llm.discovery import DiscoveredModel, discover_gguf_files
from agenvoy_desktop.llm.gguf_info import GgufInfo, ModelFileError

if TYPE_CHECKING:
    from agenvoy_desktop.llm.endpoints import Endpoint, RemoteModel
    from agenvoy_desktop.settings import ModelSettings

log = logging.getLogger(__name__)


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
    _register_endpoints(action)


def _register_endpoints(action: AddCommand) -> None:
    """The endpoint actions and ``use``."""
    add = action("add-endpoint", cmd_models_add_endpoint, "add an OpenAI-compatible chat server")
    add.add_argument("url", help="its address, e.g. http://127.0.0.1:11434 (/v1 is added)")
    add.add_argument("--name", help="name to refer to it by (default: the model id)")
    add.add_argument("--model", help="model id on the server (needed when it serves several)")
    add.add_argument("--api-key-env", metavar="VAR", help="environment variable with the API key")
    add.add_argument(
        "--keyring", action="store_true", help="ask for the API key and keep it in the OS keyring"
    )
    add.add_argument(
        "--yes-remote",
        action="store_true",
        help="confirm that conversation text may be sent to a server on another machine",
    )
    add.add_argument("--timeout", type=float, default=5.0, help=argparse.SUPPRESS)
    add.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    action(
        "remove-endpoint", cmd_models_remove_endpoint, "forget an endpoint (and its keyring key)"
    ).add_argument("name")
    find = action(
        "find-servers", cmd_models_find_servers, "look for Ollama, LM Studio or llama.cpp here"
    )
    find.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    use = action("use", cmd_models_use, "choose the chat model (a model or endpoint name)")
    use.add_argument("name", help="a chat model, an endpoint (endpoint:NAME) or 'default'")


# -- commands ----------------------------------------------------------------------
def cmd_setup(args: argparse.Namespace) -> int:
    from agenvoy_desktop.llm.buffer_probe import ensure_verdict
    from agenvoy_desktop.llm.model_prep import prepare_optional_models
    from agenvoy_desktop.llm.starter import prepare_starter_model
    from agenvoy_desktop.paths import machine_cache_dir

    paths = common.profile_paths(args).ensure()
    prepare_optional_models(paths.models_dir, common.fraction_report("multilingual-e5-small"))
    common.close_embedder(common.load_embedder(paths))
    starter = prepare_starter_model(
        paths.models_dir, progress=common.fraction_report("starter chat model")
    )
    verdict = ensure_verdict(machine_cache_dir(), starter)  # here, not at the first chat
    print(f"models ready in {paths.models_dir}")
    if verdict is not None:
        state = "on" if verdict.enabled else "off"
        print(f"llama.cpp extra buffers (AMX / repacked kernels): {state} ({verdict.reason})")
    print("llama.cpp prompt batch and flash attention for the starter (measured once per machine)…")
    batch = _calibrate_starter(starter, common.settings_of(args).models)
    if batch is not None:
        print(f"llama.cpp prompt batch for the starter: {batch}")
    return 0


def _calibrate_starter(starter: Path, settings: ModelSettings) -> str | None:
    """Measure the starter's prompt batch and flash attention now (stored per machine), not at
    the first answer.

    The engine calibrates at a model's first load on a machine; doing it here
    keeps those seconds out of the first answer in the window.  A failure is
    only logged: the engine keeps llama.cpp's default batch.
    """
    from agenvoy_desktop.core.errors import KnownError
    from agenvoy_desktop.llm.engine import ChatEngine

    engine = ChatEngine.from_settings(starter, settings)
    try:
        asyncio.run(engine.load())
    except KnownError as exc:  # the app still starts; the engine retries at its first load
        log.warning("prompt batch calibration skipped: %s", exc)
        return None
    finally:
        engine.close()
    found = engine.calibration
    return None if found is None else found.summary()


def cmd_models_list(args: argparse.Namespace) -> int:
    catalogue = _catalogue(args)
    entries = catalogue.entries()
    _note(catalogue)
    endpoints = _endpoints(args)
    if getattr(args, "json", False):
        emit_json([entry_json(e) for e in entries] + [endpoint_json(e) for e in endpoints])
        return 0
    if not any(e.source == "starter" for e in entries):
        print("(the starter chat model is not prepared yet: run `agenvoy-desktop setup`)")
    if not entries and not endpoints:
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
    _print_table([[*header, "PATH"], *rows, *_endpoint_rows(endpoints)])
    for entry in entries:
        if entry.problem:
            print(shown_line(f"{entry.name}: {entry.problem}"), file=sys.stderr)
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
            print(shown_line(f"{model.path}: {model.error}"), file=sys.stderr)
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
    """Aligned columns; names, metadata and paths come from files: shown escaped."""
    rows = [[shown_line(cell) for cell in row] for row in rows]
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


# -- endpoints ---------------------------------------------------------------------------
REMOTE_REFUSAL = (
    "{url} is on another machine: your messages, and the memory recalled into each prompt, "
    "will be sent there; add --yes-remote to confirm"
)


def cmd_models_add_endpoint(args: argparse.Namespace) -> int:
    """Probe the server, pick its model, record it (the key goes to the keyring or stays in env)."""
    from agenvoy_desktop.llm import endpoints as ep

    url = ep.normalise_url(args.url)
    remote = not ep.is_loopback(url)
    if remote and not args.yes_remote:
        raise CliError(REMOTE_REFUSAL.format(url=url))
    key = _api_key(args)
    model = _pick_model(ep.probe(url, key, timeout=args.timeout), args.model, url)
    registry = ep.EndpointRegistry(common.writable_profile(args).models_dir)
    endpoint = registry.add(
        url,
        model.id,
        name=args.name,
        context_size=model.context_size,
        parameters=model.parameters,
        api_key_env=args.api_key_env,
        keyring=args.keyring,
        remote_confirmed=args.yes_remote,
        preset=_preset_of(url),
    )
    if args.keyring and key:
        try:
            ep.store_api_key(endpoint.name, key)
        except BaseException:
            registry.remove(endpoint.name)
            raise
    if getattr(args, "json", False):
        emit_json(endpoint_json(endpoint))
        return 0
    context = f"context {model.context_size} tokens" if model.context_size else "context unknown"
    where = "remote: conversation text is sent to it" if remote else "on this machine"
    print(f"added endpoint {endpoint.name!r}: {model.id} at {url}, {context} ({where})")
    print(f"use it for chat:  agenvoy-desktop models use {endpoint.choice}")
    return 0


def cmd_models_remove_endpoint(args: argparse.Namespace) -> int:
    from agenvoy_desktop.llm.endpoints import EndpointRegistry
    from agenvoy_desktop.settings import save_settings

    paths = common.profile_paths(args)
    endpoint = EndpointRegistry(paths.models_dir).remove(args.name)
    print(f"removed endpoint {endpoint.name!r} ({endpoint.model} at {endpoint.base_url})")
    settings = common.settings_of(args)
    if settings.models.chat_model == endpoint.choice:
        settings.models.chat_model = ""
        save_settings(common.writable_profile(args).settings_file, settings)
        print("it was the chat model: the starter chat model is used again")
    return 0


def cmd_models_find_servers(args: argparse.Namespace) -> int:
    """Ask this machine's usual ports (loopback only) for a running chat server."""
    from agenvoy_desktop.llm.endpoints import PRESET_LABELS, PRESETS, look_for_servers

    found = look_for_servers()
    if getattr(args, "json", False):
        emit_json(
            [
                {
                    "preset": s.preset,
                    "label": s.label,
                    "base_url": s.base_url,
                    "models": [{"id": m.id, "context_size": m.context_size} for m in s.models],
                }
                for s in found
            ]
        )
        return 0
    if not found:
        asked = ", ".join(f"{PRESET_LABELS[p]} ({port})" for p, port in PRESETS.items())
        print(f"no chat server is running on this machine (asked 127.0.0.1 for {asked})")
        return 0
    rows = [
        [s.label, m.id, str(m.context_size or "-"), s.base_url]
        for s in found
        for m in (s.models or [])
    ]
    _print_table([["SERVER", "MODEL", "CONTEXT", "URL"], *rows])
    print("\nadd one:  agenvoy-desktop models add-endpoint URL [--model MODEL]")
    return 0


def cmd_models_use(args: argparse.Namespace) -> int:
    """Save the chat model choice (read by ``chat`` and the window when they start)."""
    from agenvoy_desktop.settings import save_settings

    paths = common.profile_paths(args)
    choice, shown = _chat_choice(args.name, paths.models_dir)
    settings = common.settings_of(args)
    settings.models.chat_model = choice
    save_settings(common.writable_profile(args).settings_file, settings)
    print(f"chat model: {shown}")
    return 0


def _chat_choice(name: str, models_dir: Path) -> tuple[str, str]:
    """(``models.chat_model`` value, words for the user) for a model or endpoint name."""
    from agenvoy_desktop.llm.endpoints import EndpointConfigError, EndpointRegistry, endpoint_name

    text = name.strip()
    if text.casefold() in ("", "default", "starter"):
        return "", "the starter chat model (the default)"
    registry = EndpointRegistry(models_dir)
    if endpoint_name(text) is None:
        catalogue = ModelCatalogue(models_dir)
        try:
            entry = catalogue.get(text)
        except CatalogueError:
            entry = None
        if entry is not None:
            if not entry.serves("chat"):
                raise CliError(f"{entry.name!r} is an embedding model, not a chat model")
            return ("" if entry.default else entry.name), f"{entry.name} (llama.cpp, in-process)"
    try:
        endpoint = registry.get(text)
    except EndpointConfigError as exc:
        raise CliError(
            f"no chat model or endpoint named {text!r}; see `agenvoy-desktop models list`"
        ) from exc
    if endpoint.remote and not endpoint.remote_confirmed:
        raise CliError(REMOTE_REFUSAL.format(url=endpoint.base_url) + " when adding it again")
    where = "remote endpoint" if endpoint.remote else "endpoint"
    return endpoint.choice, f"{endpoint.name} ({endpoint.model} at {endpoint.base_url}, {where})"


def _api_key(args: argparse.Namespace) -> str | None:
    """The key to probe with: from --api-key-env, or typed for --keyring; None without one."""
    from agenvoy_desktop.llm.endpoints import keyring_problem

    if args.api_key_env and args.keyring:
        raise CliError("choose one place for the API key: --keyring or --api-key-env")
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "").strip()
        if not key:
            raise CliError(
                f"the environment variable {args.api_key_env} is not set; "
                "set it to the API key and run the command again"
            )
        return key
    if not args.keyring:
        return None
    problem = keyring_problem()
    if problem:
        raise CliError(problem)
    if sys.stdin.isatty():
        import getpass

        key = getpass.getpass("API key (kept in the OS keyring): ").strip()
    else:
        key = sys.stdin.readline().strip()
    if not key:
        raise CliError("no API key was given")
    return key


def _pick_model(models: Sequence[RemoteModel], wanted: str | None, url: str) -> RemoteModel:
    """The model to use: --model if the server has it, else its only one."""
    ids = [m.id for m in models]
    listed = ", ".join(ids[:20]) + (", …" if len(ids) > 20 else "")
    if not models:
        raise CliError(f"{url} lists no models; load or pull one on the server first")
    if wanted is not None:
        match = next((m for m in models if m.id == wanted), None) or next(
            (m for m in models if m.id.casefold() == wanted.casefold()), None
        )
        if match is None:
            raise CliError(f"{url} has no model {wanted!r}; it offers: {listed}")
        return match
    if len(models) == 1:
        return models[0]
    raise CliError(f"{url} offers {len(models)} models; choose one with --model: {listed}")


def _preset_of(url: str) -> str | None:
    """The known local server behind *url*, by its default port (loopback only)."""
    from urllib.parse import urlsplit

    from agenvoy_desktop.llm.endpoints import PRESETS, is_loopback

    if not is_loopback(url):
        return None
    port = urlsplit(url).port
    return next((preset for preset, p in PRESETS.items() if p == port), None)


def _endpoints(args: argparse.Namespace) -> list[Endpoint]:
    from agenvoy_desktop.llm.endpoints import EndpointRegistry

    registry = EndpointRegistry(common.profile_paths(args).models_dir)
    entries = registry.entries()
    if registry.last_problem:
        print(f"agenvoy-desktop: note: {registry.last_problem}", file=sys.stderr)
    return entries


def _endpoint_rows(endpoints: list[Endpoint]) -> list[list[str]]:
    """``models list`` rows for the endpoints, in the catalogue's columns."""
    from agenvoy_desktop.llm.endpoints import parameters_from_name

    return [
        [
            e.name,
            "chat",
            "remote endpoint" if e.remote else "endpoint",
            "-",
            format_count(parameters_from_name(e.model)),
            str(e.context_size or "-"),
            "-",
            "-",
            "-",
            f"{e.model} at {e.base_url}",
        ]
        for e in endpoints
    ]


def endpoint_json(endpoint: Endpoint) -> dict[str, Any]:
    """An endpoint in ``models list --json`` (beside the catalogue's entries); never a key."""
    key = (
        f"env:{endpoint.api_key_env}"
        if endpoint.api_key_env
        else ("keyring" if endpoint.keyring else None)
    )
    return {
        "name": endpoint.name,
        "role": "chat",
        "source": "endpoint",
        "status": "ok",
        "choice": endpoint.choice,
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "context_length": endpoint.context_size,
        "remote": endpoint.remote,
        "remote_confirmed": endpoint.remote_confirmed,
        "api_key": key,
        "preset": endpoint.preset,
    }
