"""Reading a draft's prompt while it is typed: what is read is what its turn sends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, TurnEvent
from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.core.store import MemoryStore
from tests.agent.test_read_ahead import ReadingModel
from tests.conftest import SECOND, T0, conversation

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * SECOND
QUESTION = "Am I allergic to anything?"


@pytest.fixture
def storage() -> Iterator[Storage]:
    running = Storage()
    yield running
    running.close()


def _session(store: MemoryStore) -> str:
    """Yesterday's allergy in one session; today's session with an exchange in it."""
    earlier = store.create_session("Earlier")
    said = ["We should plan the week.", "Sure.", "I'm allergic to penicillin.", "Noted."]
    store.append(earlier, conversation(said, start=T0, step=DAY))
    today = store.create_session("today")
    store.append(today, conversation(["Hi there", "Hello!"], start=T0 + 10 * DAY))
    return today


def _said(read: list[ChatMessage]) -> object:
    """The last message read that is not a system one: a draft's message, or the answer an
    ordinary read-ahead ends with (before the opening of the note it reads too)."""
    return next(m["content"] for m in reversed(read) if m["role"] != "system")


def _agent(
    storage: Storage, store: MemoryStore, script: list[list[object]]
) -> tuple[Agent, ReadingModel]:
    model = ReadingModel(script)
    agent = Agent(storage, store, model, ToolRegistry(), config=AgentConfig(small_model=True))
    return agent, model


def test_the_draft_read_is_the_first_prompt_its_turn_sends(
    storage: Storage, store: MemoryStore
) -> None:
    """Head, history, the note with what recall found, the message: all read while typed,
    and nothing stored or logged for the draft."""
    sid = _session(store)
    agent, model = _agent(storage, store, [["Yes: penicillin."]])

    async def main() -> None:
        agent.draft_changed(sid, f"  {QUESTION}\n")
        await agent.idle()
        assert len(store.history(sid).messages) == 2  # the draft is not stored
        assert [kind for _t, kind, _d in store.archive.events(sid)].count("recall") == 0
        await agent.run_turn(sid, QUESTION)

    asyncio.run(main())
    read, tools = model.read[0]
    first = model.seen[0]
    assert read == list(first.messages)
    assert tools == first.tools
    assert read[-1] == {"role": "user", "content": QUESTION}
    assert any("penicillin" in str(m["content"]) for m in read[:-1])  # the recall note


def test_the_read_ahead_ends_with_the_opening_of_the_next_recall_note(
    storage: Storage, store: MemoryStore
) -> None:
    """Sent without a pause in typing, a turn that recalls something finds the head, the
    history and the opening of its note read already: only the rest is new."""
    sid = _session(store)
    agent, model = _agent(storage, store, [["Hello again."], ["Yes: penicillin."]])

    async def main() -> None:
        await agent.run_turn(sid, "Good morning")
        await agent.idle()
        await agent.run_turn(sid, QUESTION)

    asyncio.run(main())
    (read, _tools), prompt = model.read[-1], list(model.seen[-1].messages)
    *known, opening = read
    assert opening["role"] == "system"
    assert prompt[: len(known)] == known
    note = prompt[len(known)]
    assert note["role"] == "system"
    assert "penicillin" in str(note["content"])
    assert str(note["content"]).startswith(str(opening["content"]))


def test_a_newer_draft_replaces_an_older_one(storage: Storage, store: MemoryStore) -> None:
    sid = _session(store)
    agent, model = _agent(storage, store, [])

    async def main() -> None:
        agent.draft_changed(sid, "Am I")
        agent.draft_changed(sid, QUESTION)
        await agent.idle()

    asyncio.run(main())
    assert [read[-1]["content"] for read, _tools in model.read] == [QUESTION]


def test_a_draft_typed_during_a_turn_is_read_after_it(storage: Storage, store: MemoryStore) -> None:
    sid = _session(store)
    agent, model = _agent(storage, store, [["Hello again!"], ["Yes: penicillin."]])
    reads_during: list[int] = []

    def typing(_event: TurnEvent) -> None:
        if not reads_during:
            agent.draft_changed(sid, QUESTION)
        reads_during.append(len(model.read))

    async def main() -> None:
        await agent.run_turn(sid, "Good morning", on_event=typing)
        await agent.idle()
        await agent.run_turn(sid, QUESTION)

    asyncio.run(main())
    assert set(reads_during) == {0}  # nothing read while the turn ran
    assert model.stopped >= 1  # a turn calls off what was being read
    read, _tools = model.read[-1]
    assert read == list(model.seen[-1].messages)


def test_an_emptied_composer_brings_back_the_ordinary_read_ahead(
    storage: Storage, store: MemoryStore
) -> None:
    sid = _session(store)
    agent, model = _agent(storage, store, [["Morning!"]])

    async def main() -> None:
        await agent.run_turn(sid, "Good morning")
        await agent.idle()
        agent.draft_changed(sid, QUESTION)
        await agent.idle()
        agent.draft_changed(sid, "   ")
        agent.read_ahead_later(sid)  # as the end of a summary pass does
        await agent.idle()

    asyncio.run(main())
    contents = [_said(read) for read, _tools in model.read]
    assert contents == ["Morning!", QUESTION, "Morning!"]


def test_a_draft_asks_the_model_for_nothing(storage: Storage, store: MemoryStore) -> None:
    """A question that recall finds nothing for is translated for its turn by the chat
    model; for a draft it is not (the model's only work is reading)."""
    sid = _session(store)
    agent, model = _agent(storage, store, [])

    async def main() -> None:
        agent.draft_changed(sid, "Wie heißt mein Hund?")
        await agent.idle()

    asyncio.run(main())
    assert model.seen == []
    assert [read[-1]["content"] for read, _tools in model.read] == ["Wie heißt mein Hund?"]


def test_nothing_is_read_while_a_summary_pass_rewrites_the_head(
    storage: Storage, store: MemoryStore
) -> None:
    """A draft typed during a pass would be read with the old head, between the pass's own
    calls: it is read once the pass has ended."""
    sid = _session(store)
    agent, model = _agent(storage, store, [])

    async def main() -> None:
        agent.summary_running(True)
        agent.draft_changed(sid, QUESTION)
        await agent.idle()
        assert model.read == []
        assert model.stopped == 1
        agent.summary_running(False)
        await agent.idle()

    asyncio.run(main())
    assert [read[-1]["content"] for read, _tools in model.read] == [QUESTION]


def test_each_draft_is_its_turns_first_prompt_over_a_jumping_window(
    storage: Storage, store: MemoryStore
) -> None:
    """The window (6 messages, moving 4 at a time) is taken with the unstored draft as the
    turn takes it with the stored message: also the turns where its start jumps."""
    sid = _session(store)
    model = ReadingModel([[f"answer {i}"] for i in range(6)])
    config = AgentConfig(small_model=True, window_messages=6, window_step=4)
    agent = Agent(storage, store, model, ToolRegistry(), config=config)

    async def main() -> None:
        for i in range(6):
            agent.draft_changed(sid, f"message {i}")
            await agent.idle()
            await agent.run_turn(sid, f"message {i}")
            await agent.idle()

    asyncio.run(main())
    drafts = [read for read, _tools in model.read if read[-1]["content"].startswith("message")]
    assert len(drafts) == 6
    assert drafts == [list(seen.messages) for seen in model.seen]
    assert len({len(draft) for draft in drafts}) > 1  # the window's start moved


def test_with_reading_ahead_off_nothing_is_read(storage: Storage, store: MemoryStore) -> None:
    """Settings → Models: a laptop that should rest between messages."""
    sid = _session(store)
    model = ReadingModel([["Morning!"], ["Yes: penicillin."]])
    config = AgentConfig(small_model=True, read_ahead=False)
    agent = Agent(storage, store, model, ToolRegistry(), config=config)

    async def main() -> None:
        await agent.run_turn(sid, "Good morning")
        await agent.idle()
        agent.draft_changed(sid, QUESTION)
        await agent.idle()
        await agent.run_turn(sid, QUESTION)
        await agent.idle()

    asyncio.run(main())
    assert model.read == []
    assert len(model.seen) == 2
