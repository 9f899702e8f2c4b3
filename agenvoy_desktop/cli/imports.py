"""``agenvoy-desktop import PATH...``: chat histories into memory, each conversation a session.

A path is a file, a folder or a zip: another app's export (ChatGPT, Claude,
Open WebUI, LM Studio, Jan) or our own JSON Lines, history.json or export.
What is already there is not added again.  stdout gets the session id of
each conversation (one a line, as scripts read it); stderr gets the summary
and one line for each path that could not be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agenvoy_desktop.cli.common import AddCommand, open_store, progress_bar, settings_of
from agenvoy_desktop.cli.safe_text import shown_line
from agenvoy_desktop.core.timeutil import format_iso, now_ns
from agenvoy_desktop.operations.bulk_import import ImportPlan, app_name, describe


def register(add: AddCommand) -> None:
    """Add ``import`` through build_parser's ``add`` helper."""
    imp = add(
        "import",
        cmd_import,
        "import chat histories (files, folders or zips from ChatGPT, Claude, Open WebUI, "
        "LM Studio, Jan, or our JSON Lines / history.json / export); prints each session id",
    )
    imp.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    imp.add_argument(
        "--find",
        action="store_true",
        help="list the chat histories other apps keep on this computer (only reads)",
    )
    imp.add_argument("--session", help="session id for a single conversation (created or added to)")
    imp.add_argument("--title", help="title for a single conversation")
    imp.add_argument("--dry-run", action="store_true", help="show what would be imported")


def cmd_import(args: argparse.Namespace) -> int:
    from agenvoy_desktop.core.importers import ImportFormatError
    from agenvoy_desktop.core.messages import message_limit
    from agenvoy_desktop.operations.bulk_import import plan_import, run_import

    if args.find:
        return _print_found()
    if not args.paths:
        raise ImportFormatError("name a file, folder or zip to import (or --find)")
    settings = settings_of(args)
    # Everything is read and checked before the profile is opened: a bad file writes nothing.
    plan = plan_import(
        args.paths,
        now_ns(),
        max_message_bytes=message_limit(settings.memory.max_history_bytes),
        session_id=args.session,
        title=args.title,
    )
    if plan.failed and not plan.conversations and len(plan.failed) == 1:
        raise ImportFormatError(plan.failed[0])  # one path, unreadable: the usual one line
    for line in plan.failed:
        print(f"agenvoy-desktop: error: {shown_line(' '.join(line.split()))}", file=sys.stderr)
    if args.dry_run:
        _print_plan(plan)
        return 1 if plan.failed else 0
    if not plan.conversations:
        return 1
    with open_store(args, embed=True, settings=settings) as store:
        report = run_import(store, plan, progress=progress_bar("importing"))
    for count in report.counts:
        print(count.session_id)
    print(describe(plan, report), file=sys.stderr)
    return 1 if plan.failed else 0


def _print_plan(plan: ImportPlan) -> None:
    """The dry run: each conversation with its app, size, dates and session."""
    for conv in plan.conversations:
        first, last = conv.span_ns
        print(
            f"{app_name(conv.app):12s} {len(conv.messages):6,} messages  "
            f"{format_iso(first)[:10]} – {format_iso(last)[:10]}  {conv.session_id}  "
            f"{conv.title or ''}"
        )
        for skip in conv.skipped:
            print(f"{'':12s} skipped {skip.where}: {skip.reason}")
    for skip in plan.skipped:
        print(f"skipped {skip.where}: {skip.reason}")
    n = len(plan.conversations)
    print(
        f"would import {n:,} conversation{'s' if n != 1 else ''}, {plan.message_count:,} "
        "messages (those already there are not added again)",
        file=sys.stderr,
    )


def _print_found() -> int:
    """``--find``: where other apps keep chat histories here, newest first."""
    from agenvoy_desktop.core.import_formats.discover import find_histories

    found = find_histories()
    for place in found:
        count = f"{place.conversations:,} conversations" if place.conversations else "export"
        day = format_iso(place.modified_ns)[:10] if place.modified_ns else ""
        print(f"{app_name(place.app):12s} {count:>20s}  {day}  {place.path}")
    if not found:
        print("no chat histories of LM Studio or Jan, and no ChatGPT or Claude export in Downloads")
    return 0
