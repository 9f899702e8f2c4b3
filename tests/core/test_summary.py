"""The summary's data model, schema, validation, files and prompt text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.decision_cues import states_decision
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import (
    ANSWER_CURRENT_CHARS,
    ANSWER_DECISION_CHARS,
    ANSWER_DECISIONS,
    ANSWER_DESCRIPTION_CHARS,
    ANSWER_DISCUSSIONS,
    ANSWER_TOPIC_CHARS,
    CURRENT_CHARS,
    DECISION_CHARS,
    LOG_FILE,
    MAX_DECISIONS,
    SUMMARY_FILE,
    SUMMARY_SCHEMA,
    SUMMARY_VERSION,
    KeyDecision,
    PassRecord,
    PastDiscussion,
    Source,
    Summary,
    SummaryFileError,
    SummaryFormatError,
    SummaryMeta,
    answer_char_bound,
    append_record,
    build_prompt,
    cut_at_word,
    cut_middle,
    load_meta,
    load_summary,
    message_text,
    one_per_topic,
    parse_summary,
    prompt_text,
    read_records,
    render_for_prompt,
    repeated_sentences,
    save_meta,
    save_summary,
    summary_schema,
    terms,
    trace_decisions,
    transcript_line,
    validate_summary,
    without_cut_words,
    without_repeats,
)
from agenvoy_desktop.core.timeutil import format_local
from tests.conftest import T0, msg

SAMPLE = Summary(
    key_decisions=(
        KeyDecision("Use PostgreSQL 16 for the main database", "2024-05-01", source="m-pg"),
        KeyDecision("Ship on Fridays only", by_user=True),
        KeyDecision("Haruka Express", "2024-05-02"),  # from a version-1 file: no source
    ),
    past_discussions=(
        PastDiscussion("Hotel", "Compared three hotels near the station.", "2024-05-02"),
    ),
    current_discussion="Planning the data migration.",
)


def _valid() -> dict[str, Any]:
    return SAMPLE.to_json()


def test_round_trip() -> None:
    data = _valid()
    assert data["key_decisions"][1] == {"decision": "Ship on Fridays only", "by_user": True}
    assert data["key_decisions"][2] == {"decision": "Haruka Express", "decided_at": "2024-05-02"}
    assert Summary.from_json(json.loads(json.dumps(data))) == SAMPLE
    assert validate_summary(SAMPLE) is not SAMPLE
    assert Summary().is_empty
    assert not SAMPLE.is_empty
    assert Summary(current_discussion="  ").is_empty


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("current_discussion"), "summary: missing current_discussion"),
        (lambda d: d.update(extra=1), "summary: unknown field extra"),
        (lambda d: d.update(key_decisions="x"), "summary.key_decisions: expected a list"),
        (
            lambda d: d.update(key_decisions=[{"decision": "d"}] * (MAX_DECISIONS + 1)),
            f"summary.key_decisions: {MAX_DECISIONS + 1} items, at most {MAX_DECISIONS}",
        ),
        (
            lambda d: d["key_decisions"][0].update(decision="x" * (DECISION_CHARS + 1)),
            f"summary.key_decisions[0].decision: {DECISION_CHARS + 1} characters",
        ),
        (
            lambda d: d["key_decisions"][0].update(decided_at="2024-02-30"),
            "summary.key_decisions[0].decided_at: '2024-02-30' is not a date",
        ),
        (
            lambda d: d["key_decisions"][0].update(decided_at="May 1st"),
            "is not a date (YYYY-MM-DD)",
        ),
        (lambda d: d["key_decisions"][1].update(decision="  "), "decision: empty"),
        (lambda d: d["key_decisions"][0].update(why="x"), "unknown field why"),
        (
            lambda d: d["past_discussions"][0].pop("last_discussed"),
            "summary.past_discussions[0]: missing last_discussed",
        ),
        (
            lambda d: d["past_discussions"][0].update(topic=3),
            "past_discussions[0].topic: expected a string, got int",
        ),
        (
            lambda d: d.update(current_discussion="x" * (CURRENT_CHARS + 1)),
            "summary.current_discussion: 601 characters, at most 600",
        ),
    ],
)
def test_validator_rejects_with_clear_text(mutate: Any, message: str) -> None:
    data = _valid()
    mutate(data)
    with pytest.raises(SummaryFormatError) as info:
        parse_summary(data)
    assert message in str(info.value)


def test_validator_rejects_non_objects() -> None:
    with pytest.raises(SummaryFormatError, match="expected an object, got list"):
        parse_summary([])
    with pytest.raises(SummaryFormatError, match="model answer: expected an object"):
        parse_summary("text", "model answer")


def test_schema_bounds_every_string_and_list() -> None:
    props = SUMMARY_SCHEMA["properties"]
    decision = props["key_decisions"]["items"]["properties"]
    discussion = props["past_discussions"]["items"]["properties"]
    assert props["key_decisions"]["maxItems"] == ANSWER_DECISIONS <= MAX_DECISIONS
    assert props["past_discussions"]["maxItems"] == ANSWER_DISCUSSIONS
    assert decision["decision"]["maxLength"] == ANSWER_DECISION_CHARS <= DECISION_CHARS
    assert discussion["topic"]["maxLength"] == ANSWER_TOPIC_CHARS
    assert discussion["description"]["maxLength"] == ANSWER_DESCRIPTION_CHARS
    assert props["current_discussion"]["maxLength"] == ANSWER_CURRENT_CHARS <= CURRENT_CHARS
    assert decision["source"]["maxLength"] == 5
    assert summary_schema(["p1", "m1"])["properties"]["key_decisions"]["items"]["properties"][
        "source"
    ] == {"type": "string", "enum": ["p1", "m1"]}


def _longest_answer() -> str:
    """The longest JSON llama.cpp's grammar lets the model write for SUMMARY_SCHEMA."""
    decision = {
        "decision": "x" * ANSWER_DECISION_CHARS,
        "decided_at": "2024-05-01",
        "source": "m1234",
    }
    discussion = {
        "topic": "t" * ANSWER_TOPIC_CHARS,
        "description": "d" * ANSWER_DESCRIPTION_CHARS,
        "last_discussed": "2024-05-01",
    }
    data = {
        "key_decisions": [decision] * ANSWER_DECISIONS,
        "past_discussions": [discussion] * ANSWER_DISCUSSIONS,
        "current_discussion": "c" * ANSWER_CURRENT_CHARS,
    }
    # json.dumps puts one space after ":" and ","; the grammar allows one more after
    # every value and bracket (its "space" rule is at most one " ").
    return json.dumps(data)


