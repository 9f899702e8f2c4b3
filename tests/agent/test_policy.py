"""The small-model turn: tools by need, never the error-memory tools, two tool rounds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agenvoy_desktop.agent.context import SEARCH_GUIDANCE, tool_guidance
from agenvoy_desktop.agent.made_up_calls import named_after_message
from agenvoy_desktop.agent.policy import (
    FILE_TOOLS,
    FULL,
    REFUSAL_OPENINGS,
    SEARCH_TOOL,
    SMALL_MODEL_CALLS_PER_ROUND,
    TIME_TOOLS,
    TurnPlan,
    asks_about_the_past,
    clock_in_prompt,
    needed_tools,
    plan_turn,
)
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import Tool, ToolRegistry
from agenvoy_desktop.agent.turn import (
    Agent,
    AgentConfig,
    ToolCallStarted,
    TurnEvent,
    TurnStatus,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.llm.model_profile import ModelProfile
from tests.scripted_chat import Call, ScriptedChatModel

GREETINGS = [
    "Hi!",
    "Hello, how are you?",
    "Hi! My name is Lena and I live in Graz.",
    "Thanks, that was helpful.",
    "Good morning :)",
    "Guten Morgen, wie geht's?",
    "Danke schön!",
    "你好！",
    "谢谢你",
    "Tell me a joke.",
]


@pytest.mark.parametrize("text", GREETINGS)
def test_small_talk_needs_no_tool(text: str) -> None:
    assert needed_tools(text, recalled=False) == frozenset()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Please read ~/notes/todo.txt", FILE_TOOLS),
        ("What's in the folder Documents?", FILE_TOOLS),
        ("Lies die Datei bericht.md", FILE_TOOLS),
        ("What time is it?", TIME_TOOLS),
        ("How many days until Christmas?", TIME_TOOLS),
        ("What is the date 3 weeks from now?", TIME_TOOLS),
        ("Remind me: in 10 days the lease ends. What day is that?", TIME_TOOLS),
        ("Wie viele Tage noch bis Ostern?", TIME_TOOLS),
        ("Our Lisbon plan: fado on 13 May, Sintra on 15 May. List the days.", frozenset()),
        ("Write each as Place: date, one per line.", frozenset()),
        ("Do you have time to plan the trip?", frozenset()),
        ("What day is it today?", TIME_TOOLS),
        ("Which date was the concert?", TIME_TOOLS),
        ("Welches Datum haben wir?", TIME_TOOLS),
        ("今天是星期几？", TIME_TOOLS),
    ],
)
def test_cues_pick_their_tools(text: str, expected: frozenset[str]) -> None:
    assert needed_tools(text, recalled=False) == expected


@pytest.mark.parametrize(
    "text",
    [
        "What did we decide about the database?",
        "Do you remember my bike lock code?",
        "What is my name?",
        "Where do I live?",
        "Erinnerst du dich an das Hotel?",
        "我之前说过我住在哪里？",
        "我的自行车锁密码是多少？",
    ],
)
def test_questions_about_the_past_offer_search_unless_recalled(text: str) -> None:
    assert asks_about_the_past(text)
    assert SEARCH_TOOL in needed_tools(text, recalled=False)
    assert SEARCH_TOOL not in needed_tools(text, recalled=True)


@pytest.mark.parametrize(
    "text",
    [
        "I have a dentist appointment tomorrow morning.",  # "tomorrow" offered the clock
        "I locked myself out of the house again.",  # "again" offered the history search
        "我们家的小猫今天把花瓶打碎了。",
        "My notes for the trip are in ~/notes/kyoto.md.",
    ],
)
def test_a_statement_gets_no_tools_on_a_small_model(text: str) -> None:
    assert plan_turn(text, small_model=True, recalled=False) == TurnPlan(
        frozenset(), 0, avoid_openings=REFUSAL_OPENINGS
    )
    assert plan_turn(text, small_model=False, recalled=False) == FULL


def test_only_a_small_models_statement_bans_refusals() -> None:
    """Asked something, "I'm sorry, I don't know" can be the honest answer."""
    asked = plan_turn("What is my bike lock code?", small_model=True, recalled=True)
    assert asked.avoid_openings == ()
    assert "I'm sorry," in REFUSAL_OPENINGS
    assert not any("I'm sorry to hear that".startswith(p) for p in REFUSAL_OPENINGS)


def test_a_question_keeps_its_cues_on_a_small_model() -> None:
    plan = plan_turn("Is my dentist appointment tomorrow?", small_model=True, recalled=False)
    assert plan.tools is not None
    assert plan.tools >= TIME_TOOLS


@pytest.mark.parametrize(
    "text",
    [
        "In which year did the first moon landing happen?",  # searched 3 times, 46 s, wrong
        "How do I undo the last git commit?",
        "What happened before the French Revolution?",
    ],
)
def test_past_tense_alone_is_not_about_our_past(text: str) -> None:
    assert not asks_about_the_past(text)
    assert SEARCH_TOOL not in needed_tools(text, recalled=False)


def test_capable_models_get_everything() -> None:
    assert plan_turn("Hi!", small_model=False, recalled=False) == FULL


def test_profile_from_size_and_template() -> None:
    assert ModelProfile(parameters=494_000_000, template_tools=True).small
    assert not ModelProfile(parameters=7_600_000_000, template_tools=True).small
    assert ModelProfile(parameters=7_600_000_000, template_tools=False).small
    assert not ModelProfile(parameters=None, template_tools=True).small
    assert "0.5B" in ModelProfile(parameters=494_000_000, template_tools=True).describe()


def test_guidance_only_names_offered_tools() -> None:
    assert tool_guidance([]) == ""
    assert SEARCH_GUIDANCE in tool_guidance(["search_chat_history"])
    assert "search_chat_history" not in tool_guidance(["current_time"])


def _registry() -> ToolRegistry:
    async def answer(_args: dict[str, Any]) -> str:
        return "12:00"

    empty = {"type": "object", "properties": {}}
    names = ["current_time", "search_chat_history", "remember_error", "read_error"]
    return ToolRegistry([Tool(name, name, empty, answer) for name in names])


def _turn(
    store: MemoryStore,
    script: list[list[object]],
    text: str,
    events: list[TurnEvent] | None = None,
    model: ScriptedChatModel | None = None,
) -> ScriptedChatModel:
    sid = store.create_session("t")
    model = model if model is not None else ScriptedChatModel(script)
    storage = Storage()
    try:
        agent = Agent(storage, store, model, _registry(), config=AgentConfig(small_model=True))
        asyncio.run(agent.run_turn(sid, text, on_event=None if events is None else events.append))
    finally:
        storage.close()
    return model


def test_small_model_greeting_gets_no_tools_and_no_tool_talk(store: MemoryStore) -> None:
    model = _turn(store, [["Hello Lena!"]], "Hi! My name is Lena and I live in Graz.")
    assert len(model.seen) == 1
    assert model.seen[0].tools is None
    assert "tool" not in model.seen[0].messages[0]["content"]


def test_small_model_runs_at_most_two_calls_per_round(store: MemoryStore) -> None:
    asked = [Call("current_time", {"x": i}) for i in range(5)]  # five different calls
    model = _turn(store, [asked, ["Done."]], "What time is it?")
    tool_results = [m for m in model.seen[1].messages if m["role"] == "tool"]
    assert len(tool_results) == SMALL_MODEL_CALLS_PER_ROUND == 2


def test_small_model_never_sees_error_tools_and_stops_after_two_tool_rounds(
    store: MemoryStore,
) -> None:
    script: list[list[object]] = [
        [Call("current_time")],
        [Call("current_time", {"x": 1})],
        ["It is noon."],
    ]
    model = _turn(store, script, "What time is it? And did I tell you before?")
    offered = [{t["function"]["name"] for t in seen.tools or []} for seen in model.seen]
    assert offered[0] == {"current_time", "search_chat_history"}
    assert len(model.seen) == 3
    assert offered[2] == set()  # the third round must answer


def test_a_small_models_answer_as_a_made_up_call_is_asked_again_in_words(
    store: MemoryStore,
) -> None:
    """Seen in the window: the starter "called" a tool named after the user's plan."""
    script: list[list[object]] = [
        [Call("Our Lisbon plan", {"date": "2026-12-01"})],
        ["Fado: 13 May\nBelem: 14 May"],
    ]
    events: list[TurnEvent] = []
    model = _turn(store, script, "What time is it? Then list our plan.", events)
    assert len(model.seen) == 2
    assert model.seen[1].tools is None  # the answer round
    assert all(m["role"] in {"system", "user"} for m in model.seen[1].messages)
    assert not [e for e in events if isinstance(e, ToolCallStarted)]
    (sid,) = store.session_ids()
    history = store.history(sid).messages
    assert [(m.role, m.content) for m in history][-1] == (
        "assistant",
        "Fado: 13 May\nBelem: 14 May",
    )
    assert [m.role for m in history] == ["user", "assistant"]  # the made-up call left no trace


