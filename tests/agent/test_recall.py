"""Proactive recall: the floor, the block, and a turn that carries it to the model."""

from __future__ import annotations

import asyncio

import pytest

from agenvoy_desktop.agent import recall as recall_module
from agenvoy_desktop.agent.recall import (
    BLOCK_HEADER,
    BLOCK_HEADERS,
    Neighbour,
    RecallFloor,
    RecallItem,
    apply_floor,
    block_opening,
    clip,
    content_terms,
    discloses,
    format_block,
    header_for,
    names_in,
    new_part,
    query_kind,
    recall_candidates,
    shared_names,
    term_coverage,
    worth_recalling,
)
from agenvoy_desktop.agent.recall_lines import term_in
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.tools import ToolRegistry
from agenvoy_desktop.agent.turn import Agent, AgentConfig, RecallInjected, TurnEvent
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, conversation
from tests.scripted_chat import ScriptedChatModel

LOCK_FACT = "By the way, my bike lock code is 4721."


pytestmark = pytest.mark.usefixtures("utc")


def _plant(store: MemoryStore) -> str:
    sid = store.create_session("Bike trip")
    chatter = [
        "We should leave early on Saturday.",
        "Sounds good, I will pack the tent.",
        LOCK_FACT,
        "Noted.",
        "Also bring the rain jackets, the forecast looks wet.",
        "I will.",
    ]
    store.append(sid, conversation(chatter, start=T0))
    return sid


def _item(**kwargs: object) -> RecallItem:
    base: dict[str, object] = {
        "message_id": "m",
        "session_id": "s",
        "session_title": "t",
        "time_ns": T0,
        "role": "user",
        "text": "x",
    }
    base.update(kwargs)
    return RecallItem(**base)  # type: ignore[arg-type]


def test_content_terms_drop_stopwords_and_split_cjk() -> None:
    assert content_terms("What is my bike lock code?") == ["bike", "lock", "code"]
    assert "自行" in content_terms("我的自行车锁密码是多少？")
    assert "什么" not in content_terms("我住在什么地方")
    assert content_terms("Hi! How are you?") == []
    # what counting questions and "anything" questions are asked with is no topic
    assert content_terms("How many days did I spend attending workshops in April?") == [
        "attend",
        "workshop",
        "april",
    ]
    assert content_terms("Am I allergic to anything?") == ["allergic"]


def test_a_japanese_kanji_between_kana_is_a_word_of_its_own() -> None:
    assert {"家", "猫"} <= set(content_terms("家に猫はいますか？"))
    assert "私" not in content_terms("私は猫を飼っていますか？")  # in nearly every sentence
    assert "猫" not in content_terms("我家有猫吗？")  # Chinese: bigrams, as before


@pytest.mark.parametrize(
    ("term", "text"),
    [
        ("smoker", "i no longer smoke, i quit two years ago."),
        ("smoker", "i quit smoking last spring."),
        ("teacher", "i teach maths at a school."),
        ("driver", "i drive a bus for a living."),
        ("runner", "i go running every morning."),
        ("cyclist", "i don't own a car, i cycle everywhere."),
        ("bike", "my bikes are in the shed."),
    ],
)
def test_a_word_counts_where_the_line_says_the_doing(term: str, text: str) -> None:
    """Asked "Am I a smoker?", the line "I no longer smoke" shares its word."""
    assert term_in(term, text)


@pytest.mark.parametrize(
    ("term", "text"),
    [
        ("center", "the recent news"),
        ("sister", "i assist people"),
        ("smoker", "smokey barbecue sauce"),
        ("water", "what is it"),
        ("persist", "i know a persian cat"),
    ],
)
def test_an_agent_noun_does_not_match_inside_other_words(term: str, text: str) -> None:
    assert not term_in(term, text)


@pytest.mark.parametrize(
    ("term", "text"),
    [
        ("shrimp", "i'm not allergic to nuts, only to shellfish."),
        ("walnut", "i'm not allergic to nuts, only to shellfish."),
        ("shellfish", "i'm allergic to prawns."),
        ("amoxicillin", "i'm allergic to penicillin."),
        ("bike", "i don't own a car, i cycle everywhere."),
        ("pets", "i have a cat called miso."),
    ],
)
def test_a_thing_is_held_by_its_kind_and_its_other_names(term: str, text: str) -> None:
    """Asked "Can I eat shrimp?", the line "I'm allergic to shellfish" holds its word."""
    assert term_in(term, text)


