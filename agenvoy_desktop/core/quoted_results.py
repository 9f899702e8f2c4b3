"""Stored search results that quote messages, and taking a gone message's lines out of them.

The ``search_chat_history`` tool answers with excerpts of past messages,
one line per message (``- <when>, <who>: "<text>"``, the text as a JSON
string, so never more than one line), under a ``From session …`` header
per excerpt.  The turn stores that answer as a ``tool`` message whose
``quoted`` field lists the quoted messages' ids, one per line, in the
order of the lines.  The answer may quote any session, so when a message is
deleted, or its session reset or removed, its lines must leave the stored
results of every *other* session too: the archive takes them out of its
rows (and the full-text index) in the transaction that deletes
(:meth:`Archive.delete_session_rows`, :meth:`Archive.take_rows`), and the
store out of the sessions' history files just before
(``core/quoted_histories.py``).  This module is pure text and JSON, so the
archive can use it without importing the store.

Only tool results change: the assistant's *answers* in the other session
stay as they were, even where they repeat what the search found.  They are
the conversation the person sees and wrote with the assistant, and changing
them behind their back would rewrite that conversation; tool results are
hidden data derived from the archive.  A result stored before results
carried ``quoted`` keeps its text: nothing says which line quotes which
message, and matching by text would be a guess.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from agenvoy_desktop.core.messages import Message

QUOTED_KEY = "quoted"
"""The tool message's field listing the ids of the messages its lines quote, in line order."""
WITHDRAWN_KEY = "withdrawn"
"""How many quoted lines were taken out since (the chat can say "1 result deleted since")."""
EXCERPT_HEADER = "From session "
"""How each excerpt of a search result starts (``agent/builtin_tools.format_search``)."""
QUOTE_PREFIX = "- "
"""How each quoted message's line starts."""
DELETED_RESULT = "(deleted)"
"""What a result says once every line it quoted is gone, or when its lines cannot be matched."""


def without_quoted(content: str, ids: Sequence[str], gone: Collection[str]) -> str:
    """*content* (a stored search result) without the lines of the *gone* messages.

    The lines starting with :data:`QUOTE_PREFIX` are matched to *ids* in
    order (a result clipped to the tool's limit shows fewer lines than it
    has ids); an excerpt left with no line loses its header.  A result with
    more such lines than ids cannot be matched and goes whole, as does one
    left with no quoted line: the safe side.
    """
    marks = iter(ids)
    blocks: list[str] = []
    for block in content.split("\n\n"):
        kept: list[str] = []
        quoted = left = 0
        for line in block.split("\n"):
            if line.startswith(QUOTE_PREFIX):
                quoted += 1
                message_id = next(marks, None)
                if message_id is None:
                    return DELETED_RESULT
                if message_id in gone:
                    continue
                left += 1
            kept.append(line)
        if quoted and not left:
            kept = [line for line in kept if not line.startswith(EXCERPT_HEADER)]
        if kept:
            blocks.append("\n".join(kept))
    text = "\n\n".join(blocks)
    shows = any(line.startswith(QUOTE_PREFIX) for line in text.split("\n"))
    return text if shows else DELETED_RESULT


def withdrawn_result(
    content: str, extra: Mapping[str, Any], gone: Collection[str]
) -> tuple[str, dict[str, Any]] | None:
    """A stored result's (content, extra) without the *gone* messages' lines (None: it
    quotes none of them).  ``withdrawn`` counts the lines taken out."""
    ids = [str(i) for i in extra.get(QUOTED_KEY) or []]
    hit = [i for i in ids if i in gone]
    if not hit:
        return None
    changed = dict(extra)
    changed[QUOTED_KEY] = [i for i in ids if i not in gone]
    changed[WITHDRAWN_KEY] = int(extra.get(WITHDRAWN_KEY, 0) or 0) + len(hit)
    return without_quoted(content, ids, set(hit)), changed


def withdrawn_message(message: Message, gone: Collection[str]) -> Message | None:
    """*message* without the lines quoting *gone* messages (None: it quotes none)."""
    if message.role != "tool" or message.id in gone:
        return None
    changed = withdrawn_result(message.content, message.extra, gone)
    if changed is None:
        return None
    content, extra = changed
    return Message(message.id, message.role, content, message.time_ns, message.ref, extra)
