"""Recall leaves out what the window holds in an undo window (removed, reset, deleted).

The store still holds such a session until the window ends; a turn in
another session must not find it, through its own recall, the lines a total
is worked out from, or the model's search tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from agenvoy_desktop.agent import number_answers
from agenvoy_desktop.agent.builtin_tools import search_tool
from agenvoy_desktop.agent.recall import DEFAULT_FLOOR, withheld_now, withholding
from agenvoy_desktop.agent.services import WindowAgent
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import AgentConfig
from agenvoy_desktop.core.recall_record import without_lines
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation
from tests.scripted_chat import Call, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * SECOND
SECRET = ["My bike lock code is 4721.", "Noted."]


@pytest.fixture
def storage() -> Iterator[Storage]:
    running = Storage()
    yield running
    running.close()


def test_withholding_lasts_for_its_block() -> None:
    held = Withheld(frozenset({"a"}), frozenset({"m"}))
    assert withheld_now() == NOTHING_WITHHELD
    with withholding(held):
        assert withheld_now() == held
        assert held.hides("a", "x")
        assert held.hides("b", "m")
        assert not held.hides("b", "x")
    assert withheld_now() == NOTHING_WITHHELD
    assert held | Withheld(frozenset({"b"})) == Withheld(frozenset({"a", "b"}), frozenset({"m"}))


def test_a_total_is_not_worked_out_from_a_withheld_session(store: MemoryStore) -> None:
    """The lines a result is worked out from come through the same scoped search."""
    sessions = []
    for day, text in (
        (0, "My recent Facebook Live session about vegan recipes got 12 comments."),
        (5, "My most popular YouTube video has 21 comments so far."),
    ):
        sid = store.create_session(None)
        store.append(sid, conversation([text, "Nice!"], start=T0 + day * DAY))
        sessions.append(sid)
    now = store.create_session("today")
    question = (
        "What is the total number of comments on my recent Facebook Live session and my "
        "most popular YouTube video?"
    )
    worked = number_answers.work_out(store, now, question, 16, floor=DEFAULT_FLOOR)
    assert worked is not None
    assert worked.values == frozenset({"33"})
    with withholding(Withheld(frozenset({sessions[1]}))):
        assert number_answers.work_out(store, now, question, 16, floor=DEFAULT_FLOOR) is None


def turn_prompts(
    store: MemoryStore,
    storage: Storage,
    script: list[list[object]],
    withheld: Callable[[], Withheld],
) -> list[str]:
    """Run one turn in a fresh session with *withheld* left out; what each model call got."""
    tools = ToolRegistry(
        [search_tool(storage, store, lambda: 6, withheld=withheld)]  # as the services build it
    )
    model = ScriptedChatModel(script)
    agent = WindowAgent(
        storage, store, model, tools, config=AgentConfig(window_messages=6), withheld=withheld
    )
    sid = store.create_session("now")
    asyncio.run(agent.run_turn(sid, "What is my bike lock code?"))
    return ["\n".join(str(m.get("content")) for m in seen.messages) for seen in model.seen]


def test_a_turn_recalls_nothing_withheld(store: MemoryStore, storage: Storage) -> None:
    secret = store.create_session("lock")
    store.append(secret, conversation(SECRET))
    store.index_messages(secret, store.history(secret).messages)
    search = Call("search_chat_history", {"query": "bike lock code", "scope": "all"})
    script: list[list[object]] = [[search], ["I don't know."]]
    shown = turn_prompts(store, storage, [list(s) for s in script], lambda: NOTHING_WITHHELD)
    assert "4721" in shown[0]  # recalled while the session stands
    held = Withheld(frozenset({secret}))
    prompts = turn_prompts(store, storage, [list(s) for s in script], lambda: held)
    assert len(prompts) == 2  # the search ran, and its result went into the second call
    assert not any("4721" in prompt for prompt in prompts)


BLOCK = "\n".join(
    [
        "Earlier, the user told you:",
        '- On 2023-11-01 the user said: "I spent $20 on socks."',
        '  the user went on: "At the mall."',
        '- On 2023-11-03 the user said: "I spent $30 on a hat."',
        "Worked out from these lines: 20 + 30 = 50.",
    ]
)
PASSAGES = "From your documents:\n[1] notes.md: socks are cheap"


def test_a_gone_line_leaves_the_stored_block_with_what_it_added() -> None:
    """The Context tab's reading of the last block: the line, its neighbours and any
    result worked out from it go; the other lines and the document passages stay."""
    kept = without_lines(f"{BLOCK}\n\n{PASSAGES}", ["a", "b"], {"a"})
    assert kept == (
        "Earlier, the user told you:\n"
        '- On 2023-11-03 the user said: "I spent $30 on a hat."\n\n' + PASSAGES
    )
    assert without_lines(BLOCK, ["a", "b"], {"a", "b"}) == ""
    assert without_lines(f"{BLOCK}\n\n{PASSAGES}", ["a", "b"], {"a", "b"}) == PASSAGES


def test_a_block_that_does_not_match_its_ids_goes_whole() -> None:
    assert without_lines(BLOCK, ["a"], {"a"}) == ""
    assert without_lines(f"{BLOCK}\n\n{PASSAGES}", ["a", "b", "c"], {"c"}) == PASSAGES