@pytest.mark.parametrize(
    ("term", "text"),
    [
        ("eat", "seattle is a great city"),  # a short word's start, not any part of it
        ("almond", "i'm allergic to walnuts."),  # two things of one kind
        ("bike", "i drive a car."),
    ],
)
def test_a_term_is_not_held_by_another_word(term: str, text: str) -> None:
    assert not term_in(term, text)


def test_a_long_word_is_found_at_the_end_of_a_compound() -> None:
    assert term_in("schloss", "der code vom fahrradschloss ist 4721.")
    assert term_in("teacher", "her schoolteacher called.")


def test_a_thing_asked_about_finds_the_line_naming_its_kind(store: MemoryStore) -> None:
    """ "Can I eat shrimp?" shares no word with "I'm allergic to shellfish": the keyword route
    also looks for the thing's kinds, and the line's share counts them."""
    earlier = store.create_session("earlier")
    store.import_messages(conversation(["Heads up: I'm allergic to shellfish.", "Noted!"]), earlier)
    now = store.create_session("today")
    found = recall_candidates(store, now, "Can I eat shrimp?", window_messages=16)
    allergy = next(item for item in found if "shellfish" in item.text)
    assert allergy.matched_terms == 1
    assert apply_floor(found, kind="personal")[0].message_id == allergy.message_id


def test_more_lines_than_the_block_shows_are_ordered_by_their_own_words_too(
    store: MemoryStore,
) -> None:
    """A stored vector also holds the message before it; the shown text alone decides
    which of the lines that cleared the floor the block takes."""
    question = "Do I own a car?"
    chat = [
        RecallItem(f"c{i}", "s", None, T0, "user", f"Dave, your new car number {i} rocks", 0.35)
        for i in range(5)
    ]
    fact = RecallItem("fact", "s", None, T0, "user", "I don't own a car, I cycle.", 0.24)
    ordered = recall_module.by_own_words(store, [*chat, fact], question)
    assert ordered[0].message_id == "fact"
    assert ordered[0].own_cosine is not None
    assert ordered[0].own_cosine > 0.35


def test_a_long_line_keeps_its_stored_similarity(store: MemoryStore) -> None:
    """A long message's stored vector is mostly its own words: it is not embedded again."""
    long = RecallItem("long", "s", None, T0, "user", "Dave, your new car rocks. " * 10, 0.35)
    short = RecallItem("short", "s", None, T0, "user", "I don't own a car.", 0.24)
    ordered = recall_module.by_own_words(store, [long, short], "Do I own a car?")
    assert [item.own_cosine is None for item in ordered] == [False, True]
    assert ordered[0].message_id == "short"


def test_an_embedding_that_fails_leaves_the_order(store: MemoryStore) -> None:
    class Failing:
        dim = 8

        def embed(self, texts: object) -> object:
            raise RuntimeError("model gone")

    items = [
        RecallItem("a", "s", None, T0, "user", "first", 0.5),
        RecallItem("b", "s", None, T0, "user", "second", 0.4),
    ]
    store.embedder = Failing()  # type: ignore[assignment]
    assert recall_module.by_own_words(store, items, "first?") == items


def test_coverage_counts_the_verb_of_an_agent_noun() -> None:
    assert term_coverage({"smoker": 1.0}, "I no longer smoke, I quit two years ago.") == (1.0, 1)


def test_memory_question_finds_the_planted_fact(store: MemoryStore) -> None:
    _plant(store)
    now = store.create_session("today")
    found = recall_candidates(store, now, "What is my bike lock code?", window_messages=16)
    kept = apply_floor(found, kind="personal")
    assert kept
    assert kept[0].text == LOCK_FACT
    assert kept[0].session_title == "Bike trip"
    assert kept[0].matched_terms == 3


def test_unrelated_message_recalls_nothing(store: MemoryStore) -> None:
    _plant(store)
    now = store.create_session("today")
    for text in ["Hi! How are you today?", "Thanks a lot!", "Write a haiku about autumn."]:
        found = recall_candidates(store, now, text, window_messages=16)
        assert apply_floor(found, kind=query_kind(text)) == [], text


