"""The SQLite archive: every message ever written (the full-text layer).

One database file holds the archive rows, the full-text index, the session
metadata (``start_at``), the persisted vectors (so an hnswlib index file can
always be rebuilt) and a small event log for the timeline.  WAL mode; the
schema version lives in ``PRAGMA user_version`` and migrates forward; a
database from a newer app is refused rather than damaged.

The FTS5 table is *contentless*: it stores only the index of
:func:`fts_text.index_text` (of each message, and of the readable message
before it as context), never a second copy of the text.  It is derived
data: :meth:`Archive.rebuild_fts` recreates it from the rows.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.quoted_results import (
    QUOTED_KEY,
    SAID_MARK,
    SEARCH_TOOL,
    Gone,
    withdrawn_result,
)
from agenvoy_desktop.core.recall_record import RECALL_EVENT, withdrawn
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION, index_text
from agenvoy_desktop.core.retrieval.planner import MatchPlan, plan_match
from agenvoy_desktop.core.retrieval.widen import fetch_enough
from agenvoy_desktop.core.sqlite_db import SqliteStore, StoreDamagedError

SCHEMA_VERSION = 5

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    title TEXT,
    created_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    start_at_ns INTEGER NOT NULL DEFAULT 0,
    cut_seq INTEGER NOT NULL DEFAULT 0,
    next_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    msg_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    time_ns INTEGER NOT NULL,
    ref TEXT,
    tool INTEGER NOT NULL DEFAULT 0,
    extra TEXT,
    UNIQUE (session_id, seq)
);
CREATE INDEX messages_session_time ON messages (session_id, time_ns);
CREATE INDEX messages_ref ON messages (ref) WHERE ref IS NOT NULL;
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    body, content='', tokenize='unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE messages_vocab USING fts5vocab (messages_fts, 'row');
CREATE TABLE vectors (
    message_rowid INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    vec BLOB NOT NULL
);
CREATE INDEX vectors_session ON vectors (session_id);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    time_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX events_session ON events (session_id, time_ns);
"""

# v2: the FTS index gets a ``sid`` column (a per-session token) so a
# session-scoped keyword search filters inside FTS5 instead of scoring the
# whole archive and discarding other sessions' rows afterwards.
_SCHEMA_V2 = """
DROP TABLE messages_vocab;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    body, sid, content='', tokenize='unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
DELETE FROM meta WHERE key = 'fts_text_version';
"""

# v3: the FTS index stems English words (FTS5's porter tokenizer around
# unicode61; CJK bigrams are prepared by fts_text as before) and indexes each
# message with the readable message before it in a ``ctx`` column, weighted
# 0.4 against the message's own words (an answer such as "yes, every Sunday"
# is found by the question it answers; measured on LoCoMo: keyword R@10 0.61
# without the column, 0.69 with it at 0.4, 0.67 at 0.2), and a message may
# have several vectors (a long message is embedded in parts): a vector is keyed
# by a label packing the message's rowid and the part number (see
# :func:`vector_label`).  Both are derived data: the FTS index is rebuilt at
# open, the vectors are embedded again from history.json by reconciliation.
_SCHEMA_V3 = """
DROP TABLE IF EXISTS messages_vocab;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    body, sid, ctx, content='', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE messages_vocab USING fts5vocab (messages_fts, 'row');
INSERT INTO messages_fts (messages_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0, 0.4)');
DELETE FROM meta WHERE key = 'fts_text_version';
DROP TABLE vectors;
CREATE TABLE vectors (
    label INTEGER PRIMARY KEY,
    message_rowid INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    vec BLOB NOT NULL
);
CREATE INDEX vectors_session ON vectors (session_id);
CREATE INDEX vectors_message ON vectors (message_rowid);
"""

# v4: earlier versions of a conversation (an edited user message and what
# followed it, a regenerated answer) leave ``messages`` for
# ``message_versions``.  Every reader of the live conversation (history
# checks, search, vectors, the timeline) keeps reading ``messages`` alone, so
# an earlier branch can never be recalled or shown as current; the answer
# pager reads the old versions by the user message they answered (``anchor_id``).
_SCHEMA_V4 = """
CREATE TABLE message_versions (
    id INTEGER PRIMARY KEY,
    msg_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    time_ns INTEGER NOT NULL,
    ref TEXT,
    tool INTEGER NOT NULL DEFAULT 0,
    extra TEXT,
    branched_ns INTEGER NOT NULL,
    reason TEXT NOT NULL,
    anchor_id TEXT NOT NULL
);
CREATE INDEX message_versions_anchor ON message_versions (session_id, anchor_id, branched_ns);
"""

# v5: deleting a message, or resetting or removing a session, takes its lines out of
# every stored search result that quotes it (``core/quoted_results.py``), so each
# such operation reads the stored results: those listing the ids they quote, and
# (when a gone message has words) those stored before results listed ids that still
# show a quoted line (a finite set: every result with a line lists ids now).  Partial
# indexes list exactly those rows, so the read no longer scans every row: on a
# synthetic archive of 1M messages (10,000 results listing ids, 2,000 without) the
# read for deleting one message went from 0.28 s to 0.05 s, for resetting a session
# of 1,000 messages from 0.29 s to 0.14 s (matching lines by text included; 2 cores,
# warm cache; the migration itself took 0.4 s).  A query uses a partial index only
# when its WHERE repeats the index's condition: ``_QUOTING`` and ``_UNMARKED`` below
# say the same, and a test checks the plans.
# IF NOT EXISTS: a file whose version was set back by hand still has them on
# ``messages`` (tests/core/test_message_edit.py fakes schema 3 that way).
_SCHEMA_V5 = """
CREATE INDEX IF NOT EXISTS messages_quoting ON messages (id)
    WHERE role = 'tool' AND instr(extra, '"quoted"') > 0;
CREATE INDEX IF NOT EXISTS message_versions_quoting ON message_versions (id)
    WHERE role = 'tool' AND instr(extra, '"quoted"') > 0;
CREATE INDEX IF NOT EXISTS messages_unmarked ON messages (id)
    WHERE role = 'tool' AND instr(extra, '"search_chat_history"') > 0
    AND instr(extra, '"quoted"') = 0 AND instr(content, ': "') > 0;
CREATE INDEX IF NOT EXISTS message_versions_unmarked ON message_versions (id)
    WHERE role = 'tool' AND instr(extra, '"search_chat_history"') > 0
    AND instr(extra, '"quoted"') = 0 AND instr(content, ': "') > 0
"""

MIGRATIONS: dict[int, str] = {
    1: _SCHEMA_V1,
    2: _SCHEMA_V2,
    3: _SCHEMA_V3,
    4: _SCHEMA_V4,
    5: _SCHEMA_V5,
}
"""``MIGRATIONS[v]`` upgrades a database at version v-1 to v."""

