"""A session's history as events in time order: what the timeline shows.

Messages, tool calls, summary passes, compactions, resets, imports and
error-memory activity (a hint injected after a failed call, a record written
by ``remember_error``) come from three places — the archive's messages, its
``events`` table, and the summary's pass log — and are merged by
:func:`build_timeline`, a pure function; :func:`load_timeline` reads them
(on the window's storage thread, or directly from the CLI).
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenvoy_desktop.agent.query_translation import LANGUAGE_NAMES
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.recall_record import RECALL_EVENT, withdrawn
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import PassRecord, read_records
from agenvoy_desktop.core.timeutil import format_local
from agenvoy_desktop.operations.chat import hidden_lines
from agenvoy_desktop.operations.messages import action_text

KINDS: dict[str, str] = {
    "message": "Messages",
    "tool": "Tool calls",
    "recall": "Recall",
    "summary": "Summary",
    "compaction": "Compaction",
    "reset": "Resets",
    "import": "Imports",
    "errors": "Error memory",
}
KIND_LABELS: dict[str, str] = {
    "message": "Message",
    "tool": "Tool call",
    "recall": "Recall",
    "summary": "Summary",
    "compaction": "Compaction",
    "reset": "Reset",
    "import": "Import",
    "errors": "Error memory",
}
"""A row's kind (the filter menu uses the plural names in KINDS)."""
_MARKUP = re.compile(r"(\*\*|__|`+|^#+\s|^>\s|\|)", re.MULTILINE)
TEXT_CHARS = 120


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One row: when, what kind, a line of text, and the message it points at."""

    time_ns: int
    kind: str
    text: str
    message_id: str | None = None


def _recall_line(detail: Mapping[str, Any]) -> str:
    """What proactive recall put in the prompt: earlier messages, document passages, or both."""
    ids = detail.get("ids") or []
    citations = detail.get("citations") or []
    searched = detail.get("searched_as")
    language = LANGUAGE_NAMES.get(detail.get("searched_in") or "en", "another language")
    also = f" (searched in {language} too: “{searched}”)" if searched else ""
    if not ids and not citations and detail.get("example"):
        return f"Nothing remembered answers this question{also}; the model was shown how to say so"
    gone = int(detail.get("withdrawn") or 0)
    held = int(detail.get("hidden") or 0)
    parts = []
    if ids or not citations:
        parts.append(_recalled(len(ids), gone, held))
    if citations:
        parts.append(f"{len(citations)} passage{'s' if len(citations) != 1 else ''} from documents")
    lines = [
        line.removeprefix("- ")
        for line in str(detail.get("text", "")).splitlines()
        if line.startswith(("- ", "["))  # the items, not the blocks' headers
    ]
    head = " and ".join(parts) + also
    return f"{head}: {' '.join(lines)}" if lines else head  # all of it deleted since


def _recalled(shown: int, gone: int, held: int) -> str:
    """How many earlier messages a recall event quotes, and how many of them are gone or
    hidden now ("Recalled 1 earlier message, deleted since" when none is left to show)."""
    if shown == 0 and (gone or held):
        whys = [w for n, w in ((gone, "deleted since"), (held, _HELD)) if n]
        return f"Recalled {_messages(gone + held)}, {' or '.join(whys)}"
    notes = (f" ({gone} more deleted since)" if gone else "") + (
        f" ({held} more {_HELD})" if held else ""
    )
    return f"Recalled {_messages(shown)}{notes}"


_HELD = "hidden while its delete can be undone"


def _messages(count: int) -> str:
    return f"{count} earlier message{'s' if count != 1 else ''}"


def _clip(text: str) -> str:
    """One line of plain text: Markdown emphasis, code ticks and table bars removed."""
    flat = " ".join(_MARKUP.sub(" ", text).split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"


def _args(arguments: object) -> str:
    if not isinstance(arguments, Mapping):
        return ""
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())


def message_events(messages: Sequence[Message]) -> list[TimelineEvent]:
    """Messages, tool calls (with their outcome) and injected hints."""
    results = {
        str(m.extra.get("tool_call_id")): m
        for m in messages
        if m.role == "tool" and m.extra.get("tool_call_id")
    }
    called = {str(c.get("id")) for m in messages for c in _calls(m)}
    out: list[TimelineEvent] = []
    for m in messages:
        if m.role in ("user", "assistant") and (m.content.strip() or not _calls(m)):
            who = "You" if m.role == "user" else "Assistant"
            mark = " (interrupted)" if m.extra.get("interrupted") else ""
            text = f"{who}{mark}: {_clip(m.content)}"
            out.append(TimelineEvent(m.time_ns, "message", text, m.id))
        for call in _calls(m):
            out += _call_events(m, call, results)
        if m.role == "tool" and str(m.extra.get("tool_call_id")) not in called:
            orphan = {  # its call is on an earlier page of history (or was never stored)
                "id": m.extra.get("tool_call_id"),
                "function": {"name": m.extra.get("name"), "arguments": m.extra.get("arguments")},
            }
            out += _call_events(m, orphan, results)
    return out


def _calls(message: Message) -> list[Mapping[str, Any]]:
    calls = message.extra.get("tool_calls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _status(result: Message | None) -> str:
    if result is None:
        return "pending"
    if result.extra.get("is_error"):
        return "failed"
    return "no result" if result.extra.get("empty") else "done"


def _call_events(
    message: Message, call: Mapping[str, Any], results: Mapping[str, Message]
) -> list[TimelineEvent]:
    """The call itself, its hint (if one was injected) and, for remember_error, the record."""
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    name = str(function.get("name") or "tool")
    arguments = function.get("arguments") or {}
    result = results.get(str(call.get("id")))
    target = result.id if result is not None else message.id
    text = f"{name}({_clip(_args(arguments))}) · {_status(result)}"
    events = [TimelineEvent(message.time_ns, "tool", text, target)]
    if name == "remember_error":
        record = f"Record written: {_clip(_args(arguments))}"
        events.append(TimelineEvent(message.time_ns, "errors", record, target))
    hint = str(result.extra.get("error_hint") or "") if result is not None else ""
    if result is not None and hint:
        events.append(
            TimelineEvent(result.time_ns, "errors", f"Hint for {name}: {_clip(hint)}", target)
        )
    return events


def _time_of(point: object) -> str:
    """A cursor or chunk end as a short local time ("11-26 23:14"; "start" for none)."""
    if isinstance(point, Mapping) and point.get("time_ns"):
        return format_local(int(point["time_ns"]))[5:]
    return "start"


def summary_event(record: PassRecord) -> TimelineEvent:
    """A pass, a failed pass or a user edit of the summary."""
    target = record.chunk_last.get("message_id") if record.chunk_last else None
    if record.kind == "edit":
        return TimelineEvent(record.time_ns, "summary", "Summary edited by you", None)
    if record.kind == "failed":
        text = f"Summary pass failed: {_clip(record.error or 'unknown error')}"
        return TimelineEvent(record.time_ns, "summary", text, target)
    if record.kind == "stopped":
        text = (
            f"Summary pass stopped after {record.duration_s:.1f} s · "
            f"{record.messages} messages wait for the next pass"
        )
        return TimelineEvent(record.time_ns, "summary", text, None)
    text = (
        f"Summary pass · {record.messages} messages folded · cursor "
        f"{_time_of(record.cursor_before)} → {_time_of(record.cursor_after)} · "
        f"{record.duration_s:.1f} s (messages {_time_of(record.chunk_first)} … "
        f"{_time_of(record.chunk_last)})"
    )
    return TimelineEvent(record.time_ns, "summary", text, str(target) if target else None)


def archive_event(
    time_ns: int, kind: str, detail: Mapping[str, Any], messages: Sequence[Message]
) -> TimelineEvent | None:
    """One row of the archive's events table (None when messages already show it)."""
    if kind == "import":
        return TimelineEvent(time_ns, "import", f"Imported {detail.get('messages', 0):,} messages")
    if kind == "reset":
        return TimelineEvent(time_ns, "reset", "Session reset: messages cleared, summary kept")
    if kind == "compaction":
        cut = int(detail.get("start_at_ns", 0))
        first = next((m.id for m in messages if m.time_ns >= cut), None)
        text = (
            f"Compaction: {detail.get('dropped', 0):,} oldest messages left the hot history "
            f"(kept in the archive), cut at {format_local(cut) if cut else '?'}"
        )
        return TimelineEvent(time_ns, "compaction", text, first)
    if kind in ("summary_pass", "summary_failed"):
        record_kind = "pass" if kind == "summary_pass" else "failed"
        return summary_event(
            PassRecord.from_json({**detail, "kind": record_kind, "time_ns": time_ns})
        )
    if (action := action_text(kind, detail)) is not None:  # delete, edit, regenerate, fork
        target = detail.get("message_id") if kind == "regenerated" else None
        return TimelineEvent(time_ns, "message", action, str(target) if target else None)
    if kind == "error_hint":
        return None  # the tool result that carries the hint is shown instead
    if kind == "recall":
        text = _recall_line(detail)
        target = detail.get("message_id")
        return TimelineEvent(time_ns, "recall", _clip(text), str(target) if target else None)
    return TimelineEvent(
        time_ns, kind if kind in KINDS else "errors", f"{kind}: {_clip(str(detail))}"
    )