def test_a_small_models_misspelt_tool_hears_which_tools_there_are(store: MemoryStore) -> None:
    """Not a disguised answer: a tool-shaped name gets "unknown tool" and a second try."""
    script: list[list[object]] = [[Call("read_clock")], [Call("current_time")], ["It is noon."]]
    model = _turn(store, script, "What time is it?")
    assert len(model.seen) == 3
    first_result = [m for m in model.seen[1].messages if m["role"] == "tool"]
    assert "unknown tool" in first_result[0]["content"]
    assert model.seen[1].tools is not None  # may still call the right one


def test_a_made_up_tool_named_after_the_message_is_an_answer_in_disguise(
    store: MemoryStore,
) -> None:
    """Seen on LongMemEval: "theme_park_weekend" called twice, then the clock, three rounds."""
    script: list[list[object]] = [
        [Call("theme_park_weekend", {"date": "2023-10-14"})],
        ["Six Flags has Fright Fest on weekends in October."],
    ]
    events: list[TurnEvent] = []
    question = "I am planning another theme park weekend; do you have any suggestions?"
    model = _turn(store, script, question, events)
    assert len(model.seen) == 2
    assert model.seen[1].tools is None  # the answer round
    assert not [e for e in events if isinstance(e, ToolCallStarted)]


