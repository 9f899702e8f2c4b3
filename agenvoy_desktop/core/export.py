"""A session, exported for people (Markdown) or for programs (JSON).

Used by the window's Export actions and by "Export first" before a remove.
The export reads the archive, not history.json: the archive holds every
message ever written, even after compaction trimmed the hot history, so an
export before removal keeps everything the app is about to delete.

The JSON form is ``{"format": "agenvoy-session", "version": 1, ...,
"messages": [...]}`` where each message has the history.json shape
(``id``, ``role``, ``content``, ``time`` and the tool fields), plus the
rolling summary when there is one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.summary import Summary, load_summary
from agenvoy_desktop.core.timeutil import format_iso, format_local

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore

ExportFormat = Literal["markdown", "json"]
EXPORT_FORMAT = "agenvoy-session"
EXPORT_VERSION = 1
SUFFIXES: dict[ExportFormat, str] = {"markdown": ".md", "json": ".json"}
ROLE_LABELS = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}


@dataclass(frozen=True, slots=True)
class SessionExport:
    """Everything an export holds, read once on the storage thread."""

    session_id: str
    title: str | None
    created_ns: int
    messages: list[Message]
    summary: Summary | None


def collect(store: MemoryStore, session_id: str) -> SessionExport:
    """Read a session's complete history and summary (storage thread)."""
    store.require(session_id)
    meta = store.archive.session(session_id)
    messages = [row.message for row in store.archive.messages(session_id)]
    if not messages:  # an archive row can lag a crash; history.json then has it
        messages = list(store.history(session_id).messages)
    return SessionExport(
        session_id=session_id,
        title=meta.title if meta else None,
        created_ns=meta.created_ns if meta else 0,
        messages=messages,
        summary=load_summary(store.folder(session_id)),
    )


def write_export(
    store: MemoryStore, session_id: str, path: Path, fmt: ExportFormat, now_ns: int
) -> Path:
    """Export *session_id* to *path* atomically (storage thread); returns *path*."""
    data = collect(store, session_id)
    text = (
        to_markdown(data, now_ns)
        if fmt == "markdown"
        else json.dumps(to_json(data, now_ns), ensure_ascii=False, indent=2) + "\n"
    )
    atomic_write_text(path, text)
    return path


def suggested_filename(title: str | None, session_id: str, fmt: ExportFormat) -> str:
    """A file name safe on every platform: the title's words, else the session id."""
    stem = re.sub(r"[^\w\- ]+", "", title or "", flags=re.UNICODE).strip()
    stem = re.sub(r"\s+", "-", stem)[:60].strip("-") or f"session-{session_id}"
    return stem + SUFFIXES[fmt]


# -- JSON ---------------------------------------------------------------------------
def to_json(data: SessionExport, now_ns: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session_id": data.session_id,
        "title": data.title,
        "created": format_iso(data.created_ns) if data.created_ns else None,
        "exported": format_iso(now_ns),
        "messages": [m.to_json() for m in data.messages],
    }
    if data.summary is not None:
        out["summary"] = data.summary.to_json()
    return out


# -- Markdown -------------------------------------------------------------------------
def to_markdown(data: SessionExport, now_ns: int) -> str:
    """A readable transcript: heading per message, tool traffic in fenced blocks."""
    title = data.title or f"Session {data.session_id}"
    lines = [
        f"# {title}",
        "",
        f"*Session `{data.session_id}` · {len(data.messages)} messages · "
        f"exported {format_local(now_ns)}*",
        "",
    ]
    if data.summary is not None and not data.summary.is_empty:
        lines += _summary_lines(data.summary)
    for message in data.messages:
        lines += _message_lines(message)
    return "\n".join(lines).rstrip() + "\n"


def _summary_lines(summary: Summary) -> list[str]:
    lines = ["## Summary", ""]
    if summary.key_decisions:
        lines += ["**Key decisions**", ""]
        lines += [
            f"- {d.decision}" + (f" ({d.decided_at})" if d.decided_at else "")
            for d in summary.key_decisions
        ]
        lines.append("")
    if summary.past_discussions:
        lines += ["**Past discussions**", ""]
        lines += [
            f"- **{p.topic}** ({p.last_discussed}): {p.description}"
            for p in summary.past_discussions
        ]
        lines.append("")
    if summary.current_discussion:
        lines += ["**Current discussion**", "", summary.current_discussion, ""]
    return [*lines, "---", ""]


def _message_lines(message: Message) -> list[str]:
    extra = message.extra
    label = ROLE_LABELS.get(message.role, message.role)
    if message.role == "tool":
        label = f"Tool result · {extra.get('name', 'tool')}"
    lines = [f"### {label} · {format_local(message.time_ns)}", ""]
    if message.role == "tool":
        lines += fenced(message.content, "")
        if extra.get("error_hint"):
            lines += ["", *(f"> {line}" for line in str(extra["error_hint"]).splitlines())]
    elif message.content:
        lines.append(message.content)
    for call in _calls(extra):
        function = call.get("function", {})
        arguments = json.dumps(function.get("arguments", {}), ensure_ascii=False, indent=2)
        lines += ["", f"Tool call: `{function.get('name', '?')}`", "", *fenced(arguments, "json")]
    if extra.get("interrupted"):
        lines += ["", "*(answer interrupted)*"]
    return [*lines, ""]


def _calls(extra: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    calls = extra.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, Mapping)]


def fenced(text: str, language: str) -> list[str]:
    """*text* in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + language, text, fence]
