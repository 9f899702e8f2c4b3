"""Tool calls parsed out of a streamed answer (Qwen / Hermes ``<tool_call>`` blocks).

Qwen2.5 and the Hermes family answer a tool request with
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` inside the normal
text stream.  :class:`ToolCallStream` sits between the token stream and the
UI: text is passed on as it arrives, a tag that is still being spelled out
(``<tool_``) is held back so it never flashes on screen, and each finished
block becomes one :class:`ToolCallRequest`.  A block whose JSON is unusable
still becomes a request, with ``error`` set, so the agent can tell the model
what was wrong instead of silently dropping the call.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Collection, Sequence
from typing import Any

from agenvoy_desktop.core.model_api import TextDelta, ToolCallRequest

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

ToolStreamEvent = TextDelta | ToolCallRequest

BARE_JSON_LIMIT = 8000
"""Characters a reply starting with ``{`` is held back before it is treated as text."""
_TEXT, _TAG, _BARE = "text", "tag", "bare"
_CALL_NAME = re.compile(r"[^\n]{1,64}")
_CALL_KEYS = frozenset({"name", "arguments", "id", "type"})
_JSON = json.JSONDecoder()

_NAME_GUESS = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_FENCE_OPEN = re.compile(r"```(?:json)?[ \t]*\n")


def new_call_id() -> str:
    """A short unique id for a tool call, in the OpenAI style (``call_<8 hex>``)."""
    return f"call_{secrets.token_hex(4)}"


def parse_tool_call(raw: str, call_id: str) -> ToolCallRequest:
    """One ``<tool_call>`` block body as a request; ``error`` says why it is unusable."""
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except ValueError as exc:
        return _failed(call_id, raw, _guess_name(text), f"tool call is not valid JSON ({exc})")
    if not isinstance(obj, dict):
        return _failed(call_id, raw, "", "tool call must be a JSON object with name and arguments")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return _failed(call_id, raw, "", 'tool call has no "name"')
    arguments, error = _arguments(obj)
    if error is not None:
        return _failed(call_id, raw, name.strip(), error)
    return ToolCallRequest(id=call_id, name=name.strip(), arguments=arguments, raw=raw)


def _arguments(obj: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The call's arguments as a dict; some models send them as a JSON string."""
    args = obj.get("arguments", obj.get("parameters"))
    if args is None:
        return {}, None
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return {}, f"tool call arguments are not valid JSON ({exc})"
    if not isinstance(args, dict):
        return {}, "tool call arguments must be a JSON object"
    return args, None


def _guess_name(text: str) -> str:
    match = _NAME_GUESS.search(text)
    return match.group(1) if match else ""


def _failed(call_id: str, raw: str, name: str, error: str) -> ToolCallRequest:
    return ToolCallRequest(id=call_id, name=name, arguments={}, raw=raw, error=error)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects *text* holds one after another (whitespace or commas between);
    [] when anything else is in it."""
    found: list[dict[str, Any]] = []
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position == len(text):
            return found
        try:
            obj, position = _JSON.raw_decode(text, position)
        except ValueError:
            return []
        if not isinstance(obj, dict):
            return []
        found.append(obj)


def _could_open_fence(text: str) -> bool:
    """``text`` is still too short to tell whether it opens a ```json fence."""
    return "\n" not in text and text.startswith("`") and len(text) < 16


def _partial_tag(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could be the start of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ToolCallStream:
    """Splits streamed text into :class:`TextDelta` and :class:`ToolCallRequest` events.

    Feed it decoded text in any pieces; it returns the events that are
    certain so far.  Whitespace that only separates text from a tool call
    (the newline before ``<tool_call>``, the one after ``</tool_call>``) is
    dropped; any other text comes out unchanged, at most held back until the
    next piece shows it is not the start of a tag.

    Small models (the 0.5B starter among them) often skip the tags and answer
    with the bare JSON object, sometimes in a ```json fence.  With
    ``tool_names`` given, an answer that *starts* with ``{`` or such a fence
    is held until the object is complete: it becomes a call when its
    ``name`` is one of the offered tools or it has exactly a call's shape
    (see :meth:`_is_call`), and text otherwise.
    """

    def __init__(
        self, tool_names: Collection[str] = (), new_id: Callable[[], str] = new_call_id
    ) -> None:
        self._tool_names = frozenset(tool_names)
        self._new_id = new_id
        self._buf = ""
        self._mode = _TEXT
        self._pending_ws = ""
        self._after_call = False
        self._bare_ok = bool(self._tool_names)
        self._fence = 0
        self.calls = 0
        """Tool-call requests emitted so far."""

    def feed(self, text: str) -> list[ToolStreamEvent]:
        """Events that ``text`` completes (possibly none)."""
        self._buf += text
        out: list[ToolStreamEvent] = []
        while self._step(out):
            pass
        return out

    def finish(self) -> list[ToolStreamEvent]:
        """Flush at the end of the answer: held-back text, an unterminated call."""
        out: list[ToolStreamEvent] = []
        rest, self._buf = self._buf, ""
        mode, self._mode = self._mode, _TEXT
        if mode == _TAG:
            call = parse_tool_call(rest, self._new_id())
            if call.error is not None:
                call = _failed(call.id, rest, call.name, f"unterminated tool call: {call.error}")
            self._emit_call(call, out)
        elif mode == _BARE and parse_tool_call(rest, "").name in self._tool_names:
            call = parse_tool_call(rest, self._new_id())
            self._emit_call(_failed(call.id, rest, call.name, call.error or "bad tool call"), out)
        else:
            self._emit_text(rest, out, final=True)
        return out

    def _step(self, out: list[ToolStreamEvent]) -> bool:
        """Consume one complete piece of the buffer; False when more input is needed."""
        if self._mode == _TAG:
            return self._step_tag(out)
        if self._mode == _BARE:
            return self._step_bare(out)
        if self._bare_ok:
            head = self._buf.lstrip()
            if not head or _could_open_fence(head):
                return False  # wait for the first real character / the fence's first line
            fence = _FENCE_OPEN.match(head)
            if head.startswith("{") or fence:
                self._buf, self._mode = head, _BARE
                self._fence = fence.end() if fence else 0
                return True
        start = self._buf.find(TOOL_CALL_OPEN)
        if start >= 0:
            self._emit_text(self._buf[:start], out, before_call=True)
            self._buf = self._buf[start + len(TOOL_CALL_OPEN) :]
            self._mode = _TAG
            return True
        keep = _partial_tag(self._buf, TOOL_CALL_OPEN)
        cut = len(self._buf) - keep
        self._emit_text(self._buf[:cut], out)
        self._buf = self._buf[cut:]
        return False

    def _step_tag(self, out: list[ToolStreamEvent]) -> bool:
        end = self._buf.find(TOOL_CALL_CLOSE)
        if end < 0:
            return False
        raw, self._buf = self._buf[:end], self._buf[end + len(TOOL_CALL_CLOSE) :]
        self._mode = _TEXT
        self._emit_call(parse_tool_call(raw, self._new_id()), out)
        return True

    def _step_bare(self, out: list[ToolStreamEvent]) -> bool:
        """A reply that starts with ``{`` (or a ```json fence): a bare tool call, or text?"""
        raw, end = self._bare_json()
        if raw is None:
            too_long = len(self._buf) > BARE_JSON_LIMIT or TOOL_CALL_OPEN in self._buf
            if not too_long:
                return False  # incomplete so far
        self._mode = _TEXT
        objs = _json_objects(raw) if raw is not None else []
        if raw is not None and objs and all(self._is_call(obj) for obj in objs):
            self._buf = self._buf[end:]
            bodies = [raw] if len(objs) == 1 else [json.dumps(obj) for obj in objs]
            for body in bodies:  # several: the starter's answer as one "call" per line
                self._emit_call(parse_tool_call(body, self._new_id()), out)
        else:
            self._bare_ok = False  # an ordinary answer: stream it as text from here on
        return True

    def _is_call(self, obj: dict[str, Any]) -> bool:
        """An offered tool's name, or exactly the shape of a call to a tool we lack.

        The starter model sometimes invents a tool (``read_password_file``)
        in a perfectly formed call; taken as text, that JSON became the
        answer.  As a call it gets "unknown tool …; available tools: …" back
        and the model can try again.  It also names a "tool" after what the
        user said (``{"name": "fado on 13 May", "arguments": {"days": 1}}``),
        which as text was the whole answer.  Only the bare call shape counts
        (a one-line ``name``, ``arguments``, nothing else but ``id`` /
        ``type``), so ordinary JSON in an answer stays text.
        """
        name = obj.get("name")
        if name in self._tool_names:
            return True
        return (
            isinstance(name, str)
            and _CALL_NAME.fullmatch(name.strip()) is not None
            and "arguments" in obj
            and isinstance(obj["arguments"], dict | str)
            and set(obj) <= _CALL_KEYS
        )

    def _bare_json(self) -> tuple[str | None, int]:
        """(the candidate JSON text, where it ends in the buffer), or (None, 0) if incomplete."""
        if self._fence:
            close = self._buf.find("```", self._fence)
            if close < 0:
                return None, 0
            return self._buf[self._fence : close], close + 3
        try:
            _obj, end = _JSON.raw_decode(self._buf)
        except ValueError:
            return None, 0
        return self._buf[:end], end

    def _emit_call(self, call: ToolCallRequest, out: list[ToolStreamEvent]) -> None:
        out.append(call)
        self.calls += 1
        self._after_call = True
        self._pending_ws = ""

    def _emit_text(
        self,
        text: str,
        out: list[ToolStreamEvent],
        *,
        before_call: bool = False,
        final: bool = False,
    ) -> None:
        text = self._pending_ws + text
        self._pending_ws = ""
        if final and not self.calls:
            if text:
                out.append(TextDelta(text))
            return
        if self._after_call:
            text = text.lstrip()
        body = text.rstrip()
        if body:
            out.append(TextDelta(body))
            self._after_call = False
            self._bare_ok = False
        if not (before_call or final):
            self._pending_ws = text[len(body) :]


def tool_names(tools: Sequence[dict[str, Any]]) -> list[str]:
    """Names of OpenAI-style tool specs (``{"type": "function", "function": {"name": ...}}``)."""
    names = []
    for tool in tools:
        function = tool.get("function")
        spec = function if isinstance(function, dict) else tool
        if isinstance(spec.get("name"), str):
            names.append(spec["name"])
    return names
