"""``agenvoy-desktop sessions``, ``stats``, ``reset`` and ``remove``: the sessions of a profile.

``sessions settings SID`` shows a session's own settings (its system prompt
and whether it uses tools and memory search) and changes them when asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import replace
from typing import Any

from agenvoy_desktop.cli.common import (
    AddCommand,
    command_adder,
    emit_json,
    notice,
    open_store,
    profile_options,
)
from agenvoy_desktop.cli.safe_text import shown, shown_line
from agenvoy_desktop.core.profile import copies_kept_aside
from agenvoy_desktop.core.session_settings import SessionSettings
from agenvoy_desktop.core.store import SessionInfo, check_session_id
from agenvoy_desktop.core.timeutil import format_local
from agenvoy_desktop.operations import session_settings as settings_ops
from agenvoy_desktop.operations import sessions as session_ops
from agenvoy_desktop.paths import HOME_ENV, AppPaths


def register(add: AddCommand) -> None:
    """Add the session commands through build_parser's ``add`` helper."""
    ses = add("sessions", cmd_sessions, "list sessions")
    ses.add_argument("--json", action="store_true")
    action = command_adder(
        ses.add_subparsers(dest="sessions_command", metavar="ACTION"), profile_options()
    )
    action("list", cmd_sessions, "list sessions (the default action)").add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS
    )
    _register_settings(action)
    sts = add("stats", cmd_stats, "memory statistics")
    sts.add_argument("--session")
    sts.add_argument("--json", action="store_true")
    reset = add(
        "reset", cmd_reset, "clear a session's history, vectors and archive (keeps its summary)"
    )
    reset.add_argument("session_id")
    reset.add_argument(
        "--clear-summary",
        action="store_true",
        help="clear the session's rolling summary too (the window's Reset, Summary Too)",
    )
    add("remove", cmd_remove, "delete a session and everything of it").add_argument("session_id")


def cmd_sessions(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        infos = session_ops.list_sessions(store, vectors=args.json)
    if args.json:
        emit_json([_info_json(i) for i in infos])
        return 0
    if not infos:
        print("no sessions")
    for info in infos:
        print(
            f"{info.session_id:<14} {format_local(info.updated_ns) if info.updated_ns else '-':<17}"
            f" {info.history_messages:>6} recent {info.archived_messages:>7} archived "
            f"{info.history_bytes / 1024:>8.1f} KiB  {shown_line(info.title or '')}"
        )
    return 0


def _info_json(info: SessionInfo) -> dict[str, Any]:
    return dataclasses.asdict(info)


def cmd_stats(args: argparse.Namespace) -> int:
    if args.session is not None:
        check_session_id(args.session)
    with open_store(args, embed=False) as store:
        if args.session is not None:
            data: dict[str, Any] = session_ops.session_stats(store, args.session)
        else:
            data = session_ops.profile_stats(store)
            data["data_dir"] = str(
                store.paths.config_dir.parent
                if os.environ.get(HOME_ENV) or args.data_dir
                else store.paths.config_dir
            )
    if args.json:
        emit_json(data)
    else:
        for key, value in data.items():
            if key != "events":
                print(f"{key:>18}: {shown_line(str(value))}")
        for event in data.get("events", []):
            print(f"{'event':>18}: {shown_line(str(event))}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        session_ops.reset_session(store, args.session_id, clear_summary=args.clear_summary)
        _tell_copies_kept_aside(store.paths)
    print(f"reset {args.session_id}{' and its summary' if args.clear_summary else ''}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        session_ops.remove_session(store, args.session_id)
        _tell_copies_kept_aside(store.paths)
    print(f"removed {args.session_id}")
    return 0


def _tell_copies_kept_aside(paths: AppPaths) -> None:
    """Say (stderr) which copies the app set aside earlier may still hold the words just
    cleared: a reset or remove does not change them (:func:`profile.copies_kept_aside`)."""
    copies = copies_kept_aside(paths)
    if copies:
        listed = "\n".join(f"  {shown_line(str(path))}" for path in copies)
        print(
            f"note: {len(copies)} older cop{'y' if len(copies) == 1 else 'ies'} the app set "
            "aside (a backup before a format upgrade, a damaged archive) may still hold "
            f"these words; delete {'it' if len(copies) == 1 else 'them'} by hand if they "
            f"must go too:\n{listed}",
            file=sys.stderr,
        )


# -- a session's settings ------------------------------------------------------------
def _register_settings(action: AddCommand) -> None:
    cfg = action(
        "settings", cmd_settings, "show or change a session's system prompt and tools switch"
    )
    cfg.add_argument("session_id")
    prompt = cfg.add_mutually_exclusive_group()
    prompt.add_argument(
        "--system-prompt", metavar="TEXT", help="the session's own system prompt (- reads stdin)"
    )
    prompt.add_argument(
        "--default-prompt", action="store_true", help="go back to the default system prompt"
    )
    cfg.add_argument(
        "--tools", choices=("on", "off"), help="off: plain chat, no tools and no memory search"
    )
    cfg.add_argument("--json", action="store_true", default=argparse.SUPPRESS)


def cmd_settings(args: argparse.Namespace) -> int:
    sid = check_session_id(args.session_id)
    with open_store(args, embed=False) as store:
        reading = settings_ops.read_session_settings(store, sid)
        wanted = _wanted(args, reading.settings)
        settings = reading.settings
        if wanted is not None:
            settings = settings_ops.save_session_settings(store, sid, wanted).value
        elif reading.problem:
            notice(f"{reading.problem}; the defaults are used")
    if getattr(args, "json", False):
        emit_json(
            {"session_id": sid, **settings.to_json(), "custom_prompt": settings.custom_prompt}
        )
        return 0
    print(f"{'session':>13}: {sid}")
    print(f"{'tools':>13}: {'on' if settings.tools else 'off (plain chat)'}")
    if settings.system_prompt is None:
        print(f"{'system prompt':>13}: default")
    else:
        print(f"{'system prompt':>13}: custom ({len(settings.system_prompt):,} characters)")
        print(shown(settings.system_prompt))
    return 0


def _wanted(args: argparse.Namespace, current: SessionSettings) -> SessionSettings | None:
    """The settings the options ask for (None: only show them)."""
    if args.system_prompt is None and not args.default_prompt and args.tools is None:
        return None
    wanted = current
    if args.default_prompt:
        wanted = replace(wanted, system_prompt=None)
    elif args.system_prompt is not None:
        text = sys.stdin.read() if args.system_prompt == "-" else args.system_prompt
        wanted = replace(wanted, system_prompt=text)
    if args.tools is not None:
        wanted = replace(wanted, tools=args.tools == "on")
    return wanted
