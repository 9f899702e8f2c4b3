"""The OpenAI chat-completions wire format: request bodies, stream chunks, failures.

:mod:`agenvoy_desktop.llm.openai_chat` owns the conversation with a server;
this module owns what travels: our messages turned into the API's shape
(tool-call arguments as JSON strings), the sampling fields servers accept,
one streamed chunk turned into text and tool-call pieces, and every way a
request can fail turned into one :class:`EndpointError` line for the person.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from agenvoy_desktop.core.model_api import ChatMessage, ToolCallRequest
from agenvoy_desktop.llm.llama_model import ModelRunError
from agenvoy_desktop.llm.tool_calls import new_call_id
from agenvoy_desktop.settings import SamplingSettings

ErrorKind = Literal[
    "refused", "timeout", "http", "stream", "malformed", "unloaded", "auth", "oversize", "deadline"
]
"""``oversize``: more than the answer limit or the body cap arrived; ``deadline``: the
answer took longer than the overall deadline.  Neither is worth an automatic retry."""

SERVER_TEXT_LIMIT = 160
"""Characters of a server's own error text quoted in our one line."""
CHARS_PER_TOKEN = 4
"""The estimate used when a server cannot count tokens (English text averages about 4)."""
MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers a chat template adds around each message (ChatML: ``<|im_start|>role\\n``...)."""


class EndpointError(ModelRunError):
    """A chat server could not be reached or did not answer properly; ``str()`` is one line.

    ``kind`` tells the caller what went wrong without parsing the text;
    ``status`` is the HTTP status when the server answered with one.
    """

    def __init__(self, message: str, kind: ErrorKind, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status

    @property
    def transient(self) -> bool:
        """Worth trying again later: the server was away or busy, not refusing the request."""
        if self.kind in ("refused", "timeout", "stream"):
            return True
        return (
            self.kind == "http"
            and self.status is not None
            and (self.status >= 500 or self.status == 429)
        )


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` probably takes: characters / 4, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_prompt(messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None) -> int:
    """A prompt's probable tokens, for trimming when the server cannot count them.

    UTF-8 bytes / 3 overestimates English (about 4 characters a token) and
    matches CJK (3 bytes, about one token each), so a chat trimmed with it
    fits on real vocabularies.
    """
    total = math.ceil(len(json.dumps(list(tools), ensure_ascii=False).encode()) / 3) if tools else 0
    for message in messages:
        text = message.get("content") or ""
        calls = message.get("tool_calls")
        if calls:
            text += json.dumps(calls, ensure_ascii=False)
        total += math.ceil(len(text.encode("utf-8")) / 3) + MESSAGE_OVERHEAD_TOKENS
    return total


def wire_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Our messages in the API's shape: tool-call arguments travel as JSON strings.

    A system message after the conversation's first messages (the turn note,
    ``agent/context.py``) goes into the user message that follows it
    (:func:`notes_in_user_turns`).
    """
    out: list[dict[str, Any]] = []
    for message in notes_in_user_turns(messages):
        item: dict[str, Any] = dict(message)
        calls = message.get("tool_calls")
        if calls:
            item["tool_calls"] = [_wire_call(call) for call in calls]
            item.setdefault("content", "")
        out.append(item)
    return out


