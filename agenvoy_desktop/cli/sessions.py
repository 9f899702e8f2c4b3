"""``agenvoy-desktop sessions``, ``stats``, ``reset`` and ``remove``: the sessions of a profile."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from agenvoy_desktop.cli.common import AddCommand, emit_json, open_store
from agenvoy_desktop.core.store import SessionInfo, check_session_id
from agenvoy_desktop.core.timeutil import format_local
from agenvoy_desktop.operations import sessions as session_ops
from agenvoy_desktop.paths import HOME_ENV


def register(add: AddCommand) -> None:
    """Add the session commands through build_parser's ``add`` helper."""
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


def cmd_sessions(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        infos = session_ops.list_sessions(store)
    if args.json:
        emit_json([_info_json(i) for i in infos])
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
                print(f"{key:>18}: {value}")
        for event in data.get("events", []):
            print(f"{'event':>18}: {event}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        session_ops.reset_session(store, args.session_id)
    print(f"reset {args.session_id}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    with open_store(args, embed=False) as store:
        session_ops.remove_session(store, args.session_id)
    print(f"removed {args.session_id}")
    return 0
