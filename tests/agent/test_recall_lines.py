"""How a remembered message is shown: its sentences that matter, its date, the latest value."""

from __future__ import annotations

import pytest

from agenvoy_desktop.agent.recall_lines import (
    FOCUS_CHARS,
    clip_words,
    focus,
    latest_ids,
    values_in,
    when,
)
from tests.conftest import T0

pytestmark = pytest.mark.usefixtures("utc")

DAY = 86_400 * 1_000_000_000
LONG = (
    "I'm trying to figure out how to fit more reading time into my daily routine. "
    "Do you have any tips on how to prioritize reading when life gets busy? "
    "I have a demanding job and two kids, and evenings disappear in homework and dishes. "
    "By the way, I'm currently devouring \"The Seven Husbands of Evelyn Hugo\" and it's hard "
    "to put down! Anyway, any advice on audiobooks versus paper would also be welcome, since "
    "I commute by train for forty minutes every morning and every evening as well."
)


def test_a_short_message_is_shown_whole() -> None:
    assert focus("My bike lock code is 4721.", {"bike": 1.0}) == "My bike lock code is 4721."


def test_a_long_message_shows_the_sentences_with_the_words_in_their_order() -> None:
    shown = focus(LONG, {"currently": 2.0, "book": 1.0})
    assert len(shown) <= FOCUS_CHARS
    assert "The Seven Husbands of Evelyn Hugo" in shown
    assert shown.startswith("…")  # sentences before it were left out
    assert "Anyway" in shown  # the sentence after the words (the fact is often there)


def test_the_sentence_after_the_words_is_kept_when_it_fits() -> None:
    text = (
        "I've been using Zillow and HotPads, but I haven't tried the others. I'll check them "
        "out. By the way, it's crazy how long it took for my asylum application to get "
        "approved. Over a year of uncertainty was really tough. But at least it's behind me "
        "now, and I can focus on building my new life here, which is what matters most."
    )
    shown = focus(text, {"asylum": 3.0, "application": 1.0})
    assert "Over a year of uncertainty" in shown


def test_a_number_or_time_next_to_the_words_goes_before_a_request_with_them() -> None:
    text = (
        "I'm thinking of getting some more supplies for my puppy, Luna. She's still in "
        "potty-training, and I've been using those eco-friendly training pads from Chewy.com. "
        "I got a set of 10 for $25 about a month ago, and they've been a lifesaver. Do you "
        "have any recommendations for other potty-training aids or tips?"
    )
    shown = focus(text, {"train": 1.0, "pad": 1.0, "luna": 1.0, "purchas": 1.0})
    assert "about a month ago" in shown  # what dates the purchase
    assert "Do you have any recommendations" not in shown


def test_without_shared_words_the_opening_is_shown() -> None:
    shown = focus(LONG, {"penguin": 1.0})
    assert shown.startswith("I'm trying to figure out")
    assert len(shown) <= FOCUS_CHARS + 1


def test_clip_words_cuts_at_word_boundaries_around_a_place() -> None:
    text = " ".join(f"w{i}" for i in range(200))
    clipped = clip_words(text, 60, around=text.index("w100"))
    assert "w100" in clipped
    assert clipped.startswith("…")
    assert clipped.endswith("…")
    assert all(part.startswith("w") for part in clipped.strip("…").split())


def test_values_fold_number_words_and_ordinals() -> None:
    assert values_in("I just finished my 5th project") == frozenset({"5"})
    assert values_in("four restaurants, twice") == frozenset({"4", "2"})
    assert values_in("no numbers here") == frozenset()


def test_the_newer_of_two_lines_with_other_values_is_the_latest() -> None:
    terms = ["korean", "restaurant"]
    lines = [
        ("a", T0, "I've tried three Korean restaurants in my city so far."),
        ("b", T0 + 30 * DAY, "I've now tried four Korean restaurants in my city!"),
        ("c", T0 + 40 * DAY, "Korean food is great in winter."),
    ]
    assert latest_ids(lines, terms) == frozenset({"b"})
    same_value = [lines[0], ("d", T0 + DAY, "Three Korean restaurants so far, I said.")]
    assert latest_ids(same_value, terms) == frozenset()
    assert latest_ids(lines[:1], terms) == frozenset()
    # half the words either line holds is the same thing: the newer line says more
    terms = ["attend", "yoga", "class", "help", "anxiety"]
    yoga = [
        ("e", T0, "I've been doing yoga twice a week, which has been helping me."),
        ("f", T0 + 90 * DAY, "I attend yoga classes three times a week - it helps me."),
    ]
    assert latest_ids(yoga, terms) == frozenset({"f"})


def test_when_says_the_day_and_how_long_ago() -> None:
    assert when(T0, None) == "On 2023-11-14"
    assert when(T0, T0 + 3 * DAY) == "On 2023-11-14 (3 days ago)"
    assert when(T0, T0 + 60 * DAY, latest=True) == "On 2023-11-14 (1 month ago, the latest)"


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("We went three times, the third time alone.", {"3"}),
        ("Ich gehe dreimal pro Woche ins Training.", {"3"}),
        ("J'ai lu douze livres, le troisième deux fois.", {"12", "3", "2"}),
        ("Ein Kaffee und eine Brezel.", set()),  # articles, not counts
        ("Our flight is on Sept 5.", {"5"}),  # "sept" is no French seven here
    ],
)
def test_number_words_come_from_every_language_file(text: str, values: set[str]) -> None:
    assert values_in(text) == frozenset(values)
