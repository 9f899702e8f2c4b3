"""The retrieval toolkit: term planning, widening fetches, rank fusion, clipping."""

from __future__ import annotations

from agenvoy_desktop.core.retrieval.clip import clip_end, clip_line, keep_ends
from agenvoy_desktop.core.retrieval.fusion import rrf_scores
from agenvoy_desktop.core.retrieval.planner import count_cap, plan_match
from agenvoy_desktop.core.retrieval.widen import fetch_enough

COUNTS = {'"rare"': 2, '"common"': 40, '"frequent"': 60, '"everywhere"': 900}


def counts(expr: str, cap: int) -> int:
    return min(COUNTS.get(expr, 0), cap)


def test_plan_takes_rarest_terms_within_the_budget() -> None:
    plan = plan_match("frequent common rare", counts, budget=50)
    assert plan is not None
    assert (plan.expr, plan.postings) == ('"rare" OR "common"', 42)


def test_plan_always_takes_the_rarest_term_and_drops_absent_ones() -> None:
    plan = plan_match("everywhere absent", counts, budget=10)
    assert plan is not None
    assert (plan.expr, plan.postings) == ('"everywhere"', 21)  # counted up to the cap
    assert plan_match("absent", counts, budget=10) is None


def test_plan_drops_stopwords_unless_nothing_else_is_left() -> None:
    asked: list[str] = []

    def recording(expr: str, cap: int) -> int:
        asked.append(expr)
        return 1

    plan_match("what is the rare one", recording, budget=50)
    assert '"the"' not in asked
    asked.clear()
    assert plan_match("the", recording, budget=50) is not None
    assert asked == ['"the"']


def test_counting_stops_at_twice_the_budget() -> None:
    caps: list[int] = []
    plan_match("rare", lambda expr, cap: caps.append(cap) or 1, budget=100)
    assert caps == [count_cap(100)] == [201]


def test_fetch_widens_until_enough_survive_or_nothing_is_left() -> None:
    fetches: list[int] = []

    def page(fetch: int) -> tuple[list[int], bool]:
        fetches.append(fetch)
        survivors = [i for i in range(min(fetch, 100)) if i % 10 == 0]
        return survivors, fetch >= 100

    assert fetch_enough(page, 3, 5) == [0, 10, 20]
    assert fetches == [5, 40]
    fetches.clear()
    assert fetch_enough(page, 50, 5) == list(range(0, 100, 10))
    assert fetches == [5, 40, 320]


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    scores = rrf_scores([[1, 2], [2, 3]], (0.5, 1.0), k=1)
    assert scores == {1: 0.5 / 2, 2: 0.5 / 3 + 1.0 / 2, 3: 1.0 / 3}
    assert list(rrf_scores([["a"], ["b"]], None, k=3)) == ["a", "b"]  # first seen first


def test_clipping_marks_the_cut() -> None:
    assert clip_end("short", 10) == "short"
    assert clip_end("abcdefghij", 5) == "abcd…"
    assert clip_line(" a\n  b\tc ", 10) == "a b c"
    assert keep_ends("0123456789", 4, "~") == "01~89"
    assert keep_ends("0123", 4, "~") == "0123"
