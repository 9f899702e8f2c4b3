"""The rolling summary's data, schema, files and prompt text (DESIGN.md §1.1).

A summary is a small structured object — binding ``key_decisions``,
``past_discussions`` with dates, and the ``current_discussion`` — that a
model rewrites (merges) once per chunk of older messages.  Small local models
break free-form JSON, so generation is constrained by :data:`SUMMARY_SCHEMA`
(a llama.cpp grammar) and every answer is checked again by
:func:`parse_summary`, which rejects anything off-shape instead of repairing
it: a bad answer is a failed chunk, never a corrupted summary.

Files in the session folder:

``summary.json``
    the summary plus ``version`` (atomic writes).
``summary.meta.json``
    the incremental cursor (:class:`SummaryMeta`, atomic writes).
``summary.history.jsonl``
    one :class:`PassRecord` per pass, failure and user edit (appended and
    fsynced; a torn last line is skipped on read).

The runner that fills them is :mod:`agenvoy_desktop.core.summarizer`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agenvoy_desktop.core.atomic import atomic_write_text, fsync_dir
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.timeutil import format_local

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)

SUMMARY_VERSION = 1
SUMMARY_FILE = "summary.json"
META_FILE = "summary.meta.json"
LOG_FILE = "summary.history.jsonl"

MAX_DECISIONS = 8
MAX_DISCUSSIONS = 8
DECISION_CHARS = 200
TOPIC_CHARS = 80
DESCRIPTION_CHARS = 300
CURRENT_CHARS = 600
TOOL_RESULT_CHARS = 160
TOOL_ARGS_CHARS = 80

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SummaryFormatError(ValueError):
    """A summary (model answer, user edit or file) that is not the agreed shape."""


class SummaryFileError(RuntimeError):
    """A summary file that cannot be read; ``str()`` names the file."""


# -- data ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyDecision:
    """A final choice; binding for the assistant until the user changes it."""

    decision: str
    decided_at: str | None = None

    def to_json(self) -> dict[str, str]:
        data = {"decision": self.decision}
        if self.decided_at is not None:
            data["decided_at"] = self.decided_at
        return data


@dataclass(frozen=True, slots=True)
class PastDiscussion:
    """A topic that was discussed, and when it last came up."""

    topic: str
    description: str
    last_discussed: str

    def to_json(self) -> dict[str, str]:
        return {
            "topic": self.topic,
            "description": self.description,
            "last_discussed": self.last_discussed,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """The whole rolling summary of one session."""

    key_decisions: tuple[KeyDecision, ...] = ()
    past_discussions: tuple[PastDiscussion, ...] = ()
    current_discussion: str = ""

    @property
    def is_empty(self) -> bool:
        return (
            not self.key_decisions
            and not self.past_discussions
            and not self.current_discussion.strip()
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key_decisions": [d.to_json() for d in self.key_decisions],
            "past_discussions": [p.to_json() for p in self.past_discussions],
            "current_discussion": self.current_discussion,
        }

    @classmethod
    def from_json(cls, data: object) -> Summary:
        """Parse and validate (see :func:`parse_summary`)."""
        return parse_summary(data)


# -- schema ----------------------------------------------------------------------
def _text(max_chars: int, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


_DATE_SCHEMA: dict[str, Any] = {"type": "string", "format": "date"}

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "key_decisions": {
            "type": "array",
            "maxItems": MAX_DECISIONS,
            "items": {
                "type": "object",
                "properties": {"decision": _text(DECISION_CHARS), "decided_at": _DATE_SCHEMA},
                "required": ["decision"],
                "additionalProperties": False,
            },
        },
        "past_discussions": {
            "type": "array",
            "maxItems": MAX_DISCUSSIONS,
            "items": {
                "type": "object",
                "properties": {
                    "topic": _text(TOPIC_CHARS),
                    "description": _text(DESCRIPTION_CHARS),
                    "last_discussed": _DATE_SCHEMA,
                },
                "required": ["topic", "description", "last_discussed"],
                "additionalProperties": False,
            },
        },
        "current_discussion": _text(CURRENT_CHARS, 0),
    },
    "required": ["key_decisions", "past_discussions", "current_discussion"],
    "additionalProperties": False,
}
"""The JSON schema given to the model (llama.cpp turns it into a grammar)."""


# -- validation ------------------------------------------------------------------
def _object(value: object, where: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SummaryFormatError(f"{where}: expected an object, got {type(value).__name__}")
    keys = set(value)
    if missing := sorted(required - keys):
        raise SummaryFormatError(f"{where}: missing {', '.join(missing)}")
    if unknown := sorted(str(k) for k in keys - required - optional):
        raise SummaryFormatError(f"{where}: unknown field {', '.join(unknown)}")
    return dict(value)


def _string(value: object, where: str, max_chars: int, *, allow_blank: bool = False) -> str:
    if not isinstance(value, str):
        raise SummaryFormatError(f"{where}: expected a string, got {type(value).__name__}")
    if not allow_blank and not value.strip():
        raise SummaryFormatError(f"{where}: empty")
    if len(value) > max_chars:
        raise SummaryFormatError(f"{where}: {len(value)} characters, at most {max_chars}")
    return value


def _date(value: object, where: str) -> str:
    text = _string(value, where, 10)
    try:
        if not _DATE_RE.match(text):
            raise ValueError(text)
        date.fromisoformat(text)
    except ValueError:
        raise SummaryFormatError(f"{where}: {text!r} is not a date (YYYY-MM-DD)") from None
    return text


def _array(value: object, where: str, max_items: int) -> list[Any]:
    if not isinstance(value, list):
        raise SummaryFormatError(f"{where}: expected a list, got {type(value).__name__}")
    if len(value) > max_items:
        raise SummaryFormatError(f"{where}: {len(value)} items, at most {max_items}")
    return value


def _decision(value: object, where: str) -> KeyDecision:
    data = _object(value, where, {"decision"}, {"decided_at"})
    decided = data.get("decided_at")
    return KeyDecision(
        decision=_string(data["decision"], f"{where}.decision", DECISION_CHARS),
        decided_at=None if decided is None else _date(decided, f"{where}.decided_at"),
    )


def _discussion(value: object, where: str) -> PastDiscussion:
    data = _object(value, where, {"topic", "description", "last_discussed"}, set())
    return PastDiscussion(
        topic=_string(data["topic"], f"{where}.topic", TOPIC_CHARS),
        description=_string(data["description"], f"{where}.description", DESCRIPTION_CHARS),
        last_discussed=_date(data["last_discussed"], f"{where}.last_discussed"),
    )


def parse_summary(data: object, where: str = "summary") -> Summary:
    """Validate a summary object strictly; raise :class:`SummaryFormatError` naming the field.

    Nothing is trimmed or repaired: an over-long field, an extra key or a
    wrong type is an error, so a bad model answer can never slip in halfway.
    """
    fields = _object(
        data, where, {"key_decisions", "past_discussions", "current_discussion"}, set()
    )
    decisions = _array(fields["key_decisions"], f"{where}.key_decisions", MAX_DECISIONS)
    discussions = _array(fields["past_discussions"], f"{where}.past_discussions", MAX_DISCUSSIONS)
    return Summary(
        key_decisions=tuple(
            _decision(d, f"{where}.key_decisions[{i}]") for i, d in enumerate(decisions)
        ),
        past_discussions=tuple(
            _discussion(p, f"{where}.past_discussions[{i}]") for i, p in enumerate(discussions)
        ),
        current_discussion=_string(
            fields["current_discussion"],
            f"{where}.current_discussion",
            CURRENT_CHARS,
            allow_blank=True,
        ),
    )


def validate_summary(summary: Summary) -> Summary:
    """Check a summary built in code (e.g. a user edit) against the same rules."""
    return parse_summary(summary.to_json())


# -- prompt text -----------------------------------------------------------------
BINDING_HEADER = "Key decisions (binding — follow them unless the user changes them):"


def render_for_prompt(summary: Summary | None) -> str:
    """The summary as system-prompt text; "" when there is nothing to say."""
    if summary is None or summary.is_empty:
        return ""
    sections: list[str] = []
    if summary.key_decisions:
        lines = [BINDING_HEADER]
        for d in summary.key_decisions:
            when = f" (decided {d.decided_at})" if d.decided_at else ""
            lines.append(f"- {d.decision.strip()}{when}")
        sections.append("\n".join(lines))
    if summary.past_discussions:
        lines = ["Past discussions:"]
        lines += [
            f"- {p.topic.strip()} (last discussed {p.last_discussed}): {p.description.strip()}"
            for p in summary.past_discussions
        ]
        sections.append("\n".join(lines))
    if summary.current_discussion.strip():
        sections.append(f"Current discussion: {summary.current_discussion.strip()}")
    return "\n\n".join(sections)


def prompt_text(store: MemoryStore, session_id: str) -> str:
    """What the agent puts into the system prompt for a session.

    A summary file that cannot be read must not break a turn: it is logged
    and the turn goes on without a summary (the file is left as it is).
    """
    try:
        return render_for_prompt(load_summary(store.folder(session_id)))
    except SummaryFileError as exc:
        log.warning("%s", exc)
        return ""


SUMMARIZE_INSTRUCTIONS = f"""\
You maintain the rolling summary of a long conversation between a user and an \
assistant. You get the current summary as JSON and the next messages of the \
conversation, oldest first, one per line as "[date time] role: text". Lines in \
[brackets] after the role are the assistant's tool use.

