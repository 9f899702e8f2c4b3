"""The answer check: what memory showed the model against what it answered."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agenvoy_desktop.agent.answer_check import (
    Evidence,
    answer_polarity,
    asks_yes_no,
    check,
    copies_notes,
    draws_on,
    polarity_of,
    quoted,
    supporting,
    tool_call_as_prose,
)
from agenvoy_desktop.agent.recall import content_terms
from tests.conftest import T0

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * 1_000_000_000
PENICILLIN = Evidence("I'm allergic to penicillin.", T0)
MEAT = Evidence("I don't eat meat anymore, I went vegetarian last year.", T0)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Am I allergic to anything?", True),
        ("Do I have a dog?", True),
        ("So, did I ever finish The Nightingale?", True),
        ("我对青霉素过敏吗？", True),
        ("我是不是住在上海？", True),
        ("私は猫を飼っていますか？", True),
        ("Bin ich gegen Penizillin allergisch?", True),
        ("What am I allergic to?", False),
        ("How many bikes do I own?", False),
        ("Tell me about my trip.", False),
        ("我住在哪里？", False),
    ],
)
def test_yes_no_questions_are_told_apart(question: str, expected: bool) -> None:
    assert asks_yes_no(question) is expected


def test_the_clause_that_holds_the_words_decides_the_line_polarity() -> None:
    assert polarity_of(PENICILLIN.text, content_terms("Am I allergic to anything?")) == "yes"
    assert polarity_of(MEAT.text, content_terms("Do I eat meat?")) == "no"
    assert polarity_of(MEAT.text, content_terms("Am I vegetarian?")) == "yes"
    assert polarity_of("I quit smoking in 2019.", content_terms("Do I smoke?")) is None
    assert polarity_of("I quit smoking in 2019.", ["smok"]) == "no"
    # "smoker" is spoken of where the line says "smoke"
    smoker = content_terms("Am I a smoker?")
    assert polarity_of("I no longer smoke, I quit two years ago.", smoker) == "no"
    assert answer_polarity("Yes, you are a smoker.", smoker) == "yes"
    assert polarity_of("我不喝咖啡。", content_terms("我喝咖啡吗？")) == "no"
    # the clause holding the question's object decides
    contrast = "I'm not allergic to nuts, only to shellfish."
    assert polarity_of(contrast, content_terms("Am I allergic to nuts?")) == "no"
    assert polarity_of(contrast, content_terms("Am I allergic to shellfish?")) == "yes"


def test_answer_polarity_reads_the_first_word_then_the_sentence() -> None:
    terms = content_terms("Am I allergic to penicillin?")
    assert answer_polarity("No, I am not allergic to anything.", terms) == "no"
    assert answer_polarity("Yes, you told me you are.", terms) == "yes"
    assert answer_polarity("You are allergic to penicillin.", terms) == "yes"
    assert answer_polarity("You're not allergic to penicillin.", terms) == "no"
    assert answer_polarity("I don't know whether you are allergic.", terms) is None
    assert answer_polarity("是的，你对青霉素过敏。", ["青霉"]) == "yes"
    assert answer_polarity("不，你不过敏。", ["青霉"]) == "no"
    assert answer_polarity("Let me think about that.", terms) is None


def test_a_denied_allergy_under_its_own_evidence_is_caught() -> None:
    verdict = check(
        "Am I allergic to anything?", "No, I am not allergic to anything.", [PENICILLIN]
    )
    assert verdict.problem == "contradicts"
    assert "So the answer to the question is yes." in verdict.instruction
    assert verdict.fallback == 'Yes. You told me on 2023-11-14: "I\'m allergic to penicillin."'
    agreeing = check("Am I allergic to anything?", "Yes, to penicillin.", [PENICILLIN])
    assert agreeing.ok


def test_a_smoker_asked_about_under_a_line_that_says_smoke_is_checked() -> None:
    """Asked "Am I a smoker?" under "I no longer smoke", it said "Yes, … you are a smoker.":
    the line holds no "smoker", so it was not the line the question asked about."""
    line = Evidence("I no longer smoke, I quit two years ago.", T0)
    verdict = check("Am I a smoker?", "Yes, based on the message, you are a smoker.", [line])
    assert verdict.problem == "contradicts"
    assert verdict.fallback.startswith("No.")
    assert check("Am I a smoker?", "No, you quit two years ago.", [line]).problem == ""


def test_a_cjk_question_gets_its_fallback_in_its_language() -> None:
    fact = Evidence("我对青霉素过敏。", T0)
    verdict = check("我对青霉素过敏吗？", "不，你没有过敏。", [fact])
    assert verdict.problem == "contradicts"
    assert verdict.fallback == "是的。你在2023-11-14告诉过我：“我对青霉素过敏。”"


def test_the_older_of_two_values_is_caught_when_the_latest_is_marked() -> None:
    older = Evidence("I've completed 4 projects since starting painting classes.", T0)
    newer = Evidence("I just finished my 5th project since starting painting classes!", T0 + DAY)
    marked = Evidence(newer.text, newer.time_ns, latest=True)
    question = "How many projects have I completed since starting painting classes?"
    assert supporting(question, [older, marked]) is marked
    assert check(question, "You have completed 4 projects.", [older, marked]).problem == (
        "older value"
    )
    assert check(question, "Five projects so far.", [older, marked]).ok
    # unmarked, both are just lines: the answer draws on one of them
    assert check(question, "You have completed 4 projects.", [older, newer]).ok


def test_of_lines_holding_the_same_words_one_far_closer_in_meaning_answers() -> None:
    chat = [
        Evidence("Hey Dave, I just got a new car and it's amazing!", T0, closeness=0.39),
        Evidence("Wow Dave! Congrats on opening your own car shop!", T0 + 9 * DAY, closeness=0.34),
    ]
    fact = Evidence("I don't own a car, I cycle everywhere.", T0 + DAY, closeness=0.68)
    assert supporting("Do I own a car?", [*chat, fact]) is fact
    assert check("Do I own a car?", "Yes, you have a car.", [*chat, fact]).problem == (
        "contradicts"
    )
    # not far closer: the newer line is the update, as before
    near = Evidence(fact.text, fact.time_ns, closeness=0.45)
    assert supporting("Do I own a car?", [*chat, near]) is chat[1]


def test_asked_whether_it_is_safe_the_line_naming_an_allergy_answers() -> None:
    allergy = Evidence("I'm not allergic to nuts, only to shellfish.", T0)
    seafood = Evidence("I've always wanted to try the seafood there.", T0 + DAY)
    assert supporting("Can I eat shrimp?", [allergy, seafood]) is allergy
    # "only to shellfish" borrows "allergic" from the clause before it
    assert check("Can I eat shrimp?", "Yes, you can eat shrimp.", [allergy, seafood]).problem == (
        "contradicts"
    )
    assert check("Can I eat walnuts?", "Yes, you can eat walnuts.", [allergy]).ok
    assert check("Can I eat walnuts?", "No, you can't.", [allergy]).problem == "contradicts"
    assert check("Am I allergic to shellfish?", "Yes.", [allergy]).ok


def test_a_quote_is_the_sentence_that_answers_not_the_greeting_before_it() -> None:
    line = Evidence("Good morning! I'm not allergic to nuts, only to shellfish.", T0)
    assert quoted("Can I eat shrimp?", line, "no") == (
        'No. You told me on 2023-11-14: "… I\'m not allergic to nuts, only to shellfish."'
    )
    # a number said next to the words stays with them
    told = Evidence("Hi! I got a bike lock. Its code is 4721. Anyway, how are you?", T0)
    assert "4721" in quoted("What is my bike lock code?", told)
    assert "how are you" not in quoted("What is my bike lock code?", told)


def test_a_japanese_line_sharing_a_kanji_word_is_about_the_question() -> None:
    """家に猫はいますか shares no bigram with 私は猫を飼っていません, only the word 猫."""
    cat = Evidence("私は猫を飼っていません。", T0)
    assert check("家に猫はいますか？", "Yes, my house has a cat.", [cat]).problem == "contradicts"
    assert check("家に猫はいますか？", "いいえ、猫はいません。", [cat]).ok
    # the grammar both share ("っていま") makes no line about a car
    assert check("車を持っていますか？", "はい。", [cat]).ok


def test_an_answer_that_draws_on_nothing_the_line_holds_is_caught() -> None:
    line = Evidence(
        "It's crazy how long it took for my asylum application to get approved. "
        "Over a year of uncertainty was really tough.",
        T0,
    )
    question = "How long did I wait for the decision on my asylum application?"
    verdict = check(question, "2. 5. 28", [line])
    assert verdict.problem == "not drawn"
    assert "Over a year" in verdict.fallback
    assert check(question, "Over a year.", [line]).ok


def test_dates_in_the_block_are_no_answer() -> None:
    line = Evidence("My sister's wedding is in Porto.", T0)
    assert not draws_on("2023-11-14", line, "Where is my sister's wedding?")
    assert draws_on("In Porto.", line, "Where is my sister's wedding?")


def test_a_question_no_line_holds_is_left_alone() -> None:
    assert supporting("What is the capital of Peru?", [PENICILLIN]) is None
    assert check("What is the capital of Peru?", "Lima.", [PENICILLIN]).ok
    assert check("Am I allergic to anything?", "No.", []).ok


def test_a_tool_call_written_as_prose_is_caught() -> None:
    names = ["date_calc", "current_time"]
    assert tool_call_as_prose(
        "The function `date_calc` was called with the arguments {'a': 1}.", names
    )
    assert tool_call_as_prose('{"name": "date_calc", "arguments": {"days": 4}}', names)
    assert tool_call_as_prose("date_calc(start='2023-01-01')", names)
    assert not tool_call_as_prose("It was 4 days between the two dates.", names)


def test_a_tool_error_echoed_as_the_answer_is_caught() -> None:
    """Seen on LongMemEval: told "unknown tool", the starter answered with the error as JSON."""
    echo = (
        '{"name": "unknown tool \'theme_park_weekend\'; available tools: current_time, date_calc"}'
    )
    assert tool_call_as_prose(echo)
    assert tool_call_as_prose("Sorry: unknown tool 'plan'; available tools: current_time")
    assert tool_call_as_prose('```json\n{"name": "plan"}\n```')
    assert not tool_call_as_prose('{"tent": 1, "stove": 2}')  # JSON the user asked for
    assert not tool_call_as_prose("Try Knott's Berry Farm {for the rides}.")

    verdict = check("How many days between them?", '{"name": "date_calc", "arguments": {}}', [])
    assert verdict.problem == "tool call"


def test_an_answer_that_copies_the_recall_block_is_caught() -> None:
    """Seen in a walk: the starter answered with the block itself, "the user" turned "you"."""
    echo = (
        "Based on your message (from past conversations; use it only if it answers your "
        'message):\n\n- On 2023-01-20 (3 years ago) you said: "Yeah definitely!"'
    )
    assert copies_notes(echo)
    assert copies_notes('- On 2023-03-27 (1 month ago) the user said: "I am allergic."')
    assert copies_notes('Sure.\n- The same day the user said: "I am allergic."')
    assert not copies_notes("I went there the same day you said: come over.")
    assert copies_notes("用户以前告诉过你（来自过去的对话；只在能回答用户的消息时使用）：")
    assert not copies_notes('You told me on 2023-03-27: "I\'m allergic to penicillin."')
    assert not copies_notes("I know from past conversations that you like tea.")
    assert not copies_notes("On 2023-03-27 (a Monday) I went to Paris.")

    line = '- On 2023-11-14 (today) the user said: "I\'m allergic to penicillin."'
    verdict = check("Am I allergic to anything?", line, [PENICILLIN])
    assert verdict.problem == "copied notes"
    assert "penicillin" in verdict.fallback  # the line, quoted and dated
    assert check("Where am I going?", echo, []).fallback.startswith("I couldn't put")


def test_quoted_names_who_said_it() -> None:
    said = Evidence("Try MusicTheory.net for free lessons.", T0, role="assistant")
    assert quoted("Which site did you recommend?", said).startswith("I told you on 2023-11-14:")
    doc = Evidence("Front tyres: 3.2 bar.", role="document", source="van.md:3-4")
    assert (
        quoted("What tyre pressure?", doc)
        == 'Your document [van.md:3-4] says: "Front tyres: 3.2 bar."'
    )
    assert quoted("Wo wohne ich?", Evidence("Ich wohne in Graz.", T0)).startswith("Du hast mir am")
    assert quoted("Où est-ce que j'habite ?", Evidence("J'habite à Lyon.", T0)) == (
        "Tu m'as dit le 2023-11-14 : « J'habite à Lyon. »"
    )


def test_a_long_message_is_quoted_by_the_sentence_that_answers() -> None:
    said = Evidence(
        "I'm excited to try out the Bee's Knees with my homemade honey syrup. … By the way, "
        "speaking of gin, I've tried making a Negroni at home 10 times now since my friend "
        "Emma showed me how. Do you have any recommendations for other gin-based cocktails? "
        "I also bought a new shaker and some fancy glasses for the party next weekend.",
        T0,
    )
    answer = quoted("How many times have I tried making a Negroni at home?", said)
    assert answer.startswith('You told me on 2023-11-14: "')
    assert "I've tried making a Negroni at home 10 times" in answer
    assert "shaker" not in answer  # the sentences without the question's words are left out
    assert "… …" not in answer  # nor is an ellipsis doubled where recall had cut already


def test_a_refusal_under_a_line_is_caught_and_a_refused_advice_asked_again() -> None:
    line = Evidence("I started taking ukulele lessons with my friend Rachel today.", T0)
    question = "What did I do with Rachel on the Wednesday two months ago?"
    refused = check(question, "I'm sorry, but I can't assist with that.", [line])
    assert refused.problem == "not drawn"
    assert "ukulele" in refused.fallback
    advice = "Any tips for my ukulele lessons with Rachel?"
    again = check(advice, "I'm sorry, but I can't assist with that.", [line])
    # asked once more with the line, but no quote answers "Any tips?"
    assert again.problem == "not drawn"
    assert "ukulele lessons" in again.instruction
    assert again.fallback == ""
    assert check(advice, "Practise chords for ten minutes a day.", [line]).ok
    assert check("Any tips for learning the banjo?", "I'm sorry, I can't.", []).ok


def test_a_refusal_that_borrows_the_lines_words_is_still_a_refusal() -> None:
    """It names the line's places while it disowns the line: not an answer drawn from it."""
    line = Evidence(
        "I'll definitely check out Minato Mirai 21 and the Red Brick Warehouse. By the way,"
        " I've been living in Harajuku for 3 months now.",
        T0,
    )
    question = "How long have I been living in my current apartment in Harajuku?"
    answer = (
        "As an AI language model, I don't have personal experiences or information about"
        " living in current apartments. Harajuku is known for its nightlife, particularly the"
        " Minato Mirai 21 and the Red Brick Warehouse, which are popular with tourists."
    )
    verdict = check(question, answer, [line])
    assert verdict.problem == "not drawn"
    assert "3 months" in verdict.fallback