def build_timeline(
    messages: Sequence[Message],
    events: Iterable[tuple[int, str, dict[str, Any]]],
    records: Sequence[PassRecord],
) -> list[TimelineEvent]:
    """Every event of a session in time order (see the module docstring).

    Message events come in archive order, which is time order; the few
    other events are merged in.  (One big ``sort`` of 10,000 rows holds the
    GIL long enough to make the window stutter; a merge does not.)
    """
    from_messages = message_events(messages)
    seen_passes = {r.time_ns for r in records}
    others: list[TimelineEvent] = [summary_event(r) for r in records]
    for time_ns, kind, detail in events:
        if kind in ("summary_pass", "summary_failed") and time_ns in seen_passes:
            continue
        event = archive_event(time_ns, kind, detail, messages)
        if event is not None:
            others.append(event)
    order = {k: n for n, k in enumerate(KINDS)}

    def key(event: TimelineEvent) -> tuple[int, int]:
        return event.time_ns, order.get(event.kind, 99)

    others.sort(key=key)
    if any(a.time_ns > b.time_ns for a, b in itertools.pairwise(from_messages)):
        from_messages.sort(key=key)  # imported history with times out of order
    return list(heapq.merge(from_messages, others, key=key))


def load_timeline(
    store: MemoryStore, session_id: str, withheld: Withheld = NOTHING_WITHHELD
) -> list[TimelineEvent]:
    """Read and merge a session's events (storage thread).

    A recall event's lines that quote what is *withheld* (a message, or a
    session being reset or removed, in its undo window) are left out, as the
    chat's recall chip leaves them out; once the delete runs, the stored
    record has lost them for good.
    """
    if not store.exists(session_id):
        return []
    messages = [row.message for row in store.archive.messages(session_id)]
    records = read_records(store.folder(session_id))
    events = store.archive.events(session_id)
    if withheld.sessions or withheld.messages:
        events = _without_withheld(store, events, withheld)
    return build_timeline(messages, events, records)


def _without_withheld(
    store: MemoryStore, events: Iterable[tuple[int, str, dict[str, Any]]], withheld: Withheld
) -> list[tuple[int, str, dict[str, Any]]]:
    """*events* with the recall lines that quote a withheld message taken out (counted in
    the detail's ``hidden``)."""
    rows = list(events)
    quoted = {
        str(i) for _t, kind, detail in rows if kind == RECALL_EVENT for i in detail.get("ids") or []
    }
    if not quoted:
        return rows
    lines = hidden_lines(store, quoted, withheld)
    hidden = {message_id for message_id, (why, _sid) in lines.items() if why != "gone"}
    out: list[tuple[int, str, dict[str, Any]]] = []
    for time_ns, kind, detail in rows:
        changed = withdrawn(detail, hidden) if kind == RECALL_EVENT else None
        if changed is not None:
            changed["withdrawn"] = detail.get("withdrawn", 0)
            changed["hidden"] = len(detail.get("ids") or []) - len(changed["ids"])
        out.append((time_ns, kind, detail if changed is None else changed))
    return out
