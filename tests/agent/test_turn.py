"""The turn loop driven by a scripted model over a real MemoryStore."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agenvoy_desktop.agent.context import TOOL_FAILURE_GUIDANCE, Clock, build_messages
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry, ToolResult
from agenvoy_desktop.agent.turn import (
    Agent,
    AgentConfig,
    AnswerDelta,
    ToolCallFinished,
    TurnEvent,
    TurnResult,
    _writing_seconds,
)
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatFinished
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import T0
from tests.scripted_chat import WAIT, Call, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")


class FixedHints:
    def __init__(self, text: str = "[error memory] apply this fix: use an absolute path") -> None:
        self.text = text
        self.asked: list[tuple[str, str]] = []

    def hint_for_failure(self, tool: str, error_text: str) -> tuple[str, list[int]]:
        self.asked.append((tool, error_text))
        return self.text, [7]


def _tools() -> ToolRegistry:
    async def echo(args: dict[str, Any]) -> str:
        return f"echo {args['text']}"

    async def broken(_args: dict[str, Any]) -> str:
        raise FileNotFoundError("no such file: notes.txt")

    async def nothing(_args: dict[str, Any]) -> ToolResult:
        return ToolResult("no results", empty=True)

    async def hang(_args: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "late"

    text_schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    empty_schema = {"type": "object", "properties": {}}
    return ToolRegistry(
        [
            Tool("echo", "echo text", text_schema, echo),
            Tool("broken", "always fails", empty_schema, broken),
            Tool("nothing", "finds nothing", empty_schema, nothing),
            Tool("hang", "never returns", empty_schema, hang, timeout_s=0.05),
            Tool("hidden", "not offered", empty_schema, nothing, available=lambda: False),
        ]
    )


AgentFactory = Callable[..., tuple[Agent, ScriptedChatModel]]


@pytest.fixture
def make_agent(store: MemoryStore) -> Iterator[AgentFactory]:
    storages: list[Storage] = []

    def factory(script: list[list[object]], **kwargs: Any) -> tuple[Agent, ScriptedChatModel]:
        storage = Storage()
        storages.append(storage)
        model = ScriptedChatModel(script)
        kwargs.setdefault("config", AgentConfig(window_messages=6))
        agent = Agent(storage, store, model, kwargs.pop("tools", _tools()), **kwargs)
        return agent, model

    yield factory
    for storage in storages:
        storage.close()


def _run(agent: Agent, sid: str, text: str, **kwargs: Any) -> tuple[TurnResult, list[TurnEvent]]:
    events: list[TurnEvent] = []

    async def main() -> TurnResult:
        return await agent.run_turn(sid, text, on_event=events.append, **kwargs)

    return asyncio.run(main()), events


def _history(store: MemoryStore, sid: str) -> list[Message]:
    return list(store.history(sid).messages)


def test_plain_turn_streams_and_persists(store: MemoryStore, make_agent: AgentFactory) -> None:
    sid = store.create_session("t")
    agent, model = make_agent([["Hel", "lo", "!"]])
    result, events = _run(agent, sid, "hi")
    assert [e.text for e in events if isinstance(e, AnswerDelta)] == ["Hel", "lo", "!"]
    assert result.answer == "Hello!"
    assert not result.interrupted
    assert [(m.role, m.content) for m in _history(store, sid)] == [
        ("user", "hi"),
        ("assistant", "Hello!"),
    ]
    assert store.archive.count(sid) == 2
    sent = model.seen[0].messages
    assert sent[0]["role"] == "system"
    assert sent[-1] == {"role": "user", "content": "hi"}
    assert model.seen[0].tools is not None
    assert "hidden" not in {t["function"]["name"] for t in model.seen[0].tools}


def test_writing_time_is_the_models_own_when_it_has_one() -> None:
    """Text held back (an answer that began like a tool call) reaches the window late;
    the tokens/s under the answer must not count from there."""
    timed = ChatFinished("stop", 900, 36, first_token_s=1.0, duration_s=3.5)
    assert _writing_seconds(timed, first_text_at=time.perf_counter()) == pytest.approx(2.5)
    untimed = ChatFinished("stop", 900, 36)  # a scripted model: the window's clock
    started = time.perf_counter() - 2.0
    since_first_text = _writing_seconds(untimed, first_text_at=started)
    assert since_first_text >= 2.0  # a lower bound of a monotonic clock: no load can break it
    assert _writing_seconds(untimed, first_text_at=None) == 0.0


def test_context_is_summary_plus_window_golden(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    for i in range(5):
        store.append(
            sid, [store.new_message("user", f"q{i}"), store.new_message("assistant", f"a{i}")]
        )
    agent, model = make_agent(
        [["ok"]],
        summary_text=lambda _sid: "Key decisions (binding):\n- use SQLite",
        config=AgentConfig(window_messages=4, window_step=0, system_prompt="You are a test."),
    )
    _run(agent, sid, "q5")
    sent = model.seen[0].messages
    now = sent[3]["content"]  # the turn note, right before the new message
    assert now.startswith("Current local time: 2023-11-14 ")
    assert now.endswith("(Tuesday, UTC+00:00)")
    assert sent == [
        {
            "role": "system",
            "content": "You are a test. "
            + TOOL_FAILURE_GUIDANCE
            + "\n\nSummary of the earlier conversation:\nKey decisions (binding):\n- use SQLite",
        },
        {"role": "user", "content": "q4"},
        {"role": "assistant", "content": "a4"},
        {"role": "system", "content": now},
        {"role": "user", "content": "q5"},
    ]


def test_window_start_moves_in_steps_between_turns(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    """The window keeps its first message while it grows, so the prompt's prefix is reused."""
    sid = store.create_session("t")
    for i in range(4):
        store.append(
            sid, [store.new_message("user", f"q{i}"), store.new_message("assistant", f"a{i}")]
        )
    agent, model = make_agent(
        [["ok"]] * 4, config=AgentConfig(window_messages=4, window_step=4, system_prompt="T.")
    )
    firsts = []
    for turn in range(4):
        _run(agent, sid, f"n{turn}")
        sent = model.seen[-1].messages
        firsts.append(sent[1]["content"])
        assert len(sent) - 2 in range(4, 4 + 4)  # head and note aside: N to N + step - 1
    assert firsts == ["q2", "q2", "n0", "n0"]