def test_an_option_of_a_choice_question_is_an_answer() -> None:
    line = Evidence("My French press ratio is now 1 tablespoon for every 5 ounces of water.", T0)
    question = "Did I switch to more water per tablespoon of coffee, or less?"
    assert check(question, "Less water.", [line]).ok


def test_a_question_about_an_ending_is_answered_by_the_denied_habit() -> None:
    line = Evidence("I no longer smoke, I quit two years ago.", T0)
    assert check("Did I quit smoking?", "Yes.", [line]).ok
    assert check("Did I quit smoking?", "No, you still smoke.", [line]).problem == "contradicts"
    assert check("Do I smoke?", "Yes, you smoke.", [line]).problem == "contradicts"


def test_the_clause_naming_what_is_asked_decides_a_cjk_line() -> None:
    line = Evidence("私は去年東京から大阪に引っ越したので、もう東京には住んでいません。", T0)
    assert check("私は今も東京に住んでいますか？", "はい", [line]).problem == "contradicts"
    assert check("私は今も東京に住んでいますか？", "いいえ、住んでいません。", [line]).ok
    assert check("私は大阪に住んでいますか？", "はい、大阪です。", [line]).ok


def test_a_cjk_line_gets_no_polarity_verdict_unless_a_clause_names_what_is_asked() -> None:
    line = "我喜欢喝茶，但是不喜欢喝咖啡。"
    assert polarity_of(line, content_terms("我喜欢喝咖啡吗？")) == "no"
    assert polarity_of(line, content_terms("我喜欢喝茶吗？")) == "yes"
    assert polarity_of("東京も大阪も、好きです。", content_terms("京都に行きましたか？")) is None