# A keyword query scores at most this many documents: rare terms first, the
# rest dropped.  Keeps natural-language questions from turning into a scan
# (FTS5's bm25 costs ~1.5 µs per matching document on a 2-core laptop).
POSTINGS_BUDGET = 8_000
# Inside one session the budget counts that session's documents (see
# Archive._plan_match).  Each of them costs more to rank than an archive-wide
# match (FTS5 also steps through the session's token), so fewer are allowed.
# A session of a few thousand messages always fits whole; the budget only
# bites in sessions of ~100k messages.
SESSION_POSTINGS_BUDGET = 4_000
RANK_SQL = "bm25(messages_fts, 1.0, 0.0, 0.4)"
"""The archive's ranking: the FTS table's ``rank`` since schema v3 (weights of
body, sid, ctx).  Queries call it by name, not as ``ORDER BY rank``: for
``rank`` FTS5 sorts every match before the LIMIT applies, where SQLite keeps
only the best LIMIT as it goes (same hits; a third less time at p95 in the
1M-message benchmark)."""
PAGE_CACHE_KIB = 64 * 1024
"""SQLite's page cache for the archive (its default is 2 MiB).  A keyword query
walks postings all over a large archive; in the 1M-message benchmark 64 MiB cut
the p95 of a query by a quarter.  Memory is only taken as pages are read."""
COMMON_DF = 1_000
"""Frequencies at least this large are remembered between queries (see ``_term_df``)."""
DF_MEMO_ROWS = 2_000
"""A remembered frequency is recounted once this many messages were added since."""
DF_MEMO_SIZE = 4_096
SPAN_MIN_DOCS = 20_000
"""A session this large is ranked by its rowid span when its rows lie together
(see ``Archive._session_span``); below it the session token's phrase is cheap."""
SPAN_SLACK = 1.25
"""A span may hold this many rows per session row (the rest are filtered out after ranking)."""


PART_BITS = 6
MAX_PARTS = 1 << PART_BITS
"""Vectors one message may have (a long message is embedded in up to this many parts)."""


def vector_label(message_rowid: int, part: int = 0) -> int:
    """The key of one vector: its message's rowid and its part, packed in one integer.

    The hnswlib index uses the same number as its label, so a hit leads to
    its message by a shift, without a look-up.
    """
    if not 0 <= part < MAX_PARTS:
        raise ValueError(f"part {part} out of range 0..{MAX_PARTS - 1}")
    return (message_rowid << PART_BITS) | part


def label_message(label: int) -> int:
    """The archive rowid of the message a vector label belongs to."""
    return label >> PART_BITS


def sid_token(session_id: str) -> str:
    """A single FTS5 token naming a session (ids may hold '.', '-', '_')."""
    return "sid" + hashlib.sha1(session_id.encode("utf-8")).hexdigest()[:16]


def _columns(with_context: bool) -> str:
    """The FTS5 columns a user's words are matched in (``sid`` holds only session tokens)."""
    return "{body ctx}" if with_context else "body"


class _FtsContext:
    """Walks one session's messages in order, giving each its FTS body and context.

    The context of a readable message is the indexed text of the readable
    message before it (tool traffic and empty messages are skipped).  Every writer of
    the FTS index (append, delete, rebuild) derives it the same way, which a
    contentless FTS5 table needs: a row is deleted with the values it was
    inserted with.
    """

    def __init__(self, previous: str | None = None) -> None:
        self._ctx = "" if previous is None else index_text(previous)

    def next(self, content: str, is_tool: bool) -> tuple[str, str]:
        """(body, ctx) for the next message; a readable one becomes the next context.

        Tool traffic and blank messages get no context: they are never
        recalled, so they must not match through their neighbour's words.
        """
        body = index_text(content)
        if is_tool or not content.strip():
            return body, ""
        ctx, self._ctx = self._ctx, body
        return body, ctx


def _fts_rows(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[int, str, str, str]]:
    """(rowid, body, sid token, ctx) for rows of (id, content, session_id, tool).

    The rows must come in (session, seq) order.
    """
    session: str | None = None
    context = _FtsContext()
    for rowid, content, sid, tool in rows:
        if sid != session:
            session, context = sid, _FtsContext()
        body, ctx = context.next(content, bool(tool))
        yield rowid, body, sid_token(sid), ctx


def _row_values(session_id: str, seq: int, message: Message) -> tuple[Any, ...]:
    """A message as the columns msg_id … extra of its ``messages`` row."""
    return (
        message.id,
        session_id,
        seq,
        message.role,
        message.content,
        message.time_ns,
        message.ref,
        int(message.is_tool_traffic),
        message.extra_json(),
    )


_MAX_ROWID = 2**63 - 1


def _scope(session_id: str | None) -> str:
    """The FTS5 filter that keeps a match inside one session ("" for all sessions)."""
    return "" if session_id is None else f' AND sid : "{sid_token(session_id)}"'


def _filters(
    time_from_ns: int | None, time_to_ns: int | None, include_tool: bool
) -> tuple[str, list[Any]]:
    """The SQL condition on ``messages m`` (and its parameters) a keyword hit must pass."""
    where = ["1"]
    params: list[Any] = []
    if time_from_ns is not None:
        where.append("m.time_ns >= ?")
        params.append(time_from_ns)
    if time_to_ns is not None:
        where.append("m.time_ns <= ?")
        params.append(time_to_ns)
    if not include_tool:
        where.append("m.tool = 0")
    return " AND ".join(where), params


def _mark_taken(db: sqlite3.Connection, session_id: str, msg_ids: Sequence[str]) -> set[int]:
    """Put the rowids of those of *msg_ids* that are live rows of the session in
    ``temp.taken_rows`` (no limit on how many, unlike an ``IN (?, ?, …)`` list); returns them."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS taken_rows (id INTEGER PRIMARY KEY)")
    db.execute("DELETE FROM temp.taken_rows")
    db.executemany(
        "INSERT OR IGNORE INTO temp.taken_rows SELECT id FROM messages"
        " WHERE session_id = ? AND msg_id = ?",
        [(session_id, msg_id) for msg_id in msg_ids],
    )
    return {int(r[0]) for r in db.execute("SELECT id FROM temp.taken_rows")}


def _refresh_fts_around(db: sqlite3.Connection, session_id: str, taken: set[int]) -> None:
    """Drop the FTS entries of *taken* rows (also in ``temp.taken_rows``) and re-index
    the rows whose context changes.

    The span runs from the first taken row to the first readable row kept
    after the last one: the kept rows in it are deleted with their old
    context and inserted with the new one (a contentless table needs the
    old values to delete a row).
    """
    first, last = db.execute(
        "SELECT min(seq), max(seq) FROM messages WHERE id IN (SELECT id FROM temp.taken_rows)"
    ).fetchone()
    before = db.execute(
        "SELECT content FROM messages WHERE session_id = ? AND tool = 0 AND seq < ?"
        " ORDER BY seq DESC",
        (session_id, first),
    )
    previous = next((str(r[0]) for r in before if str(r[0]).strip()), None)
    span: list[tuple[int, str, str, int]] = []
    cursor = db.execute(
        "SELECT id, content, session_id, tool, seq FROM messages"
        " WHERE session_id = ? AND seq >= ? ORDER BY seq",
        (session_id, first),
    )
    for rowid, content, sid, tool, seq in cursor:
        span.append((rowid, content, sid, tool))
        if seq > last and rowid not in taken and not tool and str(content).strip():
            break
    token = sid_token(session_id)
    old = _FtsContext(previous)
    db.executemany(
        "INSERT INTO messages_fts (messages_fts, rowid, body, sid, ctx)"
        " VALUES ('delete', ?, ?, ?, ?)",
        [(r, *_fts_pair(old, c, t, token)) for r, c, _, t in span],
    )
    new = _FtsContext(previous)
    db.executemany(
        "INSERT INTO messages_fts (rowid, body, sid, ctx) VALUES (?, ?, ?, ?)",
        [(r, *_fts_pair(new, c, t, token)) for r, c, _, t in span if r not in taken],
    )


def _fts_pair(context: _FtsContext, content: str, tool: int, token: str) -> tuple[str, str, str]:
    """(body, sid token, ctx) of the next row walked by *context*."""
    body, ctx = context.next(content, bool(tool))
    return body, token, ctx


TITLE_CHARS = 48
"""The longest automatic title: a message's start, cut with an ellipsis."""


