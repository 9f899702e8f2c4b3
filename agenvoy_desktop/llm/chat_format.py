"""Chat prompts from the model's own template, and trimming that makes them fit.

A GGUF carries its chat template (``tokenizer.chat_template``, a Jinja
template written for Hugging Face ``transformers``).  :class:`ChatTemplate`
renders it the way ``transformers`` does (sandboxed, ``trim_blocks``,
``tojson`` without ASCII escaping, ``raise_exception`` and ``strftime_now``
helpers), so a model sees exactly the prompt format it was trained on.  A
GGUF without a template gets ChatML with Qwen-style tool calling.

:func:`fit_messages` is the context-overflow policy (pure, testable without a
model): drop the oldest conversation groups first, keep the system message
and the current exchange, and as a last resort cut the middle out of the
longest remaining message.  The user never sees an overflow error.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.model_api import ChatMessage

log = logging.getLogger(__name__)

# ChatML with Qwen2.5's tool convention, for GGUFs that carry no template.
CHATML_TEMPLATE = """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages and messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{% endif %}
{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' }}
{{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{% endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and ' }}
{{- 'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n' }}
{{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages and messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{% endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{% endif %}
{%- elif message.role == 'assistant' and message.tool_calls %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{% endif %}
{%- for call in message.tool_calls %}
{{- '\\n<tool_call>\\n{"name": "' + call.function.name + '", "arguments": ' }}
{{- (call.function.arguments | tojson) + '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{% endif %}
"""

# For templates that ignore ``tools``: the tool list goes into the system message.
_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{tools}\n</tools>\n\nFor each function call, return a json object with function name "
    "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)

OMISSION_MARKER = "\n[… {n} characters omitted …]\n"
MIN_KEPT_CHARS = 200
"""A message is never cut below this many characters of its own text."""


class ChatTemplateError(KnownError, ValueError):
    """The model's chat template cannot render this conversation."""


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """``transformers``' tojson filter: real UTF-8 (CJK stays readable), no HTML escaping."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _compile(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    return env.from_string(source)


class ChatTemplate:
    """A model's chat template, compiled once; ChatML when the model has none."""

    def __init__(
        self, source: str | None, *, bos_token: str = "", eos_token: str = "", model: str = ""
    ) -> None:
        self.is_fallback = not source
        self.source = source or CHATML_TEMPLATE
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.model = model
        self.supports_tools = "tools" in self.source
        try:
            self._template = _compile(self.source)
        except jinja2.TemplateError as exc:
            log.warning("%s: chat template does not compile (%s); using ChatML", model, exc)
            self.is_fallback, self.source = True, CHATML_TEMPLATE
            self.supports_tools = True
            self._template = _compile(CHATML_TEMPLATE)

    def render(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text for ``messages`` (and ``tools``), ending with the answer's start.

        A template that rejects the conversation (many insist on strictly
        alternating user/assistant turns and know no tool role) is tried once
        more with a plain form of it: the system prompt folded into the first
        user turn and a later system message (the turn note) into the next
        one, tool traffic written out as ordinary turns.
        """
        prepared = [_template_message(m) for m in messages]
        tool_list = list(tools) if tools else None
        if tool_list and not self.supports_tools:
            prepared = _with_tools_in_system(prepared, tool_list)
            tool_list = None
        try:
            return self._render(prepared, tool_list, add_generation_prompt)
        except (jinja2.TemplateError, TypeError, ValueError) as exc:
            first_error = exc
        try:
            return self._render(_plain_messages(prepared), tool_list, add_generation_prompt)
        except (jinja2.TemplateError, TypeError, ValueError):
            pass
        raise ChatTemplateError(f"{self.model}: the chat template failed: {first_error}")

    def _render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> str:
        return self._template.render(
            messages=messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )


def _template_message(message: ChatMessage) -> dict[str, Any]:
    """A plain dict the way templates expect it: content a string, arguments a dict."""
    out: dict[str, Any] = dict(message)
    out["content"] = message.get("content") or ""
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [_template_call(call) for call in calls]
    return out


def _template_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        # A model's broken arguments are shown to it as they were.
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    function["arguments"] = arguments
    function.setdefault("name", "")
    return {**call, "type": call.get("type", "function"), "function": function}


def _with_tools_in_system(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    spec = _TOOLS_PREAMBLE.format(tools="\n".join(_tojson(tool) for tool in tools))
    if messages and messages[0]["role"] == "system":
        head = {**messages[0], "content": f"{messages[0]['content']}\n\n{spec}"}
        return [head, *messages[1:]]
    return [{"role": "system", "content": spec}, *messages]


def _plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User/assistant turns only, strictly alternating, for templates that demand it.

    The leading system text goes before the first user turn; a system message
    later in the conversation (the turn note) goes before the next user turn,
    the one it was written for.
    """
    head_len = 0
    while head_len < len(messages) and messages[head_len]["role"] == "system":
        head_len += 1
    system = "\n\n".join(m["content"] for m in messages[:head_len])
    turns: list[dict[str, Any]] = []
    note: list[str] = []
    for message in messages[head_len:]:
        role, content = message["role"], message["content"]
        if role == "system":
            note.append(content)
            continue
        if role == "user" and note:
            content, note = "\n\n".join([*note, content]), []
        elif role == "tool":
            role, content = "user", f"[tool result {message.get('name', '')}]\n{content}"
        elif role == "assistant" and message.get("tool_calls"):
            calls = "\n".join(
                _tojson({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                for c in message["tool_calls"]
            )
            content = f"{content}\n<tool_call>\n{calls}\n</tool_call>".lstrip()
        _add_turn(turns, role, content)
    if note:  # nothing followed it: it ends the conversation as a user turn
        _add_turn(turns, "user", "\n\n".join(note))
    if system:
        if turns and turns[0]["role"] == "user":
            turns[0] = {"role": "user", "content": f"{system}\n\n{turns[0]['content']}"}
        else:
            turns.insert(0, {"role": "user", "content": system})
    return turns


def _add_turn(turns: list[dict[str, Any]], role: str, content: str) -> None:
    """Append a turn, joined to the previous one when both have the same role."""
    if turns and turns[-1]["role"] == role:
        turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{content}"}
    else:
        turns.append({"role": role, "content": content})


# -- fitting the context ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FitResult:
    """What :func:`fit_messages` kept."""

    messages: list[ChatMessage]
    dropped: int
    """Whole messages removed, oldest first."""
    shortened: int
    """Messages whose middle was cut out."""
    tokens: int
    """Prompt tokens of ``messages`` as measured by the count function."""
    fits: bool


def split_groups(
    messages: Sequence[ChatMessage],
) -> tuple[list[ChatMessage], list[list[ChatMessage]]]:
    """(leading system messages, conversation groups).

    A group starts at a user message and holds everything up to the next one:
    the assistant's answer, its tool calls and their results.  A system
    message later in the conversation (the turn note) starts the group of
    the user message that follows it.  Dropping whole groups never splits a
    user/assistant pair or a tool-call group, nor a note from its message.
    """
    head_len = 0
    while head_len < len(messages) and messages[head_len].get("role") == "system":
        head_len += 1
    groups: list[list[ChatMessage]] = []
    for message in messages[head_len:]:
        role = message.get("role")
        notes_only = bool(groups) and all(m.get("role") == "system" for m in groups[-1])
        if not groups or (role in ("user", "system") and not notes_only):
            groups.append([message])
        else:
            groups[-1].append(message)
    return list(messages[:head_len]), groups


def cut_middle(text: str, keep_chars: int) -> str:
    """``text`` with its middle replaced by an omission marker, about ``keep_chars`` long."""
    if len(text) <= keep_chars:
        return text
    keep_chars = max(keep_chars, 2)
    head = keep_chars // 2
    tail = keep_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}{OMISSION_MARKER.format(n=omitted)}{text[len(text) - tail :]}"


def fit_messages(
    messages: Sequence[ChatMessage],
    budget: int,
    count: Callable[[Sequence[ChatMessage]], int],
) -> FitResult:
    """The longest suffix of the conversation whose prompt fits ``budget`` tokens.

    ``count`` renders a candidate list and returns its prompt tokens.  The
    leading system message(s) and the last group (the turn note, the current
    user message and any tool traffic after it) are always kept; older
    groups go oldest first (binary search: few renders).  If that is still
    too long, the longest kept messages lose their middle.
    """
    head, groups = split_groups(messages)
    full = list(messages)
    tokens = count(full)
    if tokens <= budget or len(groups) <= 1:
        dropped_groups = 0
    else:
        dropped_groups, tokens = _fewest_groups_to_drop(head, groups, budget, count)
    kept = head + [m for group in groups[dropped_groups:] for m in group]
    dropped = len(full) - len(kept)
    if tokens <= budget:
        return FitResult(kept, dropped, 0, tokens, True)
    kept, shortened, tokens = _shorten(kept, budget, count, tokens)
    return FitResult(kept, dropped, shortened, tokens, tokens <= budget)


def _fewest_groups_to_drop(
    head: list[ChatMessage],
    groups: list[list[ChatMessage]],
    budget: int,
    count: Callable[[Sequence[ChatMessage]], int],
) -> tuple[int, int]:
    def tokens_without(n: int) -> int:
        return count(head + [m for group in groups[n:] for m in group])

    low, high = 1, len(groups) - 1  # dropping 0 is known not to fit
    high_tokens = tokens_without(high)
    if high_tokens > budget:
        return high, high_tokens
    while low < high:
        mid = (low + high) // 2
        mid_tokens = tokens_without(mid)
        if mid_tokens <= budget:
            high, high_tokens = mid, mid_tokens
        else:
            low = mid + 1
    return high, high_tokens


def _shorten(
    messages: list[ChatMessage],
    budget: int,
    count: Callable[[Sequence[ChatMessage]], int],
    tokens: int,
) -> tuple[list[ChatMessage], int, int]:
    """Cut the middle of the longest messages until the prompt fits (or nothing is left)."""
    current = [m.copy() for m in messages]
    originals = [m.get("content") or "" for m in messages]
    shortened: set[int] = set()
    for _ in range(4 * len(current) + 4):
        if tokens <= budget:
            break
        lengths = [len(m.get("content") or "") for m in current]
        index = max(range(len(current)), key=lengths.__getitem__)
        length = lengths[index]
        if length <= MIN_KEPT_CHARS:
            break
        total_chars = max(1, sum(lengths))
        chars_per_token = total_chars / max(1, tokens)
        excess = int((tokens - budget) * chars_per_token * 1.15) + len(OMISSION_MARKER) + 16
        keep = max(MIN_KEPT_CHARS, min(length - excess, length * 3 // 4))
        current[index]["content"] = cut_middle(originals[index], keep)
        shortened.add(index)
        tokens = count(current)
    return current, len(shortened), tokens
