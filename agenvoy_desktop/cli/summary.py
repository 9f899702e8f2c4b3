"""``agenvoy-desktop summarize``: fold a session's older messages into its summary, now."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from agenvoy_desktop.cli.common import AddCommand, CliError, emit_json, open_services


def register(add: AddCommand) -> None:
    """Add ``summarize`` through build_parser's ``add`` helper."""
    summ = add("summarize", cmd_summarize, "fold a session's older messages into its summary")
    summ.add_argument("session_id")
    summ.add_argument("--json", action="store_true")


def cmd_summarize(args: argparse.Namespace) -> int:
    with open_services(args) as services:
        if not services.storage.run_sync(services.store.exists, args.session_id):
            raise CliError(f"no session {args.session_id!r}")
        scheduler = services.summary_scheduler
        assert scheduler is not None  # set whenever there is a chat model
        result = asyncio.run(scheduler.summarize_now(args.session_id, progress=_progress()))
    data: dict[str, Any] = dataclasses.asdict(result)
    if args.json:
        emit_json(data)
    else:
        print(
            f"{result.stopped}: {result.passes} pass(es), {result.folded} message(s) folded,"
            f" {result.remaining} still pending"
        )
    if result.stopped in ("failed", "busy"):
        raise CliError(result.error or f"summary {result.stopped}")
    return 0


def _progress() -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        if sys.stderr.isatty():
            end = "\n" if done >= total else ""
            print(f"\rsummarising: {done}/{total} messages", end=end, file=sys.stderr)

    return report
