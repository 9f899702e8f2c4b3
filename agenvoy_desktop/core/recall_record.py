"""The stored record of a recall block, and taking a gone message's lines out of it.

Each turn that recalled something stores a ``recall`` timeline event: the
block as it was sent (``text``) and the ids of the remembered messages, one
per line, in the block's order (``ids``).  The block quotes messages of any
session, so when a message is deleted, or its session reset or removed, its
lines must leave the records of *other* sessions too (the archive does this
as it deletes: :meth:`Archive.delete_session_rows`, :meth:`Archive.take_rows`),
and the Context tab leaves out lines of messages in an undo window.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

RECALL_EVENT = "recall"


def without_lines(block: str, ids: Sequence[str], gone: Collection[str]) -> str:
    """*block* (a recall block, then any document passages after a blank line) without
    the lines of the *gone* messages.

    The block is its header, then one line per remembered message in the
    order of *ids*, each followed by indented lines of what its neighbours
    add, then perhaps a line worked out from them (a total, a date).  The
    worked-out line goes with any gone line (it may repeat its value), and a
    block whose lines cannot be matched to *ids* goes whole: the safe side.
    """
    recall, _, rest = block.partition("\n\n")
    lines = recall.split("\n")
    header, body = lines[0], lines[1:]
    groups: list[list[str]] = []
    for line in body:
        if line.startswith("- "):
            groups.append([line])
        elif line.startswith("  ") and groups:
            groups[-1].append(line)
        else:
            break  # the worked-out line: the end of the remembered lines
    kept: list[str] = []
    if not header.startswith("- ") and len(groups) == len(ids):
        for message_id, group in zip(ids, groups, strict=True):
            if message_id not in gone:
                kept += group
    shown = "\n".join([header, *kept]) if kept else ""
    return "\n\n".join(part for part in (shown, rest) if part)


def withdrawn(detail: dict[str, Any], gone: Collection[str]) -> dict[str, Any] | None:
    """A recall event's *detail* without the lines of the *gone* messages (None: none of
    its lines quotes one).  ``withdrawn`` counts the lines taken out, so the timeline can
    say that something was recalled from what is gone now."""
    ids = [str(i) for i in detail.get("ids") or []]
    hit = [i for i in ids if i in gone]
    if not hit:
        return None
    changed = dict(detail)
    changed["text"] = without_lines(str(detail.get("text", "")), ids, set(hit))
    changed["ids"] = [i for i in ids if i not in gone]
    changed["withdrawn"] = int(detail.get("withdrawn", 0) or 0) + len(hit)
    return changed
