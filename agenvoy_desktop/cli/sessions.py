"""``agenvoy-desktop sessions``, ``stats``, ``reset`` and ``remove``: the sessions of a profile.

``sessions settings SID`` shows a session's own settings (its system prompt
and whether it uses tools and memory search) and changes them when asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
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
from agenvoy_desktop.core.session_settings import SessionSettings
from agenvoy_desktop.core.set_aside_copies import delete_copies, take_session_out
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
    remove = add("remove", cmd_remove, "delete a session and everything of it")
    remove.add_argument("session_id")
    for parser in (reset, remove):
        parser.add_argument(
            f"--{DELETE_FLAG}",
            action="store_true",
            help="delete the copies of the archive the app set aside earlier (upgrade backups, "
            "damaged archives) that could not be read, so the session could not be taken "
            "out of them",
        )


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


DELETE_FLAG = "delete-unreadable-copies"


def cmd_reset(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        done = session_ops.reset_session(store, args.session_id, clear_summary=args.clear_summary)
        _settle_copies(store.paths, done.value.not_cleaned, delete=args.delete_unreadable_copies)
    print(f"reset {args.session_id}{' and its summary' if args.clear_summary else ''}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    sid = check_session_id(args.session_id)
    with open_store(args, embed=False) as store:
        if args.delete_unreadable_copies and not store.exists(sid):
            # Removed already, and told which copies it could not clean: they go now.
            left = take_session_out(store.paths, sid).not_cleaned
            _settle_copies(store.paths, left, delete=True)
            print(f"no session {sid} left to remove; the copies set aside were looked at")
            return 0
        done = session_ops.remove_session(store, sid)
        _settle_copies(store.paths, done.value.not_cleaned, delete=args.delete_unreadable_copies)
    print(f"removed {sid}")
    return 0


def _settle_copies(paths: AppPaths, copies: Sequence[Path], *, delete: bool) -> None:
    """The archive copies set aside earlier that a reset or remove could not clean (they
    could not be read, so they may still hold the words): deleted when asked, else named
    on stderr with the option that deletes them.  Copies it cleaned are not mentioned."""
    if not copies:
        return
    one = len(copies) == 1
    if delete:
        deleted = delete_copies(paths, copies)
        listed = "\n".join(f"  {shown_line(str(path))}" for path in deleted)
        print(
            f"deleted {len(deleted)} cop{'y' if len(deleted) == 1 else 'ies'} of the archive "
            f"the app set aside earlier that could not be read:\n{listed}",
            file=sys.stderr,
        )
        return
    listed = "\n".join(f"  {shown_line(str(path))}" for path in copies)
    print(
        f"note: {len(copies)} older cop{'y' if one else 'ies'} of the archive the app set "
        f"aside could not be read, so these words may still be in {'it' if one else 'them'}"
        f"; --{DELETE_FLAG} deletes {'it' if one else 'them'}:\n{listed}",
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
