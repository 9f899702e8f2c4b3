"""Tools the model may call: schemas, argument checking, and safe execution.

A tool failure is information for the model, never a crashed turn: bad
arguments, an unknown name, an exception or a hang each become a
:class:`ToolOutcome` with ``is_error`` set and a plain-words message the model
can act on.  Tools may come and go between turns (the document tools exist
only while their worker is up), so the registry asks each tool whether it is
available when the turn starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenvoy_desktop.core.errors import KnownError, is_known, one_line

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 20.0
MAX_RESULT_CHARS = 4000  # ~1000 tokens: small models have small contexts

UNKNOWN_TOOL = "unknown tool"
"""How the result of a call to a tool that was not offered begins."""


class ToolArgumentError(KnownError, ValueError):
    """Arguments that do not match the tool's schema (message says which)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a handler returns: text for the model, and whether it found nothing."""

    content: str
    empty: bool = False
    data: Any = None
    quoted: tuple[str, ...] = ()
    """The ids of the messages *content* quotes, one per quoted line, in order: stored with
    the result so deleting one of them takes its line out (``core/quoted_results.py``)."""


Handler = Callable[[dict[str, Any]], Awaitable[ToolResult | str]]


@dataclass(frozen=True, slots=True)
class Tool:
    """One callable tool.  ``parameters`` is a JSON schema for an object."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    handler: Handler
    timeout_s: float = DEFAULT_TIMEOUT_S
    available: Callable[[], bool] = field(default=lambda: True)

    def spec(self) -> dict[str, Any]:
        """OpenAI-style function spec, as chat templates expect.

        ``additionalProperties`` is checked here but not shown to the model:
        small models copy it into their arguments, and it costs prompt tokens.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _for_model(self.parameters),
            },
        }


def _for_model(schema: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: _for_model(v) for k, v in out["properties"].items()}
    return out


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one call, as persisted and shown (chip in the UI)."""

    name: str
    arguments: dict[str, Any]
    content: str
    is_error: bool = False
    empty: bool = False
    duration_s: float = 0.0
    quoted: tuple[str, ...] = ()
    """The messages *content* quotes (:attr:`ToolResult.quoted`)."""

    @property
    def failed(self) -> bool:
        """An error or an empty result: both make the error memory look for hints."""
        return self.is_error or self.empty


class ToolRegistry:
    """The tools of one agent; :meth:`call` never raises for tool problems."""

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def available(self) -> list[Tool]:
        """Tools offered in this turn (a crashing availability check means: not offered)."""
        out: list[Tool] = []
        for tool in self._tools.values():
            try:
                if tool.available():
                    out.append(tool)
            except Exception:  # an availability probe must not break the turn
                log.warning("availability check of tool %s failed", tool.name, exc_info=True)
        return out

    def specs(self) -> list[dict[str, Any]]:
        return [tool.spec() for tool in self.available()]

    def names(self) -> list[str]:
        """Every registered tool's name (offered now or not): what an answer must not call
        in prose (``agent/answer_check.py``)."""
        return list(self._tools)

    async def call(
        self, name: str, arguments: Mapping[str, Any], offered: Sequence[str] | None = None
    ) -> ToolOutcome:
        """Validate and run one call; every failure becomes an error outcome."""
        args = dict(arguments)
        started = time.perf_counter()

        def outcome(
            content: str, *, error: bool = False, empty: bool = False, quoted: Sequence[str] = ()
        ) -> ToolOutcome:
            took = time.perf_counter() - started
            return ToolOutcome(name, args, _clip(content), error, empty, took, tuple(quoted))

        tool = self._tools.get(name)
        if tool is None or (offered is not None and name not in offered):
            names = ", ".join(offered if offered is not None else self._tools) or "none"
            return outcome(f"{UNKNOWN_TOOL} {name!r}; available tools: {names}", error=True)
        try:
            validate_arguments(tool.parameters, args)
        except ToolArgumentError as exc:
            return outcome(f"invalid arguments for {name}: {exc}", error=True)
        try:
            result = await asyncio.wait_for(tool.handler(args), timeout=tool.timeout_s)
        except TimeoutError:
            return outcome(f"{name} timed out after {tool.timeout_s:g} s", error=True)
        except ToolArgumentError as exc:
            return outcome(f"invalid arguments for {name}: {exc}", error=True)
        except Exception as exc:  # a tool bug is reported to the model, not raised
            if is_known(exc):  # a file, a date, a record that is not there: the model's to fix
                log.info("tool %s failed: %s", name, one_line(exc))
            else:
                log.error("internal error in tool %s", name, exc_info=True)
            return outcome(f"{name} failed: {type(exc).__name__}: {exc}", error=True)
        if isinstance(result, str):
            result = ToolResult(result, empty=not result.strip())
        return outcome(result.content, empty=result.empty, quoted=result.quoted)


def _clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters not shown]"


# -- argument checking --------------------------------------------------------
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def validate_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> None:
    """Check ``args`` against the subset of JSON schema our tools use.

    Supported: type, properties, required, additionalProperties=false, enum,
    minimum/maximum, minLength/maxLength, items, maxItems.  Small on purpose:
    the messages are written for a small model to correct its call.
    """
    _check("arguments", schema, dict(args))


def _check(where: str, schema: Mapping[str, Any], value: Any) -> None:
    expected = schema.get("type")
    if expected is not None:
        kinds = _TYPES[expected]
        is_bool = isinstance(value, bool)
        if not isinstance(value, kinds) or (is_bool and expected != "boolean"):
            raise ToolArgumentError(f"{where} must be {_a(expected)}, got {_describe(value)}")
    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(json.dumps(v) for v in schema["enum"])
        raise ToolArgumentError(f"{where} must be one of {options}, got {json.dumps(value)}")
    if isinstance(value, str):
        _check_length(where, schema, len(value), "characters")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolArgumentError(f"{where} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolArgumentError(f"{where} must be at most {schema['maximum']}")
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ToolArgumentError(f"{where} may have at most {schema['maxItems']} items")
        for index, item in enumerate(value):
            _check(f"{where}[{index}]", schema.get("items", {}), item)
    if isinstance(value, dict):
        _check_object(where, schema, value)


def _check_object(where: str, schema: Mapping[str, Any], value: dict[str, Any]) -> None:
    props: Mapping[str, Any] = schema.get("properties", {})
    missing = [key for key in schema.get("required", ()) if key not in value]
    if missing:
        raise ToolArgumentError(f"missing required {', '.join(repr(m) for m in missing)}")
    if schema.get("additionalProperties") is False:
        unknown = sorted(set(value) - set(props))
        if unknown:
            allowed = ", ".join(props) or "none"
            raise ToolArgumentError(
                f"unknown {', '.join(repr(u) for u in unknown)} (allowed: {allowed})"
            )
    for key, sub in props.items():
        if key in value:
            prefix = key if where == "arguments" else f"{where}.{key}"
            _check(prefix, sub, value[key])


def _check_length(where: str, schema: Mapping[str, Any], size: int, unit: str) -> None:
    if "minLength" in schema and size < schema["minLength"]:
        raise ToolArgumentError(f"{where} must have at least {schema['minLength']} {unit}")
    if "maxLength" in schema and size > schema["maxLength"]:
        raise ToolArgumentError(f"{where} must have at most {schema['maxLength']} {unit}")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "an integer", float: "a number", list: "an array"}.get(
        type(value), "an object"
    )
