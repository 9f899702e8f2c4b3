"""The answer check: what memory showed the model against what it answered."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.answer_check import (
    Evidence,
    answer_polarity,
    asks_yes_no,
    check,
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
    verdict = check("How many days between them?", '{"name": "date_calc", "arguments": {}}', [])
    assert verdict.problem == "tool call"


def test_quoted_names_who_said_it() -> None:
    said = Evidence("Try MusicTheory.net for free lessons.", T0, role="assistant")
    assert quoted("Which site did you recommend?", said).startswith("I told you on 2023-11-14:")
    doc = Evidence("Front tyres: 3.2 bar.", role="document", source="van.md:3-4")
    assert (
        quoted("What tyre pressure?", doc)
        == 'Your document [van.md:3-4] says: "Front tyres: 3.2 bar."'
    )
    assert quoted("Wo wohne ich?", Evidence("Ich wohne in Graz.", T0)).startswith("Du hast mir am")


def test_a_refusal_under_a_line_is_caught_but_not_a_refused_advice() -> None:
    line = Evidence("I started taking ukulele lessons with my friend Rachel today.", T0)
    question = "What did I do with Rachel on the Wednesday two months ago?"
    refused = check(question, "I'm sorry, but I can't assist with that.", [line])
    assert refused.problem == "not drawn"
    assert "ukulele" in refused.fallback
    advice = "Any tips for my ukulele lessons with Rachel?"
    assert check(advice, "I'm sorry, but I can't assist with that.", [line]).ok


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