def title_for(content: str) -> str:
    """The automatic title of a session whose first user message is *content*."""
    flat = " ".join(content.split())
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1].rstrip() + "…"


def first_title(messages: Iterable[Message]) -> str | None:
    """The automatic title from the first user message with text in *messages*, if any."""
    first = next((m for m in messages if m.role == "user" and m.content.strip()), None)
    return None if first is None else title_for(first.content)


FORK_SUFFIX = " (fork)"
"""What a fork's title adds to its source's title."""


def title_from_messages(title: str, texts: Iterable[str]) -> bool:
    """Whether *title* was made from one of *texts* (the sessions list's automatic title).

    The automatic title is a message with its whitespace folded: the whole
    of it, or its start cut with an ellipsis; a fork's title is its
    source's with :data:`FORK_SUFFIX`.  A title the person typed
    matches only if it says exactly what a message says (then it holds the
    same words, and goes with them); a word it shares with one does not.
    """
    while title.endswith(FORK_SUFFIX):  # a fork's title is its source's, marked
        title = title.removesuffix(FORK_SUFFIX)
    cut = title.endswith("…")
    stem = " ".join(title.removesuffix("…").split())
    if not stem:
        return False
    flat = (" ".join(text.split()) for text in texts)
    return any(text.startswith(stem) if cut else text == stem for text in flat)


def _gone(db: sqlite3.Connection, session_id: str, msg_ids: Collection[str] | None) -> Gone:
    """The messages of a session about to be deleted, by id and text (:class:`Gone`).

    *msg_ids* None: the whole session, its earlier versions included (a
    search may have quoted a message before an edit or a regenerate moved
    it there).  Else those ids, with the texts of the live rows among them:
    an id no longer live still counts, for a rerun after a crash.  The texts
    are read only while a result stored without ids shows a line
    (:func:`_any_unmarked`): only such a result is matched by them.
    """
    texts = _any_unmarked(db)
    column = "content" if texts else "''"
    if msg_ids is None:
        rows = db.execute(
            f"SELECT msg_id, {column} FROM messages WHERE session_id = ? UNION ALL"
            f" SELECT msg_id, {column} FROM message_versions WHERE session_id = ?",
            (session_id, session_id),
        ).fetchall()
        return Gone((str(r[0]) for r in rows), (str(r[1]) for r in rows))
    if not texts:
        return Gone(msg_ids)
    found = db.execute(
        "SELECT content FROM messages WHERE session_id = ?"
        " AND msg_id IN (SELECT value FROM json_each(?))",
        (session_id, json.dumps(sorted(msg_ids))),
    )
    return Gone(msg_ids, (str(r[0]) for r in found))


def _any_unmarked(db: sqlite3.Connection) -> bool:
    """Whether a search result stored before results listed ids still shows a quoted
    line, live or as an earlier version (a seek in each ``*_unmarked`` index)."""
    return any(
        db.execute(_quoting_sql(table, _UNMARKED, "1") + " LIMIT 1").fetchone()
        for table in ("messages", "message_versions")
    )


def _withdraw_recalled(db: sqlite3.Connection, gone: set[str]) -> None:
    """Take the lines of the *gone* messages out of every session's recall records.

    A turn in one session may have recalled a message of another; its
    ``recall`` event keeps the block as sent.  Deleting the message, or
    resetting or removing its session, must leave no copy of its words, so
    the quoting lines go in the same transaction (``core/recall_record.py``).
    One pass over the recall events (one per turn that recalled something).
    """
    if not gone:
        return
    rows = db.execute("SELECT id, detail FROM events WHERE kind = ?", (RECALL_EVENT,)).fetchall()
    for event_id, raw in rows:
        try:
            detail = json.loads(raw)
        except ValueError:
            continue
        changed = withdrawn(detail, gone) if isinstance(detail, dict) else None
        if changed is not None:
            db.execute(
                "UPDATE events SET detail = ? WHERE id = ?",
                (json.dumps(changed, ensure_ascii=False), event_id),
            )


_QUOTING = f"role = 'tool' AND instr(extra, '\"{QUOTED_KEY}\"') > 0"
"""The rows that may be stored search results listing the messages they quote (the
condition of the ``*_quoting`` indexes of schema v5, word for word)."""
_UNMARKED = (
    f"role = 'tool' AND instr(extra, '\"{SEARCH_TOOL}\"') > 0"
    f" AND instr(extra, '\"{QUOTED_KEY}\"') = 0 AND instr(content, '{SAID_MARK}') > 0"
)
"""The rows that may be search results stored before results listed ids and still
show a quoted line (the condition of the ``*_unmarked`` indexes of schema v5, word
for word; a search that found nothing lists no ids and shows no line).  A row whose
extra happens to hold ``"quoted"`` elsewhere is among :data:`_QUOTING`'s rows, and
:func:`withdrawn_result` tells the two kinds apart by the field itself."""


_RESULT_COLUMNS = "id, msg_id, session_id, content, tool, extra"
"""What :func:`_quoting_rows` reads of each stored result."""


def _quoting_sql(table: str, condition: str = _QUOTING, columns: str = _RESULT_COLUMNS) -> str:
    """The stored results of *table* (``messages`` or ``message_versions``) that meet
    *condition* (:data:`_QUOTING` or :data:`_UNMARKED`): each reads its partial index."""
    return f"SELECT {columns} FROM {table} WHERE {condition}"


def _stored_results(db: sqlite3.Connection, table: str, gone: Gone) -> list[Any]:
    """The rows of *table* (of :data:`_RESULT_COLUMNS`) that may quote a *gone* message.

    A result listing ids is read whole only when its extra names a gone id
    (:meth:`Gone.may_quote`; the content is the bulk of a row).  Results
    stored before results listed ids are read only when a gone message has
    words to match them by.
    """
    named = [
        int(rowid)
        for rowid, raw in db.execute(_quoting_sql(table, _QUOTING, "id, extra"))
        if gone.may_quote(str(raw))
    ]
    rows: list[Any] = []
    if named:
        rows = db.execute(
            f"SELECT {_RESULT_COLUMNS} FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(named),),
        ).fetchall()
    if gone.has_texts:
        rows += db.execute(_quoting_sql(table, _UNMARKED)).fetchall()
    return rows


def _quoting_rows(
    rows: Iterable[Sequence[Any]], gone: Gone
) -> Iterator[tuple[int, str, str, str, int, str, dict[str, Any]]]:
    """(rowid, msg_id, session, old content, tool, new content, new extra) of each of
    *rows* (of :func:`_stored_results`) whose stored search result quotes a *gone*
    message; rows that are themselves *gone* are left to their delete."""
    for rowid, msg_id, session_id, content, tool, raw in rows:
        if str(msg_id) in gone.ids:
            continue
        try:
            extra = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(extra, dict):
            continue
        changed = withdrawn_result(str(content), extra, gone)
        if changed is not None:
            yield rowid, str(msg_id), str(session_id), str(content), int(tool), *changed