Return the updated summary as one JSON object with exactly these fields:
- "key_decisions": final choices the user made or agreed to, at most \
{MAX_DECISIONS}, each {{"decision": text of at most {DECISION_CHARS} characters, \
"decided_at": "YYYY-MM-DD"}}. They are binding: keep every earlier decision \
unless the new messages change or cancel it, then replace it.
- "past_discussions": topics that were discussed, at most {MAX_DISCUSSIONS}, each \
{{"topic": at most {TOPIC_CHARS} characters, "description": at most \
{DESCRIPTION_CHARS} characters, "last_discussed": "YYYY-MM-DD"}}. Update a topic \
when it comes up again; when there are too many, merge related ones or drop the \
oldest and least important.
- "current_discussion": what the newest messages are about and what is still \
open, at most {CURRENT_CHARS} characters.

Merge, do not append: your answer replaces the current summary, so carry over \
everything from it that still holds. Use only facts from the summary and the \
messages. Keep every field short. Write in the language of the conversation.

Whenever a message settles something ("we will use…", "let's go with…", \
"decision:", "agreed", "I chose…"), add it to key_decisions, even if the current \
summary has none. Example: from the line \
"[2024-05-02 10:00] user: OK, we'll host it on Hetzner." the answer contains \
"key_decisions": [{{"decision": "Host it on Hetzner", "decided_at": "2024-05-02"}}]."""


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _call_text(call: object) -> str:
    if not isinstance(call, dict):
        return "?"
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    assert isinstance(function, dict)
    args = function.get("arguments", "")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return f"{function.get('name', '?')}({_one_line(args, TOOL_ARGS_CHARS)})"


def message_text(message: Message) -> str:
    """A message's text for the transcript; tool traffic in compact form."""
    if message.role == "tool":
        name = message.extra.get("name") or "tool"
        return f"[tool {name} → {_one_line(message.content, TOOL_RESULT_CHARS)}]"
    text = message.content.strip()
    calls = message.extra.get("tool_calls")
    if calls and isinstance(calls, list):
        joined = ", ".join(_call_text(c) for c in calls)
        text = f"{text} [calls {joined}]".strip()
    return text


