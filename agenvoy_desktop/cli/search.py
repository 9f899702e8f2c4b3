"""``agenvoy-desktop search``: conversation memory by keywords, meaning, or both."""

from __future__ import annotations

import argparse

from agenvoy_desktop.cli.common import (
    MAX_RESULTS,
    AddCommand,
    CliError,
    clip,
    emit_json,
    in_range,
    open_store,
    time_option,
)
from agenvoy_desktop.cli.safe_text import shown_line
from agenvoy_desktop.core.search import MODES, SearchQuery, SearchResult
from agenvoy_desktop.core.store import check_session_id
from agenvoy_desktop.core.timeutil import format_iso, format_local
from agenvoy_desktop.operations.search import run_search


def register(add: AddCommand) -> None:
    """Add ``search`` through build_parser's ``add`` helper."""
    srch = add("search", cmd_search, "search conversation memory")
    srch.add_argument("query")
    scope = srch.add_mutually_exclusive_group()
    scope.add_argument("--session")
    scope.add_argument("--all", action="store_true", help="all sessions (the default)")
    srch.add_argument("--mode", choices=MODES, default="hybrid")
    srch.add_argument("--limit", type=int, default=10)
    srch.add_argument("--since", help="ISO 8601 time (naive = local)")
    srch.add_argument("--until", help="ISO 8601 time (naive = local)")
    srch.add_argument("--include-tool", action="store_true", help="also search tool traffic")
    srch.add_argument("--json", action="store_true")


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError("empty query")
    if args.session is not None:
        check_session_id(args.session)  # an empty id is a mistake, not "all sessions"
    query = SearchQuery(
        text=args.query,
        mode=args.mode,
        limit=in_range("--limit", args.limit, 1, MAX_RESULTS),
        session_id=args.session,
        time_from_ns=time_option("--since", args.since),
        time_to_ns=time_option("--until", args.until),
        include_tool=args.include_tool,
    )
    semantic = args.mode != "keyword"
    with open_store(args, embed=semantic, top_up=[args.session]) as store:
        result = run_search(store, query).result
    if args.json:
        _print_json(result)
    else:
        _print_hits(result)
    return 0


def _print_json(result: SearchResult) -> None:
    emit_json(
        [
            {
                "session_id": hit.item.session_id,
                "message_id": hit.item.message.id,
                "ref": hit.item.message.ref,
                "role": hit.item.message.role,
                "time": format_iso(hit.item.message.time_ns),
                "content": hit.item.message.content,
                "score": round(hit.score, 6),
            }
            for hit in result.hits
        ]
    )


def _print_hits(result: SearchResult) -> None:
    if not result.hits:
        print("no results")
    for rank, hit in enumerate(result.hits, start=1):
        msg = hit.item.message
        print(
            f"{rank:>2}. {hit.score:7.4f}  {shown_line(hit.item.session_id)}  "
            f"{format_local(msg.time_ns)}  {shown_line(msg.role)}: {clip(msg.content)}"
        )