def test_answer_bound_covers_the_longest_answer() -> None:
    longest = _longest_answer()
    bound = answer_char_bound(SUMMARY_SCHEMA)
    assert len(longest) <= bound <= len(longest) * 1.5
    parse_summary(json.loads(longest.replace('"x', '"y', 1)), repeats=True)
    with pytest.raises(ValueError, match="no bound"):
        answer_char_bound({"type": "number"})


def test_grammar_bounds_strings_and_lists() -> None:
    """llama.cpp's schema-to-grammar conversion keeps every maxLength and maxItems."""
    import llama_cpp

    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(SUMMARY_SCHEMA), verbose=False)
    rules = dict(
        line.split(" ::= ", 1) for line in grammar._grammar.splitlines() if " ::= " in line
    )
    assert not any("char*" in body or "char+" in body for body in rules.values())
    assert rules["current-discussion"].count("char") == ANSWER_CURRENT_CHARS
    assert rules["key-decisions"].count("key-decisions-item") == ANSWER_DECISIONS
    assert rules["past-discussions"].count("past-discussions-item") == ANSWER_DISCUSSIONS
    item = rules["key-decisions-item-decision"]
    assert item.count("char") == ANSWER_DECISION_CHARS


def test_schema_is_a_working_llama_cpp_grammar(tmp_path: Path) -> None:
    """The grammar compiles in llama.cpp and constrains a real (tiny) model's output."""
    import llama_cpp

    from tests.tiny_gguf import write_tiny_llama

    model_path = tmp_path / "tiny.gguf"
    write_tiny_llama(model_path)
    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(SUMMARY_SCHEMA), verbose=False)
    llm = llama_cpp.Llama(str(model_path), n_ctx=256, verbose=False, seed=3)
    try:
        out = llm.create_completion("summary:", grammar=grammar, max_tokens=40, temperature=0.0)
    finally:
        llm.close()
    text = "".join(out["choices"][0]["text"].split())  # type: ignore[index]
    assert text.startswith('{"key_decisions":[') or '{"key_decisions":['.startswith(text)