def notes_in_user_turns(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages with each non-leading system message put at the start of the next user one.

    A server renders the conversation with the model's own chat template, and
    we cannot see that template: many accept a system message only first
    (Gemma's, Mistral's and other strictly alternating ones raise, which a
    server answers with an error, and the plain form the local engine falls
    back to does not run there). Folded into the user's message, the note
    still comes after the unchanged history, so a server's prompt cache
    (llama.cpp's ``cache_prompt``) reuses that history as before.  A note
    with no user message after it stays as it is.
    """
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    out: list[ChatMessage] = list(messages[:head])
    notes: list[str] = []
    for message in messages[head:]:
        if message.get("role") == "system":
            notes.append(message.get("content") or "")
        elif message.get("role") == "user" and notes:
            text = "\n\n".join([*notes, message.get("content") or ""])
            out.append({**message, "content": text})
            notes = []
        else:
            out.append(message)
    out.extend({"role": "system", "content": note} for note in notes)
    return out


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments", {})
    if not isinstance(arguments, str):
        function["arguments"] = json.dumps(arguments, ensure_ascii=False)
    return {"id": call.get("id") or new_call_id(), "type": "function", "function": function}


def sampling_fields(
    sampling: SamplingSettings, temperature: float, *, extras: bool
) -> dict[str, Any]:
    """Sampling as request fields: the standard ones, and llama.cpp's when ``extras``.

    llama.cpp, llama-cpp-python, Ollama and LM Studio accept the extra
    fields; a strict server (OpenAI's) rejects unknown ones, so the caller
    drops them after one refusal.
    """
    fields: dict[str, Any] = {"temperature": temperature, "top_p": sampling.top_p}
    if sampling.seed >= 0:
        fields["seed"] = sampling.seed
    if extras:
        fields |= {
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
            "repeat_penalty": sampling.repeat_penalty,
            "repeat_last_n": sampling.repeat_last_n,
        }
        if sampling.dry_multiplier > 0:
            fields |= {
                "dry_multiplier": sampling.dry_multiplier,
                "dry_base": sampling.dry_base,
                "dry_allowed_length": sampling.dry_allowed_length,
            }
    return fields


# -- the stream --------------------------------------------------------------------------------
@dataclass(slots=True)
class Chunk:
    """What one streamed ``data:`` line carried."""

    text: str = ""
    tool_parts: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


def parse_chunk(data: str, base_url: str) -> Chunk:
    """One ``data:`` payload; :class:`EndpointError` when it is not a chunk or carries an error."""
    try:
        obj = json.loads(data)
    except ValueError:
        raise malformed(base_url, data) from None
    if not isinstance(obj, dict):
        raise malformed(base_url, data)
    if "error" in obj:
        raise EndpointError(
            f"The server at {base_url} failed mid-answer: {server_text(obj)} — "
            "check the server's log, then send again.",
            "stream",
        )
    chunk = Chunk(usage=obj.get("usage") if isinstance(obj.get("usage"), dict) else None)
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise malformed(base_url, data)
    if choices:
        choice = choices[0]
        delta = _delta_of(choice)
        if delta is None:
            raise malformed(base_url, data)
        content = delta.get("content")
        chunk.text = content if isinstance(content, str) else ""
        parts = delta.get("tool_calls")
        chunk.tool_parts = (
            [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        )
        chunk.finish_reason = choice.get("finish_reason")
    return chunk


def _delta_of(choice: object) -> dict[str, Any] | None:
    """A streamed choice's ``delta``; some servers send the whole ``message`` in one event."""
    if not isinstance(choice, dict):
        return None
    delta = choice.get("delta", choice.get("message"))
    return delta if isinstance(delta, dict) else None


def parse_completion(text: str, base_url: str) -> Chunk:
    """A whole, non-streamed ``chat.completion`` body as one chunk (as if streamed at once).

    Some servers and proxies ignore ``"stream": true`` and answer with the
    finished answer: its content and tool calls are as good as a stream's.
    """
    try:
        obj = json.loads(text)
    except ValueError:
        raise malformed(base_url, text) from None
    if not isinstance(obj, dict):
        raise malformed(base_url, text)
    if "error" in obj:
        return parse_chunk(text, base_url)  # raises the server's own words
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise malformed(base_url, text)
    content = message.get("content")
    calls = message.get("tool_calls")
    return Chunk(
        text=content if isinstance(content, str) else "",
        tool_parts=_whole_calls(calls) if isinstance(calls, list) else [],
        finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
        usage=obj.get("usage") if isinstance(obj.get("usage"), dict) else None,
    )


def _whole_calls(calls: list[Any]) -> list[dict[str, Any]]:
    """Finished tool calls as stream pieces; arguments given as an object become JSON text."""
    parts: list[dict[str, Any]] = []
    for index, call in enumerate(c for c in calls if isinstance(c, dict)):
        function = dict(call.get("function") or {})
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            function["arguments"] = json.dumps(arguments, ensure_ascii=False)
        parts.append({"index": index, "id": call.get("id"), "function": function})
    return parts


class ToolCallAssembler:
    """Joins streamed ``tool_calls`` pieces (by ``index``) into whole requests."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, str]] = {}

    def feed(self, parts: list[dict[str, Any]]) -> None:
        for part in parts:
            index = part.get("index", len(self._calls))
            call = self._calls.setdefault(int(index), {"id": "", "name": "", "arguments": ""})
            if isinstance(part.get("id"), str) and not call["id"]:
                call["id"] = part["id"]
            function = part.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str) and not call["name"]:
                    call["name"] = function["name"]
                if isinstance(function.get("arguments"), str):
                    call["arguments"] += function["arguments"]

    def requests(self) -> list[ToolCallRequest]:
        """The calls so far; ``error`` says why one's arguments are unusable."""
        return [_call_request(call) for _, call in sorted(self._calls.items())]


def _call_request(call: dict[str, str]) -> ToolCallRequest:
    call_id, name, raw = call["id"] or new_call_id(), call["name"], call["arguments"]
    if not name:
        return ToolCallRequest(call_id, "", {}, raw, 'tool call has no "name"')
    try:
        # strict=False, as for the engine's JSON: a raw newline in a string carries meaning.
        arguments = json.loads(raw, strict=False) if raw.strip() else {}
    except ValueError as exc:
        return ToolCallRequest(
            call_id, name, {}, raw, f"tool call arguments are not valid JSON ({exc})"
        )
    if not isinstance(arguments, dict):
        return ToolCallRequest(call_id, name, {}, raw, "tool call arguments must be a JSON object")
    return ToolCallRequest(call_id, name, arguments, raw)


# -- failures ----------------------------------------------------------------------------------
def server_text(body: object) -> str:
    """The server's own error message from a JSON error body, shortened to one line."""
    text = ""
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        text = error if isinstance(error, str) else json.dumps(error)
    elif isinstance(body, str):
        text = body
    text = " ".join(text.split())
    return text[:SERVER_TEXT_LIMIT] + ("…" if len(text) > SERVER_TEXT_LIMIT else "")


def malformed(base_url: str, data: str) -> EndpointError:
    return EndpointError(
        f"The server at {base_url} sent a chunk that is not OpenAI chat JSON "
        f"({server_text(data)[:60]!r}) — is it an OpenAI-compatible server?",
        "malformed",
    )


def html_page(base_url: str) -> EndpointError:
    return EndpointError(
        f"The server at {base_url} answered with an HTML page, not OpenAI chat JSON "
        "(is the URL the API's?) — check the endpoint's address; it usually ends in /v1.",
        "malformed",
    )


def empty_body(base_url: str) -> EndpointError:
    return EndpointError(
        f"The server at {base_url} answered with an empty body: no answer at all "
        "(it failed after taking the request) — check its log, then send again.",
        "stream",
    )


def too_big(base_url: str, limit_bytes: int) -> EndpointError:
    return EndpointError(
        f"The server at {base_url} sent more than {limit_bytes / 2**20:.3g} MB for one answer "
        "— reading stopped there; is it an OpenAI-compatible chat server?",
        "oversize",
    )


def past_answer_limit(base_url: str, max_tokens: int) -> EndpointError:
    return EndpointError(
        f"The server at {base_url} kept sending past the answer limit of {max_tokens:,} tokens "
        "(it ignores max_tokens) — reading stopped there; raise the answer limit in Settings "
        "if answers need more room.",
        "oversize",
    )


def past_deadline(base_url: str, deadline_s: float) -> EndpointError:
    return EndpointError(
        f"The server at {base_url} was still answering after {deadline_s:g} s — it is too "
        "slow or stuck; reading stopped there. Try again, or choose a faster server.",
        "deadline",
    )


def dropped_mid_chunk(base_url: str) -> EndpointError:
    return EndpointError(
        f"The connection to the server at {base_url} dropped mid-answer (a chunk arrived cut "
        "off) — check that the server is still running, then send again.",
        "stream",
    )


def transport_error(
    exc: httpx.TransportError, base_url: str, timeouts: httpx.Timeout
) -> EndpointError:
    """A network-level failure as one line that says what to do."""
    if isinstance(exc, httpx.ConnectTimeout):
        return EndpointError(
            f"The server at {base_url} did not accept the connection within "
            f"{timeouts.connect:g} s — is it running and reachable?",
            "timeout",
        )
    if isinstance(exc, httpx.TimeoutException):
        return EndpointError(
            f"The server at {base_url} sent nothing for {timeouts.read:g} s — it may be "
            "overloaded or stuck; try again, or raise the endpoint's read timeout.",
            "timeout",
        )
    if isinstance(exc, httpx.ConnectError):
        return EndpointError(
            f"The server at {base_url} refused the connection — is it running?", "refused"
        )
    return EndpointError(
        f"The connection to the server at {base_url} broke mid-answer ({type(exc).__name__}) — "
        "check that the server is still running, then send again.",
        "stream",
    )


def http_error(status: int, body: object, base_url: str, model: str) -> EndpointError:
    """A non-2xx answer as one line; a missing model and a refused key get their own kinds."""
    said = server_text(body)
    if status in (401, 403):
        return EndpointError(
            f"The server at {base_url} refused the API key (HTTP {status}) — "
            "check the key set for this endpoint.",
            "auth",
            status,
        )
    lowered = said.lower()
    missing = any(word in lowered for word in ("not found", "not loaded", "unloaded", "no model"))
    if (status == 404 and ("model" in lowered or not said)) or ("model" in lowered and missing):
        return EndpointError(
            f"The server at {base_url} does not have the model {model!r} loaded — "
            "load it on the server or choose another model.",
            "unloaded",
            status,
        )
    detail = f": {said}" if said else ""
    return EndpointError(
        f"The server at {base_url} answered HTTP {status}{detail} — check the server's log.",
        "http",
        status,
    )
