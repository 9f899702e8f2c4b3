"""``agenvoy-desktop errors list|show|add|edit|delete|search|purge [--json]``.

The same store the inspector shows (``memory/errors.sqlite3``).  Everything
but ``search`` runs without a model, so it is instant; ``search`` uses the
embedding model when it can be prepared and otherwise says so on stderr and
searches by keywords.  The CLI opens the store without purging, so
``list --include-expired`` can show what the next purge would remove.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from agenvoy_desktop.cli import common
from agenvoy_desktop.cli.common import (
    MAX_RESULTS,
    SQLITE_INT_MAX,
    AddCommand,
    CliError,
    clip,
    command_adder,
    emit_json,
    in_range,
    profile_options,
)
from agenvoy_desktop.cli.safe_text import shown
from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.core.error_memory import (
    ORDER_KEYS,
    ErrorMemory,
    ErrorRecordNotFound,
    error_db_path,
    open_error_memory,
)
from agenvoy_desktop.core.error_types import ERROR_TYPES, OUTCOMES, ErrorHint, ErrorRecord
from agenvoy_desktop.core.timeutil import format_iso, format_local, now_ns
from agenvoy_desktop.operations import errors as error_ops


def register(add_command: AddCommand) -> None:
    """Add the ``errors`` command (with its actions) through build_parser's ``add``."""
    parser = add_command("errors", _dispatch, "inspect and edit the cross-session error memory")
    sub = parser.add_subparsers(dest="errors_action", metavar="ACTION", required=True)
    options = argparse.ArgumentParser(add_help=False, parents=[profile_options()])
    options.add_argument("--json", action="store_true", help="machine-readable output")
    action = command_adder(sub, options, "errors_func")

    lst = action("list", cmd_list, "list records (newest first)")
    lst.add_argument("--tool")
    lst.add_argument("--outcome", choices=OUTCOMES)
    lst.add_argument("--include-expired", action="store_true")
    lst.add_argument("--sort", choices=ORDER_KEYS, default="created", help="default: created")
    lst.add_argument("--ascending", action="store_true", help="oldest / fewest first")
    lst.add_argument("--limit", type=int)
    action("show", cmd_show, "show one record").add_argument("id", type=int)
    add = action("add", cmd_add, "add a record (same tool + symptom: updates it)")
    _record_options(add, required=True)
    add.add_argument("--session", help="session the record was learned in")
    edit = action("edit", cmd_edit, "change a record's fields (keywords are replaced)")
    edit.add_argument("id", type=int)
    _record_options(edit, required=False)
    edit.add_argument("--renew", action="store_true", help="extend its life by the TTL")
    action("delete", cmd_delete, "delete a record").add_argument("id", type=int)
    srch = action("search", cmd_search, "search records (renews what it returns)")
    srch.add_argument("query")
    srch.add_argument("--tool")
    srch.add_argument("--limit", type=int, default=10)
    srch.add_argument("--keyword-only", action="store_true", help="skip the embedding model")
    action("purge", cmd_purge, "delete expired records now")


def _record_options(cmd: argparse.ArgumentParser, *, required: bool) -> None:
    cmd.add_argument("--tool", required=required)
    cmd.add_argument("--symptom", required=required)
    cmd.add_argument("--cause")
    cmd.add_argument("--action")
    cmd.add_argument("--outcome", choices=OUTCOMES, required=required)
    cmd.add_argument("--keyword", action="append", help="repeatable")
    cmd.add_argument("--error-type", choices=ERROR_TYPES, help="default: from the symptom")


def _dispatch(args: argparse.Namespace) -> int:
    _check_numbers(args)
    try:
        result: int = args.errors_func(args)
    except (ValueError, ErrorRecordNotFound) as exc:  # bad input: one clear line
        raise CliError(str(exc)) from exc
    return result


def _check_numbers(args: argparse.Namespace) -> None:
    """Range-check the numeric arguments before the store sees them (one line each)."""
    if getattr(args, "id", None) is not None:
        in_range("id", args.id, 1, SQLITE_INT_MAX)
    if getattr(args, "limit", None) is not None:
        in_range("--limit", args.limit, 1, MAX_RESULTS)


@contextlib.contextmanager
def _memory(
    args: argparse.Namespace, embedder: TextEmbedder | None = None
) -> Iterator[ErrorMemory]:
    path = error_db_path(common.writable_profile(args))  # the store may create or migrate it
    memory, notice = open_error_memory(path, embedder, purge_on_open=False)
    if notice:
        common.notice(notice)
    with memory:
        yield memory


# -- output -----------------------------------------------------------------------------------
def record_json(record: ErrorRecord, now: int) -> dict[str, Any]:
    """A record with stable keys and ISO 8601 times."""
    return {
        "id": record.id,
        "tool": record.tool,
        "error_type": record.error_type,
        "keywords": list(record.keywords),
        "symptom": record.symptom,
        "cause": record.cause,
        "action": record.action,
        "outcome": record.outcome,
        "source": record.source,
        "session_id": record.session_id,
        "created": format_iso(record.created_ns),
        "updated": format_iso(record.updated_ns),
        "expires": format_iso(record.expires_ns),
        "expired": record.is_expired(now),
        "hits": record.hits,
        "last_hit": format_iso(record.last_hit_ns) if record.last_hit_ns else None,
        "has_vector": record.has_vector,
    }


