"""The summary's data model, schema, validation, files and prompt text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import (
    CURRENT_CHARS,
    DECISION_CHARS,
    DESCRIPTION_CHARS,
    LOG_FILE,
    MAX_DECISIONS,
    MAX_DISCUSSIONS,
    SUMMARY_FILE,
    SUMMARY_SCHEMA,
    TOPIC_CHARS,
    KeyDecision,
    PassRecord,
    PastDiscussion,
    Summary,
    SummaryFileError,
    SummaryFormatError,
    SummaryMeta,
    append_record,
    build_prompt,
    cut_middle,
    load_meta,
    load_summary,
    message_text,
    parse_summary,
    prompt_text,
    read_records,
    render_for_prompt,
    save_meta,
    save_summary,
    transcript_line,
    validate_summary,
)
from agenvoy_desktop.core.timeutil import format_local
from tests.conftest import T0, msg

SAMPLE = Summary(
    key_decisions=(
        KeyDecision("Use PostgreSQL 16 for the main database", "2024-05-01"),
        KeyDecision("Ship on Fridays only"),
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
    assert data["key_decisions"][1] == {"decision": "Ship on Fridays only"}
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


def test_schema_limits_match_the_validator() -> None:
    props = SUMMARY_SCHEMA["properties"]
    decision = props["key_decisions"]["items"]["properties"]["decision"]
    discussion = props["past_discussions"]["items"]["properties"]
    assert props["key_decisions"]["maxItems"] == MAX_DECISIONS
    assert props["past_discussions"]["maxItems"] == MAX_DISCUSSIONS
    assert decision["maxLength"] == DECISION_CHARS
    assert discussion["topic"]["maxLength"] == TOPIC_CHARS
    assert discussion["description"]["maxLength"] == DESCRIPTION_CHARS
    assert props["current_discussion"]["maxLength"] == CURRENT_CHARS


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

Past discussions:
- Hotel (last discussed 2024-05-02): Compared three hotels near the station.

Current discussion: Planning the data migration."""


def test_render_for_prompt_golden() -> None:
    assert render_for_prompt(SAMPLE) == GOLDEN
    assert render_for_prompt(Summary()) == ""
    assert render_for_prompt(None) == ""
    only_current = Summary(current_discussion="Just started.")
    assert render_for_prompt(only_current) == "Current discussion: Just started."


def test_prompt_carries_the_previous_summary_and_lines() -> None:
    messages = build_prompt(SAMPLE, ["[2024-05-03 10:00] user: hi"])
    assert messages[0]["role"] == "system"
    assert "JSON" in messages[0]["content"]
    body = messages[1]["content"]
    assert json.dumps(SAMPLE.to_json(), ensure_ascii=False) in body
    assert body.index("Current summary") < body.index("[2024-05-03 10:00] user: hi")


def test_summary_file_round_trip_and_errors(tmp_path: Path) -> None:
    assert load_summary(tmp_path) is None
    save_summary(tmp_path, SAMPLE)
    stored = json.loads((tmp_path / SUMMARY_FILE).read_text("utf-8"))
    assert stored["version"] == 1
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