def test_saying_the_same_again_recalls_nothing_to_echo(store: MemoryStore) -> None:
    _plant(store)
    now = store.create_session("today")
    found = recall_candidates(store, now, LOCK_FACT, window_messages=16)
    assert LOCK_FACT not in [item.text for item in found]
    # a question that repeats the fact's words still finds it (it may ask to confirm)
    found = recall_candidates(store, now, "Is my bike lock code 4721?", window_messages=16)
    assert LOCK_FACT in [item.text for item in found]


def test_only_the_sentences_that_say_something_new_are_recalled() -> None:
    said = content_terms("Hi! My name is Lena and I live in Graz.")
    assert new_part("My name is Lena and I live in Graz", said) == ""
    recalled = "Hi! My name is Lena and I live in Graz. My bike lock code is 4721."
    assert new_part(recalled, said) == "My bike lock code is 4721."


def test_current_window_is_not_recalled(store: MemoryStore) -> None:
    sid = _plant(store)
    found = recall_candidates(store, sid, "What is my bike lock code?", window_messages=16)
    assert found == []


def test_tool_traffic_and_empty_messages_never_recalled(store: MemoryStore) -> None:
    sid = store.create_session("tools")
    store.append(
        sid,
        [
            store.new_message("user", "the bike lock code is in my notes file"),
            store.new_message(
                "assistant",
                "",
                tool_calls=[{"id": "1", "function": {"name": "x", "arguments": {}}}],
            ),
            store.new_message("tool", "bike lock code: 9999", tool_call_id="1", name="x"),
            store.new_message("assistant", ""),
        ],
    )
    now = store.create_session("today")
    found = recall_candidates(store, now, "bike lock code", window_messages=16)
    assert [item.role for item in found] == ["user"]


def test_floor_depends_on_the_kind_of_message() -> None:
    floor = RecallFloor(
        personal_cosine=0.35,
        personal_cosine_share=0.0,
        personal_keyword=0.5,
        general_score=0.95,
        cjk_keyword=0.2,
    )
    semantic = _item(cosine=0.5, coverage=0.2, matched_terms=1)
    keyword = _item(cosine=0.1, coverage=0.8, matched_terms=1)
    strong = _item(cosine=0.7, coverage=1.0, matched_terms=2, query_terms=2)
    small_talk = _item(cosine=0.9, coverage=1.0, matched_terms=1, query_terms=1)
    weak = _item(cosine=0.3, coverage=0.4, matched_terms=3)
    # the line after a fact: close in meaning through its context, no word of the question
    context_only = _item(cosine=0.69)
    paraphrase = _item(cosine=0.8)
    personal = [weak, keyword, semantic, context_only, paraphrase]
    # best first: cosine + 0.3 x word share
    assert apply_floor(personal, floor, kind="personal") == [paraphrase, semantic, keyword]
    general = [weak, keyword, semantic, strong, small_talk]
    assert apply_floor(general, floor, kind="general") == [strong]
    # CJK: MiniLM's cosine means little there, shared bigrams decide
    cjk_close = _item(cosine=0.8, coverage=0.1, matched_terms=1)
    cjk_words = _item(cosine=0.2, coverage=0.3, matched_terms=2)
    assert apply_floor([cjk_close, cjk_words], floor, kind="cjk") == [cjk_words]


def test_a_personal_hit_in_a_message_that_tells_several_things() -> None:
    """ "When is my daughter's birthday?" against "Hi, I'm Tomas. I work as a baker in Brno
    and my daughter Eva turns 7 on 14 March." (measured with MiniLM): kept."""
    intro = _item(cosine=0.49, coverage=0.45, matched_terms=1)
    assert apply_floor([intro], RecallFloor(), kind="personal") == [intro]
    strict = RecallFloor(personal_cosine=0.5, personal_cosine_share=0.4, personal_keyword=0.7)
    assert apply_floor([intro], strict, kind="personal") == []  # why the floor is not stricter


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("What is Ana allergic to?", {"Ana"}),
        ("Which batteries does Otto's hearing aid need?", {"Otto"}),
        ("How do I get from London to Paris by train?", {"London", "Paris"}),
        ("Ana called. What did I tell her?", set()),  # a sentence's first word
        ("What does CPU stand for? Is it open on Monday, Dr Who?", {"Who"}),
        ("I'm sure I said it in May.", set()),
        ("In welchem Raum sitzt Sabine?", {"Raum", "Sabine"}),  # German nouns too
        ("小林的生日是哪天？", set()),
    ],
)
def test_names_in(text: str, names: set[str]) -> None:
    assert names_in(text) == names


