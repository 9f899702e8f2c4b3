"""What the model sees in a turn: system prompt + summary + the window + this turn's note.

Pure functions over stored messages, so golden tests can pin the exact
messages sent.  The prompt is laid out for the KV cache: what stays the same
from turn to turn comes first, what changes every turn or round comes last.

* the head system message: base prompt, tool guidance, rolling summary;
* the made-up exchanges (if any, :mod:`agent.not_remembered`);
* the window's history: the window (moving in steps, ``take_window``) up to
  the current user message, never splitting a pair or a tool-call group;
* the **turn note**, a second system message: the time, this round's tool
  results and the recall block (which may end with a second try's
  instruction);
* the current user message (persisted first, so already the window's last
  exchange), followed by this turn's tool calls and results in a tool round.

The engine evaluates only what follows the longest common prefix with the
previous prompt, so a new recall block or clock line costs the note and the
user message, not the whole window.  In a brand-new session (nothing before
the user message) the note stays inside the head system message, so the
model reads exactly what it read before the note moved: base, time, results,
recall, question.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from agenvoy_desktop.agent.tools import UNKNOWN_TOOL
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatMessage

DEFAULT_SYSTEM_PROMPT = (
    "You are Agenvoy, a personal assistant running entirely on the user's own computer. "
    "Answer in the user's language, briefly and concretely."
)
SMALL_MODEL_SYSTEM_PROMPT = (
    "You are Agenvoy. Reply briefly and concretely, in the language of the message."
)
"""The default for a small model (``policy``): nothing it can copy into an answer.

The starter wrote the identity line into its replies ("Dr. Okafor is a
personal assistant running entirely on the user's own computer", 7 of 24
statements) and spoke of "the user" (4 of 24); with this line, 0 and 0,
fewer refusals and shorter answers (``benchmarks/statement_echo.py``)."""
SEARCH_GUIDANCE = (
    "You remember earlier conversations: when the user refers to something that is neither "
    "in the messages below nor in what you remember, call search_chat_history before answering."
)
DOCUMENTS_GUIDANCE = (
    "For questions of fact, call search_rag first and cite the sources you use as (path:lines)."
)
"""One line: the prompt of a 0.5B model has little room (see ``document_tools``)."""
TOOL_FAILURE_GUIDANCE = (
    "When a tool fails, read the hint that comes with the error before trying again."
)


def tool_guidance(offered: Sequence[str]) -> str:
    """What the system prompt says about tools, for the tools offered in this round only.

    A turn without tools (a greeting to a small model) gets no tool talk at
    all: a small model told about a tool it is not offered tries to call it.
    """
    parts: list[str] = []
    if "search_chat_history" in offered:
        parts.append(SEARCH_GUIDANCE)
    if "search_rag" in offered:  # offered only while the user's collections are enabled
        parts.append(DOCUMENTS_GUIDANCE)
    if offered:
        parts.append(TOOL_FAILURE_GUIDANCE)
    return " ".join(parts)


INTERRUPTED_NOTE = "[answer interrupted by the user]"
FAILED_NOTE = "[answer cut off: the model failed before it finished]"


Clock = Literal["time", "date", "none"]
"""How much of the clock a system prompt carries (``policy.clock_in_prompt`` decides;
"date" is a measured alternative, see ``benchmarks/lab/clock_talk.py``)."""


def local_time_line(now_ns: int) -> str:
    """``Current local time: 2026-11-29 23:05 (Sunday, UTC+01:00)``."""
    moment = datetime.fromtimestamp(now_ns / 1e9).astimezone()
    offset = moment.strftime("%z")
    zone = f"UTC{offset[:3]}:{offset[3:]}" if offset else "local"
    return f"Current local time: {moment:%Y-%m-%d %H:%M} ({moment:%A}, {zone})"


def date_line(now_ns: int) -> str:
    """``Today is Sunday, 2026-11-29.`` — the date without the hour and the zone."""
    moment = datetime.fromtimestamp(now_ns / 1e9).astimezone()
    return f"Today is {moment:%A}, {moment:%Y-%m-%d}."


def clock_line(now_ns: int, clock: Clock) -> str:
    """The system prompt's clock line for *clock* ("" for none)."""
    if clock == "time":
        return local_time_line(now_ns)
    if clock == "date":
        return date_line(now_ns)
    return ""


WINDOW_STEP = 8
"""How far the window's start jumps (``take_window``): it holds N to N + 7 messages and
keeps its first message for about four exchanges, so their KV cache is reused."""


def system_message(
    base_prompt: str,
    summary_text: str,
    now_ns: int,
    extra: str = "",
    *,
    guidance: str = "",
    recall: str = "",
    clock: Clock = "time",
) -> ChatMessage:
    """The whole system prompt as one message: the head, then the turn note.

    Order: what changes least comes first (base prompt, tool guidance, the
    rolling summary), then the time (as much of it as *clock* says), this
    round's tool results and the recall block last — the recall block must
    sit at the end, where a small model reads it as the freshest context.
    For callers that need one system message; a turn's prompt puts the note
    before the user's message (:func:`build_messages`).
    """
    head = head_message(base_prompt, summary_text, guidance=guidance)["content"]
    note = turn_note(now_ns, extra, recall=recall, clock=clock)
    return {"role": "system", "content": f"{head}\n\n{note}" if note else head}