def _withdraw_quoted(db: sqlite3.Connection, gone: Gone) -> None:
    """Take the lines of the *gone* messages out of every session's stored search results.

    The ``search_chat_history`` tool of a turn in one session may have
    quoted a message of another; the result is stored as a ``tool`` message
    (``core/quoted_results.py``).  Its row, its full-text entry (a tool row
    has no context and is no one's context, so no neighbour changes) and
    any earlier version of it in ``message_versions`` lose the quoting lines
    in the transaction that deletes the messages: matched by id, or for a
    result stored before results listed ids, by text.  The assistant's
    answers stay as they were (see ``core/quoted_results.py``).
    """
    if not gone:
        return
    live = _stored_results(db, "messages", gone)
    for rowid, _id, session_id, old, tool, content, extra in list(_quoting_rows(live, gone)):
        token = sid_token(session_id)
        body, ctx = _FtsContext().next(old, bool(tool))
        db.execute(
            "INSERT INTO messages_fts (messages_fts, rowid, body, sid, ctx)"
            " VALUES ('delete', ?, ?, ?, ?)",
            (rowid, body, token, ctx),
        )
        body, ctx = _FtsContext().next(content, bool(tool))
        db.execute(
            "INSERT INTO messages_fts (rowid, body, sid, ctx) VALUES (?, ?, ?, ?)",
            (rowid, body, token, ctx),
        )
        _set_content(db, "messages", rowid, content, extra)
    earlier = _stored_results(db, "message_versions", gone)
    for rowid, *_row, content, extra in list(_quoting_rows(earlier, gone)):
        _set_content(db, "message_versions", rowid, content, extra)


def _set_content(
    db: sqlite3.Connection, table: str, rowid: int, content: str, extra: dict[str, Any]
) -> None:
    """Write a row's new content and extra (``extra`` as :meth:`Message.extra_json` writes it)."""
    db.execute(
        f"UPDATE {table} SET content = ?, extra = ? WHERE id = ?",
        (content, json.dumps(extra, ensure_ascii=False, sort_keys=True), rowid),
    )


