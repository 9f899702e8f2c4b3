"""Date arithmetic over remembered lines (agent/date_reasoning/).

Timestamps are made from local wall-clock times, the way the module reads
them back, so the tests pass in any time zone (one test checks that).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import date, datetime

import pytest

from agenvoy_desktop.agent.date_reasoning import (
    DatedMention,
    TemporalQuestion,
    Unit,
    age_phrase,
    ago,
    best_mention,
    day_range,
    difference,
    event_dates,
    explain,
    local_date,
    mentions,
    parse_temporal_question,
    to_second_person,
    when_it_happened,
)
from agenvoy_desktop.language import LanguageDataError, language
from agenvoy_desktop.language.catalog import parse


def said_at(year: int, month: int, day: int, hour: int = 12) -> int:
    """UTC ns of a local wall-clock time (noon: clear of midnight and DST changes)."""
    return int(datetime(year, month, day, hour).timestamp() * 1_000_000_000)


WEDNESDAY = said_at(2023, 4, 19)
"""Wednesday, 2023-04-19: the day every line below was said."""
TODAY = date(2023, 4, 19)


# --- questions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "kind", "unit", "events"),
    [
        (
            "How many days ago did I harvest my first batch of fresh herbs?",
            "ago",
            "days",
            ("harvest my first batch of fresh herbs",),
        ),
        (
            "How many months ago did I attend the Seattle International Film Festival?",
            "ago",
            "months",
            ("attend the Seattle International Film Festival",),
        ),
        ("How long ago did I start yoga?", "ago", None, ("start yoga",)),
        ("How many months ago was my trip to Japan?", "ago", "months", ("my trip to Japan",)),
        ("How long ago was I in Paris?", "ago", None, ("was in Paris",)),
        ("How long has it been since I moved to Berlin?", "ago", None, ("moved to Berlin",)),
        ("How many weeks since I last saw my dentist?", "ago", "weeks", ("last saw my dentist",)),
        (
            "Can you tell me how many days ago I bought the blue vase?",
            "ago",
            "days",
            ("bought the blue vase",),
        ),
        (
            "How many days passed between the day I attended the gardening workshop and the day "
            "I planted the tomato saplings?",
            "between",
            "days",
            ("attended the gardening workshop", "planted the tomato saplings"),
        ),
        (
            "How many weeks passed between the time I sold baked goods at the Farmers' Market "
            "and the time I participated in the Spring Fling Market?",
            "between",
            "weeks",
            ("sold baked goods at the Farmers' Market", "participated in the Spring Fling Market"),
        ),
        (
            "How long was it between my visit to the MoMA and the Ancient Civilizations exhibit?",
            "between",
            None,
            ("my visit to the MoMA", "the Ancient Civilizations exhibit"),
        ),
        (
            "How many days passed between the day I bought bread and butter and the day I baked?",
            "between",
            "days",
            ("bought bread and butter", "baked"),
        ),
        (
            "How many days did it take me to finish 'The Nightingale'?",
            "between",
            "days",
            ("start 'The Nightingale'", "finish 'The Nightingale'"),
        ),
        (
            "How many weeks did it take me to knit the scarf?",
            "between",
            "weeks",
            ("start knitting the scarf", "finish knitting the scarf"),
        ),
        (
            "How many days did it take for me to receive the new remote shutter release after "
            "I ordered it?",
            "between",
            "days",
            ("ordered it", "receive the new remote shutter release"),
        ),
        (
            "How many days had passed since I bought my iPad when I attended the tech conference?",
            "between",
            "days",
            ("bought my iPad", "attended the tech conference"),
        ),
        (
            "How many days before my best friend's birthday party did I order her gift?",
            "between",
            "days",
            ("my best friend's birthday party", "order her gift"),
        ),
        (
            "Which event happened first, my attendance at a cultural festival or the start of "
            "my Spanish classes?",
            "first",
            None,
            ("my attendance at a cultural festival", "the start of my Spanish classes"),
        ),
        (
            "Which item did I purchase first, the dog bed for Max or the training pads for Luna?",
            "first",
            None,
            ("the dog bed for Max", "the training pads for Luna"),
        ),
        (
            "Which group did I join first, 'Page Turners' or 'Marketing Professionals'?",
            "first",
            None,
            ("'Page Turners'", "'Marketing Professionals'"),
        ),
        (
            "Who became a parent first, Tom or Alex?",
            "first",
            None,
            ("Tom became a parent", "Alex became a parent"),
        ),
        (
            "Did I buy the blender or the toaster first?",
            "first",
            None,
            ("the blender", "the toaster"),
        ),
        (
            "Between the concert and the museum trip, which did I do first?",
            "first",
            None,
            ("the concert", "the museum trip"),
        ),
        (
            "Which did I visit first: the Louvre, the Prado, or the Uffizi?",
            "first",
            None,
            ("the Louvre", "the Prado", "the Uffizi"),
        ),
        ("When did I last see my dentist?", "when", None, ("last see my dentist",)),
        (
            "When was the last time I went to the climbing gym?",
            "when",
            None,
            ("went to the climbing gym",),
        ),
        ("Do you remember when I adopted Luna?", "when", None, ("adopted Luna",)),
        (
            "What did I do with Rachel on the Wednesday two months ago?",
            "on_day",
            None,
            ("do with Rachel",),
        ),
        ("What did I buy last Saturday?", "on_day", None, ("buy",)),
        (
            "How many different museums or galleries did I visit in December?",
            "on_day",
            None,
            ("visit different museums or galleries",),
        ),
        (
            "How many days did I spend hiking in April?",
            "on_day",
            None,
            ("spend hiking",),
        ),
        ("Where was I yesterday?", "on_day", None, ()),
    ],
)
def test_temporal_questions_are_recognised(
    question: str, kind: str, unit: str | None, events: tuple[str, ...]
) -> None:
    parsed = _parsed(question)
    assert (parsed.kind, parsed.unit, parsed.events) == (kind, unit, events)


@pytest.mark.parametrize(
    "question",
    [
        "What is my dog's name?",
        "How many bikes do I own?",
        "How long is my commute?",
        "How long was my trip to Japan?",
        "How many days a week do I go to the gym?",
        "How many days did I spend in Paris?",
        "How long did I stay in Rome?",
        "How long did it take me to drive to work?",
        "How long have I been vegetarian?",
        "When is my mom's birthday?",
        "How many weeks until my wedding?",
        "What time is it?",
        "Who won first place, Tom or Alex?",
        "Which should I read first, Dune or Emma?",
        "Which do I need first, the drill or the saw?",
        "What did I do with Rachel?",
        "What am I doing next week?",
        "What did I plan for tomorrow?",
        "How long between trains at my station?",
        "What's the date today?",
        "How old is my cat?",
        "",
    ],
)
def test_other_questions_are_not_temporal(question: str) -> None:
    assert parse_temporal_question(question) is None


def _parsed(question: str) -> TemporalQuestion:
    parsed = parse_temporal_question(question)
    assert parsed is not None, question
    return parsed


def test_which_first_keeps_the_shared_verb() -> None:
    assert _parsed("Which item did I purchase first, the bed or the pads?").action == "purchase"
    assert _parsed("Who became a parent first, Tom or Alex?").action == "became a parent"
    met = _parsed("Who did I meet first, Sarah or John?")
    assert (met.action, met.events) == ("meet", ("Sarah", "John"))
    assert _parsed("Which happened first, the trip or the move?").action is None


def test_an_on_day_question_points_at_a_day_or_a_span() -> None:
    rachel = _parsed("What did I do with Rachel on the Wednesday two months ago?")
    weekend = _parsed("Where did I go last weekend?")
    assert rachel.anchor == "the Wednesday two months ago"
    # two months before 2023-04-19 is 2023-02-19, a Sunday; the nearest Wednesday is the 22nd
    assert day_range(rachel, TODAY) == (date(2023, 2, 22), date(2023, 2, 22))
    assert day_range(weekend, TODAY) == (date(2023, 4, 15), date(2023, 4, 16))


def test_only_on_day_questions_have_a_day_range() -> None:
    assert day_range(_parsed("How long ago did I start yoga?"), TODAY) is None


# --- dates in what was said -------------------------------------------------------------


def _dates(text: str) -> list[tuple[str, str, str]]:
    return [(m.phrase, m.date.isoformat(), m.precision) for m in event_dates(text, WEDNESDAY)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I finally went there today.", [("today", "2023-04-19", "day")]),
        ("This morning I ran 5k.", [("This morning", "2023-04-19", "day")]),
        ("Tonight we cook.", [("Tonight", "2023-04-19", "day")]),
        ("Yesterday I planted the tomatoes.", [("Yesterday", "2023-04-18", "day")]),
        ("I slept badly last night.", [("last night", "2023-04-18", "day")]),
        (
            "We hiked the day before yesterday.",
            [("the day before yesterday", "2023-04-17", "day")],
        ),
        ("Last week I started yoga.", [("Last week", "2023-04-12", "week")]),
        ("Last weekend was fun.", [("Last weekend", "2023-04-15", "week")]),
        ("I met Tom last Friday.", [("last Friday", "2023-04-14", "day")]),
        ("This past Sunday I rested.", [("This past Sunday", "2023-04-16", "day")]),
        ("On Monday I bought a bed.", [("On Monday", "2023-04-17", "day")]),
        # said on a Wednesday, "on Wednesday" is the one a week before
        ("On Wednesday I bought a bed.", [("On Wednesday", "2023-04-12", "day")]),
        ("the Friday before last", [("the Friday before last", "2023-04-07", "day")]),
        ("I got it 3 days ago.", [("3 days ago", "2023-04-16", "day")]),
        ("I moved two weeks ago.", [("two weeks ago", "2023-04-05", "week")]),
        ("a week ago", [("a week ago", "2023-04-12", "week")]),
        ("a couple of days ago", [("a couple of days ago", "2023-04-17", "day")]),
        ("a few days ago", [("a few days ago", "2023-04-16", "week")]),
        ("six months ago", [("six months ago", "2022-10-19", "month")]),
        ("I started yoga 2 years ago.", [("2 years ago", "2021-04-19", "year")]),
        (
            "I've been taking Spanish classes for the past three months.",
            [("for the past three months", "2023-01-19", "month")],
        ),
        ("last month", [("last month", "2023-03-19", "month")]),
        ("last year", [("last year", "2022-04-19", "year")]),
        ("earlier this month", [("earlier this month", "2023-04-10", "month")]),
        ("It was on May 3rd.", [("May 3rd", "2022-05-03", "day")]),
        ("It was on April 3.", [("April 3", "2023-04-03", "day")]),
        ("We met on 3 May.", [("3 May", "2022-05-03", "day")]),
        ("the 3rd of May, 2021", [("the 3rd of May, 2021", "2021-05-03", "day")]),
        ("Sept. 12", [("Sept. 12", "2022-09-12", "day")]),
        ("I paid on the 14th.", [("on the 14th", "2023-04-14", "day")]),
        ("I paid on the 24th.", [("on the 24th", "2023-03-24", "day")]),
        ("2023-05-02 was great", [("2023-05-02", "2023-05-02", "day")]),
        ("5/3/2023", [("5/3/2023", "2023-05-03", "day")]),
        ("on 5/23", [("on 5/23", "2022-05-23", "day")]),
        ("in March 2021", [("March 2021", "2021-03-15", "month")]),
        ("back in 2019", [("in 2019", "2019-07-01", "year")]),
        (
            "Yesterday I planted the tomatoes, and last month I went to the workshop.",
            [("Yesterday", "2023-04-18", "day"), ("last month", "2023-03-19", "month")],
        ),
    ],
)
def test_date_phrases_resolve_against_the_day_said(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    assert _dates(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'll see her tomorrow.", [("tomorrow", "2023-04-20", "day")]),
        ("The dentist is next Friday.", [("next Friday", "2023-04-21", "day")]),
        ("next week", [("next week", "2023-04-26", "week")]),
        ("I'll go on Friday.", [("on Friday", "2023-04-21", "day")]),
        ("I will see her on May 30.", [("May 30", "2023-05-30", "day")]),
        ("I'm going to pay on the 2nd.", [("on the 2nd", "2023-05-02", "day")]),
    ],
)
def test_a_sentence_about_the_future_resolves_forward(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    assert _dates(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "on 5/3",  # May 3 or March 5
        "Add 1/2 cup of sugar.",
        "The shop is open 24/7.",
        "I live on the 2nd floor.",
        "It worked on the 3rd try.",
        "I met Jan 3 times.",
        "I may 2 things at once.",
        "Mondays are hard.",
        "I've done yoga for 3 years.",
        "What a week!",
    ],
)
def test_look_alikes_are_no_dates(text: str) -> None:
    assert event_dates(text, WEDNESDAY) == []


def test_a_mention_carries_its_span() -> None:
    (week,) = event_dates("last week", WEDNESDAY)
    (month,) = event_dates("last month", WEDNESDAY)
    assert (week.first, week.last) == (date(2023, 4, 10), date(2023, 4, 16))
    assert (month.first, month.last) == (date(2023, 3, 1), date(2023, 3, 31))


@pytest.fixture
def set_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Switch the process's local zone; the original comes back afterwards."""

    def switch(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield switch
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Pacific/Kiritimati"])
def test_the_local_day_does_not_depend_on_the_zone(
    set_zone: Callable[[str], None], zone: str
) -> None:
    set_zone(zone)
    late = said_at(2023, 4, 19, 23)
    assert local_date(late) == date(2023, 4, 19)
    assert when_it_happened("Yesterday I planted the tomatoes.", late) == date(2023, 4, 18)


def test_a_line_without_a_date_happened_the_day_it_was_said() -> None:
    assert when_it_happened("I planted the tomato saplings.", WEDNESDAY) == TODAY
    assert best_mention("I planted the tomato saplings.", WEDNESDAY).phrase == ""


def test_the_sharpest_mention_dates_a_line() -> None:
    text = "Last month I joined a club and yesterday I planted the tomatoes."
    assert when_it_happened(text, WEDNESDAY) == date(2023, 4, 18)


def test_the_mention_near_the_event_dates_it() -> None:
    text = "Last week I started yoga; today was class five."
    assert when_it_happened(text, WEDNESDAY) == TODAY
    assert when_it_happened(text, WEDNESDAY, event="start yoga") == date(2023, 4, 12)


# --- wording ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "unit", "said"),
    [
        (date(2023, 4, 15), date(2023, 4, 21), "days", "6 days"),
        (date(2023, 4, 21), date(2023, 4, 15), "days", "6 days"),
        (date(2023, 4, 20), date(2023, 4, 21), "days", "1 day"),
        (date(2023, 3, 1), date(2023, 3, 22), "weeks", "3 weeks"),
        (date(2023, 3, 1), date(2023, 3, 24), "weeks", "3 weeks (23 days)"),
        (date(2023, 3, 1), date(2023, 3, 27), "weeks", "4 weeks (26 days)"),
        (date(2023, 1, 19), date(2023, 4, 19), "months", "3 months"),
        (date(2022, 12, 15), date(2023, 4, 19), "months", "4 months (125 days)"),
        (date(2023, 1, 31), date(2023, 2, 28), "months", "1 month"),
        (date(2020, 4, 19), date(2023, 4, 19), "years", "3 years"),
        (date(2023, 4, 10), date(2023, 4, 19), None, "9 days"),
        (date(2023, 3, 1), date(2023, 3, 22), None, "3 weeks"),
    ],
)
def test_difference(a: date, b: date, unit: Unit | None, said: str) -> None:
    assert difference(a, b, unit) == said


