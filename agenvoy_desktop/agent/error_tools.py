"""The agent's side of the error memory: three tools and the failure-hint source.

The store (:class:`ErrorMemory`) lives on the storage thread, so every call
here goes through :class:`Storage`.  Records the model writes are tagged with
the session they came from and show up in the timeline as events.
"""

from __future__ import annotations

import json
from typing import Any

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolArgumentError, ToolResult
from agenvoy_desktop.agent.turn import current_session
from agenvoy_desktop.core.error_memory import ErrorMemory, ErrorRecordNotFound
from agenvoy_desktop.core.error_types import (
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_SYMPTOM_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOOL_CHARS,
    OUTCOMES,
    ErrorHint,
    ErrorRecord,
    ErrorRecordInvalid,
    format_hints,
)
from agenvoy_desktop.core.store import MemoryStore


class ErrorMemoryHints:
    """The turn loop's error memory: hints for a failure, and failures remembered.

    Implements :class:`agent.turn.HintSource` and :class:`agent.turn.FailureRecorder`
    over an :class:`ErrorMemory` (storage thread only).
    """

    def __init__(self, errors: ErrorMemory) -> None:
        self.errors = errors

    def hint_for_failure(self, tool: str, error_text: str) -> tuple[str, list[int]]:
        hints = self.errors.lookup_for_failure(tool, error_text)
        return format_hints(hints, tool=tool), [h.record.id for h in hints]

    def record_failure(
        self,
        tool: str,
        error_text: str,
        arguments: dict[str, Any],
        session_id: str,
        resolution: dict[str, Any] | None = None,
    ) -> int | None:
        """Remember a failed call; the same tool and error text renew its one record.

        With *resolution* (the arguments of a later call of the same tool
        that worked) the record is ``resolved`` and its action is that call,
        so the next hint says what to do: a record that was only ``failed``
        is upgraded.  Without, the call is remembered as ``failed``; a record
        that already knows more (resolved, or abandoned on purpose) is only
        renewed, so a turn that did not apply a known fix cannot erase it.
        """
        if not tool or not error_text.strip():
            return None
        symptom = _clip(error_text.strip(), MAX_SYMPTOM_CHARS)
        if resolution is None:
            known = self.errors.find(tool, symptom)
            if known is not None and known.outcome != "failed":
                return self.errors.renew(known.id).id
            action = f"called {_call(tool, arguments)}"
        else:
            action = f"call {_call(tool, resolution)} (it worked after {_call(tool, arguments)})"
        record = self.errors.add(
            tool,
            symptom,
            action=_clip(action, MAX_TEXT_CHARS),
            outcome="failed" if resolution is None else "resolved",
            session_id=session_id,
            source="agent",
        )
        return record.id


def _call(tool: str, arguments: dict[str, Any]) -> str:
    """A call as the model would write it: ``tool({"key": "value"})``."""
    return f"{tool}({json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)})"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_record(record: ErrorRecord) -> str:
    """A record as the model (and ``read_error``) sees it."""
    lines = [
        f"record #{record.id} — tool {record.tool}, outcome {record.outcome}, "
        f"type {record.error_type}, hits {record.hits}",
        f"symptom: {record.symptom}",
    ]
    if record.cause:
        lines.append(f"cause: {record.cause}")
    if record.action:
        lines.append(f"action: {record.action}")
    if record.keywords:
        lines.append(f"keywords: {', '.join(record.keywords)}")
    return "\n".join(lines)


def _describe_hits(hits: list[ErrorHint]) -> str:
    return "\n\n".join(f"{describe_record(h.record)}\n→ {h.instruction}" for h in hits)


def error_tools(storage: Storage, errors: ErrorMemory, store: MemoryStore) -> list[Tool]:
    """``remember_error``, ``search_error_history`` and ``read_error``."""

    async def remember(args: dict[str, Any]) -> ToolResult:
        sid = current_session.get(None)
        try:
            record = await storage.run(
                errors.add,
                args["tool"],
                args["symptom"],
                cause=args.get("cause", ""),
                action=args.get("action", ""),
                outcome=args["outcome"],
                keywords=tuple(args.get("keywords", ())),
                session_id=sid,
                source="agent",
            )
        except ErrorRecordInvalid as exc:
            raise ToolArgumentError(str(exc)) from exc
        if sid:
            detail = {"record_id": record.id, "tool": record.tool, "outcome": record.outcome}
            await storage.run(store.archive.add_event, sid, store.clock(), "error_memory", detail)
        return ToolResult(f"remembered as record #{record.id}")

    async def search(args: dict[str, Any]) -> ToolResult:
        hits = await storage.run(
            errors.search, args["query"], tool=args.get("tool"), limit=int(args.get("limit", 5))
        )
        if not hits:
            return ToolResult("no matching error records", empty=True)
        return ToolResult(_describe_hits(hits))

    async def read(args: dict[str, Any]) -> ToolResult:
        record = await storage.run(errors.get, int(args["id"]))
        if record is None:
            raise ErrorRecordNotFound(f"no error record #{args['id']} (it may have expired)")
        return ToolResult(describe_record(record))

    text = {"type": "string", "maxLength": MAX_TEXT_CHARS}
    return [
        Tool(
            "remember_error",
            "Remember how a tool failed and what was done about it, so the next "
            "attempt (in any conversation) can learn from it.",
            {
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "minLength": 1, "maxLength": MAX_TOOL_CHARS},
                    "symptom": {"type": "string", "minLength": 1, "maxLength": MAX_SYMPTOM_CHARS},
                    "cause": text,
                    "action": text,
                    "outcome": {"type": "string", "enum": list(OUTCOMES)},
                    "keywords": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": MAX_KEYWORD_CHARS},
                        "maxItems": MAX_KEYWORDS,
                    },
                },
                "required": ["tool", "symptom", "outcome"],
                "additionalProperties": False,
            },
            remember,
        ),
        Tool(
            "search_error_history",
            "Search remembered tool failures and their fixes.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 500},
                    "tool": {"type": "string", "maxLength": MAX_TOOL_CHARS},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            search,
        ),
        Tool(
            "read_error",
            "Read one remembered failure by its record number.",
            {
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 1}},
                "required": ["id"],
                "additionalProperties": False,
            },
            read,
        ),
    ]
