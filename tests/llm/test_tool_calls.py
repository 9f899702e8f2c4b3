"""The streaming ``<tool_call>`` parser: no tag ever leaks, every block becomes one request."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest

from agenvoy_desktop.core.model_api import TextDelta, ToolCallRequest
from agenvoy_desktop.llm.tool_calls import (
    ToolCallStream,
    ToolStreamEvent,
    new_call_id,
    parse_tool_call,
)

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def ids() -> Iterable[str]:
    return (f"call_{n}" for n in itertools.count())


def run(pieces: Iterable[str], tool_names: Iterable[str] = ()) -> list[ToolStreamEvent]:
    counter = iter(ids())
    stream = ToolCallStream(tuple(tool_names), new_id=lambda: next(counter))
    events: list[ToolStreamEvent] = []
    for piece in pieces:
        events.extend(stream.feed(piece))
    events.extend(stream.finish())
    return events


def text_of(events: list[ToolStreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: list[ToolStreamEvent]) -> list[ToolCallRequest]:
    return [e for e in events if isinstance(e, ToolCallRequest)]


def test_plain_text_passes_through_unchanged() -> None:
    text = "Hello <b>world</b>, 1 < 2 and a <tool> that is not a call.\n"
    events = run(text)  # one character at a time
    assert text_of(events) == text
    assert calls_of(events) == []


def test_tag_split_over_many_deltas_never_leaks() -> None:
    stream = ToolCallStream(new_id=lambda: "call_x")
    seen: list[ToolStreamEvent] = []
    for char in "Let me check." + CALL:
        seen.extend(stream.feed(char))
        assert "<" not in text_of(seen), "a partial tag reached the UI"
    seen.extend(stream.finish())
    assert text_of(seen) == "Let me check."
    assert calls_of(seen) == [
        ToolCallRequest(
            id="call_x",
            name="get_weather",
            arguments={"city": "Paris"},
            raw='\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n',
        )
    ]


def test_text_before_and_after_a_call() -> None:
    events = run(["Sure.\n", CALL[:20], CALL[20:], "\n\nDone ", "now."])
    kinds = [type(e).__name__ for e in events]
    assert [k for k, _ in itertools.groupby(kinds)] == ["TextDelta", "ToolCallRequest", "TextDelta"]
    assert text_of(events) == "Sure.Done now."


def test_multiple_calls_get_distinct_ids() -> None:
    second = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
    events = run([CALL, "\n", second])
    calls = calls_of(events)
    assert [c.name for c in calls] == ["get_weather", "search"]
    assert [c.id for c in calls] == ["call_0", "call_1"]
    assert text_of(events) == ""


def test_bad_json_is_a_request_with_an_error_and_a_name_guess() -> None:
    events = run(['<tool_call>{"name": "get_weather", "arguments": {city: Paris}}</tool_call>'])
    (call,) = calls_of(events)
    assert call.name == "get_weather"
    assert call.arguments == {}
    assert call.error is not None
    assert "not valid JSON" in call.error


@pytest.mark.parametrize(
    ("body", "name", "error"),
    [
        ("[1, 2]", "", "JSON object"),
        ('{"arguments": {}}', "", '"name"'),
        ('{"name": "f", "arguments": [1]}', "f", "must be a JSON object"),
        ('{"name": "f", "arguments": "{bad"}', "f", "arguments are not valid JSON"),
        ("nonsense", "", "not valid JSON"),
    ],
)
def test_unusable_calls_say_why(body: str, name: str, error: str) -> None:
    call = parse_tool_call(body, "call_1")
    assert call.name == name
    assert call.error is not None
    assert error in call.error
    assert call.raw == body


def test_arguments_given_as_a_json_string_or_missing() -> None:
    call = parse_tool_call('{"name": "f", "arguments": "{\\"a\\": 1}"}', "c")
    assert (call.arguments, call.error) == ({"a": 1}, None)
    assert parse_tool_call('{"name": "f"}', "c").arguments == {}
    assert parse_tool_call(
        '```json\n{"name": "f", "parameters": {"b": 2}}\n```', "c"
    ).arguments == {"b": 2}


def test_call_without_closing_tag_at_the_end() -> None:
    # The model stopped right after the JSON: the call is complete all the same.
    complete = run(['<tool_call>{"name": "f", "arguments": {"a": 1}}'])
    assert [(c.name, c.arguments, c.error) for c in calls_of(complete)] == [("f", {"a": 1}, None)]
    (cut,) = calls_of(run(['<tool_call>{"name": "f", "argu']))
    assert cut.name == "f"
    assert cut.error is not None
    assert cut.error.startswith("unterminated tool call")


def test_partial_tag_at_the_end_is_text_after_all() -> None:
    assert text_of(run(["see <tool_"])) == "see <tool_"


def test_bare_json_call_when_tools_are_known() -> None:
    body = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    pieces = ["\n", *(body[i : i + 3] for i in range(0, len(body), 3))]
    events = run(pieces, tool_names=["get_weather"])
    (call,) = calls_of(events)
    assert (call.name, call.arguments, call.error) == ("get_weather", {"city": "Paris"}, None)
    assert text_of(events) == ""


def test_bare_json_that_is_no_call_stays_text() -> None:
    answer = '{"name": "Alice", "age": 3} is the record.'
    assert text_of(run(answer, tool_names=["get_weather"])) == answer
    assert text_of(run("Use {braces} freely.", tool_names=["get_weather"])) == (
        "Use {braces} freely."
    )
    # without tools, JSON is never taken for a call
    body = '{"name": "get_weather", "arguments": {}}'
    assert text_of(run(body)) == body


@pytest.mark.parametrize(
    ("body", "name", "arguments"),
    [
        (
            '{"name": "read_password_file", "arguments": {"path": "/etc/passwd"}}',
            "read_password_file",
            {"path": "/etc/passwd"},
        ),
        # seen in the window: a "tool" named after the user's plan
        (
            '{"name": "fado on 13 May", "arguments": {"date": "2026-12-04", "days": 1}}',
            "fado on 13 May",
            {"date": "2026-12-04", "days": 1},
        ),
        ('{"name": "Alice Smith", "arguments": {}}', "Alice Smith", {}),
    ],
)
def test_a_bare_call_to_an_invented_tool_is_a_call(
    body: str, name: str, arguments: dict[str, object]
) -> None:
    """The starter invents tools; as a call it hears "unknown tool" and can retry."""
    (call,) = calls_of(run(body, tool_names=["read_text_file"]))
    assert (call.name, call.arguments, call.error) == (name, arguments, None)


@pytest.mark.parametrize(
    "answer",
    [
        '{"name": "Alice", "age": 3}',  # no arguments
        '{"name": "a\\nb", "arguments": {}}',  # a name over two lines
        '{"name": "", "arguments": {}}',  # no name
        '{"name": "plan", "arguments": {}, "notes": "x"}',  # more than a call
        '{"name": "plan", "arguments": 3}',  # arguments neither object nor JSON text
    ],
)
def test_json_shaped_unlike_a_call_stays_text(answer: str) -> None:
    assert text_of(run(answer, tool_names=["read_text_file"])) == answer


def test_cut_off_bare_call_is_reported() -> None:
    events = run(['{"name": "get_weather", "arguments": {"ci'], tool_names=["get_weather"])
    (call,) = calls_of(events)
    assert call.name == "get_weather"
    assert call.error is not None


def test_call_ids_look_like_openai_ones() -> None:
    first, second = new_call_id(), new_call_id()
    assert first != second
    assert first.startswith("call_")
    assert len(first) == len("call_") + 8


def test_bare_call_in_a_json_fence() -> None:
    answer = '```json\n{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}\n```\n'
    events = run(answer, tool_names=["get_weather"])  # one character at a time
    (call,) = calls_of(events)
    assert (call.name, call.arguments, call.error) == ("get_weather", {"city": "Paris"}, None)
    assert text_of(events) == ""


def test_a_fence_of_several_calls_is_several_calls() -> None:
    """Seen in the window: the starter's answer as one made-up call per line, fenced."""
    answer = (
        '```json\n{"name": "Sintra", "arguments": {"date": "2026-05-15"}}\n'
        '{"name": "Belem", "arguments": {"date": "2026-05-14"}}\n```'
    )
    events = run(answer, tool_names=["current_time"])
    assert [(c.name, c.arguments) for c in calls_of(events)] == [
        ("Sintra", {"date": "2026-05-15"}),
        ("Belem", {"date": "2026-05-14"}),
    ]
    assert text_of(events) == ""
    mixed = '```json\n{"name": "Sintra", "arguments": {}}\n{"city": "Lisbon"}\n```'
    assert text_of(run(mixed, tool_names=["current_time"])) == mixed  # not all calls: text


def test_code_fences_that_are_no_call_stay_text() -> None:
    code = "```python\nprint('hi')\n```\nThat prints hi."
    assert text_of(run(code, tool_names=["get_weather"])) == code
    data = '```json\n{"name": "Alice"}\n```\nA record.'
    assert text_of(run(data, tool_names=["get_weather"])) == data
    assert text_of(run("`x` is a variable.", tool_names=["get_weather"])) == "`x` is a variable."
