"""``agenvoy-desktop doctor [--repair]``: every store checked against the others.

Exit status 3 when something is (still) wrong, so a script can tell.
"""

from __future__ import annotations

import argparse
import sys

from agenvoy_desktop.cli.common import AddCommand, emit_json, open_store, profile_paths
from agenvoy_desktop.core.archive import ArchiveDamagedError
from agenvoy_desktop.core.errors import one_line
from agenvoy_desktop.core.findings import Finding


def register(add: AddCommand) -> None:
    """Add ``doctor`` through build_parser's ``add`` helper."""
    doc = add("doctor", cmd_doctor, "check history, archive and vectors against each other")
    doc.add_argument("--repair", action="store_true")
    doc.add_argument("--json", action="store_true")


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check every store; with ``--repair`` fix them.  Exit 3: something is (still) wrong."""
    findings = _findings(args)
    if args.json:
        emit_json(
            [
                {
                    "session_id": f.session_id,
                    "kind": f.kind,
                    "detail": f.detail,
                    "repaired": f.repaired,
                }
                for f in findings
            ]
        )
    else:
        _print_findings(findings, repair=args.repair)
    left = [f for f in findings if not f.repaired] if args.repair else findings
    if args.repair and left and not args.json:
        print(f"{len(left)} problem(s) left unrepaired", file=sys.stderr)
    return 3 if left else 0


def _findings(args: argparse.Namespace) -> list[Finding]:
    from agenvoy_desktop.core.error_memory import error_db_path
    from agenvoy_desktop.core.reconcile import check_error_memory, doctor

    error_db = error_db_path(profile_paths(args))
    findings: list[Finding] = []
    try:
        with open_store(
            args, embed=args.repair, reconcile=False, repair_damage=args.repair
        ) as store:
            findings += [Finding(None, "archive", n, True) for n in store.notices]
            findings += doctor(store, repair=args.repair, error_db=error_db)
    except ArchiveDamagedError as exc:  # only without --repair: reported, not touched
        findings.append(Finding(None, "archive", one_line(exc), False))
        findings += check_error_memory(error_db, repair=False)
    return findings


def _print_findings(findings: list[Finding], *, repair: bool) -> None:
    if not findings:
        print("all layers consistent: nothing to repair")
        return
    for finding in findings:
        print(finding)
    if not repair:
        print("run `agenvoy-desktop doctor --repair` to fix these")