GOLDEN = """\
Key decisions (binding — follow them unless the user changes them):
- Use PostgreSQL 16 for the main database (decided 2024-05-01)
- Ship on Fridays only

Noted earlier, not traced to a message (not binding):
- Haruka Express (decided 2024-05-02)

Past discussions:
- Hotel (last discussed 2024-05-02): Compared three hotels near the station.

Current discussion: Planning the data migration."""


def test_render_for_prompt_golden() -> None:
    assert render_for_prompt(SAMPLE) == GOLDEN
    assert render_for_prompt(Summary()) == ""
    assert render_for_prompt(None) == ""
    only_current = Summary(current_discussion="Just started.")
    assert render_for_prompt(only_current) == "Current discussion: Just started."


def test_prompt_carries_the_previous_summary_with_handles_and_lines() -> None:
    messages = build_prompt(SAMPLE, ["[m1 2024-05-03 10:00] user: hi"])
    assert messages[0]["role"] == "system"
    assert "JSON" in messages[0]["content"]
    body = messages[1]["content"]
    shown = json.loads(body.split("\n")[1])
    assert [d.get("source") for d in shown["key_decisions"]] == ["p1", "p2", "p3"]
    assert "by_user" not in body
    assert body.index("Current summary") < body.index("[m1 2024-05-03 10:00] user: hi")


# -- repeated sentences and traced decisions ------------------------------------------
def test_repeated_sentences_are_rejected_within_and_across_fields() -> None:
    data = _valid()
    data["current_discussion"] = (
        "Planning the hotel stay. Booking trains! planning   THE hotel-stay"
    )
    with pytest.raises(SummaryFormatError, match="repeats the sentence 'planning the hotel stay'"):
        parse_summary(data)
    data["current_discussion"] = "Compared three hotels near the station"
    with pytest.raises(SummaryFormatError, match="compared three hotels"):
        parse_summary(data)  # also a past discussion's description
    data["current_discussion"] = "OK. OK. Let's go with. Let's go with."  # too short for a loop
    assert parse_summary(data).current_discussion == "OK. OK. Let's go with. Let's go with."
    looped = Summary(current_discussion="现在讨论酒店的预订。现在讨论酒店的预订。")
    assert repeated_sentences(looped) == ["现在讨论酒店的预订"]


def test_without_repeats_keeps_each_sentence_once() -> None:
    looped = Summary(
        key_decisions=(
            KeyDecision("Take the Haruka Express from the airport.", source="a"),
            KeyDecision("Take the Haruka Express from the airport", source="b"),
        ),
        past_discussions=(
            PastDiscussion(
                "Trains", "Sunrise there is around 5:40 in April. Cash only.", "2024-04-01"
            ),
        ),
        current_discussion="Sunrise there is around 5:40 in April.\n"
        "Sunrise there is around 5:40 in April. What to pack for the trip?",
    )
    clean = without_repeats(looped)
    assert repeated_sentences(clean) == []
    assert [d.source for d in clean.key_decisions] == ["a"]
    assert clean.past_discussions == looped.past_discussions
    assert clean.current_discussion == "What to pack for the trip?"
    assert without_repeats(SAMPLE) == SAMPLE