@pytest.mark.parametrize(
    ("name", "message", "after"),
    [
        ("theme_park_weekend", "I am planning another theme park weekend; any ideas?", True),
        ("lisbon_trip_plan", "What did we plan for the Lisbon trip?", True),
        ("read_clock", "What time is it?", False),  # a tool misspelt: no words of the message
        ("search_history", "Search my history for the plumber.", False),  # close to a tool
        ("get_weather_forecast", "Will it rain in Vienna tomorrow?", False),
    ],
)
def test_what_a_made_up_tool_is_named_after(name: str, message: str, after: bool) -> None:
    offered = ["current_time", "date_calc", "search_chat_history"]
    assert named_after_message(name, message, offered) is after


def test_a_small_models_offered_call_still_runs(store: MemoryStore) -> None:
    model = _turn(store, [[Call("current_time")], ["It is noon."]], "What time is it?")
    assert [m["role"] for m in model.seen[1].messages][-2:] == ["assistant", "tool"]


@pytest.mark.parametrize(
    ("text", "clock"),
    [
        ("Hi!", "none"),
        ("Guten Tag!", "none"),
        ("I have a dentist appointment on Friday.", "none"),
        ("What is my bike lock code?", "none"),
        ("What time is it?", "time"),
        ("Wie spät ist es gerade?", "time"),
        ("Is the shop open at 9 o'clock?", "time"),
        ("今天星期几？", "time"),
        ("我的車位是幾號？", "none"),  # 幾號: "which number", not only the date
        ("Is my dentist appointment tomorrow?", "time"),
        ("We're buying paint this weekend.", "none"),  # tells, does not ask
        ("Are the shops open this weekend?", "time"),
    ],
)
def test_small_model_gets_the_clock_only_when_it_asks_about_time(text: str, clock: str) -> None:
    assert clock_in_prompt(text, small_model=True) == clock
    assert clock_in_prompt(text, small_model=False) == "time"


def test_small_model_statement_prompt_has_no_clock(store: MemoryStore) -> None:
    model = _turn(store, [["It is noon."]], "What time is it?")
    assert "Current local time:" in model.seen[-1].messages[0]["content"]
    model = _turn(store, [["Nice."]], "I painted the kitchen today.")
    system = model.seen[0].messages[0]["content"]
    assert "Current local time:" not in system
    assert "UTC" not in system
    assert "Today is" not in system


def test_small_model_statement_bans_refusal_openings(store: MemoryStore) -> None:
    model = _turn(store, [["Noted."]], "My bike lock code is 4417.")
    assert model.seen[0].avoid_openings == REFUSAL_OPENINGS
    model = _turn(store, [["4417."]], "What is my bike lock code?")
    assert model.seen[0].avoid_openings == ()


def test_small_model_statement_shows_no_memory_search_status(store: MemoryStore) -> None:
    """The window's "Looking through your memory…" only for a search that runs."""
    told: list[TurnEvent] = []
    _turn(store, [["Nice."]], "I painted the kitchen.", told)
    asked: list[TurnEvent] = []
    _turn(store, [["Blue."]], "What colour is my kitchen?", asked)
    assert TurnStatus("recall") not in told
    assert TurnStatus("recall") in asked


class _NotLoadedYet(ScriptedChatModel):
    """Like the engine before its first load: ``loaded`` is False until it answers."""

    loaded = False


def test_a_model_not_loaded_yet_says_it_is_loading(store: MemoryStore) -> None:
    """The first answer on a new machine waits ~13 s for the load's calibration."""
    loading: list[TurnEvent] = []
    _turn(store, [["Hello!"]], "Hi!", loading, model=_NotLoadedYet([["Hello!"]]))
    assert TurnStatus("loading") in loading
    assert TurnStatus("thinking") not in loading
    ready: list[TurnEvent] = []
    _turn(store, [["Hello!"]], "Hi!", ready)  # no ``loaded``: a server, or a test double
    assert TurnStatus("thinking") in ready
    assert TurnStatus("loading") not in ready
