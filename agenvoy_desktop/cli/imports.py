"""``agenvoy-desktop import``: a conversation from JSON Lines or a history.json into memory."""

from __future__ import annotations

import argparse
from pathlib import Path

from agenvoy_desktop.cli.common import AddCommand, open_store, progress_bar, settings_of
from agenvoy_desktop.core.store import check_session_id
from agenvoy_desktop.core.timeutil import now_ns
from agenvoy_desktop.operations.sessions import import_conversation


def register(add: AddCommand) -> None:
    """Add ``import`` through build_parser's ``add`` helper."""
    imp = add("import", cmd_import, "import JSON Lines or a history.json; prints the session id")
    imp.add_argument("file", type=Path)
    imp.add_argument("--session", help="session id (created if new, appended to if it exists)")
    imp.add_argument("--title")


def cmd_import(args: argparse.Namespace) -> int:
    from agenvoy_desktop.core.importers import read_import_file
    from agenvoy_desktop.core.messages import message_limit

    if args.session is not None:
        check_session_id(args.session)
    settings = settings_of(args)
    limit = message_limit(settings.memory.max_history_bytes)
    # Validates everything before the profile is opened: a bad file writes nothing.
    messages = read_import_file(args.file, now_ns(), max_message_bytes=limit)
    with open_store(args, embed=True, settings=settings) as store:
        imported = import_conversation(
            store,
            messages,
            args.session,
            title=args.title or args.file.stem,
            progress=progress_bar("embedding"),
        )
    print(imported.value)
    return 0