def test_one_per_topic_folds_later_entries_into_the_first() -> None:
    looped = Summary(
        past_discussions=(
            PastDiscussion("Pet training", "A positive reinforcement workshop.", "2023-05-02"),
            PastDiscussion("Hiking", "A trail near the lake.", "2023-05-03"),
            PastDiscussion("pet  Training!", "Keep me updated on their progress.", "2023-05-11"),
            PastDiscussion("Pet training", "Have a great time at the workshop!", "2023-05-04"),
        ),
        current_discussion="The workshop.",
    )
    folded = one_per_topic(looped)
    assert folded.past_discussions == (
        PastDiscussion("Pet training", "A positive reinforcement workshop.", "2023-05-11"),
        PastDiscussion("Hiking", "A trail near the lake.", "2023-05-03"),
    )
    assert folded.current_discussion == "The workshop."
    assert one_per_topic(SAMPLE) is SAMPLE


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        (
            "Lisbon has plenty; I can suggest some in",
            40,
            "Lisbon has plenty; I can suggest some\u2026",
        ),
        ("Trip dates, hotels", 40, "Trip dates, hotels"),  # under the limit: as written
        (
            "Ends with a whole sentence, so it stays.",
            40,
            "Ends with a whole sentence, so it stays.",
        ),
        ("Sintra trip: train from Rossio, tickets", 39, "Sintra trip: train from Rossio\u2026"),
        ("x" * 30 + " y", 32, "x" * 30 + "\u2026"),
        ("ab " + "c" * 37, 40, "ab " + "c" * 37),  # the cut would not leave half: kept
        ("c" * 40, 40, "c" * 40),  # no word boundary at all
    ],
)
def test_a_string_cut_by_the_grammar_ends_at_a_word(text: str, limit: int, expected: str) -> None:
    assert len(text) <= limit
    assert cut_at_word(text, limit) == expected


def test_without_cut_words_ends_each_cut_field_at_a_word() -> None:
    cut = "Lisbon has plenty; I can suggest some in"
    assert len(cut) == ANSWER_TOPIC_CHARS
    summary = Summary(
        key_decisions=(KeyDecision("Sintra on 15 May", "2024-05-01", "m3"),),
        past_discussions=(PastDiscussion(cut, "Restaurants near Chiado.", "2024-05-01"),),
        current_discussion="w" * 20 + " word" * 56,  # 300 characters
    )
    tidy = without_cut_words(summary)
    assert tidy.past_discussions[0].topic == "Lisbon has plenty; I can suggest some\u2026"
    assert tidy.past_discussions[0].description == "Restaurants near Chiado."
    assert tidy.key_decisions == summary.key_decisions
    assert tidy.current_discussion == summary.current_discussion[:-5] + "\u2026"
    assert without_cut_words(tidy) == tidy  # a tidied field is under its limit
    assert without_cut_words(SAMPLE) == SAMPLE


def test_terms_for_the_overlap_check() -> None:
    assert terms("We decided: book Hotel Sakura for 3 nights on 2024-05-02") == {
        "book",
        "hotel",
        "sakur",
        "nights"[:5],
        "2024",
        "05",
        "02",
    }
    assert "京都" in terms("去京都的旅館")
    assert terms("hotels") == terms("Hotel")


def test_trace_decisions_resolves_handles_and_drops_the_untraceable() -> None:
    answer = Summary(
        key_decisions=(
            KeyDecision("Book Hotel Sakura", "2024-05-02", source="m2"),
            KeyDecision("Haruka Express", "2024-05-02", source="m1"),
            KeyDecision("Use PostgreSQL 16", "2024-05-01", source="p1"),
            KeyDecision("Ship on Fridays", source="p2"),
            KeyDecision("Invented", source="m7"),
            KeyDecision("Sakura hotel looks great", source="m3"),  # a remark, not a choice
        ),
        current_discussion="Hotels.",
    )
    sources = {
        "p1": Source("id-pg", "Use PostgreSQL 16 for the main database", earlier_decision=True),
        "p2": Source(None, "Ship on Fridays only", by_user=True, earlier_decision=True),
        "m1": Source("id-1", "Which hotel do we take?"),
        "m2": Source("id-2", "OK, let's book the Sakura hotel."),
        "m3": Source("id-3", "Whoa, the Sakura hotel looks great!"),
    }
    traced, dropped = trace_decisions(answer, sources)
    assert [(d.decision, d.source, d.by_user) for d in traced.key_decisions] == [
        ("Book Hotel Sakura", "id-2", False),
        ("Use PostgreSQL 16", "id-pg", False),
        ("Ship on Fridays", None, True),
    ]
    assert dropped == [
        "'Haruka Express': not stated in m1",
        "'Invented': unknown source 'm7'",
        "'Sakura hotel looks great': m3 settles no choice",
    ]