def _clear_derived_title(db: sqlite3.Connection, session_id: str, texts: list[str]) -> None:
    """Clear the session's title if it was made from *texts* or its earlier versions."""
    row = db.execute("SELECT title FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None or not row[0]:
        return
    older = db.execute("SELECT content FROM message_versions WHERE session_id = ?", (session_id,))
    if title_from_messages(str(row[0]), [*texts, *(str(r[0]) for r in older)]):
        db.execute("UPDATE sessions SET title = NULL WHERE session_id = ?", (session_id,))


class ArchiveError(KnownError, RuntimeError):
    """An environment problem with the archive file, phrased for the user."""


class ArchiveDamagedError(ArchiveError, StoreDamagedError):
    """The archive file is damaged: it must be set aside and rebuilt (see :mod:`recovery`)."""


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    """A row of the archive: the message plus where it sits."""

    rowid: int
    session_id: str
    seq: int
    message: Message


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """``session_meta``: title, activity and the compaction cut point."""

    session_id: str
    title: str | None
    created_ns: int
    updated_ns: int
    start_at_ns: int
    cut_seq: int
    next_seq: int


@dataclass(frozen=True, slots=True)
class Branch:
    """Why rows leave the live conversation but stay archived as an earlier version."""

    reason: str
    """``edit`` (a user message was edited) or ``regenerate`` (an answer was redone)."""
    anchor_id: str
    """The user message the branch belongs to: the edited one, or the one answered again."""
    branched_ns: int


_MSG_COLS = "m.id, m.session_id, m.seq, m.msg_id, m.role, m.content, m.time_ns, m.ref, m.extra"


def _row_to_archived(row: Sequence[Any]) -> ArchivedMessage:
    extra = json.loads(row[8]) if row[8] else {}
    return ArchivedMessage(
        rowid=row[0],
        session_id=row[1],
        seq=row[2],
        message=Message(
            id=row[3], role=row[4], content=row[5], time_ns=row[6], ref=row[7], extra=extra
        ),
    )


class Archive(SqliteStore):
    """Owner of the SQLite database.  Thread-safe through one lock."""

    _kind = "archive"
    _not_a_db = "the file is not an archive database"
    _error = ArchiveError
    _damaged = ArchiveDamagedError
    _schema_version = SCHEMA_VERSION
    _migrations = MIGRATIONS

    def __init__(self, path: Path) -> None:
        super().__init__(path, check_same_thread=False)

    def _opened(self) -> None:
        self._db.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
        # What a delete frees is overwritten with zeros, not left in free pages and cells:
        # a reset, a remove or a deleted message leaves no copy of its text in the file.
        self._db.execute("PRAGMA secure_delete = ON")
        self._df_memo: dict[tuple[str, str, str, int], tuple[int, int]] = {}
        if self.get_meta("fts_text_version") != str(FTS_TEXT_VERSION):
            self.rebuild_fts()

    # -- sessions -----------------------------------------------------------
    def ensure_session(self, session_id: str, now_ns: int, title: str | None = None) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO sessions (session_id, title, created_ns, updated_ns)"
                " VALUES (?, ?, ?, ?)",
                (session_id, title, now_ns, now_ns),
            )

    def session(self, session_id: str) -> SessionMeta | None:
        rows = self._query(
            "SELECT session_id, title, created_ns, updated_ns, start_at_ns, cut_seq, next_seq"
            " FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        return SessionMeta(*rows[0]) if rows else None

    def sessions(self) -> list[SessionMeta]:
        rows = self._query(
            "SELECT session_id, title, created_ns, updated_ns, start_at_ns, cut_seq, next_seq"
            " FROM sessions ORDER BY updated_ns DESC"
        )
        return [SessionMeta(*row) for row in rows]

    def recent_sessions(self, limit: int) -> list[SessionMeta]:
        """The *limit* sessions written to last, newest first."""
        rows = self._query(
            "SELECT session_id, title, created_ns, updated_ns, start_at_ns, cut_seq, next_seq"
            " FROM sessions ORDER BY updated_ns DESC LIMIT ?",
            (limit,),
        )
        return [SessionMeta(*row) for row in rows]

    def set_title(self, session_id: str, title: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE sessions SET title = ? WHERE session_id = ?", (title, session_id))

    def set_cut(self, session_id: str, cut_seq: int, start_at_ns: int) -> None:
        """Record a compaction's cut point (``session_meta.start_at``)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET cut_seq = ?, start_at_ns = ? WHERE session_id = ?",
                (cut_seq, start_at_ns, session_id),
            )

    # -- messages -----------------------------------------------------------
    def add_messages(self, session_id: str, messages: Sequence[Message], now_ns: int) -> list[int]:
        """Append messages to a session; returns their archive rowids."""
        if not messages:
            return []
        with self.transaction() as db:
            row = db.execute(
                "SELECT next_seq FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise KeyError(session_id)
            seq = row[0]
            rowids: list[int] = []
            context = _FtsContext(self._last_readable(db, session_id))
            for message in messages:
                cur = db.execute(
                    "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns,"
                    " ref, tool, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _row_values(session_id, seq, message),
                )
                rowid = cur.lastrowid
                assert rowid is not None
                body, ctx = context.next(message.content, message.is_tool_traffic)
                db.execute(
                    "INSERT INTO messages_fts (rowid, body, sid, ctx) VALUES (?, ?, ?, ?)",
                    (rowid, body, sid_token(session_id), ctx),
                )
                rowids.append(rowid)
                seq += 1
            db.execute(
                "UPDATE sessions SET next_seq = ?, updated_ns = ? WHERE session_id = ?",
                (seq, max(now_ns, messages[-1].time_ns), session_id),
            )
        return rowids

    def rowids_for(self, msg_ids: Iterable[str]) -> dict[str, int]:
        """Map message ids to archive rowids (missing ids are absent)."""
        ids = list(msg_ids)
        out: dict[str, int] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._query(f"SELECT msg_id, id FROM messages WHERE msg_id IN ({marks})", part)
            out.update(dict(rows))
        return out

    def count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return int(self._query("SELECT count(*) FROM messages")[0][0])
        return int(
            self._query("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,))[0][0]
        )

    def count_from(self, session_id: str, seq: int) -> int:
        """Rows of a session at or after *seq* (what history.json should hold)."""
        rows = self._query(
            "SELECT count(*) FROM messages WHERE session_id = ? AND seq >= ?", (session_id, seq)
        )
        return int(rows[0][0])

    def all_msg_ids(self, session_id: str) -> dict[str, int]:
        """msg_id -> seq for every row of a session."""
        rows = self._query("SELECT msg_id, seq FROM messages WHERE session_id = ?", (session_id,))
        return {str(r[0]): int(r[1]) for r in rows}

    def messages(
        self, session_id: str, seq_from: int = 0, seq_to: int | None = None
    ) -> list[ArchivedMessage]:
        """A session's rows with ``seq_from <= seq < seq_to``, in order."""
        upper = seq_to if seq_to is not None else 2**62
        rows = self._query(
            f"SELECT {_MSG_COLS} FROM messages m WHERE m.session_id = ? AND m.seq >= ?"
            " AND m.seq < ? ORDER BY m.seq",
            (session_id, seq_from, upper),
        )
        return [_row_to_archived(r) for r in rows]

    def by_rowids(self, rowids: Sequence[int]) -> dict[int, ArchivedMessage]:
        out: dict[int, ArchivedMessage] = {}
        for start in range(0, len(rowids), 500):
            part = list(rowids[start : start + 500])
            marks = ",".join("?" * len(part))
            rows = self._query(f"SELECT {_MSG_COLS} FROM messages m WHERE m.id IN ({marks})", part)
            out.update({r[0]: _row_to_archived(r) for r in rows})
        return out

    def gone(self, session_id: str, msg_ids: Collection[str] | None = None) -> Gone:
        """The messages a delete (*msg_ids*) or a reset or remove (None) of *session_id*
        is about to take, as stored results quote them (see :func:`_gone`)."""
        with self._lock:
            try:
                return _gone(self._db, session_id, msg_ids)
            except sqlite3.DatabaseError as exc:
                self._raise(exc)

    def quoting(self, gone: Gone) -> dict[str, list[str]]:
        """Per session, the ids of the live stored search results that quote a *gone*
        message (what :func:`quoted_histories.withdraw_from_histories` rewrites)."""
        out: dict[str, list[str]] = {}
        with self._lock:
            try:
                rows = _stored_results(self._db, "messages", gone)
            except sqlite3.DatabaseError as exc:
                self._raise(exc)
        for _rowid, msg_id, session_id, *_rest in _quoting_rows(rows, gone):
            out.setdefault(session_id, []).append(msg_id)
        return out

    def delete_session_rows(
        self, session_id: str, *, drop_session: bool, keep_events: Collection[str] = ()
    ) -> None:
        """Clear a session's archive rows, vectors and events (reset / remove), leaving no copy.

        A reset keeps the session's row (its settings, a title the person
        typed) and the timeline events of the kinds in *keep_events* (the
        summary's, when the summary stays); a title made from the session's
        own words goes with them (:func:`title_from_messages`).  The
        full-text index then drops the deleted words for good and the
        write-ahead log is emptied (:meth:`_scrub`).  Idempotent: run again
        after a crash, it finds nothing to delete and scrubs again.
        """
        self._df_memo.clear()  # frequencies may have fallen
        with self.transaction() as db:
            rows = db.execute(
                "SELECT id, content, session_id, tool FROM messages WHERE session_id = ?"
                " ORDER BY seq",
                (session_id,),
            ).fetchall()
            db.executemany(
                "INSERT INTO messages_fts (messages_fts, rowid, body, sid, ctx)"
                " VALUES ('delete', ?, ?, ?, ?)",
                list(_fts_rows(rows)),
            )
            if not drop_session:
                _clear_derived_title(db, session_id, [str(r[1]) for r in rows])
            gone = _gone(db, session_id, None)
            _withdraw_recalled(db, set(gone.ids))
            _withdraw_quoted(db, gone)
            db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM message_versions WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM vectors WHERE session_id = ?", (session_id,))
            kept = sorted(keep_events) if not drop_session else []
            marks = ",".join("?" * len(kept))
            db.execute(
                f"DELETE FROM events WHERE session_id = ? AND kind NOT IN ({marks})",
                (session_id, *kept),
            )
            if drop_session:
                db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            else:
                db.execute(
                    "UPDATE sessions SET start_at_ns = 0, cut_seq = 0, next_seq = 0"
                    " WHERE session_id = ?",
                    (session_id,),
                )
        self._scrub()

    def _scrub(self) -> None:
        """Leave no copy of deleted rows: merge the FTS index, then empty the write-ahead log.

        ``secure_delete`` (set at open) zeroes what a delete frees in the
        tables, but a contentless FTS5 index records a delete as a new
        segment listing the deleted words, beside the old segment that still
        holds them, until the segments are merged.  ``optimize`` merges them
        all at once (about a second per 100,000 messages, and nothing when
        the index is one segment already).  FTS5's own ``secure-delete``
        option (SQLite 3.42+) is not enough: measured with 3.54, it takes a
        deleted term out of the segments but its prefix stays in the
        segment index, so ``optimize`` runs whatever the version.  Last,
        the log, which still holds the pages as they were before, is copied
        back and truncated (:meth:`SqliteStore.truncate_log`).
        """
        with self.transaction() as db:
            db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
        self.truncate_log()

    # -- taking messages out of the live conversation -----------------------------
    def message(self, session_id: str, msg_id: str) -> ArchivedMessage | None:
        """One live row of a session by message id (None: not there, or not live)."""
        rows = self._query(
            f"SELECT {_MSG_COLS} FROM messages m WHERE m.session_id = ? AND m.msg_id = ?",
            (session_id, msg_id),
        )
        return _row_to_archived(rows[0]) if rows else None

    def exchange(self, session_id: str, seq: int) -> list[ArchivedMessage]:
        """The live rows of the exchange holding row *seq*: from its user message
        (the last one at or before *seq*) up to the next user message."""
        first = self._query(
            "SELECT max(seq) FROM messages WHERE session_id = ? AND seq <= ? AND role = 'user'",
            (session_id, seq),
        )[0][0]
        after = self._query(
            "SELECT min(seq) FROM messages WHERE session_id = ? AND seq > ? AND role = 'user'",
            (session_id, seq),
        )[0][0]
        return self.messages(session_id, 0 if first is None else int(first), after)

    def take_rows(
        self,
        session_id: str,
        msg_ids: Iterable[str],
        *,
        branch: Branch | None,
        event: tuple[int, str, dict[str, Any]] | None = None,
    ) -> int:
        """Take live rows out: deleted, or kept in ``message_versions`` as *branch*.

        One transaction: the rows, their full-text entries (the readable
        message after a removed one gets its new context), their vectors and
        the timeline *event* (written only when a row was taken, so running
        this again after a crash adds nothing).  Returns the rows taken.

        A delete (no *branch*) leaves no copy of the words in the file
        (:meth:`_scrub`, run again by a rerun after a crash): a person who
        deletes one message with a code in it means it.  An edit or a
        regenerate keeps the earlier version on purpose, for paging back.
        """
        self._df_memo.clear()  # frequencies may have fallen
        taken = self._take(session_id, list(msg_ids), branch, event)
        if branch is None:
            self._scrub()
        return taken

    def _take(
        self,
        session_id: str,
        msg_ids: list[str],
        branch: Branch | None,
        event: tuple[int, str, dict[str, Any]] | None,
    ) -> int:
        with self.transaction() as db:
            taken = _mark_taken(db, session_id, msg_ids)
            if not taken:
                return 0
            _refresh_fts_around(db, session_id, taken)
            chosen = "IN (SELECT id FROM temp.taken_rows)"
            if branch is None:  # a delete: no record of another turn may quote it either
                _withdraw_recalled(db, set(msg_ids))
                _withdraw_quoted(db, _gone(db, session_id, msg_ids))
            else:
                db.execute(
                    "INSERT INTO message_versions (msg_id, session_id, seq, role, content,"
                    " time_ns, ref, tool, extra, branched_ns, reason, anchor_id)"
                    " SELECT msg_id, session_id, seq, role, content, time_ns, ref, tool, extra,"
                    f" ?, ?, ? FROM messages WHERE id {chosen} ORDER BY seq",
                    (branch.branched_ns, branch.reason, branch.anchor_id),
                )
            db.execute(f"DELETE FROM vectors WHERE message_rowid {chosen}")
            db.execute(f"DELETE FROM messages WHERE id {chosen}")
            db.execute("DELETE FROM temp.taken_rows")
            if event is not None:
                time_ns, kind, detail = event
                db.execute(
                    "INSERT INTO events (session_id, time_ns, kind, detail) VALUES (?, ?, ?, ?)",
                    (session_id, time_ns, kind, json.dumps(detail, ensure_ascii=False)),
                )
        return len(taken)

    def branches(self, session_id: str, anchor_id: str, reason: str) -> list[list[ArchivedMessage]]:
        """Earlier versions kept for the user message *anchor_id*, oldest first."""
        rows = self._query(
            "SELECT branched_ns, id, session_id, seq, msg_id, role, content, time_ns, ref, extra"
            " FROM message_versions WHERE session_id = ? AND anchor_id = ? AND reason = ?"
            " ORDER BY branched_ns, seq",
            (session_id, anchor_id, reason),
        )
        groups: dict[int, list[ArchivedMessage]] = {}
        for row in rows:
            groups.setdefault(int(row[0]), []).append(_row_to_archived(row[1:]))
        return list(groups.values())

    def version_count(self, session_id: str) -> int:
        """Rows of a session kept as earlier versions."""
        rows = self._query(
            "SELECT count(*) FROM message_versions WHERE session_id = ?", (session_id,)
        )
        return int(rows[0][0])

    @staticmethod
    def _last_readable(db: sqlite3.Connection, session_id: str) -> str | None:
        """Content of the session's newest readable message (the next one's context)."""
        rows = db.execute(
            "SELECT content FROM messages WHERE session_id = ? AND tool = 0 ORDER BY seq DESC",
            (session_id,),
        )
        # Python's idea of blank (not SQL's trim, which keeps newlines) decides,
        # as in _FtsContext: both sides must agree on every row's context.
        return next((str(r[0]) for r in rows if str(r[0]).strip()), None)

    # -- full-text search ------------------------------------------------------
    def _doc_freq(self, expr: str, cap: int, scope: str = "", columns: str = "body") -> int:
        """Documents matching one term (inside *scope*, a sid filter), counted up to *cap*.

        Counting the term's own matches (stopping at *cap*) is exact for
        phrases and prefixes and costs at most *cap* postings; fts5vocab's
        count walks the term's whole doclist, which for a common word in a
        large archive took longer than the search it was meant to bound.
        With a scope, FTS5 intersects the term with the session's token and
        skips through the term's doclist, so the count is of the session's
        matches and costs about that many postings.
        """
        rows = self._query(
            "SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)",
            (f"{columns} : {expr}{scope}", cap),
        )
        return int(rows[0][0])

    def build_match(
        self,
        query: str,
        budget: int | None = None,
        session_id: str | None = None,
        *,
        with_context: bool = False,
    ) -> str | None:
        """Turn a user's text into a bounded FTS5 MATCH expression (None: no terms)."""
        if budget is None:
            budget = POSTINGS_BUDGET if session_id is None else SESSION_POSTINGS_BUDGET
        planned = self._plan_match(query, budget, _scope(session_id), _columns(with_context))
        return None if planned is None else planned.expr

    def _plan_match(
        self, query: str, budget: int, scope: str = "", columns: str = "body"
    ) -> MatchPlan | None:
        """The bounded MATCH expression for a user's text (:func:`planner.plan_match`).

        With a *scope* (a session), frequencies and the budget count that
        session's documents only: a word common in the archive but rare in
        the session is exactly the one that finds the answer there, and only
        the session's matches are ever scored.
        """
        newest = self._newest_rowid() if self._df_memo else 0

        def doc_freq(expr: str, cap: int) -> int:
            return self._term_df(expr, cap, scope, columns, newest)

        return plan_match(query, doc_freq, budget)

    def _term_df(self, expr: str, cap: int, scope: str, columns: str, newest: int) -> int:
        """:meth:`_doc_freq`, remembered for common terms.

        Counting a common word is the expensive part of planning (up to *cap*
        postings), and the same words come back query after query; a rare
        word is cheap to count and must be exact (a message said a moment
        ago has to be findable), so only counts of :data:`COMMON_DF` or more
        are kept.  They are only used to order terms and size the budget, so
        a count a few messages old is as good: it is recounted after
        :data:`DF_MEMO_ROWS` new messages, and all are forgotten when this
        connection deletes rows.  (Rows another process deletes leave a count
        high until then: the term is only treated as more common than it is.)
        """
        key = (expr, scope, columns, cap)
        known = self._df_memo.get(key)
        if known is not None and newest - known[1] <= DF_MEMO_ROWS:
            return known[0]
        df = self._doc_freq(expr, cap, scope, columns)
        if df >= COMMON_DF:
            if len(self._df_memo) >= DF_MEMO_SIZE:
                self._df_memo.pop(next(iter(self._df_memo)))
            self._df_memo[key] = (df, newest or self._newest_rowid())
        return df

    def _newest_rowid(self) -> int:
        rows = self._query("SELECT max(id) FROM messages")
        return int(rows[0][0] or 0)

    def _recent_floor(self, expr: str, budget: int) -> int:
        """Lowest rowid among the newest *budget* matches (0: rank them all).

        When even the rarest term matches more documents than the budget
        allows, only the newest of them are ranked: in a personal memory the
        recent mention is the likelier answer, and the cost stays bounded.
        """
        rows = self._query(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (expr, budget - 1),
        )
        return int(rows[0][0]) if rows else 0

    def keyword_search(
        self,
        query: str,
        *,
        limit: int,
        session_id: str | None = None,
        time_from_ns: int | None = None,
        time_to_ns: int | None = None,
        include_tool: bool = False,
        exclude_msg_ids: frozenset[str] = frozenset(),
        with_context: bool = False,
    ) -> list[tuple[ArchivedMessage, float]]:
        """Best-first archive hits with a relevance score (higher is better).

        *with_context*: a message also matches through the words of the
        readable message before it (weighted 0.4), so an answer is found by
        the question it answers; without it, only a message's own words count.

        FTS5 ranks in a subquery with a LIMIT; the remaining filters (time,
        tool traffic, excluded ids) apply to that short list, which is widened
        until enough hits survive or FTS5 has nothing more to give.
        """
        budget = POSTINGS_BUDGET if session_id is None else SESSION_POSTINGS_BUDGET
        scope, columns = _scope(session_id), _columns(with_context)
        planned = self._plan_match(query, budget, scope, columns)
        if planned is None:
            return []
        expr = f"{columns} : ({planned.expr}){scope}"
        floor = self._recent_floor(expr, budget) if planned.postings > budget else 0
        where = _filters(time_from_ns, time_to_ns, include_tool)
        span = None if session_id is None else self._session_span(session_id)
        if span is not None:  # the same matches and scores, without the session's phrase
            expr = f"{columns} : ({planned.expr})"
            where = (f"{where[0]} AND m.session_id = ?", [*where[1], session_id])
        low, high = span or (0, _MAX_ROWID)

        def page(fetch: int) -> tuple[list[tuple[ArchivedMessage, float]], bool]:
            nonlocal floor
            rowids = (max(floor, low), high)
            hits, exhausted = self._ranked(expr, rowids, fetch, where, exclude_msg_ids)
            if len(hits) < limit and exhausted and floor:
                floor = 0  # the newest matches did not pass the filters: rank all
                rowids = (low, high)
                hits, exhausted = self._ranked(expr, rowids, fetch, where, exclude_msg_ids)
            return hits, exhausted

        return fetch_enough(page, limit, (limit + len(exclude_msg_ids)) * 3 + 10)

    def _session_span(self, session_id: str) -> tuple[int, int] | None:
        """The rowids a large session's messages lie between, if they lie together.

        FTS5's bm25 weighs each phrase of a query by reading the phrase's
        whole doclist once per query, and the session token's phrase lists
        every message of the session: for 100,000 messages that read was
        half of a session-scoped search (its weight in the score is 0).
        Ranking the same terms inside the session's rowid span gives the same
        matches and scores without it; rows of other sessions inside the span
        are filtered out after ranking, so the span is used only when they
        are few (an imported conversation, a session not interleaved with
        others).  None: rank with the session's phrase.
        """
        token = f'"{sid_token(session_id)}"'
        docs = self._term_df(token, _MAX_ROWID, "", "sid", self._newest_rowid())
        if docs < SPAN_MIN_DOCS:
            return None
        ends = [
            self._query(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
                f" ORDER BY rowid {order} LIMIT 1",
                (f"sid : {token}",),
            )
            for order in ("ASC", "DESC")
        ]
        if not (ends[0] and ends[1]):
            return None
        low, high = int(ends[0][0][0]), int(ends[1][0][0])
        return (low, high) if high - low + 1 <= docs * SPAN_SLACK else None

    def _ranked(
        self,
        expr: str,
        rowids: tuple[int, int],
        fetch: int,
        where: tuple[str, list[Any]],
        exclude_msg_ids: frozenset[str],
    ) -> tuple[list[tuple[ArchivedMessage, float]], bool]:
        """(hits among FTS5's best *fetch* matches with a rowid in *rowids* (both
        ends included) that pass *where*, best first; whether FTS5 returned
        fewer than *fetch*)."""
        ranked = self._query(
            f"SELECT rowid, {RANK_SQL} AS score FROM messages_fts WHERE messages_fts MATCH ?"
            " AND rowid >= ? AND rowid <= ? ORDER BY score LIMIT ?",
            (expr, *rowids, fetch),
        )
        score = {int(rowid): -float(rank) for rowid, rank in ranked}
        marks = ",".join("?" * len(score))
        sql, params = where
        rows = self._query(
            f"SELECT {_MSG_COLS} FROM messages m WHERE m.id IN ({marks}) AND {sql}",
            [*score, *params],
        )
        hits = [(_row_to_archived(r), score[r[0]]) for r in rows if r[3] not in exclude_msg_ids]
        hits.sort(key=lambda hit: hit[1], reverse=True)
        return hits, len(ranked) < fetch

    def rebuild_fts(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Recreate the derived full-text index from the rows (interrupt-safe)."""
        total = self.count()
        with self.transaction() as db:
            db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('delete-all')")
            done = 0
            cursor = db.execute(
                "SELECT id, content, session_id, tool FROM messages ORDER BY session_id, seq"
            )
            rows = _fts_rows(cursor)
            while batch := list(itertools.islice(rows, 2000)):
                db.executemany(
                    "INSERT INTO messages_fts (rowid, body, sid, ctx) VALUES (?, ?, ?, ?)", batch
                )
                done += len(batch)
                if progress:
                    progress(done, total)
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_text_version', ?)",
                (str(FTS_TEXT_VERSION),),
            )

    def fts_ok(self) -> bool:
        """FTS5's own integrity check, plus one indexed document per row.

        A contentless table cannot be checked against the rows by FTS5
        itself, so the document count is compared as well.
        """
        try:
            with self._lock:
                self._db.execute(
                    "INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 0)"
                )
                indexed = self._db.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()
                rows = self._db.execute("SELECT count(*) FROM messages").fetchone()
        except sqlite3.DatabaseError:
            return False
        return bool(indexed[0] == rows[0])

    # -- vectors ----------------------------------------------------------------
    def add_vectors(self, session_id: str, model: str, items: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors as (label, blob); see :func:`vector_label`."""
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors (label, message_rowid, session_id, model, vec)"
                " VALUES (?, ?, ?, ?, ?)",
                [(label, label_message(label), session_id, model, blob) for label, blob in items],
            )

    def vectors(self, session_id: str) -> list[tuple[int, bytes]]:
        """A session's vectors as (label, blob), in label order."""
        return [
            (int(r[0]), bytes(r[1]))
            for r in self._query(
                "SELECT label, vec FROM vectors WHERE session_id = ? ORDER BY label",
                (session_id,),
            )
        ]

    def sessions_between(self, session_ids: Sequence[str], lo_ns: int, hi_ns: int) -> list[str]:
        """Those of *session_ids* with a message said between two times (both included)."""
        return [
            sid
            for sid in session_ids
            if self._query(
                "SELECT 1 FROM messages WHERE session_id = ? AND time_ns BETWEEN ? AND ? LIMIT 1",
                (sid, lo_ns, hi_ns),
            )
        ]

    def vectors_between(self, session_id: str, lo_ns: int, hi_ns: int) -> list[tuple[int, bytes]]:
        """The vectors of a session's messages said between two times (both included),
        in label order: a time-limited search reads these, not the whole session."""
        return [
            (int(r[0]), bytes(r[1]))
            for r in self._query(
                "SELECT v.label, v.vec FROM messages m JOIN vectors v ON v.message_rowid = m.id"
                " WHERE m.session_id = ? AND m.time_ns BETWEEN ? AND ? ORDER BY v.label",
                (session_id, lo_ns, hi_ns),
            )
        ]

    def vector_labels(self, session_id: str) -> set[int]:
        rows = self._query("SELECT label FROM vectors WHERE session_id = ?", (session_id,))
        return {int(r[0]) for r in rows}

    def vector_rowids(self, session_id: str) -> set[int]:
        """Rowids of the messages that have at least one vector."""
        rows = self._query(
            "SELECT DISTINCT message_rowid FROM vectors WHERE session_id = ?", (session_id,)
        )
        return {int(r[0]) for r in rows}

    def vector_message_count(self, session_id: str) -> int:
        """How many messages have a vector: their first parts, counted on the session index.

        Every embedded message has part 0.  ``len(vector_rowids(...))`` reads each
        vector's row, blob and all (60 ms for a session of 9,000); this reads the index.
        """
        rows = self._query(
            "SELECT count(*) FROM vectors WHERE session_id = ? AND label % ? = 0",
            (session_id, MAX_PARTS),
        )
        return int(rows[0][0])

    def delete_vectors(self, rowids: Iterable[int]) -> None:
        """Drop every vector (all parts) of the given messages."""
        with self.transaction() as db:
            db.executemany("DELETE FROM vectors WHERE message_rowid = ?", [(r,) for r in rowids])

    def delete_all_vectors(self) -> None:
        """Forget every stored vector (the embedding model changed)."""
        with self.transaction() as db:
            db.execute("DELETE FROM vectors")

    def vector_sessions(self) -> set[str]:
        return {r[0] for r in self._query("SELECT DISTINCT session_id FROM vectors")}

    # -- events -------------------------------------------------------------
    def add_event(self, session_id: str, time_ns: int, kind: str, detail: dict[str, Any]) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO events (session_id, time_ns, kind, detail) VALUES (?, ?, ?, ?)",
                (session_id, time_ns, kind, json.dumps(detail, ensure_ascii=False)),
            )

    def events(self, session_id: str) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self._query(
            "SELECT time_ns, kind, detail FROM events WHERE session_id = ? ORDER BY time_ns, id",
            (session_id,),
        )
        return [(int(r[0]), str(r[1]), json.loads(r[2])) for r in rows]

    def last_event(self, session_id: str, kind: str) -> tuple[int, dict[str, Any]] | None:
        """The newest event of one kind in a session (time, detail), or None."""
        rows = self._query(
            "SELECT time_ns, detail FROM events WHERE session_id = ? AND kind = ?"
            " ORDER BY time_ns DESC, id DESC LIMIT 1",
            (session_id, kind),
        )
        return (int(rows[0][0]), json.loads(rows[0][1])) if rows else None

    def doc_frequency(
        self,
        expr: str,
        cap: int,
        *,
        without_sessions: Collection[str] = (),
        without_messages: Collection[str] = (),
    ) -> int:
        """Messages matching one quoted FTS term (from ``fts_text.query_terms``), up to *cap*.

        Messages of *without_sessions* and those of *without_messages* are not
        counted: the window withholds them in an undo window, and a word said
        only there was, as far as a turn may know, never said.
        """
        if not without_sessions and not without_messages:
            return self._doc_freq(expr, cap)
        rows = self._query(
            "SELECT count(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
            " AND rowid NOT IN (SELECT id FROM messages"
            " WHERE session_id IN (SELECT value FROM json_each(?))"
            " OR msg_id IN (SELECT value FROM json_each(?))) LIMIT ?)",
            (
                f"body : {expr}",
                json.dumps(sorted(without_sessions)),
                json.dumps(sorted(without_messages)),
                cap,
            ),
        )
        return int(rows[0][0])

    def vocabulary_has_range(self, low: str, high: str) -> bool:
        """Whether any indexed term lies in [*low*, *high*): which scripts the messages
        are written in, at the cost of one seek in the FTS vocabulary."""
        rows = self._query(
            "SELECT 1 FROM messages_vocab WHERE term >= ? AND term < ? LIMIT 1", (low, high)
        )
        return bool(rows)

    def vocabulary_count(self, terms: Sequence[str]) -> int:
        """How many of *terms* (as the index writes them: folded, stemmed) are indexed."""
        marks = ",".join("?" * len(terms))
        rows = self._query(f"SELECT count(*) FROM messages_vocab WHERE term IN ({marks})", terms)
        return int(rows[0][0]) if rows else 0

    # -- recovery and start-up counts -------------------------------------------
    def probe(self) -> None:
        """The cheap check at open: the tables every command reads can be read.

        Reads the sessions and the newest message of each (the pages a
        start-up and a sessions list touch first); a damaged page there
        raises :class:`ArchiveDamagedError`.  Damage elsewhere shows when a
        query reaches it, or in ``doctor`` (:meth:`integrity_problems`).
        """
        self._query("SELECT count(*), max(next_seq) FROM sessions")
        self._query("SELECT max(id) FROM messages")
        self._query("SELECT id, content FROM messages ORDER BY id DESC LIMIT 64")

    def recent_counts(self) -> dict[str, int]:
        """Per session, the rows at or after its cut point (what history.json holds)."""
        rows = self._query(
            "SELECT s.session_id, count(m.id) FROM sessions s LEFT JOIN messages m"
            " ON m.session_id = s.session_id AND m.seq >= s.cut_seq GROUP BY s.session_id"
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def vector_message_counts(self) -> dict[str, int]:
        """Per session, how many messages have at least one vector."""
        rows = self._query(
            "SELECT session_id, count(DISTINCT message_rowid) FROM vectors GROUP BY session_id"
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def restore(
        self,
        sessions: Sequence[SessionMeta],
        rows: Sequence[tuple[int | None, str, int, Message]],
        events: Sequence[tuple[int, str, int, str, str]],
    ) -> int:
        """Write salvaged and restored rows into this (fresh) archive; returns messages written.

        *rows* are (rowid or None, session_id, seq, message): a salvaged row
        keeps its rowid (so nothing that points at it changes), a row restored
        from history.json gets a new one, after every kept rowid.  *events*
        are (id, session_id, time_ns, kind, detail JSON).  A row whose id or
        (session, seq) is already taken is skipped, never overwritten.  The
        full-text index is rebuilt from the rows at the end.
        """
        written = 0
        ordered = sorted(rows, key=lambda row: (row[0] is None, row[0] or 0))
        with self.transaction() as db:
            for meta in sessions:
                db.execute(
                    "INSERT OR IGNORE INTO sessions (session_id, title, created_ns, updated_ns,"
                    " start_at_ns, cut_seq, next_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        meta.session_id,
                        meta.title,
                        meta.created_ns,
                        meta.updated_ns,
                        meta.start_at_ns,
                        meta.cut_seq,
                        meta.next_seq,
                    ),
                )
            for rowid, session_id, seq, message in ordered:
                cur = db.execute(
                    "INSERT OR IGNORE INTO messages (id, msg_id, session_id, seq, role, content,"
                    " time_ns, ref, tool, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (rowid, *_row_values(session_id, seq, message)),
                )
                written += cur.rowcount
            db.executemany(
                "INSERT OR IGNORE INTO events (id, session_id, time_ns, kind, detail)"
                " VALUES (?, ?, ?, ?, ?)",
                events,
            )
            db.execute(
                "UPDATE sessions SET next_seq = max(next_seq, coalesce((SELECT max(seq) + 1"
                " FROM messages m WHERE m.session_id = sessions.session_id), 0))"
            )
        self.rebuild_fts()
        return written