@pytest.mark.parametrize(
    ("day", "unit", "said"),
    [
        (date(2023, 4, 19), None, "today"),
        (date(2023, 4, 18), "days", "yesterday"),
        (date(2023, 4, 15), "days", "4 days ago"),
        (date(2023, 2, 19), "months", "2 months ago"),
        (date(2023, 4, 22), None, "in 3 days"),
    ],
)
def test_ago(day: date, unit: Unit | None, said: str) -> None:
    assert ago(day, TODAY, unit) == said


@pytest.mark.parametrize(
    ("day", "said"),
    [
        (date(2023, 4, 19), "today"),
        (date(2023, 4, 18), "yesterday"),
        (date(2023, 4, 16), "3 days ago"),
        (date(2023, 4, 6), "13 days ago"),
        (date(2023, 4, 5), "2 weeks ago"),
        (date(2023, 2, 23), "7 weeks ago"),
        (date(2022, 12, 19), "4 months ago"),
        (date(2021, 4, 20), "23 months ago"),
        (date(2022, 4, 19), "12 months ago"),
        (date(2021, 4, 19), "2 years ago"),
        (date(2023, 4, 22), "today"),  # a clock that ran ahead
    ],
)
def test_age_phrase(day: date, said: str) -> None:
    assert age_phrase(day, TODAY) == said


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ("harvest my first batch of fresh herbs", "you harvested your first batch of fresh herbs"),
        ("last see my dentist", "you last saw your dentist"),
        ("attended the gardening workshop", "you attended the gardening workshop"),
        ("plan the trip", "you planned the trip"),
        ("try sushi", "you tried sushi"),
        ("buy a bike", "you bought a bike"),
        ("was in Paris", "you were in Paris"),
        ("my attendance at a cultural festival", "your attendance at a cultural festival"),
        ("the start of my Spanish classes", "the start of your Spanish classes"),
    ],
)
def test_events_are_said_back_in_the_second_person(event: str, said: str) -> None:
    assert to_second_person(event) == said


