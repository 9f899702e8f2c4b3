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

A result stored before results carried ``quoted`` names no ids, so its
lines are matched by text instead (:meth:`Gone.quotes`): a line goes when
its text is the whole text of a gone message or, for the one line the
tool's limit cut short, the start of one.  The tool quotes every message
whole; only the result as a whole is clipped (``agent/tools.py`` cuts it at
4,000 characters, mid-line, and adds a line saying how much more there
was), so a line's text is either a complete JSON string or the start of one,
never an excerpt from the middle.  Every release wrote this layout (an
earlier one, ``* [<when>] <role>: <text>``, never left development).
Texts are compared as the tool wrote them, JSON-encoded, so a line cut
inside an escape still matches.  A line quoting a kept message that says
exactly what a gone one said (or, cut short, starts the same way) goes
too: that only loses a line of hidden derived data, where keeping a line
that quotes a gone message would keep its words.  A blank message leaves
no words, so it matches nothing.

Only tool results change: the assistant's *answers* in the other session
stay as they were, even where they repeat what the search found.  They are
the conversation the person sees and wrote with the assistant, and changing
them behind their back would rewrite that conversation; tool results are
hidden data derived from the archive.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from agenvoy_desktop.core.messages import Message

QUOTED_KEY = "quoted"
"""The tool message's field listing the ids of the messages its lines quote, in line order."""
WITHDRAWN_KEY = "withdrawn"
"""How many quoted lines were taken out since (the chat can say "1 result deleted since")."""
SEARCH_TOOL = "search_chat_history"
"""The tool whose stored results quote messages (a tool message's ``name``)."""
EXCERPT_HEADER = "From session "
"""How each excerpt of a search result starts (``agent/builtin_tools.format_search``)."""
QUOTE_PREFIX = "- "
"""How each quoted message's line starts."""
SAID_MARK = ': "'
"""Where a quoted line's text starts (at its opening quote): after ``<when>, <who>``."""
MATCH_MARK = " (match)"
"""What follows a quoted line's text when the message was one of the search's hits."""
DELETED_RESULT = "(deleted)"
"""What a result says once every line it quoted is gone, or when its lines cannot be matched."""

_LISTS_IDS = f'"{QUOTED_KEY}": ['
"""How a stored result's extra, as the archive writes it (``json.dumps``), lists its ids."""
LOOK_FOR = 64
"""Up to this many gone ids (texts), a stored result's extra (content) is searched for
each; with more, it is parsed (its lines are matched one by one)."""


class Gone:
    """The messages whose lines leave the stored results: their ids, and their texts
    for results stored without ids."""

    __slots__ = ("_encoded", "_encoded_set", "_needles", "ids")

    def __init__(self, ids: Iterable[str], texts: Iterable[str] = ()) -> None:
        self.ids = frozenset(ids)
        self._needles = [json.dumps(i, ensure_ascii=False) for i in self.ids]
        # The texts as the tool wrote them, sorted: those starting with a cut line's text
        # lie together (one bisection).  A blank text leaves no words to match.
        self._encoded = sorted({json.dumps(t, ensure_ascii=False) for t in texts if t.strip()})
        self._encoded_set = frozenset(self._encoded)

    def __bool__(self) -> bool:
        return bool(self.ids or self._encoded)

    @property
    def has_texts(self) -> bool:
        """Whether results stored without ids can lose lines (a text with words is known)."""
        return bool(self._encoded)

    def may_quote(self, extra_json: str) -> bool:
        """A first look at a stored result's extra as the archive holds it (JSON text):
        False only when the result cannot quote a gone message, so its content need
        not be read.

        A result listing ids quotes a gone message only if it names one.  Nothing
        else in a search result's extra can hold a ``quoted`` list (its
        arguments passed the tool's schema: strings and numbers), so a result
        that shows one is never one to match by text.  A few gone ids are
        looked for as JSON strings; with many, parsing the extra is cheaper.
        """
        if _LISTS_IDS not in extra_json:
            return True
        if len(self._needles) <= LOOK_FOR:
            return any(needle in extra_json for needle in self._needles)
        try:
            listed = json.loads(extra_json).get(QUOTED_KEY)
        except (ValueError, AttributeError):
            return True
        return not isinstance(listed, list) or not self.ids.isdisjoint(map(str, listed))

    def may_show(self, content: str) -> bool:
        """A first look at a result stored without ids: False only when none of its
        lines can quote a gone text, so they need not be matched one by one.

        A whole line holds its text's encoding; only the last quoted line can
        have been cut short (the limit cuts the result's end).  With many gone
        texts, looking for each costs more than matching the lines.
        """
        if len(self._encoded) > LOOK_FOR or any(e in content for e in self._encoded):
            return True
        last = content[content.rfind("\n" + QUOTE_PREFIX) + 1 :].split("\n", 1)[0]
        return last.startswith(QUOTE_PREFIX) and self.quotes(last)

    def quotes(self, line: str) -> bool:
        """Whether a result's quoted *line* quotes a gone message, judged by its text.

        The line's text (from its opening quote) is a gone message's encoded
        text, whole (perhaps followed by :data:`MATCH_MARK`), or cut short by
        the result's limit: a start of one, or one whole with the start of the
        mark.  A line cut before its text shows none.  Set look-ups and one
        bisection: a reset matches every line of every such result.
        """
        start = line.find(SAID_MARK)
        if start < 0:
            return False
        said = line[start + len(SAID_MARK) - 1 :]
        if said.removesuffix(MATCH_MARK) in self._encoded_set:
            return True
        at = bisect.bisect_left(self._encoded, said)  # cut inside the text
        if at < len(self._encoded) and self._encoded[at].startswith(said):
            return True
        end = said.rfind('"') + 1  # cut inside the mark, which holds no quote
        return MATCH_MARK.startswith(said[end:]) and said[:end] in self._encoded_set


