"""A word said only in what the window withholds was never said, as far as a turn knows.

A session removed or reset in its undo window, or a message deleted in
one, is still in the store; recall leaves it out (``test_recall_withheld``),
and so must the check that names what the user never told: a word said only
there would otherwise count as told, and the answer would not say "you
never told me about it" although nothing the model sees holds it.
"""

from __future__ import annotations

import asyncio

import pytest

from agenvoy_desktop.agent.never_said import never_said
from agenvoy_desktop.agent.recall import find_block, withholding
from agenvoy_desktop.agent.services import WindowAgent
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import AgentConfig, TurnResult
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation
from tests.scripted_chat import ScriptedChatModel

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * SECOND
BASEBALLS = [
    "I added three autographed baseballs to my collection this spring.",
    "What a collection!",
    "Two of the baseballs are signed by the 1998 team.",
    "Lovely.",
]
QUESTION = "How many autographed baseballs do I have?"


def _session(store: MemoryStore, texts: list[str], start: int = T0) -> str:
    sid = store.create_session(None)
    store.append(sid, conversation(texts, start=start))
    return sid


def _asked(store: MemoryStore, question: str) -> str:
    """The session the question is asked in, with the question stored (as a turn does)."""
    now = store.create_session("today")
    store.append(now, conversation([question], start=T0 + DAY))
    return now


def test_a_word_said_only_in_a_withheld_session_was_never_said(store: MemoryStore) -> None:
    held = _session(store, BASEBALLS)
    _asked(store, QUESTION)
    assert never_said(store, QUESTION, []) == []  # said twice: told, while the session stands
    with withholding(Withheld(frozenset({held}))):
        assert never_said(store, QUESTION, []) == ["baseballs"]
    assert never_said(store, QUESTION, []) == []  # Undo: told again


def test_a_word_said_only_in_withheld_messages_was_never_said(store: MemoryStore) -> None:
    sid = _session(store, BASEBALLS)
    _asked(store, QUESTION)
    said = {m.id for m in store.history(sid).messages if "baseballs" in m.content}
    assert len(said) == 2
    with withholding(Withheld(messages=frozenset(said))):
        assert never_said(store, QUESTION, []) == ["baseballs"]
    one = Withheld(messages=frozenset(sorted(said)[:1]))
    with withholding(one):  # one line still holds it, with the question: as good as never said
        assert never_said(store, QUESTION, []) == ["baseballs"]


def test_a_name_told_with_the_thing_only_in_a_withheld_session_was_never_told(
    store: MemoryStore,
) -> None:
    for text in (
        "My colleague Tom moved to Berlin last spring.",
        "Tom recommended a great ramen place near the office.",
        "I went bouldering with Tom on Saturday.",
        "My cousin Alex just became a parent: a baby girl!",
    ):
        _session(store, [text, "Nice."])
    held = _session(store, ["My brother Tom became a parent in March.", "Congratulations!"])
    question = "Who became a parent first, Tom or Alex?"
    now = _asked(store, question)
    alex = [i for i in find_block(store, now, question, 16).items if "Alex" in i.text]
    assert never_said(store, question, alex) == []  # Tom's line tells it, while it stands
    with withholding(Withheld(frozenset({held}))):
        assert never_said(store, question, alex) == ["Tom"]


def _turn(store: MemoryStore, withheld: Withheld) -> TurnResult:
    """One turn asking QUESTION with *withheld* left out, as the window's services run it."""
    model = ScriptedChatModel([["You have 3 autographed baseballs."], ["3."]])
    storage = Storage()
    try:
        agent = WindowAgent(
            storage,
            store,
            model,
            ToolRegistry(),
            config=AgentConfig(small_model=True),
            withheld=lambda: withheld,
        )
        now = store.create_session("today")
        return asyncio.run(agent.run_turn(now, QUESTION))
    finally:
        storage.close()


def test_a_turn_says_never_told_of_what_only_a_withheld_session_holds(
    store: MemoryStore,
) -> None:
    held = _session(store, BASEBALLS)
    result = _turn(store, Withheld(frozenset({held})))
    assert result.checked == "never told"
    assert result.answer == "I don't know: you haven't told me about baseballs."
    # the control, after it (a turn's own words are archived): Undo makes it told
    assert _turn(store, NOTHING_WITHHELD).checked != "never told"