def _explain(question: str, *days: date | DatedMention) -> str:
    parsed = _parsed(question)
    return explain(parsed, list(zip(parsed.events, days, strict=False)), TODAY)


def test_explain_between() -> None:
    said = _explain(
        "How many days passed between the day I attended the gardening workshop and the day I "
        "planted the tomato saplings?",
        date(2023, 4, 15),
        date(2023, 4, 21),
    )
    assert said == (
        "You attended the gardening workshop on 2023-04-15 and planted the tomato saplings "
        "on 2023-04-21: 6 days apart."
    )


def test_explain_between_noun_phrases() -> None:
    said = _explain(
        "How many days before my best friend's birthday party did I order her gift?",
        date(2023, 3, 20),
        date(2023, 3, 17),
    )
    assert said == (
        "Your best friend's birthday party was on 2023-03-20 and you ordered her gift on "
        "2023-03-17: 3 days apart."
    )


def test_explain_first() -> None:
    said = _explain(
        "Which event happened first, my attendance at a cultural festival or the start of my "
        "Spanish classes?",
        date(2023, 4, 10),
        date(2023, 3, 2),
    )
    assert said == (
        "The start of your Spanish classes (2023-03-02) came before your attendance at a "
        "cultural festival (2023-04-10)."
    )


def test_explain_first_with_a_shared_verb() -> None:
    bought = _explain(
        "Which item did I purchase first, the dog bed for Max or the training pads for Luna?",
        date(2023, 4, 10),
        date(2023, 3, 2),
    )
    parent = _explain(
        "Who became a parent first, Tom or Alex?", date(2023, 4, 10), date(2023, 3, 2)
    )
    same = _explain(
        "Which group did I join first, 'Page Turners' or 'Marketing Professionals'?",
        date(2023, 4, 10),
        date(2023, 4, 10),
    )
    assert bought == (
        "You purchased the training pads for Luna first (2023-03-02), then the dog bed for Max "
        "(2023-04-10)."
    )
    assert parent == "Alex became a parent first (2023-03-02), then Tom (2023-04-10)."
    assert same == (
        "You joined 'Page Turners' and 'Marketing Professionals' on the same day (2023-04-10)."
    )


