"""Openings an answer may not start with (llm/openings.py), on a made-up vocabulary."""

from __future__ import annotations

from agenvoy_desktop.llm.openings import OpeningBan, Vocabulary

PIECES = [
    b"",  # 0: a control token
    b"I",  # 1
    b"'m",  # 2
    b" sorry",  # 3
    b",",  # 4
    b" to",  # 5
    b" hear",  # 6
    b"I'm",  # 7
    "抱".encode()[:2],  # 8: the first two bytes of 抱
    "抱".encode()[2:] + "歉".encode(),  # 9: its last byte and 歉
    "，".encode(),  # 10
]


def vocabulary() -> Vocabulary:
    return Vocabulary(PIECES)


def ban(*phrases: str) -> OpeningBan:
    made = OpeningBan.of(vocabulary(), phrases)
    assert made is not None
    return made


def banned(opening: OpeningBan) -> list[int] | None:
    ids = opening.banned()
    return None if ids is None else sorted(ids.tolist())


def test_tokens_are_found_by_the_start_of_their_text() -> None:
    assert sorted(vocabulary().starting_with(b"I").tolist()) == [1, 7]
    assert vocabulary().starting_with(b"I'm").tolist() == [7]
    assert vocabulary().starting_with(b"x").tolist() == []
    high = Vocabulary([b"\xff", b"\xff\xfe", b"\xfe\xff", b"a"])
    assert sorted(high.starting_with(b"\xff").tolist()) == [0, 1]
    assert high.starting_with(b"\xfe").tolist() == [2]


def test_the_token_that_would_complete_the_phrase_is_banned_and_sympathy_stays_open() -> None:
    opening = ban("I'm sorry,")
    assert banned(opening) == []  # "I" and "I'm" only start it
    for token in (7, 3):  # "I'm", " sorry"
        opening.chose(PIECES[token])
    assert banned(opening) == [4]  # the comma; " to" stays allowed
    opening.chose(PIECES[5])
    assert banned(opening) is None  # "I'm sorry to" can no longer become a banned phrase


def test_a_phrase_split_inside_a_character() -> None:
    opening = ban("抱歉，")
    opening.chose(PIECES[8])
    assert banned(opening) == []
    opening.chose(PIECES[9])
    assert banned(opening) == [10]


def test_a_leading_line_break_does_not_hide_the_opening() -> None:
    opening = ban("I'm sorry,")
    for piece in (b"\n", PIECES[7], PIECES[3]):
        opening.chose(piece)
    assert banned(opening) == [4]


def test_no_phrases_no_ban() -> None:
    assert OpeningBan.of(vocabulary(), ()) is None
