"""The rolling summary's data, schema, files and prompt text.

A summary is a small structured object — binding ``key_decisions``,
``past_discussions`` with dates, and the ``current_discussion`` — that a
model rewrites (merges) once per chunk of older messages.  Small local models
break free-form JSON, so generation is constrained by :data:`SUMMARY_SCHEMA`
(a llama.cpp grammar) and every answer is checked again by
:func:`parse_summary`, which rejects anything off-shape instead of repairing
it: a bad answer is a failed chunk, never a corrupted summary.

Two rules keep the summary true.  No sentence is said twice (small models
loop, and copy one sentence into two fields): :func:`without_repeats` keeps
the first of each.  A key decision must cite the message that states it:
the prompt gives every message a handle, the schema lets a decision name
only those (and the previous decisions' handles), and
:func:`trace_decisions` stores the message id, dropping decisions whose
words are not in the message they cite.  Only traced decisions (and the
user's own) are binding in the system prompt.

Files in the session folder:

``summary.json``
    the summary plus ``version`` (atomic writes); version 1 had no decision
    sources and loads unchanged (its decisions are then not binding);
    version 2 had no facts.
``summary.previous.json``
    the summary as it was before the last pass or edit (a copy of the
    bytes :func:`save_summary` replaced), so the Summary tab can show what
    changed; absent before the second write.  Read leniently
    (:func:`load_previous_summary`): a damaged copy only hides the comparison.
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

from agenvoy_desktop.core.atomic import atomic_write_bytes, atomic_write_text, fsync_dir
from agenvoy_desktop.core.decision_cues import states_decision
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.sqlite_db import set_aside_path
from agenvoy_desktop.core.summary_facts import Fact, fact_from_json, render_facts
from agenvoy_desktop.core.timeutil import format_local

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)

SUMMARY_VERSION = 3
"""2: key decisions carry ``source`` (the message that states them) and ``by_user``.
3: ``facts``, sentences of folded messages kept word for word (:mod:`.summary_facts`)."""
META_VERSION = 1
SUMMARY_FILE = "summary.json"
PREVIOUS_FILE = "summary.previous.json"
META_FILE = "summary.meta.json"
LOG_FILE = "summary.history.jsonl"

# What a stored summary may hold (files written by earlier versions, user edits).
MAX_DECISIONS = 8
MAX_DISCUSSIONS = 8
DECISION_CHARS = 200
TOPIC_CHARS = 80
DESCRIPTION_CHARS = 300
CURRENT_CHARS = 600
MAX_STORED_FACTS = 200
"""A user's edit may keep more facts than a pass would (:data:`.summary_facts.MAX_FACTS`)."""
SOURCE_CHARS = 128
# What one model answer may hold: tighter, so that its worst case (every list
# full, every string at its limit) fits the token budget beside the transcript.
ANSWER_DECISIONS = 5
ANSWER_DECISION_CHARS = 100
ANSWER_DISCUSSIONS = 5
ANSWER_TOPIC_CHARS = 40
ANSWER_DESCRIPTION_CHARS = 150
ANSWER_CURRENT_CHARS = 300
HANDLE_CHARS = 5
"""``m1``…``m9999`` for the chunk's messages, ``p1``…``p99`` for earlier decisions."""
TOOL_RESULT_CHARS = 160
TOOL_ARGS_CHARS = 80

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SummaryFormatError(KnownError, ValueError):
    """A summary (model answer, user edit or file) that is not the agreed shape."""


class SummaryFileError(KnownError, RuntimeError):
    """A summary file that cannot be read; ``str()`` names the file."""


# -- data ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyDecision:
    """A final choice; binding for the assistant until the user changes it.

    ``source`` is the id of the message that states the decision, so a
    person can check it (the Summary tab links to it); inside a raw model
    answer it is still the prompt's short handle (``m3``) until
    :func:`trace_decisions` resolves it.  ``by_user`` marks a decision the
    user added or reworded in the Summary tab: the user is its source.  A
    decision with neither (files from version 1) is kept and shown, but is
    not binding (:func:`render_for_prompt`).
    """

    decision: str
    decided_at: str | None = None
    source: str | None = None
    by_user: bool = False

    @property
    def binding(self) -> bool:
        return self.source is not None or self.by_user

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"decision": self.decision}
        if self.decided_at is not None:
            data["decided_at"] = self.decided_at
        if self.source is not None:
            data["source"] = self.source
        if self.by_user:
            data["by_user"] = True
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
    facts: tuple[Fact, ...] = ()
    """Kept by code, never written by the model (:mod:`.summary_facts`)."""

    @property
    def is_empty(self) -> bool:
        return (
            not self.key_decisions
            and not self.past_discussions
            and not self.current_discussion.strip()
            and not self.facts
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key_decisions": [d.to_json() for d in self.key_decisions],
            "past_discussions": [p.to_json() for p in self.past_discussions],
            "current_discussion": self.current_discussion,
        }
        if self.facts:
            data["facts"] = [f.to_json() for f in self.facts]
        return data

    @classmethod
    def from_json(cls, data: object) -> Summary:
        """Parse and validate (see :func:`parse_summary`)."""
        return parse_summary(data)


