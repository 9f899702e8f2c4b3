"""The summary's facts: which sentences are kept, how a change replaces, what is let go."""

from __future__ import annotations

from datetime import datetime

from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.summary import Summary, load_summary, render_for_prompt, save_summary
from agenvoy_desktop.core.summary_facts import (
    MAX_FACTS,
    Fact,
    judge,
    merge_facts,
    pick_facts,
    render_facts,
)

NOON = int(datetime(2023, 5, 8, 12, 0).astimezone().timestamp() * 1e9)


def said(text: str, role: str = "user", mid: str = "m1") -> Message:
    return Message(id=mid, role=role, content=text, time_ns=NOON)


def test_names_numbers_dates_and_choices_are_kept_questions_and_greetings_are_not() -> None:
    picked = pick_facts(
        [
            said(
                "Hi there! Thanks so much. We booked the Hotel Granvia for 3 nights. "
                "Which day suits you best?",
                mid="a",
            ),
            said("Sounds great, have fun!", role="assistant", mid="b"),
        ]
    )
    assert [f.text for f in picked.facts] == ["We booked the Hotel Granvia for 3 nights."]
    assert picked.facts[0].source == "a"
    assert picked.facts[0].said_on == "2023-05-08"
    assert [d.reason for d in picked.left_out] == []  # the question names nothing
    assert judge("Which day suits you best?")[1] == "a question"
    assert judge("Sounds great, have fun!")[1] == "a greeting or remark"


def test_a_question_with_a_name_is_let_go_with_its_reason() -> None:
    picked = pick_facts([said("Have you ever been to Lisbon?")])
    assert picked.facts == []
    assert [(d.text, d.reason) for d in picked.left_out] == [
        ("Have you ever been to Lisbon?", "a question")
    ]


def test_relative_days_get_their_date_and_a_speaker_prefix_stays() -> None:
    picked = pick_facts(
        [said("Caroline: I went to an LGBTQ support group yesterday. It was 5 pm.")]
    )
    assert picked.facts[0].text == (
        "Caroline: I went to an LGBTQ support group yesterday (7 May 2023)."
    )
    assert all(f.text.startswith("Caroline: ") for f in picked.facts)


def test_a_long_message_gives_at_most_three_facts_and_says_why_not_more() -> None:
    text = " ".join(f"I paid {n} euros for the Rome tickets in May." for n in range(10, 16))
    picked = pick_facts([said(text)])
    assert len(picked.facts) == 3
    assert len(picked.left_out) == 3
    assert "at most 3" in picked.left_out[0].reason


def fact(text: str, score: float = 5.0, source: str = "m") -> Fact:
    return Fact(text, source, "2023-05-08", "user", score)


def test_a_changed_fact_replaces_the_old_one_and_remembers_it() -> None:
    old = fact("We're moving to 12 Rose Street on 14 March.", source="m1")
    new = fact("We're moving to 5 Oak Lane on 14 March.", source="m9")
    facts, dropped = merge_facts([old], [new])
    assert [f.text for f in facts] == [new.text]
    assert facts[0].replaced == old.text
    assert dropped[0].text == old.text
    assert dropped[0].reason.startswith("changed:")


def test_a_fact_about_another_thing_is_no_change() -> None:
    facts, _ = merge_facts([fact("The bread costs 3 euros.")], [fact("The milk costs 5 euros.")])
    assert len(facts) == 2


def test_different_facts_and_word_for_word_repeats() -> None:
    a = fact("My cat Miso is 3 years old.")
    b = fact("The movers from Blue Wagon come at 9 am.")
    facts, dropped = merge_facts([a], [b, fact("My cat Miso is 3 years old.")])
    assert [f.text for f in facts] == [a.text, b.text]
    assert dropped == []


def test_over_the_budget_the_least_telling_oldest_facts_go() -> None:
    words = [f"{a}{b}" for a in "bcdfghjklm" for b in ("ara", "ero", "iko", "umo", "ella")]
    many = [fact(f"The {w} costs 5 euros.", score=3.0 + (n % 2)) for n, w in enumerate(words)]
    many = many[: MAX_FACTS + 5]
    facts, dropped = merge_facts([], many)
    assert len(facts) == MAX_FACTS
    assert len(dropped) == 5
    assert all(d.text in {f.text for f in many if f.score == 3.0} for d in dropped)
    assert "still in the archive" in dropped[0].reason


def test_facts_are_saved_loaded_and_reach_the_prompt(tmp_path) -> None:  # type: ignore[no-untyped-def]
    summary = Summary(
        current_discussion="Moving house.", facts=(fact("The deposit is 1,200 euros."),)
    )
    save_summary(tmp_path, summary)
    assert load_summary(tmp_path) == summary
    prompt = render_for_prompt(summary)
    assert "- 8 May 2023, you: The deposit is 1,200 euros." in prompt
    assert prompt.index("The deposit") < prompt.index("Current discussion")
    assert render_facts([]) == ""


def test_chinese_and_german_sentences_with_numbers_are_kept() -> None:
    picked = pick_facts(
        [said("我的猫叫小白，今年3岁了。"), said("Wir ziehen am 14. März nach Berlin.")]
    )
    assert len(picked.facts) == 2


def test_a_title_or_an_initial_does_not_end_the_sentence() -> None:
    picked = pick_facts(
        [said("My new dentist is called Dr. Okafor, her practice is near the station.")]
    )
    assert [f.text for f in picked.facts] == [
        "My new dentist is called Dr. Okafor, her practice is near the station."
    ]


def test_an_answer_that_says_the_users_fact_back_is_not_kept_twice() -> None:
    user = fact("I booked Blue Wagon Movers, they quoted 640 euros.", source="u")
    echo = Fact("Blue Wagon Movers at 640 euros.", "a", "2023-05-08", "assistant", 5.0)
    more = Fact("So the movers come to 730 euros in all.", "b", "2023-05-08", "assistant", 5.0)
    facts, dropped = merge_facts([], [user, echo, more])
    assert [f.source for f in facts] == ["u", "b"]
    assert dropped[0].reason.startswith("says again what was just said")


def test_an_answers_first_word_does_not_make_the_news_after_it_a_remark() -> None:
    assert judge("Yeah, I have been volunteering at the animal shelter and loving it.")[1] is None
    assert judge("Oh, we finally got married after all those years!")[1] is None
    assert judge("Yeah, totally!")[1] is not None
    wow = "Wow, that looks like such a beautiful painting with amazing colours!"
    assert judge(wow)[1] == "a greeting or remark"


def test_a_life_event_counts_but_praise_of_the_listeners_project_does_not() -> None:
    assert judge("I took a pottery class with my neighbour.")[1] is None
    assert judge("I went to a pottery place with my neighbour.")[1] is not None  # no event
    assert judge("Your project is going to be great for them!")[1] is not None
    assert judge("我们结婚了，很开心。")[1] is None
    assert judge("我们见面了，很开心。")[1] is not None