@pytest.mark.parametrize(
    ("line", "question", "answer"),
    [
        ("I'm allergic to penicillin.", "Can I take penicillin safely?", "Yes, you can."),
        ("I'm allergic to penicillin.", "Is penicillin safe for me?", "Yes, it is safe."),
        ("我对青霉素过敏。", "我可以吃青霉素吗？", "可以，很安全。"),
        ("私はそばアレルギーがあります。", "私はそばを食べても大丈夫ですか？", "はい。"),
    ],
)
def test_an_allergy_answers_no_to_whether_it_is_safe(line: str, question: str, answer: str) -> None:
    assert check(question, answer, [Evidence(line, T0)]).problem == "contradicts"


def test_an_allergy_still_answers_yes_to_whether_there_is_one() -> None:
    line = Evidence("I'm allergic to penicillin.", T0)
    assert check("Am I allergic to penicillin?", "Yes, you are.", [line]).ok


def test_no_allergy_answers_yes_to_whether_it_is_safe() -> None:
    line = Evidence("I'm not allergic to nuts.", T0)
    assert check("Can I eat nuts?", "No, you can't.", [line]).problem == "contradicts"
    assert check("Can I eat nuts?", "Yes, you can.", [line]).ok


def test_a_clause_about_the_eating_itself_is_not_flipped_by_the_allergy() -> None:
    line = Evidence("I have coeliac disease, so I can't eat gluten.", T0)
    assert check("Can I eat gluten?", "Yes, you can eat gluten.", [line]).problem == "contradicts"
    assert check("Can I eat gluten?", "No, you can't.", [line]).ok