class _Unmatched(Exception):
    """A result shows more quoted lines than it lists ids."""


def _without_lines(content: str, goes: Callable[[str], bool]) -> tuple[str, int]:
    """*content* (a stored search result) without the quoted lines *goes* picks (asked in
    line order), and how many went.

    An excerpt left with no line loses its header; a result left with no
    quoted line is :data:`DELETED_RESULT`.
    """
    blocks: list[str] = []
    removed = 0
    for block in content.split("\n\n"):
        kept: list[str] = []
        quoted = left = 0
        for line in block.split("\n"):
            if line.startswith(QUOTE_PREFIX):
                quoted += 1
                if goes(line):
                    removed += 1
                    continue
                left += 1
            kept.append(line)
        if quoted and not left:
            kept = [line for line in kept if not line.startswith(EXCERPT_HEADER)]
        if kept:
            blocks.append("\n".join(kept))
    text = "\n\n".join(blocks)
    shows = any(line.startswith(QUOTE_PREFIX) for line in text.split("\n"))
    return (text if shows else DELETED_RESULT), removed


def without_quoted(content: str, ids: Sequence[str], gone: Collection[str]) -> str:
    """*content* (a stored search result) without the lines of the *gone* messages.

    The lines starting with :data:`QUOTE_PREFIX` are matched to *ids* in
    order (a result clipped to the tool's limit shows fewer lines than it
    has ids); an excerpt left with no line loses its header.  A result with
    more such lines than ids cannot be matched and goes whole, as does one
    left with no quoted line: the safe side.
    """
    marks = iter(ids)

    def goes(_line: str) -> bool:
        message_id = next(marks, None)
        if message_id is None:
            raise _Unmatched
        return message_id in gone

    try:
        return _without_lines(content, goes)[0]
    except _Unmatched:
        return DELETED_RESULT


def without_said(content: str, gone: Gone) -> tuple[str, int]:
    """*content* (a result stored without ids) without the lines whose text is a *gone*
    message's (:meth:`Gone.quotes`), and how many went."""
    return _without_lines(content, gone.quotes)


def withdrawn_result(
    content: str, extra: Mapping[str, Any], gone: Gone
) -> tuple[str, dict[str, Any]] | None:
    """A stored result's (content, extra) without the *gone* messages' lines (None: it
    quotes none of them).  ``withdrawn`` counts the lines taken out.

    A result listing ids is matched by them alone; a search result stored
    before results listed ids, by the texts of the gone messages.
    """
    if QUOTED_KEY in extra:
        return _withdrawn_by_id(content, extra, gone.ids)
    if extra.get("name") != SEARCH_TOOL or not gone.may_show(content):
        return None
    text, removed = without_said(content, gone)
    if not removed:
        return None
    changed = dict(extra)
    changed[WITHDRAWN_KEY] = int(extra.get(WITHDRAWN_KEY, 0) or 0) + removed
    return text, changed


def _withdrawn_by_id(
    content: str, extra: Mapping[str, Any], gone: Collection[str]
) -> tuple[str, dict[str, Any]] | None:
    ids = [str(i) for i in extra.get(QUOTED_KEY) or []]
    hit = [i for i in ids if i in gone]
    if not hit:
        return None
    changed = dict(extra)
    changed[QUOTED_KEY] = [i for i in ids if i not in gone]
    changed[WITHDRAWN_KEY] = int(extra.get(WITHDRAWN_KEY, 0) or 0) + len(hit)
    return without_quoted(content, ids, set(hit)), changed


def withdrawn_message(message: Message, gone: Gone) -> Message | None:
    """*message* without the lines quoting *gone* messages (None: it quotes none)."""
    if message.role != "tool" or message.id in gone.ids:
        return None
    changed = withdrawn_result(message.content, message.extra, gone)
    if changed is None:
        return None
    content, extra = changed
    return Message(message.id, message.role, content, message.time_ns, message.ref, extra)