def head_message(base_prompt: str, summary_text: str, *, guidance: str = "") -> ChatMessage:
    """The prompt's first message, what changes least: base prompt, tool guidance, summary."""
    head = base_prompt.strip()
    if guidance.strip():
        head = f"{head} {guidance.strip()}"
    parts = [head]
    if summary_text.strip():
        parts.append("Summary of the earlier conversation:\n" + summary_text.strip())
    return {"role": "system", "content": "\n\n".join(parts)}


def turn_note(now_ns: int, extra: str = "", *, recall: str = "", clock: Clock = "time") -> str:
    """What changes every turn or round: the time, this round's tool results, the recall block.

    "" when there is none of them (no note is sent).
    """
    parts: list[str] = []
    if line := clock_line(now_ns, clock):
        parts.append(line)
    if extra.strip():
        parts.append(extra.strip())
    if recall.strip():
        parts.append(recall.strip())
    return "\n\n".join(parts)


def turn_note_index(messages: Sequence[ChatMessage]) -> int | None:
    """Where the turn note sits in a built prompt (a system message after the first), if any."""
    return next((i for i, m in enumerate(messages) if i > 0 and m.get("role") == "system"), None)


def tool_results_note(traffic: Sequence[Message]) -> str:
    """This turn's tool calls and results as plain text for the answer round.

    Small local models (the 0.5B starter among them) answer a tool result
    in a ``tool`` message with the same call again, but read the same result
    correctly from the system prompt; bigger models do well either way.  So
    the round that must answer (no tools offered) gets the results here.
    No closing instruction follows them: measured with the starter model, a
    trailing "answer from these results" line made it echo the last quoted
    message instead of answering.
    """
    lines = ["Results of the tools called for the user's last message:"]
    for message in traffic:
        if message.role != "tool" or message.extra.get("repeated"):
            continue  # a repeat notice adds nothing to the first result
        if message.extra.get("is_error") and message.content.startswith(UNKNOWN_TOOL):
            # a call to a tool that does not exist holds nothing to answer from, and the
            # starter answered with the error itself ("{\"name\": \"unknown tool …\"}")
            continue
        args = json.dumps(message.extra.get("arguments", {}), ensure_ascii=False)
        status = " (failed)" if message.extra.get("is_error") else ""
        lines.append(f"### {message.extra.get('name', 'tool')}({args}){status}")
        lines.append(message.content.strip() or "(no result)")
        if message.extra.get("error_hint"):
            lines.append(str(message.extra["error_hint"]))
    return "\n".join(lines) if len(lines) > 1 else ""


def to_chat_message(message: Message) -> ChatMessage:
    """One stored message in the form chat templates expect."""
    extra = message.extra
    if message.role == "tool":
        content = message.content
        hint = extra.get("error_hint")
        if hint:
            content = f"{content}\n\n{hint}"
        out: ChatMessage = {"role": "tool", "content": content}
        if extra.get("tool_call_id"):
            out["tool_call_id"] = str(extra["tool_call_id"])
        if extra.get("name"):
            out["name"] = str(extra["name"])
        return out
    content = message.content
    if extra.get("interrupted"):
        note = FAILED_NOTE if extra.get("interrupted_by") == "error" else INTERRUPTED_NOTE
        content = f"{content}\n{note}" if content else note
    chat: ChatMessage = {"role": message.role, "content": content}
    calls = extra.get("tool_calls")
    if message.role == "assistant" and isinstance(calls, list) and calls:
        chat["tool_calls"] = [_tool_call(call) for call in calls]
    return chat


def _tool_call(call: Any) -> dict[str, Any]:
    """Normalise a stored call to ``{"id", "type", "function": {"name", "arguments": {}}}``."""
    function = call.get("function", call) if isinstance(call, dict) else {}
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI-style string arguments from an import
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"raw": arguments}
    return {
        "id": str(call.get("id", "")) if isinstance(call, dict) else "",
        "type": "function",
        "function": {"name": str(function.get("name", "")), "arguments": arguments},
    }


def build_messages(
    *,
    base_prompt: str,
    summary_text: str,
    window: Sequence[Message],
    now_ns: int,
    extra_system: str = "",
    guidance: str = "",
    recall: str = "",
    examples: Sequence[ChatMessage] = (),
    clock: Clock = "time",
) -> list[ChatMessage]:
    """The full prompt of one model call (see the module docstring for the layout).

    Head system message, made-up *examples* (if any), the window's history,
    the turn note (time, *extra_system*, *recall*), then the window's last
    user message and whatever follows it.  Without history before that
    message the note joins the head (:func:`system_message`), as one
    system prompt.
    """
    chat = [to_chat_message(m) for m in window if m.role != "system"]
    note = turn_note(now_ns, extra_system, recall=recall, clock=clock)
    head = head_message(base_prompt, summary_text, guidance=guidance)
    current = next((i for i in range(len(chat) - 1, -1, -1) if chat[i]["role"] == "user"), None)
    if note and current:  # there is history before the current exchange
        chat.insert(current, {"role": "system", "content": note})
    elif note:  # a new session (or no user message at all): one system prompt
        head = {"role": "system", "content": f"{head['content']}\n\n{note}"}
    return [head, *examples, *chat]