def test_chinese_asks_whether_a_medicine_can_be_used() -> None:
    line = Evidence("我对青霉素过敏。", T0)
    assert check("我可以用青霉素吗？", "是的，我可以使用青霉素。", [line]).problem == "contradicts"


def test_the_older_value_is_read_where_the_question_words_are() -> None:
    older = Evidence("I've been doing yoga twice a week, which has really been helping me.", T0)
    newer = Evidence(
        "I've also got a meeting on Wednesday from 2-3pm. Oh, and I attend yoga classes, "
        "which is three times a week - it really helps me clear my head.",
        T0 + DAY,
        latest=True,
    )
    question = "How often do I attend yoga classes to help with my anxiety?"
    # "2-3pm" is a value of the newer line, but not of the sentence about yoga
    assert check(question, "I attend yoga twice a week.", [older, newer]).problem == ("older value")
    assert check(question, "Three times a week.", [older, newer]).ok


def test_a_count_or_time_answered_without_a_number_is_caught() -> None:
    line = Evidence(
        "I need to be done with the meeting before I head to the gym, which is usually at 6:00 pm.",
        T0,
    )
    question = "What time do I usually go to the gym?"
    verdict = check(question, "You go to the gym on Tuesdays and Thursdays.", [line])
    assert verdict.problem == "not drawn"
    assert "6:00 pm" in verdict.fallback
    assert check(question, "Usually at 6 pm.", [line]).ok
    # "how long" may be answered in words ("over a year"): not held to a number
    wait = Evidence("Over a year of waiting for my visa was tough.", T0)
    assert check("How long did I wait for my visa?", "Over a year.", [wait]).ok