def test_explain_ago_and_when() -> None:
    herbs = _explain(
        "How many days ago did I harvest my first batch of fresh herbs?", date(2023, 4, 15)
    )
    dentist = _explain("When did I last see my dentist?", date(2023, 3, 2))
    assert herbs == "You harvested your first batch of fresh herbs on 2023-04-15, 4 days ago."
    assert dentist == "You last saw your dentist on 2023-03-02, 7 weeks (48 days) ago."


def test_explain_keeps_a_coarse_date_coarse() -> None:
    (in_2019,) = event_dates("We lived in Paris back in 2019.", WEDNESDAY)
    said = _explain("How long ago was I in Paris?", in_2019)
    assert said == "You were in Paris in 2019, about 4 years (1388 days) ago."


def test_explain_names_what_it_could_not_date() -> None:
    said = _explain(
        "How many weeks passed between the time I sold baked goods at the Farmers' Market and "
        "the time I participated in the Spring Fling Market?",
        date(2023, 3, 2),
    )
    assert said == (
        "You sold baked goods at the Farmers' Market on 2023-03-02. I found no date for "
        '"participated in the Spring Fling Market".'
    )


def test_explain_on_day() -> None:
    question = TemporalQuestion("on_day", None, ("do with Rachel",), anchor="last weekend")
    assert explain(question, [], TODAY) == "Last weekend was 2023-04-15 to 2023-04-16."
    rachel = _explain("What did I do with Rachel on the Wednesday two months ago?")
    assert rachel == "The Wednesday two months ago was Wednesday, 2023-02-22."


def _dates_file(count_words: str) -> str:
    return f'[language]\nname = "X"\nscript = "latin"\n[dates]\ncount_words = {count_words}\n'


def test_the_date_parser_takes_its_counts_from_every_language_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra = parse("xx", _dates_file('[["a dozen", "12"], ["two", "7"]]'))
    monkeypatch.setattr(mentions, "languages", lambda: (language("en"), extra))
    counts = mentions._count_words()
    assert (counts["a dozen"], counts["a couple of"]) == (12, 2)
    assert counts["two"] == 2  # the first language to list a word gives its number


def test_a_count_without_a_number_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = parse("xx", _dates_file('[["a dozen", "twelve"]]'))
    monkeypatch.setattr(mentions, "languages", lambda: (bad,))
    with pytest.raises(LanguageDataError, match=r"^language file xx\.toml: dates\.count_words "):
        mentions._count_words()
