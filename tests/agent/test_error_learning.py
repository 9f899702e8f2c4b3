"""The loop learns from its own tool failures, without the model's help.

A failed call that a later call of the same tool in the turn got past is
remembered as resolved, with the arguments that worked; one that never
recovered, as failed; the same failure again renews its one record.  The
model's ``remember_error`` still writes explicit notes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent.error_tools import ErrorMemoryHints, error_tools
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig
from agenvoy_desktop.core.error_memory import ErrorMemory
from agenvoy_desktop.core.error_types import ErrorRecord
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import FakeClock
from tests.fakes import HashingEmbedder
from tests.scripted_chat import Call, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")

RELATIVE = {"path": "notes.txt"}
ABSOLUTE = {"path": "/home/me/notes.txt"}
FAILURE = "read_note failed: FileNotFoundError: no such file: notes.txt"


async def read_note(args: dict[str, Any]) -> str:
    """Finds the note only by its absolute path, as a sandboxed file tool would."""
    if not str(args["path"]).startswith("/"):
        raise FileNotFoundError(f"no such file: {args['path']}")
    return "front tyre 2.3 bar"


def _registry(storage: Storage, errors: ErrorMemory, store: MemoryStore) -> ToolRegistry:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    return ToolRegistry(
        [Tool("read_note", "read a note", schema, read_note), *error_tools(storage, errors, store)]
    )


class Loop:
    """An agent over a real error memory; each turn follows its own script."""

    def __init__(self, store: MemoryStore, tmp_path: Path) -> None:
        self.store = store
        self.storage = Storage()
        self.errors = self.storage.run_sync(
            ErrorMemory, tmp_path / "errors.sqlite3", HashingEmbedder(dim=256), clock=FakeClock()
        )
        self.sid = store.create_session("t")

    def turn(self, script: list[list[object]], text: str = "what is my tyre pressure?") -> None:
        hints = ErrorMemoryHints(self.errors)
        agent = Agent(
            self.storage,
            self.store,
            ScriptedChatModel(script),
            _registry(self.storage, self.errors, self.store),
            hints=hints,
            failures=hints,
            config=AgentConfig(window_messages=6),
        )

        async def main() -> None:
            await agent.run_turn(self.sid, text)
            await agent.idle()

        asyncio.run(main())

    def records(self) -> list[ErrorRecord]:
        return self.storage.run_sync(self.errors.list)

    def events(self) -> list[dict[str, Any]]:
        return [d for _t, kind, d in self.store.archive.events(self.sid) if kind == "error_memory"]

    def close(self) -> None:
        self.storage.run_sync(self.errors.close)
        self.storage.close()


@pytest.fixture
def loop(store: MemoryStore, tmp_path: Path) -> Iterator[Loop]:
    opened = Loop(store, tmp_path)
    yield opened
    opened.close()


def fail_then_succeed() -> list[list[object]]:
    return [[Call("read_note", RELATIVE)], [Call("read_note", ABSOLUTE)], ["2.3 bar"]]


def fail_only() -> list[list[object]]:
    return [[Call("read_note", RELATIVE)], ["I could not read it."]]


def test_a_failure_the_turn_got_past_is_remembered_with_what_worked(loop: Loop) -> None:
    loop.turn(fail_then_succeed())
    [record] = loop.records()
    assert (record.tool, record.symptom, record.outcome) == ("read_note", FAILURE, "resolved")
    assert record.action == (
        'call read_note({"path": "/home/me/notes.txt"})'
        ' (it worked after read_note({"path": "notes.txt"}))'
    )
    assert loop.events() == [
        {"record_id": record.id, "tool": "read_note", "outcome": "resolved", "auto": True}
    ]


def test_a_failure_that_never_recovers_is_remembered_as_failed(loop: Loop) -> None:
    loop.turn(fail_only())
    [record] = loop.records()
    assert (record.symptom, record.outcome) == (FAILURE, "failed")
    assert record.action == 'called read_note({"path": "notes.txt"})'
    assert loop.events() == [
        {"record_id": record.id, "tool": "read_note", "outcome": "failed", "auto": True}
    ]


def test_repeated_turns_renew_one_record_and_a_later_fix_upgrades_it(loop: Loop) -> None:
    loop.turn(fail_only())
    [first] = loop.records()
    loop.turn(fail_only())
    [again] = loop.records()
    assert again.id == first.id
    assert again.outcome == "failed"
    assert again.expires_ns > first.expires_ns  # renewed, not duplicated

    loop.turn(fail_then_succeed())
    [fixed] = loop.records()
    assert (fixed.id, fixed.outcome) == (first.id, "resolved")
    assert "/home/me/notes.txt" in fixed.action

    loop.turn(fail_only())  # the fix was not applied this time: it is kept, and renewed
    [kept] = loop.records()
    assert (kept.id, kept.outcome, kept.action) == (first.id, "resolved", fixed.action)
    assert kept.expires_ns > fixed.expires_ns
    outcomes = [e["outcome"] for e in loop.events()]
    assert outcomes == ["failed", "failed", "resolved", "failed"]


def test_the_next_failure_is_told_the_fix(loop: Loop) -> None:
    loop.turn(fail_then_succeed())
    hints = ErrorMemoryHints(loop.errors)
    text, ids = loop.storage.run_sync(hints.hint_for_failure, "read_note", FAILURE)
    assert ids == [loop.records()[0].id]
    assert 'apply this fix: call read_note({"path": "/home/me/notes.txt"})' in text


def test_the_models_remember_error_still_writes_its_own_note(loop: Loop) -> None:
    note = {
        "tool": "web_fetch",
        "symptom": "the site refused the connection",
        "cause": "no network in the sandbox",
        "action": "answer from memory instead",
        "outcome": "abandoned",
    }
    loop.turn([[Call("remember_error", note)], ["Noted."]], text="remember that")
    [record] = loop.records()
    assert (record.tool, record.outcome, record.cause) == (
        "web_fetch",
        "abandoned",
        "no network in the sandbox",
    )
    assert loop.events() == [{"record_id": record.id, "tool": "web_fetch", "outcome": "abandoned"}]


def test_only_the_same_tool_that_worked_resolves_a_failure(loop: Loop) -> None:
    """Another tool that worked later in the turn is no fix for this one."""
    loop.turn(
        [
            [Call("read_note", RELATIVE)],
            [Call("remember_error", {"tool": "x", "symptom": "y", "outcome": "failed"})],
            ["done"],
        ]
    )
    outcomes = {r.tool: r.outcome for r in loop.records()}
    assert outcomes == {"read_note": "failed", "x": "failed"}