def test_a_name_question_is_answered_with_the_name_of_the_line_about_its_thing() -> None:
    shampoo = Evidence(
        "I've been using a lavender scented shampoo that I picked up on a whim at "
        "Trader Joe's, and it's been doing wonders for my hair.",
        T0,
    )
    question = "What brand of shampoo do I currently use?"
    verdict = check(question, "The brand of shampoo currently used is Lavender.", [shampoo])
    assert verdict.problem == "not drawn"
    assert "Trader Joe's" in verdict.fallback
    assert check(question, "You use Trader Joe's.", [shampoo]).ok

    got = Evidence("I also got a new bookshelf, which has helped me declutter.", T0)
    ikea = Evidence("The new bookshelf is from IKEA, and I'm really happy with it.", T0 + 1)
    bulbs = Evidence(
        "I'll check the old bulbs I bought from Home Depot before buying a new one.", T0 + 2
    )
    lines = [got, ikea, bulbs]
    question = "Where did I buy my new bookshelf from?"
    # the bulbs line names a store too, but not the bookshelf
    verdict = check(question, "From Home Depot, where you bought the old bulbs.", lines)
    assert verdict.problem == "not drawn"
    assert "IKEA" in verdict.fallback
    assert check(question, "You bought it from IKEA.", lines).ok
    # a line naming nothing leaves the answer alone
    assert check("Where do I work out?", "At home.", [Evidence("I work out at home.", T0)]).ok