def test_shared_names_are_whole_words_written_the_same_way() -> None:
    names = names_in("When is Tom's birthday, and what does Ana like?")
    assert shared_names(names, "Tom's birthday is on 3 October.") == 1
    assert shared_names(names, "Tomorrow I see Anastasia.") == 0
    assert shared_names(names, "tom and ana came") == 0
    assert shared_names(names, "Ana and Tom came.") == 2


def test_a_name_shared_with_a_general_question_lowers_its_floor() -> None:
    floor = RecallFloor()
    # "What is Ana allergic to?" against "my sister Ana is allergic to celery":
    # weak in meaning (the vector holds the line before), all the words
    fact = _item(cosine=0.32, coverage=1.0, matched_terms=2, query_terms=2, shared_names=1)
    # "What is Tokyo famous for?" against "The festival in Tokyo was awesome!"
    place = _item(cosine=0.49, coverage=0.44, matched_terms=1, query_terms=2, shared_names=1)
    unnamed = _item(cosine=0.32, coverage=1.0, matched_terms=2, query_terms=2)
    assert apply_floor([fact, place, unnamed], floor, kind="general") == [fact]


def test_a_person_asked_about_by_name_is_recalled(store: MemoryStore) -> None:
    sid = store.create_session("Dinner")
    chatter = [
        "We are five for dinner on Friday.",
        "Great, what will you cook?",
        "One more thing: my sister Ana is allergic to celery.",
        "Noted, no celery.",
    ]
    store.append(sid, conversation(chatter, start=T0))
    now = store.create_session("today")
    text = "What is Ana allergic to?"
    assert query_kind(text) == "general"
    kept = apply_floor(recall_candidates(store, now, text, window_messages=16), kind="general")
    assert [item.text for item in kept] == [chatter[2]]


def test_query_kind() -> None:
    assert query_kind("Where do I live?") == "personal"
    assert query_kind("What did we decide about the hotel?") == "personal"
    assert query_kind("What is the capital of Australia?") == "general"
    assert query_kind("Hi!") == "general"
    assert query_kind("我的自行车锁密码是多少？") == "cjk"
    assert query_kind("Python 里怎么读取 JSON 文件？") == "general"


