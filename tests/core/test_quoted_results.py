"""A stored search result loses the lines of a deleted message: by id, or by text when it
lists no ids (stored before results did)."""

from __future__ import annotations

import json

from agenvoy_desktop.core.quoted_results import (
    DELETED_RESULT,
    QUOTED_KEY,
    WITHDRAWN_KEY,
    Gone,
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
    assert withdrawn_result(RESULT, extra, Gone({"zz"})) is None
    changed = withdrawn_result(RESULT, extra, Gone({"m3"}, ["the keeper is Marguerite"]))
    assert changed is not None
    text, new = changed
    assert "Marguerite" not in text
    assert new[QUOTED_KEY] == ["m1", "m2"]
    assert new[WITHDRAWN_KEY] == 1
    assert (
        withdrawn_result(text, new, Gone({"m3"})) is None
    )  # a rerun after a crash changes nothing


def test_a_result_listing_ids_is_matched_by_them_never_by_text() -> None:
    extra = {"name": "search_chat_history", QUOTED_KEY: ["m1", "m2", "m3"]}
    assert withdrawn_result(RESULT, extra, Gone({"zz"}, ["code 4721"])) is None


# -- results stored before results listed ids: matched by text -----------------------------
LEGACY = {"name": "search_chat_history", "arguments": {"query": "code"}}
"""A stored search result's extra from before the ``quoted`` field."""


def test_a_result_without_ids_loses_the_lines_showing_a_gone_text() -> None:
    changed = withdrawn_result(RESULT, LEGACY, Gone({"m1"}, ["code 4721"]))
    assert changed is not None
    text, extra = changed
    assert "4721" not in text
    assert '"noted"' in text
    assert "Marguerite" in text
    assert text.endswith("matched nothing.)")
    assert extra[WITHDRAWN_KEY] == 1
    assert QUOTED_KEY not in extra
    assert withdrawn_result(text, extra, Gone({"m1"}, ["code 4721"])) is None  # a rerun


def test_a_text_only_part_of_a_line_says_is_no_match() -> None:
    gone = Gone({"x"}, ["code", "code 4721 and more", "noted."])
    assert withdrawn_result(RESULT, LEGACY, gone) is None


def test_without_ids_an_emptied_excerpt_loses_its_header_and_an_emptied_result_goes() -> None:
    two = Gone({"m1", "m2"}, ["code 4721", "noted"])
    changed = withdrawn_result(RESULT, LEGACY, two)
    assert changed is not None
    assert changed[0].startswith("From session b:")
    every = Gone({"m1", "m2", "m3"}, ["code 4721", "noted", "the keeper is Marguerite"])
    assert withdrawn_result(RESULT, LEGACY, every) == (
        DELETED_RESULT,
        {**LEGACY, WITHDRAWN_KEY: 3},
    )


def _clipped(content: str, limit: int) -> str:
    """*content* as the tool registry clips a result (``agent/tools.py``)."""
    return content[:limit] + f"\n[… {len(content) - limit} more characters not shown]"


def test_a_line_cut_by_the_result_limit_goes_when_a_gone_text_starts_with_it() -> None:
    said = 'The code is "4721"\nand the tandem\'s is 9913, ' + "la " * 50
    line = f"- 2026-01-01 10:01, the user said: {json.dumps(said, ensure_ascii=False)} (match)"
    full = f'From session a:\n- 2026-01-01 10:00, the user said: "hello"\n{line}'
    for cut in (
        full.index("4721") - 1,
        full.index("4721"),
        full.index("\\n") + 1,
        full.index("9913") + 2,
        len(full) - 3,
    ):
        clipped = _clipped(full, cut)  # in an escape, after one, in the text, in " (match)"
        changed = withdrawn_result(clipped, LEGACY, Gone({"m2"}, [said]))
        assert changed is not None, clipped
        text = changed[0]
        assert "The code" not in text
        assert '"hello"' in text
        assert "more characters not shown]" in text
    other = Gone({"m9"}, ["The code is something else"])
    assert withdrawn_result(_clipped(full, full.index("4721")), LEGACY, other) is None


def test_a_line_cut_before_its_text_shows_none_and_stays() -> None:
    full = 'From session a:\n- 2026-01-01 10:00, the user said: "hello"\n- 2026-01-01 10:01, the'
    changed = withdrawn_result(_clipped(full, len(full)), LEGACY, Gone({"m2"}, ["hello"]))
    assert changed is not None
    assert changed[0] == "From session a:\n- 2026-01-01 10:01, the\n[… 0 more characters not shown]"
    assert withdrawn_result(_clipped(full, len(full)), LEGACY, Gone({"m2"}, ["bye"])) is None


def test_a_kept_message_saying_what_a_gone_one_said_loses_its_line_too() -> None:
    """Text cannot tell two messages apart: the line goes (the safe side)."""
    changed = withdrawn_result(RESULT, LEGACY, Gone({"elsewhere"}, ["noted"]))
    assert changed is not None
    assert '"noted"' not in changed[0]


def test_blank_texts_and_other_tools_match_nothing() -> None:
    blank = 'From session a:\n- 2026-01-01 10:00, you answered: ""'
    assert withdrawn_result(blank, LEGACY, Gone({"m1"}, ["", "  \n"])) is None
    assert not Gone({"m1"}, [" "]).has_texts
    read = {"name": "read_file", "arguments": {"path": "notes.md"}}
    assert withdrawn_result(RESULT, read, Gone({"m1"}, ["code 4721"])) is None


def test_a_stored_result_naming_no_gone_id_is_not_read() -> None:
    for gone in (Gone({"m1"}, ["code 4721"]), Gone({"m1", *(f"x{i}" for i in range(500))})):
        assert gone.may_quote(json.dumps({"name": "search_chat_history", QUOTED_KEY: ["m1"]}))
        assert not gone.may_quote(json.dumps({"name": "search_chat_history", QUOTED_KEY: ["m2"]}))
        assert gone.may_quote(json.dumps(LEGACY))  # no ids: only its text can tell