def transcript_line(message: Message) -> str:
    """``[YYYY-MM-DD HH:MM] role: text`` (local time, as the user saw it)."""
    return f"[{format_local(message.time_ns)}] {message.role}: {message_text(message)}"


def cut_middle(text: str, keep: int) -> str:
    """Keep the first and last characters of an over-long message, mark the cut."""
    keep = max(0, min(keep, len(text)))
    if keep >= len(text):
        return text
    head = keep // 2
    tail = keep - head
    return f"{text[:head]} […{len(text) - keep} characters cut…] {text[len(text) - tail :]}"


def summary_prompt_json(summary: Summary) -> str:
    """The previous summary as it appears in the prompt (compact, readable)."""
    return json.dumps(summary.to_json(), ensure_ascii=False)


def build_prompt(summary: Summary, transcript_lines: Sequence[str]) -> list[ChatMessage]:
    """The one model call of a chunk: instructions, previous summary, new messages."""
    body = (
        f"Current summary:\n{summary_prompt_json(summary)}\n\n"
        "New messages:\n" + "\n".join(transcript_lines) + "\n\nReturn the updated summary."
    )
    return [
        {"role": "system", "content": SUMMARIZE_INSTRUCTIONS},
        {"role": "user", "content": body},
    ]


# -- files -----------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SummaryFileError(f"{path}: cannot read ({exc})") from exc


def _check_version(path: Path, data: object) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SummaryFileError(f"{path}: expected a JSON object")
    version = data.get("version", SUMMARY_VERSION)
    if not isinstance(version, int) or version > SUMMARY_VERSION:
        raise SummaryFileError(
            f"{path}: format version {version!r} is newer than this app knows "
            f"({SUMMARY_VERSION}); update Agenvoy Desktop"
        )
    return data


def load_summary(folder: Path) -> Summary | None:
    """A session's summary, None when there is none yet.

    Files without ``version`` (a bare summary object) are read as version 1.
    """
    path = folder / SUMMARY_FILE
    try:
        data = _check_version(path, _read_json(path))
    except FileNotFoundError:
        return None
    data.pop("version", None)
    try:
        return parse_summary(data)
    except SummaryFormatError as exc:
        raise SummaryFileError(f"{path}: {exc}") from exc