def test_tool_failure_injects_hint_and_second_call_follows(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    hints = FixedHints()
    agent, model = make_agent(
        [[Call("broken")], [Call("echo", {"text": "x"})], ["done"]], hints=hints
    )
    result, events = _run(agent, sid, "read my notes")
    assert result.answer == "done"
    assert result.tool_calls == 2
    assert result.rounds == 3
    assert hints.asked == [("broken", "broken failed: FileNotFoundError: no such file: notes.txt")]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[0].outcome.is_error
    assert finished[0].hint == hints.text
    assert finished[1].outcome.content == "echo x"
    assert finished[1].hint == ""
    roles = [(m.role, bool(m.extra.get("tool_calls"))) for m in _history(store, sid)]
    assert roles == [
        ("user", False),
        ("assistant", True),
        ("tool", False),
        ("assistant", True),
        ("tool", False),
        ("assistant", False),
    ]
    tool_msg = _history(store, sid)[2]
    assert tool_msg.extra["error_hint"] == hints.text
    assert tool_msg.extra["is_error"] is True
    assert tool_msg.extra["error_hint_ids"] == [7]
    events = store.archive.events(sid)
    assert [(kind, d["tool"], d["record_ids"]) for _t, kind, d in events] == [
        ("error_hint", "broken", [7])
    ]
    second_round = model.seen[1].messages
    assert second_round[-1]["role"] == "tool"
    assert second_round[-1]["content"].endswith(hints.text)
    assert second_round[-2]["tool_calls"][0]["function"]["name"] == "broken"


def test_empty_result_counts_as_failure(store: MemoryStore, make_agent: AgentFactory) -> None:
    sid = store.create_session("t")
    hints = FixedHints()
    agent, _ = make_agent([[Call("nothing")], ["ok"]], hints=hints)
    _run(agent, sid, "find")
    assert hints.asked
    assert hints.asked[0][1].startswith("empty result")


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (Call("nope"), "unknown tool 'nope'; available tools: echo, broken, nothing, hang"),
        (Call("hidden"), "unknown tool 'hidden'"),
        (Call("echo", {}), "invalid arguments for echo: missing required 'text'"),
        (Call("echo", {"text": 3}), "invalid arguments for echo: text must be a string"),
        (Call("echo", {"text": "a", "x": 1}), "unknown 'x' (allowed: text)"),
        (Call("hang"), "hang timed out after 0.05 s"),
        (Call("echo", error="Expecting value"), "could not read the tool call: Expecting value"),
    ],
)
def test_bad_calls_become_tool_errors(
    store: MemoryStore, make_agent: AgentFactory, call: Call, expected: str
) -> None:
    sid = store.create_session("t")
    agent, model = make_agent([[call], ["recovered"]])
    result, events = _run(agent, sid, "go")
    assert result.answer == "recovered"
    outcome = next(e for e in events if isinstance(e, ToolCallFinished)).outcome
    assert outcome.is_error
    assert expected in outcome.content
    assert model.seen[1].messages[-1]["role"] == "tool"