# -- schema ----------------------------------------------------------------------
def _text(max_chars: int, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


_DATE_SCHEMA: dict[str, Any] = {"type": "string", "format": "date"}


def summary_schema(handles: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON schema of one model answer (llama.cpp turns it into a grammar).

    Every string has a ``maxLength`` and every list a ``maxItems``, which
    llama.cpp's schema-to-grammar conversion turns into bounded repetitions,
    so the longest possible answer is known (:func:`answer_char_bound`).
    With *handles* a decision's ``source`` must be one of them (an ``enum``:
    the grammar itself keeps the model from citing a message that is not in
    the prompt); without, any short string (for tests and the bound).
    """
    source = {"type": "string", "enum": list(handles)} if handles else _text(HANDLE_CHARS)
    return {
        "type": "object",
        "properties": {
            "key_decisions": {
                "type": "array",
                "maxItems": ANSWER_DECISIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "decision": _text(ANSWER_DECISION_CHARS),
                        "decided_at": _DATE_SCHEMA,
                        "source": source,
                    },
                    "required": ["decision", "decided_at", "source"],
                    "additionalProperties": False,
                },
            },
            "past_discussions": {
                "type": "array",
                "maxItems": ANSWER_DISCUSSIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "topic": _text(ANSWER_TOPIC_CHARS),
                        "description": _text(ANSWER_DESCRIPTION_CHARS),
                        "last_discussed": _DATE_SCHEMA,
                    },
                    "required": ["topic", "description", "last_discussed"],
                    "additionalProperties": False,
                },
            },
            "current_discussion": _text(ANSWER_CURRENT_CHARS, 0),
        },
        "required": ["key_decisions", "past_discussions", "current_discussion"],
        "additionalProperties": False,
    }


SUMMARY_SCHEMA: dict[str, Any] = summary_schema()
"""The answer schema with a generic ``source`` (any handle-sized string)."""


def answer_char_bound(schema: Mapping[str, Any]) -> int:
    """The most characters an answer matching *schema* can have under llama.cpp's grammar.

    The grammar allows at most one space where JSON allows whitespace
    (llama.cpp's ``space ::= " "?``), so the bound is exact for the
    constructs used here: objects (every property present), arrays at
    ``maxItems``, strings at ``maxLength``, enums at their longest member,
    ``format: date``.  Every token of an answer is at least one character
    long, so this bounds its tokens too, except for string characters that
    take several: JSON escapes (``\\n``, ``\\u00e9``, one ``char`` of the
    grammar each) and some characters outside ASCII.  Summaries rarely have
    enough of them to matter; the summarizer's retry with half the chunk
    covers the rest.
    """
    kind = schema.get("type")
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        # {"key": value, "key": value} with a space after { : , and each value
        members = sum(len(json.dumps(k)) + 2 + answer_char_bound(v) for k, v in props.items())
        return 2 + members + 2 * max(0, len(props) - 1) + 2
    if kind == "array":
        items = int(schema["maxItems"])
        return 2 + items * answer_char_bound(schema["items"]) + 2 * max(0, items - 1) + 2
    if "enum" in schema:
        return max(len(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]) + 1
    if schema.get("format") == "date":
        return 12 + 1
    if kind == "string":
        return 2 + int(schema["maxLength"]) + 1
    raise ValueError(f"no bound for schema {schema!r}")


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
    data = _object(value, where, {"decision"}, {"decided_at", "source", "by_user"})
    decided = data.get("decided_at")
    source = data.get("source")
    by_user = data.get("by_user", False)
    if not isinstance(by_user, bool):
        raise SummaryFormatError(f"{where}.by_user: expected true or false")
    return KeyDecision(
        decision=_string(data["decision"], f"{where}.decision", DECISION_CHARS),
        decided_at=None if decided is None else _date(decided, f"{where}.decided_at"),
        source=None if source is None else _string(source, f"{where}.source", SOURCE_CHARS),
        by_user=by_user,
    )


def _discussion(value: object, where: str) -> PastDiscussion:
    data = _object(value, where, {"topic", "description", "last_discussed"}, set())
    return PastDiscussion(
        topic=_string(data["topic"], f"{where}.topic", TOPIC_CHARS),
        description=_string(data["description"], f"{where}.description", DESCRIPTION_CHARS),
        last_discussed=_date(data["last_discussed"], f"{where}.last_discussed"),
    )


def parse_summary(data: object, where: str = "summary", *, repeats: bool = False) -> Summary:
    """Validate a summary object strictly; raise :class:`SummaryFormatError` naming the field.

    Nothing is trimmed or repaired: an over-long field, an extra key or a
    wrong type is an error, so a bad model answer can never slip in halfway.
    A sentence said twice (within a field or across fields, compared
    normalised) is an error too — a small model stuck in a loop repeats
    itself, and the summary goes into every prompt — except with
    ``repeats=True``: files written before this rule, and model answers,
    which the summarizer passes through :func:`without_repeats` instead.
    """
    summary = _parse_fields(data, where)
    if not repeats and (twice := repeated_sentences(summary)):
        raise SummaryFormatError(f"{where}: repeats the sentence {twice[0]!r}")
    return summary


def _parse_fields(data: object, where: str) -> Summary:
    fields = _object(
        data, where, {"key_decisions", "past_discussions", "current_discussion"}, {"facts"}
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
        facts=_facts(fields.get("facts", []), f"{where}.facts"),
    )


def _facts(value: object, where: str) -> tuple[Fact, ...]:
    items = _array(value, where, MAX_STORED_FACTS)
    try:
        return tuple(fact_from_json(item) for item in items)
    except ValueError as exc:
        raise SummaryFormatError(f"{where}: {exc}") from exc


def validate_summary(summary: Summary) -> Summary:
    """Check a summary built in code (e.g. a user edit) against the same rules."""
    return parse_summary(summary.to_json())


# -- repeated sentences ------------------------------------------------------------
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])\s*|\n+")
_NON_WORD = re.compile(r"[\W_]+")
MIN_SENTENCE_CHARS = 20
"""Shorter pieces ("OK.", "Let's go with") may well recur; they are not a loop.
Chinese and Japanese say as much in fewer characters: 8 there."""
_MIN_CJK_SENTENCE_CHARS = 8


def _normalised(piece: str) -> str | None:
    """A sentence as compared: lower case, no punctuation; None when too short to count."""
    text = " ".join(_NON_WORD.sub(" ", piece.lower()).split())
    shortest = _MIN_CJK_SENTENCE_CHARS if _CJK.search(text) else MIN_SENTENCE_CHARS
    return text if len(text) >= shortest else None


def sentences(text: str) -> list[str]:
    """*text* split at sentence ends and line breaks, normalised for comparison.

    Pieces shorter than :data:`MIN_SENTENCE_CHARS` after normalising are left out.
    """
    return [n for p in _SENTENCE_END.split(text) if (n := _normalised(p)) is not None]


def summary_texts(summary: Summary) -> list[str]:
    """The free-text fields whose sentences must not repeat (topics are labels)."""
    return [
        *(d.decision for d in summary.key_decisions),
        *(p.description for p in summary.past_discussions),
        summary.current_discussion,
    ]


def repeated_sentences(summary: Summary) -> list[str]:
    """Normalised sentences that occur more than once in the summary, first seen first."""
    seen: set[str] = set()
    twice: list[str] = []
    for text in summary_texts(summary):
        for sentence in sentences(text):
            if sentence in seen and sentence not in twice:
                twice.append(sentence)
            seen.add(sentence)
    return twice


def without_repeats(summary: Summary) -> Summary:
    """*summary* with every sentence's second and later occurrences removed.

    What the summarizer does with every answer: a small model often copies
    one sentence from a message into two fields, and keeping it once loses
    nothing, whereas rejecting the answer would cost a whole second
    generation.  A decision or discussion left with no text goes.
    """
    seen: set[str] = set()

    def keep(text: str) -> str:
        kept: list[str] = []
        for piece in _SENTENCE_END.split(text):
            norm = _normalised(piece)
            if norm is None or norm not in seen:
                kept.append(piece.strip())
            if norm is not None:
                seen.add(norm)
        return " ".join(p for p in kept if p)

    decisions = [replace(d, decision=keep(d.decision)) for d in summary.key_decisions]
    discussions = [replace(p, description=keep(p.description)) for p in summary.past_discussions]
    return Summary(
        key_decisions=tuple(d for d in decisions if d.decision),
        past_discussions=tuple(p for p in discussions if p.description),
        current_discussion=keep(summary.current_discussion),
        facts=summary.facts,
    )


def topic_key(topic: str) -> str:
    """A topic as compared: lower case, words only ("Pet training" = "pet-training")."""
    return " ".join(_NON_WORD.sub(" ", topic.lower()).split())


def one_per_topic(summary: Summary) -> Summary:
    """*summary* with each topic's later discussions folded into its first one.

    The starter, out of things to say, lists one topic again and again with
    another quoted line as its description ("Pet training" five times in
    one answer).  The first entry is the one the previous summary carried
    or the model wrote first; it keeps its description and takes the latest
    ``last_discussed`` of the entries folded into it.
    """
    firsts: dict[str, int] = {}
    kept: list[PastDiscussion] = []
    for discussion in summary.past_discussions:
        key = topic_key(discussion.topic)
        at = firsts.get(key) if key else None
        if at is None:
            if key:
                firsts[key] = len(kept)
            kept.append(discussion)
        elif discussion.last_discussed > kept[at].last_discussed:
            kept[at] = replace(kept[at], last_discussed=discussion.last_discussed)
    if len(kept) == len(summary.past_discussions):
        return summary
    return replace(summary, past_discussions=tuple(kept))


ELLIPSIS = "\u2026"
_CUT_TAIL = " \t,;:-\u2013\u2014("


def cut_at_word(text: str, limit: int) -> str:
    """*text* that stopped at its grammar limit (*limit* characters) ended at a word boundary.

    The answer grammar stops a string at its ``maxLength`` wherever it is, so
    a 0.5B model's topic read "Lisbon has plenty; I can suggest some in".
    Such a string loses its last, possibly broken, word and ends in "…";
    a shorter one, or one whose cut leaves fewer than half its characters,
    is kept as it is.
    """
    if len(text) < limit or text[-1] in ".!?\u2026)\"'":
        return text
    head = text[: text.rfind(" ")].rstrip(_CUT_TAIL) if " " in text else ""
    if len(head) < limit // 2:
        return text
    return head + ELLIPSIS


def without_cut_words(summary: Summary) -> Summary:
    """*summary* with each answer field the grammar cut short ended at a word.

    See :func:`cut_at_word`; runs on model answers only (a user's edit is kept as typed).
    """
    return Summary(
        key_decisions=tuple(
            replace(d, decision=cut_at_word(d.decision, ANSWER_DECISION_CHARS))
            for d in summary.key_decisions
        ),
        past_discussions=tuple(
            replace(
                p,
                topic=cut_at_word(p.topic, ANSWER_TOPIC_CHARS),
                description=cut_at_word(p.description, ANSWER_DESCRIPTION_CHARS),
            )
            for p in summary.past_discussions
        ),
        current_discussion=cut_at_word(summary.current_discussion, ANSWER_CURRENT_CHARS),
        facts=summary.facts,
    )


# -- prompt text -----------------------------------------------------------------
BINDING_HEADER = "Key decisions (binding — follow them unless the user changes them):"
UNCONFIRMED_HEADER = "Noted earlier, not traced to a message (not binding):"


def render_for_prompt(summary: Summary | None) -> str:
    """The summary as system-prompt text; "" when there is nothing to say.

    Only decisions traced to a message (or made by the user) are listed as
    binding; untraced ones from older files are listed apart as notes, so a
    model's guess never becomes a rule the assistant must follow.
    """
    if summary is None or summary.is_empty:
        return ""
    sections: list[str] = []
    binding = [d for d in summary.key_decisions if d.binding]
    notes = [d for d in summary.key_decisions if not d.binding]
    for header, decisions in ((BINDING_HEADER, binding), (UNCONFIRMED_HEADER, notes)):
        if decisions:
            sections.append("\n".join([header, *map(_decision_line, decisions)]))
    if summary.past_discussions:
        lines = ["Past discussions:"]
        lines += [
            f"- {p.topic.strip()} (last discussed {p.last_discussed}): {p.description.strip()}"
            for p in summary.past_discussions
        ]
        sections.append("\n".join(lines))
    if summary.facts:
        sections.append(render_facts(summary.facts))
    if summary.current_discussion.strip():
        sections.append(f"Current discussion: {summary.current_discussion.strip()}")
    return "\n\n".join(sections)


def _decision_line(decision: KeyDecision) -> str:
    when = f" (decided {decision.decided_at})" if decision.decided_at else ""
    return f"- {decision.decision.strip()}{when}"


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


OTHER_TOPIC = "Other things said"
TOPIC_SHARED_TERMS = 2
"""Content terms a fact must share with a topic to sit under it (one, "near", is chance)."""


def facts_by_topic(summary: Summary) -> list[tuple[str, list[Fact]]]:
    """The facts under the past discussion they share most words with, in the summary's order.

    A fact that shares fewer than :data:`TOPIC_SHARED_TERMS` content terms
    with every topic goes under :data:`OTHER_TOPIC`, last.  Only for reading: the prompt keeps the
    facts in the order they were said.
    """
    topics = [(p.topic, terms(f"{p.topic} {p.description}")) for p in summary.past_discussions]
    groups: dict[str, list[Fact]] = {topic: [] for topic, _ in topics}
    other: list[Fact] = []
    for fact in summary.facts:
        words = terms(fact.text)
        best = max(topics, key=lambda t: len(t[1] & words), default=None)
        if best is None or len(best[1] & words) < TOPIC_SHARED_TERMS:
            other.append(fact)
        else:
            groups[best[0]].append(fact)
    found = [(topic, facts) for topic, facts in groups.items() if facts]
    return [*found, (OTHER_TOPIC, other)] if other else found


def session_facts(store: MemoryStore, session_id: str) -> tuple[Fact, ...]:
    """The facts of a session's summary; none when it has no summary or it cannot be read."""
    try:
        summary = load_summary(store.folder(session_id))
    except SummaryFileError as exc:
        log.warning("%s", exc)
        return ()
    return summary.facts if summary is not None else ()


SUMMARIZE_INSTRUCTIONS = f"""\
You maintain the rolling summary of a long conversation between a user and an \
assistant. You get the current summary as JSON and the next messages of the \
conversation, oldest first, one per line as "[handle date time] role: text". \
Lines in [brackets] after the role are the assistant's tool use.

Return the updated summary as one JSON object with exactly these fields:
- "key_decisions": at most {ANSWER_DECISIONS} final choices the user made or \
agreed to, each {{"decision": at most {ANSWER_DECISION_CHARS} characters, \
"decided_at": "YYYY-MM-DD", "source": handle}}. "source" is the handle of the \
message that states the decision (e.g. "m3"), or the "source" it already has \
in the current summary. A decision is a choice someone settled ("we will \
use…", "let's go with…", "I booked…", "agreed"); a place, product or topic \
that was only mentioned is not a decision. Keep every earlier decision unless \
the new messages change or cancel it, then replace it.
- "past_discussions": at most {ANSWER_DISCUSSIONS} topics, each {{"topic": at \
most {ANSWER_TOPIC_CHARS} characters, "description": at most \
{ANSWER_DESCRIPTION_CHARS} characters, "last_discussed": "YYYY-MM-DD"}}. \
Update a topic when it comes up again; merge related topics.
- "current_discussion": what the newest messages are about and what is still \
open, at most {ANSWER_CURRENT_CHARS} characters.

Merge, do not append: your answer replaces the current summary, so carry over \
everything from it that still holds. Use only facts from the summary and the \
messages, with their names, places, numbers and dates. Never write the same \
sentence twice. Write in the language of the conversation.

Example: from the line "[m4 2024-05-02 10:00] user: OK, we'll host it on \
Hetzner." the answer contains "key_decisions": [{{"decision": "Host it on \
Hetzner", "decided_at": "2024-05-02", "source": "m4"}}]."""


# -- sources of decisions ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Source:
    """What a handle in the prompt stands for: a message, or an earlier decision.

    ``message_id`` is None for an earlier decision without a source (kept
    as it was); ``text`` is what a decision citing the handle must overlap.
    """

    message_id: str | None
    text: str
    by_user: bool = False
    earlier_decision: bool = False
    """A decision of the previous summary (``p1``…): accepted once, not judged again."""

    @property
    def settles_choice(self) -> bool:
        """Whether a decision may cite this: an earlier decision, or a message that settles one."""
        return self.earlier_decision or states_decision(self.text)


def message_handle(index: int) -> str:
    """The prompt's handle of the chunk's *index*-th message (``m1`` first)."""
    return f"m{index + 1}"


def decision_sources(summary: Summary) -> dict[str, Source]:
    """Handles ``p1``… for the previous summary's decisions, so they keep their source."""
    return {
        f"p{i + 1}": Source(d.source, d.decision, d.by_user, earlier_decision=True)
        for i, d in enumerate(summary.key_decisions)
    }


_TERM = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_STOP_WORDS = """\
the and for with that this these those will would should could shall we you our your
they them their are was were been being have has had not but from all any can its into
onto over then than also just only some what when which who whom how why there here
about after before again very more most much such use used using let lets going get got
decide decided decision decisions choose chose chosen choice agree agreed agreement
settle settled final finally okay yes sure user assistant"""
_STOP = frozenset(_STOP_WORDS.split())


def terms(text: str) -> set[str]:
    """Content terms for the overlap check: words (5-letter prefixes), numbers, CJK bigrams.

    The prefix lets "hotels" meet "hotel"; words that any decision may use
    ("decided", "we", "will") do not count as overlap.
    """
    found: set[str] = set()
    for word in _TERM.findall(text.lower()):
        if _CJK.search(word):
            found.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
        elif word.isdigit():
            if len(word) >= 2:
                found.add(word)
        elif len(word) >= 3 and word not in _STOP:
            found.add(word[:5])
    return found


def trace_decisions(answer: Summary, sources: Mapping[str, Source]) -> tuple[Summary, list[str]]:
    """Resolve each decision's handle to its message id; drop what cannot be traced.

    A decision is kept when the message it cites shares a content term with
    it and settles a choice (:func:`~agenvoy_desktop.core.decision_cues.states_decision`;
    an earlier decision it cites always does).  Otherwise it goes to the
    message that states it (:func:`stating_source`) or is dropped — not the whole answer:
    the rest of the answer is still good, and a decision that cannot be shown
    to come from the conversation must not become binding.  One its message
    states but that settles nothing is a remark: it becomes a past discussion
    (not binding) where the list has room (:func:`as_discussions`).  Returns
    the traced summary and one note per dropped decision.
    """
    kept: list[KeyDecision] = []
    remarks: list[KeyDecision] = []
    dropped: list[str] = []
    for decision in answer.key_decisions:
        cited = sources.get(decision.source) if decision.source else None
        stated = cited is not None and bool(terms(decision.decision) & terms(cited.text))
        source = cited if stated and cited is not None and cited.settles_choice else None
        if source is None:
            source = stating_source(decision.decision, sources)
        if source is not None:
            kept.append(replace(decision, source=source.message_id, by_user=source.by_user))
        elif cited is None:
            dropped.append(f"{decision.decision!r}: unknown source {decision.source!r}")
        elif stated:
            dropped.append(f"{decision.decision!r}: {decision.source} settles no choice")
            remarks.append(decision)
        else:
            dropped.append(f"{decision.decision!r}: not stated in {decision.source}")
    discussions = as_discussions(remarks, answer.past_discussions)
    return replace(answer, key_decisions=tuple(kept), past_discussions=discussions), dropped


def as_discussions(
    remarks: Sequence[KeyDecision], discussions: Sequence[PastDiscussion]
) -> tuple[PastDiscussion, ...]:
    """*discussions*, then each dated remark while the list has room for it.

    The remark is its own description; its topic is its first words.  A
    remark whose content terms an existing discussion already holds adds
    nothing, and the list never grows past the answer's limit.
    """
    out = list(discussions)
    for remark in remarks:
        if len(out) >= ANSWER_DISCUSSIONS or remark.decided_at is None:
            continue
        said = terms(remark.decision)
        if any(said <= terms(f"{d.topic} {d.description}") for d in out):
            continue
        text = " ".join(remark.decision.split())
        out.append(
            PastDiscussion(
                topic=cut_at_word(text[:ANSWER_TOPIC_CHARS], ANSWER_TOPIC_CHARS),
                description=text[:ANSWER_DESCRIPTION_CHARS],
                last_discussed=remark.decided_at,
            )
        )
    return tuple(out)


REPOINT_MIN_TERMS = 3
"""Content terms a decision must share with a message it did not cite to be re-pointed there."""


def stating_source(decision: str, sources: Mapping[str, Source]) -> Source | None:
    """The message that states *decision* when the model cited the wrong one, if any.

    The starter cites the question a decision answers ("Any restaurant
    ideas?") rather than the reply that settles it ("Booked: Cervejaria
    Ramiro, 16 May at 20:00").  A message that settles a choice and holds
    at least half of the decision's content terms, and three or more, states it; the latest such
    message wins a tie, as later messages settle earlier ones.  Stricter
    than the one shared term a cited source needs: a re-pointed decision must
    be all but written in the message it now links to, and a bare name
    ("Haruka Express", two terms) is never re-pointed into a decision.
    """
    wanted = terms(decision)
    best: Source | None = None
    best_shared = 0
    for source in sources.values():
        if not source.settles_choice:
            continue
        shared = len(wanted & terms(source.text))
        if shared >= max(best_shared, REPOINT_MIN_TERMS) and shared * 2 >= len(wanted):
            best, best_shared = source, shared
    return best


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


def transcript_line(message: Message, handle: str | None = None) -> str:
    """``[handle YYYY-MM-DD HH:MM] role: text`` (local time, as the user saw it)."""
    prefix = f"{handle} " if handle else ""
    return f"[{prefix}{format_local(message.time_ns)}] {message.role}: {message_text(message)}"


def cut_middle(text: str, keep: int) -> str:
    """Keep the first and last characters of an over-long message, mark the cut."""
    keep = max(0, min(keep, len(text)))
    if keep >= len(text):
        return text
    head = keep // 2
    tail = keep - head
    return f"{text[:head]} […{len(text) - keep} characters cut…] {text[len(text) - tail :]}"


def summary_prompt_json(summary: Summary) -> str:
    """The previous summary as it appears in the prompt (compact, readable).

    Each decision's source shows as its handle (``p1``…, see
    :func:`decision_sources`): message ids are long and mean nothing to the
    model, and the handle is what it must copy to keep the decision.
    """
    data = summary.to_json()
    data.pop("facts", None)  # kept by code: the model never sees nor rewrites them
    for i, decision in enumerate(data["key_decisions"]):
        decision.pop("by_user", None)
        decision["source"] = f"p{i + 1}"
    return json.dumps(data, ensure_ascii=False)


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


def _check_version(path: Path, data: object, known: int) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SummaryFileError(f"{path}: expected a JSON object")
    version = data.get("version", 1)
    if not isinstance(version, int) or version > known:
        raise SummaryFileError(
            f"{path}: format version {version!r} is newer than this app knows "
            f"({known}); update Agenvoy Desktop"
        )
    return data


def load_summary(folder: Path) -> Summary | None:
    """A session's summary, None when there is none yet.

    Files without ``version`` (a bare summary object) are read as version 1.
    Older files need no conversion: a version-1 file is a version-2 file
    whose decisions have no ``source``, and a version-2 file is a version-3
    file without ``facts`` (the next pass starts the list).
    """
    return _load_summary_file(folder / SUMMARY_FILE)


def load_previous_summary(folder: Path) -> Summary | None:
    """The summary before the last pass or edit; None when there is none or it is damaged.

    Only the Summary tab's comparison reads it, so a copy that does not read
    (cut bytes, a newer app's format) is logged and ignored rather than
    reported: the summary itself is fine.
    """
    try:
        return _load_summary_file(folder / PREVIOUS_FILE)
    except SummaryFileError as exc:
        log.warning("previous summary ignored: %s", exc)
        return None


def _load_summary_file(path: Path) -> Summary | None:
    try:
        data = _check_version(path, _read_json(path), SUMMARY_VERSION)
    except FileNotFoundError:
        return None
    data.pop("version", None)
    try:
        # Version 1 had no sources: its decisions load untraced (not binding)
        # and may repeat sentences; the next pass rewrites them under the rules.
        return parse_summary(data, repeats=True)
    except SummaryFormatError as exc:
        raise SummaryFileError(f"{path}: {exc}") from exc


def check_summary_files(folder: Path, *, repair: bool) -> list[str]:
    """Whether a session's summary files read; with *repair* damaged ones are set aside.

    Damaged means not a JSON object at all (garbled or cut bytes); a file of
    the wrong shape or from a newer app is left for the summarizer to
    report.  A summary without its cursor (or the reverse) would fold
    messages twice or skip them, so when either file is damaged both are
    set aside (renamed ``<name>.damaged-<time>``, never deleted) and the
    session summarizes from scratch.  Returns one line per problem.
    """
    problems: list[str] = []
    for name in (SUMMARY_FILE, META_FILE):
        try:
            data = _read_json(folder / name)
        except FileNotFoundError:
            continue
        except SummaryFileError as exc:
            problems.append(str(exc).removeprefix(f"{folder}{os.sep}"))
            continue
        if not isinstance(data, dict):
            problems.append(f"{name}: not a JSON object")
    if not problems or not repair:
        return problems
    moved = [set_aside_file(folder / name) for name in (SUMMARY_FILE, META_FILE)]
    kept = ", ".join(str(m.name) for m in moved if m is not None)
    notice = f"{problems[0]}; set aside as {kept}; the summary starts fresh"
    log.info("%s: %s", folder, notice)  # the caller tells the user
    return [notice]


def set_aside_file(path: Path) -> Path | None:
    """Rename *path* to a free ``<name>.damaged-<time>`` next to it (None when absent)."""
    if not path.exists():
        return None
    target = set_aside_path(path)
    os.replace(path, target)
    return target


def save_summary(folder: Path, summary: Summary) -> None:
    """Write *summary* atomically, keeping the one it replaces as :data:`PREVIOUS_FILE`.

    The copy is written first: a crash between the two writes leaves the
    copy equal to the summary (the comparison shows no change), never a
    copy newer than the summary.
    """
    _keep_previous(folder)
    data = {"version": SUMMARY_VERSION, **summary.to_json()}
    atomic_write_text(folder / SUMMARY_FILE, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _keep_previous(folder: Path) -> None:
    """Copy the current summary file's bytes to :data:`PREVIOUS_FILE` (or drop a stale copy).

    Without a current summary (the first pass, or after a repair set a
    damaged one aside) there is nothing before the coming write: an older
    copy would compare the new summary with one it never replaced.
    """
    previous = folder / PREVIOUS_FILE
    try:
        data = (folder / SUMMARY_FILE).read_bytes()
    except FileNotFoundError:
        data = None
    except OSError as exc:
        log.warning("%s: previous summary not kept (%s)", folder, exc)
        data = None
    if data is None:
        previous.unlink(missing_ok=True)
    else:
        atomic_write_bytes(previous, data)


HistoryStamp = tuple[int, int, int]
"""(mtime_ns, size, inode) of history.json: changes on every append and rewrite."""


@dataclass(frozen=True, slots=True)
class SummaryMeta:
    """The incremental cursor and bookkeeping of ``summary.meta.json``.

    ``cursor_seq`` (the archive ``seq`` of the newest folded message) is the
    ordering key, since times can tie; ``cursor_time_ns`` is kept too
    (what the summary covers, in time, for a person).  -1 / None / 0 = nothing
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
    version: int = META_VERSION

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
        data = _check_version(path, _read_json(path), META_VERSION)
        return SummaryMeta.from_json(data)
    except FileNotFoundError:
        return None
    except (TypeError, ValueError, IndexError) as exc:
        raise SummaryFileError(f"{path}: bad field ({exc})") from exc


def save_meta(folder: Path, meta: SummaryMeta) -> None:
    atomic_write_text(folder / META_FILE, json.dumps(meta.to_json(), indent=2) + "\n")


# -- pass history ------------------------------------------------------------------
RecordKind = Literal["pass", "edit", "failed", "stopped"]


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
    def from_json(cls, data: object) -> PassRecord:
        """One parsed line; TypeError unless it is an object whose known fields have their types.

        A garbled line is skipped by :func:`read_records` rather than shown
        (or crashing the timeline) with a list where a count should be.
        """
        if not isinstance(data, dict):
            raise TypeError(f"not a JSON object but {type(data).__name__}")
        for key, kinds in _RECORD_TYPES.items():
            value = data.get(key)
            if key in data and (not isinstance(value, kinds) or _is_flag(value, kinds)):
                raise TypeError(f"{key!r} is {value!r}")
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        values = {k: data[k] for k in known if k in data}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)


_RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "time_ns": (int,),
    "model": (str, type(None)),
    "chunk_first": (dict, type(None)),
    "chunk_last": (dict, type(None)),
    "cursor_before": (dict, type(None)),
    "cursor_after": (dict, type(None)),
    "messages": (int,),
    "duration_s": (int, float),
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "error": (str, type(None)),
}
"""The JSON types of a pass record's known fields (``kind`` and ``time_ns`` are required)."""


def _is_flag(value: object, kinds: tuple[type, ...]) -> bool:
    """A JSON true/false where a number is wanted (bool is an int to Python, not to us)."""
    return isinstance(value, bool) and bool not in kinds


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