@dataclass(frozen=True)
class _FirstWorkedOut:
    sentence: str = "The start of your Spanish classes (February 2023) came before the festival."
    values: frozenset[str] = frozenset()
    words: tuple[str, ...] = ("start", "spanish", "class")
    later: tuple[str, ...] = ("attendance", "cultural", "festival")


def test_which_came_first_is_held_to_the_worked_out_order() -> None:
    question = (
        "Which event happened first, my attendance at a cultural festival or the start of "
        "my Spanish classes?"
    )
    worked = _FirstWorkedOut()

    def problem(answer: str) -> str:
        return check(question, answer, [], computed=worked).problem

    assert problem("My attendance at a cultural festival came before my Spanish classes.") == (
        "not worked out"
    )
    assert problem("The start of your Spanish classes came first.") == ""
    assert problem("The cultural festival came after the start of your Spanish classes.") == ""
    assert problem("The festival.") == "not worked out"


def test_a_time_taken_from_the_lines_other_sentence_is_caught() -> None:
    """Seen on LongMemEval: the meeting's time given for the gym's."""
    line = Evidence(
        "I think Tuesday afternoon at 2:00 pm could work well. I need to make sure I'm done "
        "with the meeting before I head to the gym, which is usually at 6:00 pm.",
        T0,
    )
    question = "What time do I usually go to the gym?"
    wrong = check(question, "You typically go to the gym on Tuesday afternoon at 2:00 pm.", [line])
    assert wrong.problem == "not drawn"
    assert "6:00 pm" in wrong.fallback
    assert check(question, "You usually go to the gym at 6:00 pm.", [line]).ok
    assert check(question, "Usually at 6 pm.", [line]).ok


def test_an_answer_that_says_yes_then_the_opposite_is_caught() -> None:
    """Seen with the starter: right in its first word, wrong in its sentence."""
    quit_line = Evidence("I quit smoking two years ago.", T0)
    question = "Did I quit smoking?"
    torn = check(
        question, "Yes, according to your statement, you did not quit smoking.", [quit_line]
    )
    assert torn.problem == "contradicts"
    assert torn.fallback.startswith("Yes.")
    assert check(question, "Yes, you quit smoking two years ago.", [quit_line]).ok
    assert check(question, "Yes.", [quit_line]).ok
    assert check(
        "Am I allergic to penicillin?", "Yes, you are allergic to penicillin.", [PENICILLIN]
    ).ok
    assert (
        check("Am I allergic to penicillin?", "No, you are not.", [PENICILLIN]).problem
        == "contradicts"
    )


def test_the_instruction_said_back_is_no_answer() -> None:
    """Seen on the second try: "Yes, the answer to the question is yes." The line is quoted."""
    quit_line = Evidence("I quit smoking two years ago.", T0)
    verdict = check("Did I quit smoking?", "Yes, the answer to the question is yes.", [quit_line])
    assert verdict.problem == "not drawn"
    assert verdict.fallback == 'Yes. You told me on 2023-11-14: "I quit smoking two years ago."'