def test_a_remark_cited_as_a_decision_becomes_a_past_discussion() -> None:
    answer = Summary(
        key_decisions=(
            KeyDecision("Counseling or working in mental health", "2023-05-08", source="m1"),
            KeyDecision("Whoa, the store looks great", "2023-05-08", source="m2"),
        ),
        past_discussions=(
            PastDiscussion("Store", "Whoa, the store looks great now.", "2023-05-01"),
        ),
        current_discussion="Careers.",
    )
    sources = {
        "m1": Source("id-1", "I'm keen on counseling or working in mental health."),
        "m2": Source("id-2", "Whoa, your store looks great!"),
    }
    traced, dropped = trace_decisions(answer, sources)
    assert traced.key_decisions == ()
    assert len(dropped) == 2
    # the first is new, the second says nothing the list does not already hold
    assert traced.past_discussions == (
        PastDiscussion("Store", "Whoa, the store looks great now.", "2023-05-01"),
        PastDiscussion(
            "Counseling or working in mental health",
            "Counseling or working in mental health",
            "2023-05-08",
        ),
    )


@pytest.mark.parametrize(
    ("text", "settles"),
    [
        ("OK, we'll host it on Hetzner.", True),
        ("Let’s go with the blue one.", True),
        ("Booked: Cervejaria Ramiro, 16 May at 20:00.", True),
        ("I decided to take the train instead of flying.", True),
        ("Abgemacht, wir nehmen das Hotel am Bahnhof.", True),
        ("那就这么定了，我们住京都站旁边。", True),
        ("Jon: Hey Gina! Whoa, your store looks great!", False),
        ("I was trying to squeeze in some me-time.", False),
        ("Which hotel should we book in Kyoto?", False),
        ("Patrick Rothfuss's fantasy book is my favourite.", False),
    ],
)
def test_what_settles_a_choice(text: str, settles: bool) -> None:
    assert states_decision(text) is settles


def test_summary_file_round_trip_and_errors(tmp_path: Path) -> None:
    assert load_summary(tmp_path) is None
    save_summary(tmp_path, SAMPLE)
    stored = json.loads((tmp_path / SUMMARY_FILE).read_text("utf-8"))
    assert stored["version"] == SUMMARY_VERSION
    assert stored["key_decisions"][0]["source"] == "m-pg"
    assert stored["key_decisions"][1]["by_user"] is True
    assert load_summary(tmp_path) == SAMPLE
    # A bare object (no version, as another tool might write it) is read as v1.
    (tmp_path / SUMMARY_FILE).write_text(json.dumps(SAMPLE.to_json()), "utf-8")
    assert load_summary(tmp_path) == SAMPLE
    for bad, text in [
        ("{not json", "cannot read"),
        (json.dumps({"version": 99, **SAMPLE.to_json()}), "newer than this app knows"),
        (json.dumps({"version": 1, "key_decisions": []}), "missing"),
    ]:
        (tmp_path / SUMMARY_FILE).write_text(bad, "utf-8")
        with pytest.raises(SummaryFileError) as info:
            load_summary(tmp_path)
        assert str(tmp_path / SUMMARY_FILE) in str(info.value)
        assert text in str(info.value)
        assert (tmp_path / SUMMARY_FILE).read_text("utf-8") == bad  # never touched