def save_summary(folder: Path, summary: Summary) -> None:
    data = {"version": SUMMARY_VERSION, **summary.to_json()}
    atomic_write_text(folder / SUMMARY_FILE, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


HistoryStamp = tuple[int, int, int]
"""(mtime_ns, size, inode) of history.json: changes on every append and rewrite."""


@dataclass(frozen=True, slots=True)
class SummaryMeta:
    """The incremental cursor and bookkeeping of ``summary.meta.json``.

    ``cursor_seq`` (the archive ``seq`` of the newest folded message) is the
    ordering key, since times can tie; ``cursor_time_ns`` is kept too
    (DESIGN.md §1.1 speaks of the cursor's time).  -1 / None / 0 = nothing
    folded yet.  ``history_stamp``, ``window_messages`` and ``caught_up``
    feed the mtime gate (see :mod:`summarizer`).
    """

    cursor_seq: int = -1
    cursor_message_id: str | None = None
    cursor_time_ns: int = 0
    summarized_messages: int = 0
    updated_ns: int = 0
    model: str | None = None
    window_messages: int = 0
    caught_up: bool = False
    history_stamp: HistoryStamp | None = None
    version: int = SUMMARY_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "cursor_time_ns": self.cursor_time_ns,
            "cursor_message_id": self.cursor_message_id,
            "cursor_seq": self.cursor_seq,
            "summarized_messages": self.summarized_messages,
            "updated_ns": self.updated_ns,
            "model": self.model,
            "window_messages": self.window_messages,
            "caught_up": self.caught_up,
            "history_stamp": list(self.history_stamp) if self.history_stamp else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SummaryMeta:
        stamp = data.get("history_stamp")
        msg_id = data.get("cursor_message_id")
        model = data.get("model")
        return cls(
            cursor_seq=int(data.get("cursor_seq", -1)),
            cursor_message_id=None if msg_id is None else str(msg_id),
            cursor_time_ns=int(data.get("cursor_time_ns", 0)),
            summarized_messages=int(data.get("summarized_messages", 0)),
            updated_ns=int(data.get("updated_ns", 0)),
            model=None if model is None else str(model),
            window_messages=int(data.get("window_messages", 0)),
            caught_up=bool(data.get("caught_up", False)),
            history_stamp=(int(stamp[0]), int(stamp[1]), int(stamp[2])) if stamp else None,
        )

    def with_(self, **changes: Any) -> SummaryMeta:
        return replace(self, **changes)


def load_meta(folder: Path) -> SummaryMeta | None:
    path = folder / META_FILE
    try:
        data = _check_version(path, _read_json(path))
        return SummaryMeta.from_json(data)
    except FileNotFoundError:
        return None
    except (TypeError, ValueError, IndexError) as exc:
        raise SummaryFileError(f"{path}: bad field ({exc})") from exc


def save_meta(folder: Path, meta: SummaryMeta) -> None:
    atomic_write_text(folder / META_FILE, json.dumps(meta.to_json(), indent=2) + "\n")


# -- pass history ------------------------------------------------------------------
RecordKind = Literal["pass", "edit", "failed"]


@dataclass(frozen=True, slots=True)
class PassRecord:
    """One line of ``summary.history.jsonl`` (and the detail of its timeline event).

    ``chunk_first`` / ``chunk_last`` and the cursors are
    ``{"message_id", "seq", "time_ns"}`` dicts (None where there is none).
    """

    kind: RecordKind
    time_ns: int
    model: str | None = None
    chunk_first: dict[str, Any] | None = None
    chunk_last: dict[str, Any] | None = None
    cursor_before: dict[str, Any] | None = None
    cursor_after: dict[str, Any] | None = None
    messages: int = 0
    duration_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "time_ns": self.time_ns,
            "model": self.model,
            "chunk_first": self.chunk_first,
            "chunk_last": self.chunk_last,
            "cursor_before": self.cursor_before,
            "cursor_after": self.cursor_after,
            "messages": self.messages,
            "duration_s": round(self.duration_s, 4),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "error": self.error,
        }
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PassRecord:
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        values = {k: data[k] for k in known if k in data}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)


def append_record(folder: Path, record: PassRecord) -> None:
    """Append one line durably; a torn previous line is closed off first."""
    path = folder / LOG_FILE
    line = json.dumps(record.to_json(), ensure_ascii=False).encode("utf-8") + b"\n"
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0), 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            os.lseek(fd, size - 1, os.SEEK_SET)  # writes still go to the end (O_APPEND)
            if os.read(fd, 1) != b"\n":
                line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(folder)


def read_records(folder: Path, limit: int | None = None) -> list[PassRecord]:
    """The pass history, oldest first (the newest *limit* when given).

    Unreadable lines (a torn tail after a crash) are skipped with a warning.
    """
    path = folder / LOG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    records: list[PassRecord] = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(PassRecord.from_json(json.loads(line)))
        except (ValueError, TypeError) as exc:
            log.warning("%s line %d skipped: %s", path, number, exc)
    return records[-limit:] if limit else records
