"""A stored search result loses the lines of a deleted message, matched by id, never by text."""

from __future__ import annotations

from agenvoy_desktop.core.quoted_results import (
    DELETED_RESULT,
    QUOTED_KEY,
    WITHDRAWN_KEY,
    withdrawn_result,
    without_quoted,
)

RESULT = (
    'From session a:\n- 2026-01-01 10:00, the user said: "code 4721" (match)\n'
    '- 2026-01-01 10:01, you answered: "noted"\n\n'
    'From session b:\n- 2026-01-02 09:00, the user said: "the keeper is Marguerite" (match)'
    "\n(Found by searching all sessions at any time; the filters given matched nothing.)"
)


def test_the_gone_line_goes_and_its_neighbours_stay() -> None:
    text = without_quoted(RESULT, ["m1", "m2", "m3"], {"m1"})
    assert "4721" not in text
    assert '"noted"' in text
    assert "Marguerite" in text
    assert text.endswith("matched nothing.)")


def test_an_excerpt_with_no_line_left_loses_its_header() -> None:
    text = without_quoted(RESULT, ["m1", "m2", "m3"], {"m1", "m2"})
    assert "From session a" not in text
    assert text.startswith("From session b:")


def test_nothing_left_or_lines_that_cannot_be_matched_go_whole() -> None:
    assert without_quoted(RESULT, ["m1", "m2", "m3"], {"m1", "m2", "m3"}) == DELETED_RESULT
    assert without_quoted(RESULT, ["m1", "m2"], {"m2"}) == DELETED_RESULT  # 3 lines, 2 ids


def test_a_clipped_result_shows_fewer_lines_than_it_has_ids() -> None:
    clipped = RESULT[:120] + "\n[… 200 more characters not shown]"
    text = without_quoted(clipped, ["m1", "m2", "m3"], {"m3"})
    assert text == clipped


def test_withdrawn_counts_and_forgets_the_gone_ids() -> None:
    extra = {"name": "search_chat_history", QUOTED_KEY: ["m1", "m2", "m3"]}
    assert withdrawn_result(RESULT, extra, {"zz"}) is None
    changed = withdrawn_result(RESULT, extra, {"m3"})
    assert changed is not None
    text, new = changed
    assert "Marguerite" not in text
    assert new[QUOTED_KEY] == ["m1", "m2"]
    assert new[WITHDRAWN_KEY] == 1
    assert withdrawn_result(text, new, {"m3"}) is None  # a rerun after a crash changes nothing


def test_a_result_without_ids_keeps_its_text() -> None:
    assert withdrawn_result(RESULT, {"name": "search_chat_history"}, {"m1"}) is None