def test_rounds_are_bounded(store: MemoryStore, make_agent: AgentFactory) -> None:
    sid = store.create_session("t")
    loop = [[Call("echo", {"text": str(i)})] for i in range(2)]
    agent, model = make_agent([*loop, ["final"]], config=AgentConfig(max_rounds=3))
    result, _ = _run(agent, sid, "go")
    assert result.rounds == 3
    assert result.answer == "final"
    assert result.tool_calls == 2
    assert model.seen[-1].tools is None
    # a model that insists on calling tools in the last round gets no more calls run
    eager = [[Call("echo", {"text": str(i)})] for i in range(3)]
    agent, model = make_agent(eager, config=AgentConfig(max_rounds=3))
    result, _ = _run(agent, sid, "go")
    assert result.tool_calls == 2
    assert "stopped after 3 rounds" in result.answer


def test_tool_traffic_persisted_and_skipped_by_search(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    agent, _ = make_agent([[Call("echo", {"text": "zebra"})], ["fine"]])
    _run(agent, sid, "hello")
    archived = [a.message for a in store.archive.messages(sid)]
    assert [m.is_tool_traffic for m in archived] == [False, True, True, False]
    query = SearchQuery("zebra", mode="keyword", session_id=sid)
    assert not search_chat_history(store, query).hits
    with_tools = SearchQuery("zebra", mode="keyword", session_id=sid, include_tool=True)
    assert search_chat_history(store, with_tools).hits


def test_stop_mid_stream_saves_partial_as_interrupted(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    agent, model = make_agent([["par", "tial", WAIT, "never"]])
    stop = asyncio.Event()

    async def main() -> TurnResult:
        task = asyncio.create_task(agent.run_turn(sid, "long please", stop=stop))
        await model.waiting.wait()
        stop.set()
        model.gate.set()
        return await task

    result = asyncio.run(main())
    assert result.interrupted
    assert result.answer == "partial"
    last = _history(store, sid)[-1]
    assert (last.role, last.content, last.extra.get("interrupted")) == (
        "assistant",
        "partial",
        True,
    )
    # the next turn sees the interruption, not a dangling user message
    agent2, model2 = make_agent([["ok"]])
    _run(agent2, sid, "again")
    sent = model2.seen[0].messages
    assert [m["role"] for m in sent[-3:]] == ["assistant", "system", "user"]  # the turn note
    assert "[answer interrupted by the user]" in sent[-3]["content"]


def test_task_cancel_keeps_history_consistent(store: MemoryStore, make_agent: AgentFactory) -> None:
    sid = store.create_session("t")
    agent, model = make_agent([["so", WAIT]])

    async def main() -> None:
        task = asyncio.create_task(agent.run_turn(sid, "x"))
        await model.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    history = _history(store, sid)
    assert [(m.role, m.content) for m in history] == [("user", "x"), ("assistant", "so")]
    assert history[-1].extra["interrupted"] is True


def test_stop_between_tool_calls(store: MemoryStore, make_agent: AgentFactory) -> None:
    sid = store.create_session("t")
    stop = asyncio.Event()

    async def stopper(_args: dict[str, Any]) -> str:
        stop.set()
        return "stopped"

    tools = _tools()
    tools.register(Tool("stopper", "sets stop", {"type": "object"}, stopper))
    agent, _ = make_agent([[Call("stopper"), Call("echo", {"text": "b"})]], tools=tools)
    result, _ = _run(agent, sid, "x", stop=stop)
    history = _history(store, sid)
    assert result.interrupted
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert history[3].content == "not run: the user stopped"


def test_build_messages_restores_tool_calls_from_import() -> None:
    stored = [
        Message("1", "user", "q", 1),
        Message(
            "2",
            "assistant",
            "",
            2,
            extra={"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        ),
        Message("3", "tool", "r", 3, extra={"tool_call_id": "c", "name": "f"}),
    ]
    out = build_messages(base_prompt="S", summary_text="", window=stored, now_ns=0)
    assert out[2]["tool_calls"] == [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    ]
    assert out[3] == {"role": "tool", "content": "r", "tool_call_id": "c", "name": "f"}


def test_a_repeated_failing_call_is_not_run_again(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    hints = FixedHints()
    agent, _ = make_agent([[Call("broken")], [Call("broken")], ["gave up"]], hints=hints)
    result, events = _run(agent, sid, "x")
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallFinished)]
    assert "FileNotFoundError" in outcomes[0].content
    assert outcomes[1].content.startswith("this exact call already failed in this turn")
    assert result.answer == "gave up"
    assert len(hints.asked) == 2


def test_specs_hide_additional_properties() -> None:
    spec = _tools().available()[0].spec()
    assert spec["function"]["parameters"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }


def test_a_repeated_successful_call_forces_an_answer(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    same = Call("echo", {"text": "a"})
    agent, model = make_agent([[same], [same], ["the answer"]])
    result, events = _run(agent, sid, "x")
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallFinished)]
    assert outcomes[1].content.startswith("this exact call was already made")
    assert model.seen[2].tools is None
    assert result.answer == "the answer"
    answer_round = model.seen[2].messages
    assert [m["role"] for m in answer_round] == ["system", "user"]
    assert '### echo({"text": "a"})\necho a' in answer_round[0]["content"]
    assert answer_round[0]["content"].endswith('### echo({"text": "a"})\necho a')


def test_identical_calls_in_one_message_run_once(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    same = Call("echo", {"text": "a"})
    agent, _ = make_agent([[same, same, Call("echo", {"text": "b"}), same], ["ok"]])
    result, events = _run(agent, sid, "x")
    ran = [e.outcome.content for e in events if isinstance(e, ToolCallFinished)]
    assert ran == ["echo a", "echo b"]
    assert result.tool_calls == 2


def test_messages_are_embedded_after_the_answer(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    sid = store.create_session("t")
    agent, _ = make_agent([[Call("echo", {"text": "a"})], ["done"]])

    async def main() -> tuple[int, int]:
        await agent.run_turn(sid, "hello")
        before = len(store.archive.vector_rowids(sid))
        await agent.idle()
        return before, len(store.archive.vector_rowids(sid))

    before, after = asyncio.run(main())
    assert after == 4  # user, tool call, tool result, answer
    assert before <= after


def test_settle_runs_after_the_answer_even_when_embedding_fails(
    store: MemoryStore, make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints wait for the answer, and a failed embedding does not skip them."""
    sid = store.create_session("t")
    settled: list[int] = []
    agent, _ = make_agent([["one"], ["two"]], settle=lambda: settled.append(len(settled)))

    def broken(_sid: str, _messages: object) -> None:
        raise RuntimeError("embedder gone")

    async def main() -> None:
        await agent.run_turn(sid, "first")
        await agent.idle()
        monkeypatch.setattr(store, "index_messages", broken)
        await agent.run_turn(sid, "second")
        await agent.idle()

    asyncio.run(main())
    assert settled == [0, 1]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], str]] = []

    def record_failure(
        self, tool: str, error_text: str, arguments: dict[str, Any], session_id: str
    ) -> int | None:
        self.calls.append((tool, error_text, arguments, session_id))
        return 41 + len(self.calls)


def test_the_loop_remembers_tool_errors_after_the_answer(
    store: MemoryStore, make_agent: AgentFactory
) -> None:
    """A small model is never offered remember_error: the loop records failures itself."""
    sid = store.create_session("t")
    recorder = Recorder()
    agent, _ = make_agent(
        [[Call("broken"), Call("nothing")], [Call("broken")], ["gave up"]], failures=recorder
    )

    async def main() -> list[tuple[str, str, dict[str, Any], str]]:
        await agent.run_turn(sid, "read my notes")
        seen_before_idle = list(recorder.calls)
        await agent.idle()
        return seen_before_idle

    assert asyncio.run(main()) == []  # nothing on the answer's path
    # one record: the empty result is no error, the repeated call adds nothing
    assert recorder.calls == [
        ("broken", "broken failed: FileNotFoundError: no such file: notes.txt", {}, sid)
    ]
    events = [(kind, d) for _t, kind, d in store.archive.events(sid) if kind == "error_memory"]
    assert events == [
        ("error_memory", {"record_id": 42, "tool": "broken", "outcome": "failed", "auto": True})
    ]


@pytest.mark.parametrize(
    ("clock", "line"),
    [
        ("time", "Current local time: 2023-11-14 22:13 (Tuesday, UTC+00:00)"),
        ("date", "Today is Tuesday, 2023-11-14."),
        ("none", None),
    ],
)
def test_system_prompt_carries_as_much_clock_as_asked(clock: Clock, line: str | None) -> None:
    system = build_messages(
        base_prompt="S", summary_text="", window=[], now_ns=T0, clock=clock, recall="R"
    )[0]["content"]
    assert system.split("\n\n") == (["S", line, "R"] if line else ["S", "R"])