def _say(text: str, *, err: bool = False) -> None:
    """One line to stdout (or stderr): the CLI's output, not a debugging print."""
    (sys.stderr if err else sys.stdout).write(shown(text) + "\n")


def _table(records: list[ErrorRecord], now: int, scores: list[float] | None = None) -> None:
    head = f"{'ID':>5}  {'TOOL':<16} {'OUTCOME':<9} {'TYPE':<14} {'HITS':>4}  {'EXPIRES':<10}  "
    _say(("SCORE   " if scores else "") + head + "SYMPTOM")
    for n, rec in enumerate(records):
        expires = "expired" if rec.is_expired(now) else format_local(rec.expires_ns)[:10]
        line = (
            f"{rec.id:>5}  {clip(rec.tool, 16):<16} {rec.outcome:<9} {rec.error_type:<14}"
            f" {rec.hits:>4}  {expires:<10}  {clip(rec.symptom, 70)}"
        )
        _say((f"{scores[n]:6.3f}  " if scores else "") + line)


def _show(record: ErrorRecord, now: int) -> None:
    data = record_json(record, now)
    data["keywords"] = ", ".join(record.keywords)
    for key, value in data.items():
        _say(f"{key:>11}: {'' if value is None else value}")


# -- actions ---------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        records = error_ops.list_records(
            memory,
            args.tool,
            args.outcome,
            include_expired=args.include_expired,
            order_by=args.sort if args.ascending else f"-{args.sort}",
            limit=args.limit,
        )
    now = now_ns()
    if args.json:
        emit_json([record_json(r, now) for r in records])
    elif not records:
        _say("no error records")
    else:
        _table(records, now)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        record = error_ops.get_record(memory, args.id)
    if args.json:
        emit_json(record_json(record, now_ns()))
    else:
        _show(record, now_ns())
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    fields = {
        "tool": args.tool,
        "symptom": args.symptom,
        "cause": args.cause or "",
        "action": args.action or "",
        "outcome": args.outcome,
        "keywords": args.keyword or (),
        "error_type": args.error_type,
    }
    with _memory(args) as memory:
        existing = error_ops.merged_into(memory, args.tool, args.symptom)
        record = error_ops.add_record(memory, fields, args.session).value
    merged = existing == record.id
    if args.json:
        emit_json({**record_json(record, now_ns()), "merged": merged})
    elif merged:
        _say(f"updated error record #{record.id} (same tool and symptom)")
    else:
        _say(f"added error record #{record.id}")
    return 0


def cmd_edit(args: argparse.Namespace) -> int:
    fields = {
        name: getattr(args, name)
        for name in ("tool", "symptom", "cause", "action", "outcome", "error_type")
        if getattr(args, name) is not None
    }
    if args.keyword is not None:
        fields["keywords"] = args.keyword
    if not fields and not args.renew:
        raise CliError(
            "nothing to change: give --tool, --symptom, --cause, --action, --outcome,"
            " --keyword, --error-type or --renew"
        )
    with _memory(args) as memory:
        record = error_ops.edit_record(memory, args.id, fields, renew=args.renew).value
    if args.json:
        emit_json(record_json(record, now_ns()))
    else:
        _say(f"updated error record #{record.id}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        error_ops.delete_record(memory, args.id)
    if args.json:
        emit_json({"deleted": args.id})
    else:
        _say(f"deleted error record #{args.id}")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        purged = error_ops.purge_expired(memory).value
    if args.json:
        emit_json({"purged": purged})
    else:
        _say(f"purged {purged} expired error record{'s' if purged != 1 else ''}")
    return 0


def _search_embedder(args: argparse.Namespace) -> TextEmbedder | None:
    """The embedding model, or None (with a note on stderr) when it cannot be had."""
    if args.keyword_only:
        return None
    try:
        return common.load_embedder(common.profile_paths(args))
    except (ImportError, OSError, RuntimeError, ValueError) as exc:  # missing, broken, offline
        _say(
            f"note: embedding model unavailable ({' '.join(str(exc).split()) or exc!r});"
            " keyword search only",
            err=True,
        )
        return None


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError("empty query")
    if args.limit < 1:
        raise CliError("--limit must be at least 1")
    embedder = _search_embedder(args)
    try:
        with _memory(args, embedder) as memory:
            hints = error_ops.search_records(memory, args.query, tool=args.tool, limit=args.limit)
    finally:
        common.close_embedder(embedder)
    _print_hits(hints, json_out=args.json)
    return 0


def _print_hits(hints: list[ErrorHint], *, json_out: bool) -> None:
    now = now_ns()
    if json_out:
        emit_json(
            [
                {
                    **record_json(h.record, now),
                    "score": round(h.score, 6),
                    "instruction": h.instruction,
                }
                for h in hints
            ]
        )
    elif not hints:
        _say("no matching error records")
    else:
        _table([h.record for h in hints], now, [h.score for h in hints])