def test_version_1_files_load_untraced_and_with_their_repeats(tmp_path: Path) -> None:
    old = {
        "version": 1,
        "key_decisions": [{"decision": "Haruka Express", "decided_at": "2023-11-14"}],
        "past_discussions": [],
        "current_discussion": "Current trip plans. " * 6,  # a loop an old pass let through
    }
    (tmp_path / SUMMARY_FILE).write_text(json.dumps(old), "utf-8")
    summary = load_summary(tmp_path)
    assert summary is not None
    assert summary.key_decisions == (KeyDecision("Haruka Express", "2023-11-14"),)
    assert not summary.key_decisions[0].binding
    assert "binding" not in render_for_prompt(summary).split("\n")[0].replace("not binding", "")
    save_summary(tmp_path, summary)
    assert json.loads((tmp_path / SUMMARY_FILE).read_text("utf-8"))["version"] == SUMMARY_VERSION


def test_meta_round_trip(tmp_path: Path) -> None:
    assert load_meta(tmp_path) is None
    meta = SummaryMeta(
        cursor_seq=7,
        cursor_message_id="abc",
        cursor_time_ns=T0,
        summarized_messages=8,
        updated_ns=T0 + 5,
        model="m",
        window_messages=16,
        caught_up=True,
        history_stamp=(1, 2, 3),
    )
    save_meta(tmp_path, meta)
    assert load_meta(tmp_path) == meta
    (tmp_path / "summary.meta.json").write_text('{"cursor_seq": "x"}', "utf-8")
    with pytest.raises(SummaryFileError, match=r"summary\.meta\.json: bad field"):
        load_meta(tmp_path)


def test_pass_history_appends_and_survives_a_torn_tail(tmp_path: Path) -> None:
    append_record(tmp_path, PassRecord("pass", T0, model="m", messages=3, extra={"note": 1}))
    with (tmp_path / LOG_FILE).open("ab") as handle:
        handle.write(b'{"kind": "pa')  # a crash in the middle of a line
    append_record(tmp_path, PassRecord("edit", T0 + 1, model="user"))
    records = read_records(tmp_path)
    assert [r.kind for r in records] == ["pass", "edit"]
    assert records[0].messages == 3
    assert records[0].extra == {"note": 1}
    assert read_records(tmp_path, limit=1)[0].kind == "edit"
    assert read_records(tmp_path / "missing") == []


def test_transcript_lines_and_tool_traffic() -> None:
    user = msg("user", "  Where did we stay in Kyoto?  ", T0)
    assert transcript_line(user) == f"[{format_local(T0)}] user: Where did we stay in Kyoto?"
    call = msg(
        "assistant",
        "",
        T0,
        tool_calls=[
            {"id": "1", "function": {"name": "search_chat_history", "arguments": {"q": "Kyoto"}}}
        ],
    )
    assert message_text(call) == '[calls search_chat_history({"q": "Kyoto"})]'
    assert transcript_line(user, "m3").startswith(f"[m3 {format_local(T0)}] user:")
    result = msg("tool", "hit one\n" + "long " * 100, T0, name="search_chat_history")
    text = message_text(result)
    assert text.startswith("[tool search_chat_history → hit one long")
    assert len(text) < 200
    assert text.endswith("…]")


def test_cut_middle_keeps_both_ends() -> None:
    text = "HEAD" + "x" * 1000 + "TAIL"
    cut = cut_middle(text, 10)
    assert cut.startswith("HEADx")
    assert cut.endswith("xTAIL")
    assert "[…998 characters cut…]" in cut
    assert cut_middle("short", 10) == "short"
    assert cut_middle(text, 0) == " […1008 characters cut…] "


def test_prompt_text_for_the_agent(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    sid = store.create_session(session_id="p1")
    assert prompt_text(store, sid) == ""
    save_summary(store.folder(sid), SAMPLE)
    assert prompt_text(store, sid) == GOLDEN
    (store.folder(sid) / SUMMARY_FILE).write_text("[]", "utf-8")
    assert prompt_text(store, sid) == ""  # a broken file never breaks a turn
    assert "expected a JSON object" in caplog.text