def test_the_header_follows_the_messages_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under an English header the starter answered Chinese questions in English."""
    assert header_for("What is my bike lock code?") == BLOCK_HEADER
    assert header_for("我的电动车锁密码是多少？") == BLOCK_HEADERS["zh"]
    assert header_for("ジムのロッカー番号は何番ですか？") == BLOCK_HEADERS["ja"]
    assert header_for("Python 里怎么读取 JSON 文件？") == BLOCK_HEADER  # mostly Latin
    block = format_block([_item(text="4721")], header=BLOCK_HEADERS["zh"])
    assert block.text.splitlines()[0] == BLOCK_HEADERS["zh"]
    monkeypatch.setattr(recall_module, "LOCALISED_HEADER", False)
    assert header_for("我的电动车锁密码是多少？") == BLOCK_HEADER


@pytest.mark.parametrize(
    "asked",
    ["What is my bike lock code?", "我的电动车锁密码是多少？", "ジムのロッカー番号は何番ですか？"],
)
def test_a_block_starts_with_the_opening_read_ahead_of_it(asked: str) -> None:
    """What the next turn's note is read ahead with (agent/read_ahead.py) opens every block
    of a message in that script that does not ask for advice."""
    block = format_block([_item(text="4721")], header=header_for(asked), now_ns=T0)
    assert block.text.startswith(block_opening(asked))
    assert block_opening(asked).startswith(header_for(asked))


def test_a_line_said_the_day_of_the_line_above_says_so_instead_of_its_date() -> None:
    day = 86400 * SECOND
    items = [
        _item(message_id="a", time_ns=T0, text="I booked the flight to Lisbon."),
        _item(message_id="b", time_ns=T0 + 60 * SECOND, text="It leaves at 7 am."),
        _item(message_id="c", time_ns=T0 + 2 * day, text="I packed my bag."),
    ]
    lines = format_block(items, now_ns=T0 + 9 * day).text.splitlines()
    assert lines[1].startswith('- On 2023-11-14 (9 days ago) the user said: "I booked')
    assert lines[2] == '- The same day the user said: "It leaves at 7 am."'
    assert lines[3].startswith("- On 2023-11-16 (7 days ago) the user said:")


def test_block_is_labelled_dated_and_bounded() -> None:
    items = [
        _item(message_id=str(i), time_ns=T0 + (5 - i) * 86400 * SECOND, text=f"word{i} " * 200)
        for i in range(5)
    ]
    block = format_block(items, budget_chars=800)
    lines = block.text.splitlines()
    assert lines[0] == BLOCK_HEADER
    assert len(lines) == 3  # two items fit the budget
    assert lines[1].startswith('- On 2023-11-18 the user said: "word1')
    assert block.message_ids == ["1", "0"]  # the two best, in the order they were said
    assert format_block([]).text == ""


def test_a_line_too_long_for_what_is_left_lets_a_shorter_one_below_it_in() -> None:
    """Two long lines used most of the budget and the short line that answered ("I'm
    reading The Nightingale") was left out: a line that does not fit is passed over, not
    the end of the block."""
    day = 86400 * SECOND
    items = [
        _item(message_id="long1", time_ns=T0, text="word " * 70),
        _item(message_id="long2", time_ns=T0 + day, text="more " * 70),
        _item(message_id="short", time_ns=T0 + 2 * day, text="I'm reading The Nightingale."),
    ]
    block = format_block(items, budget_chars=700)  # each long line ~360 characters
    assert block.message_ids == ["long1", "short"]


def test_block_lines_carry_their_age_in_time_order_and_the_latest_is_marked() -> None:
    day = 86400 * SECOND
    older = _item(message_id="a", time_ns=T0, text="I just reached 500 followers on Instagram.")
    newer = _item(
        message_id="b", time_ns=T0 + 17 * day, text="I'm now at 600 followers on Instagram."
    )
    other = _item(message_id="c", time_ns=T0 + 3 * day, text="I posted a reel about Instagram.")
    block = format_block(
        [newer, other, older],
        now_ns=T0 + 31 * day,
        query_terms=content_terms("How many Instagram followers do I have?"),
    )
    lines = block.text.splitlines()[1:]
    assert lines[0] == (
        '- On 2023-11-14 (4 weeks ago) the user said: "I just reached 500 followers on Instagram."'
    )
    assert lines[1].startswith("- On 2023-11-17 (4 weeks ago) the user said:")  # 28 days
    assert lines[2] == (
        "- On 2023-12-01 (2 weeks ago, the latest) the user said: "
        '"I\'m now at 600 followers on Instagram."'
    )
    assert block.latest == frozenset({"b"})


def test_an_assistant_line_and_its_neighbours_are_labelled() -> None:
    said = _item(
        role="assistant",
        text="Try MusicTheory.net for free lessons.",
        neighbours=(Neighbour("user", "I use the app on my phone at Target.", after=True),),
    )
    lines = format_block([said]).text.splitlines()[1:]
    assert lines == [
        '- On 2023-11-14 you said: "Try MusicTheory.net for free lessons."',
        '  the user went on: "I use the app on my phone at Target."',
    ]


def test_a_reply_between_two_remembered_lines_is_shown_once() -> None:
    """The reply after one line is the reply before the next: under the better line only."""
    reply = "Libib and StoryGraph can track your reading habits."
    first = _item(
        message_id="a",
        text="Which apps track reading?",
        seq=1,
        neighbours=(Neighbour("assistant", reply, after=True),),
    )
    second = _item(
        message_id="b",
        text="I've started a book club.",
        seq=3,
        neighbours=(Neighbour("assistant", reply, after=False),),
    )
    text = format_block([second, first]).text
    assert text.count(reply) == 1
    assert text.splitlines()[-1] == f'  you had said: "{reply}"'


def test_clip_keeps_head_and_tail() -> None:
    text = "start " + "x" * 1000 + " end"
    clipped = clip(text, 100)
    assert len(clipped) <= 100
    assert clipped.startswith("start")
    assert clipped.endswith("end")


def test_turn_puts_the_block_last_in_the_system_prompt(store: MemoryStore) -> None:
    _plant(store)
    now = store.create_session("today")
    model = ScriptedChatModel([["It is 4721."]])
    storage = Storage()
    events: list[TurnEvent] = []
    try:
        agent = Agent(storage, store, model, ToolRegistry(), config=AgentConfig(small_model=True))
        result = asyncio.run(
            agent.run_turn(now, "What is my bike lock code?", on_event=events.append)
        )
        shown = asyncio.run(agent.context_messages(now))
    finally:
        storage.close()
    system = model.seen[0].messages[0]["content"]
    assert system.endswith(result.recall_text)
    assert LOCK_FACT in result.recall_text
    assert model.seen[0].tools is None  # recall answered it: no search tool for a small model
    assert next(e for e in events if isinstance(e, RecallInjected)).text == result.recall_text
    kinds = [kind for _t, kind, _d in store.archive.events(now)]
    assert kinds == ["recall"]
    # the Context tab shows the block as sent while that turn is in the window
    assert shown[0]["content"].endswith(result.recall_text)


@pytest.mark.parametrize(("small", "recalled"), [(True, False), (False, True)])
def test_a_small_models_statement_gets_no_recall(
    store: MemoryStore, small: bool, recalled: bool
) -> None:
    """The starter echoed recalled lines back for statements (statement_echo.py)."""
    _plant(store)
    now = store.create_session("today")
    model = ScriptedChatModel([["Have a good ride!"]])
    storage = Storage()
    try:
        agent = Agent(storage, store, model, ToolRegistry(), config=AgentConfig(small_model=small))
        result = asyncio.run(agent.run_turn(now, "I know my bike lock code by heart."))
    finally:
        storage.close()
    assert (LOCK_FACT in result.recall_text) is recalled
    assert (LOCK_FACT in model.seen[0].messages[0]["content"]) is recalled


def test_recall_can_be_switched_off(store: MemoryStore) -> None:
    _plant(store)
    now = store.create_session("today")
    model = ScriptedChatModel([["I don't know."]])
    storage = Storage()
    try:
        config = AgentConfig(proactive_recall=False)
        agent = Agent(storage, store, model, ToolRegistry(), config=config)
        result = asyncio.run(agent.run_turn(now, "What is my bike lock code?"))
    finally:
        storage.close()
    assert result.recall_text == ""
    assert LOCK_FACT not in model.seen[0].messages[0]["content"]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("By the way, my bike lock code is 4721.", True),
        ("Hi! My name is Lena and I live in Graz.", True),
        ("Remember that my PIN is 9052.", True),
        ("Where do I live?", False),
        ("Also list every temple in Kyoto with opening hours.", False),
        ("Read my notes for the Kyoto trip and suggest a day plan.", False),
        ("Can you please summarize this article?", False),
        ("We booked the ryokan. Can you list the temples nearby?", True),
    ],
)
def test_only_statements_are_worth_recalling(text: str, kept: bool) -> None:
    assert worth_recalling("user", text) is kept
    assert not worth_recalling("assistant", text)


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("What are some ways to keep my living room dust-free, with a cat that sheds a lot?", True),
        ("Can you suggest reminders for my gym sessions, which I usually go to at 7 pm?", True),
        ("Where do I live?", False),
        ("What is my bike lock code?", False),  # asks for the user's fact, tells none
        ("Can you recommend vacuum cleaners for pet owners?", False),
        ("Also list every temple in Kyoto with opening hours.", False),
        ("我的猫掉毛很厉害，你能推荐一款吸尘器吗？", True),
    ],
)
def test_a_question_may_tell_something_of_the_users_own(text: str, told: bool) -> None:
    assert discloses(text) is told


def test_an_earlier_question_that_tells_is_recalled_for_advice_only(store: MemoryStore) -> None:
    """Seen on LongMemEval: the cat that sheds was said only inside a question."""
    sid = store.create_session("Home")
    store.append(
        sid,
        conversation(
            [
                "What are some simple ways to keep my living room dust-free, especially with "
                "a cat that sheds a lot?",
                "Vacuum twice a week and brush the cat outside.",
            ],
            start=T0,
        ),
    )
    now = store.create_session("today")
    advice = recall_candidates(
        store, now, "I've been sneezing a lot. Do you think it might be my living room?", 16
    )
    assert [i.role for i in advice] == ["user"]
    assert "cat that sheds" in advice[0].text
    fact = recall_candidates(store, now, "How big is my living room?", 16)
    assert fact == []


@pytest.mark.parametrize(
    ("text", "advice"),
    [
        ("I've been sneezing a lot. Do you think it might be my living room?", True),
        ("Do you think I'm allergic to anything?", False),  # a fact, asked politely
        ("Any tips for my phone's battery?", True),
        ("What is my bike lock code?", False),
    ],
)
def test_an_opinion_is_advice_and_a_fact_is_not(text: str, advice: bool) -> None:
    assert recall_module.asks_for_advice(text) is advice
