"""The incremental summary runner and its triggers, driven by a scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agenvoy_desktop.core.lifecycle import remove_session, reset_session
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ModelOutputError
from agenvoy_desktop.core.store import MemoryStore, UnknownSessionError
from agenvoy_desktop.core.summarizer import (
    ANSWER_TOKENS,
    LOCK_FILE,
    LOCK_STALE_NS,
    PassProgress,
    SessionLock,
    Summarizer,
    SummaryBusyError,
    SummaryRunResult,
    SummaryScheduler,
    history_stamp,
    save_user_edit,
)
from agenvoy_desktop.core.summary import (
    LOG_FILE,
    META_FILE,
    SUMMARY_FILE,
    KeyDecision,
    PassRecord,
    Summary,
    SummaryFormatError,
    load_meta,
    load_summary,
    read_records,
    save_meta,
)
from tests.conftest import SECOND, T0, FakeClock, StoreFactory, conversation, msg
from tests.scripted_model import ScriptedJsonModel, numbered_summary

T = TypeVar("T")
SID = "s1"
TAG = re.compile(r"msg-(\d{3})\b")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def texts(count: int, start: int = 0, pad: int = 0) -> list[str]:
    """Numbered messages; each settles a choice ("chose"), so a decision may cite any."""
    return [f"msg-{i:03d} chose topic {i}" + " lorem" * pad for i in range(start, start + count)]


def seed(store: MemoryStore, count: int, sid: str = SID, **kw: Any) -> list[Message]:
    messages = conversation(texts(count, **kw))
    store.import_messages(messages, sid)
    return messages


def tags(prompt: str) -> list[int]:
    """The message numbers in a prompt's transcript, in order."""
    transcript = prompt.split("New messages:", 1)[1]
    return [int(n) for n in TAG.findall(transcript)]


def stored(
    model: ScriptedJsonModel, call: int, first: Message, index: int | None = None
) -> Summary:
    """The scripted answer to *call* as it is saved: its decision cites *first* by id."""
    data = numbered_summary(call if index is None else index, model.calls[call].messages)
    data["key_decisions"][0]["source"] = first.id
    return Summary.from_json(data)


def without_facts(summary: Summary | None) -> Summary | None:
    """The model's part of a saved summary (the facts are code's, tested apart)."""
    return None if summary is None else replace(summary, facts=())


def make(store: MemoryStore, model: ScriptedJsonModel, **kw: Any) -> Summarizer:
    kw.setdefault("clock", FakeClock(start=T0 + 10_000 * SECOND))
    return Summarizer(store, model, **kw)


def folder(store: MemoryStore, sid: str = SID) -> Path:
    return store.folder(sid)


# -- a first run ---------------------------------------------------------------------------
def test_first_run_folds_everything_older_than_the_window(store: MemoryStore) -> None:
    messages = seed(store, 40)
    model = ScriptedJsonModel(numbered_summary)
    progress: list[tuple[int, int]] = []
    result = run(make(store, model).run(SID, progress=lambda d, t: progress.append((d, t))))
    assert result == SummaryRunResult(SID, "done", 1, 24, -1, 23, 0, None)
    assert progress == [(24, 24)]
    assert len(model.calls) == 1
    assert tags(model.prompts[0]) == list(range(24))  # the window (24..39) stays verbatim
    summary = load_summary(folder(store))
    assert replace(summary, facts=()) == stored(model, 0, messages[0])
    assert summary.facts  # the folded messages' numbers and choices, kept by code
    assert summary.key_decisions[0].decision == "decision from chunk 0: msg-000 chose topic"
    meta = load_meta(folder(store))
    assert meta is not None
    assert (meta.cursor_seq, meta.cursor_message_id) == (23, messages[23].id)
    assert meta.cursor_time_ns == messages[23].time_ns
    assert (meta.summarized_messages, meta.model, meta.caught_up) == (24, "scripted-json", True)


def test_pass_history_and_timeline_event(store: MemoryStore) -> None:
    messages = seed(store, 40)
    model = ScriptedJsonModel(numbered_summary)
    seen: list[tuple[str, PassRecord]] = []
    summarizer = make(store, model)
    unsubscribe = summarizer.on_pass(lambda sid, rec: seen.append((sid, rec)))
    run(summarizer.run(SID))
    unsubscribe()
    (record,) = read_records(folder(store))
    assert record.kind == "pass"
    assert record.error is None
    assert record.chunk_first == {"message_id": messages[0].id, "seq": 0, "time_ns": T0}
    assert record.chunk_last == {
        "message_id": messages[23].id,
        "seq": 23,
        "time_ns": messages[23].time_ns,
    }
    assert record.cursor_before == {"message_id": None, "seq": -1, "time_ns": 0}
    assert record.cursor_after == record.chunk_last
    assert record.model == "scripted-json"
    assert record.messages == 24
    assert record.prompt_tokens > 0
    assert record.completion_tokens > 0
    assert record.duration_s >= 0
    assert seen == [(SID, record)]
    events = [(kind, detail) for _, kind, detail in store.archive.events(SID)]
    assert ("summary_pass", record.to_json()) in events


# -- chunking ------------------------------------------------------------------------------
def test_small_context_makes_several_chunks_each_merging_the_previous(
    store: MemoryStore,
) -> None:
    seed(store, 56)  # 40 pending
    model = ScriptedJsonModel(numbered_summary, context_size=1000)
    result = run(make(store, model, max_answer_tokens=100).run(SID))
    assert result.stopped == "done"
    assert result.folded == 40
    assert result.passes == len(model.calls) == 4  # one call per chunk, no merge pass
    seen = [tags(p) for p in model.prompts]
    assert [n for chunk in seen for n in chunk] == list(range(40))  # each once, in order
    assert "chunk" not in model.prompts[0]
    for i, prompt in enumerate(model.prompts[1:]):
        previous = numbered_summary(i, model.calls[i].messages)
        previous["key_decisions"][0]["source"] = "p1"  # its handle in this prompt
        assert json.dumps(previous, ensure_ascii=False) in prompt  # merged into
    for call in model.calls:
        prompt_tokens = sum(len(m["content"]) // 4 for m in call.messages)
        assert prompt_tokens + call.max_tokens <= model.context_size
    assert len(read_records(folder(store))) == result.passes


def test_a_message_bigger_than_the_budget_is_cut_in_the_middle(store: MemoryStore) -> None:
    big = "BEGIN " + "word " * 4000 + " END"
    store.import_messages([msg("user", big, T0), *conversation(texts(17), start=T0 + 1)], SID)
    model = ScriptedJsonModel(numbered_summary, context_size=1345)
    result = run(make(store, model, max_answer_tokens=100).run(SID))
    assert result.stopped == "done"
    first = model.prompts[0]
    assert "BEGIN" in first
    assert "END" in first
    assert "characters cut" in first
    assert sum(len(m["content"]) // 4 for m in model.calls[0].messages) < 1240


def test_token_counts_are_cached(store: MemoryStore) -> None:
    seed(store, 56)
    model = ScriptedJsonModel(numbered_summary, context_size=1195, fail_on={1, 2})
    summarizer = make(store, model, max_answer_tokens=100)
    run(summarizer.run(SID))
    before = model.token_counts
    model.fail_on.clear()
    run(summarizer.run(SID))
    lines = sum(len(tags(p)) for p in model.prompts[3:])
    assert model.token_counts - before < lines  # message lines were not counted again


# -- failures --------------------------------------------------------------------------------
def test_failed_chunk_keeps_earlier_ones_and_retry_resumes(store: MemoryStore) -> None:
    messages = seed(store, 40)  # 24 pending: three chunks (11, 7, 6) with this context
    model = ScriptedJsonModel(numbered_summary, context_size=960, fail_on={1, 2})
    summarizer = make(store, model, max_answer_tokens=100)
    first = run(summarizer.run(SID))
    chunks = [tags(p) for p in model.prompts]
    assert len(chunks) == 3  # chunk 2 failed, and so did its retry with the first half
    assert chunks[2] == chunks[1][: len(chunks[1]) // 2]
    end_of_first = chunks[0][-1]
    assert first.stopped == "failed"
    assert first.error == "scripted failure (and before: scripted failure)"
    assert (first.passes, first.folded, first.cursor_after) == (1, len(chunks[0]), end_of_first)
    assert without_facts(load_summary(folder(store))) == stored(model, 0, messages[0])
    meta = load_meta(folder(store))
    assert meta is not None
    assert meta.cursor_seq == end_of_first
    assert not meta.caught_up
    kinds = [(r.kind, r.error) for r in read_records(folder(store))]
    assert kinds == [("pass", None), ("failed", first.error)]
    assert read_records(folder(store))[-1].messages == len(chunks[2])
    assert "summary_failed" in [k for _, k, _ in store.archive.events(SID)]

    retry_model = ScriptedJsonModel(lambda i, m: numbered_summary(10 + i, m), context_size=960)
    second = run(make(store, retry_model, max_answer_tokens=100).run(SID))
    retried = [tags(p) for p in retry_model.prompts]
    assert second.stopped == "done"
    assert second.cursor_before == end_of_first
    assert retried[0][0] == chunks[1][0]  # resumes exactly where the failure stopped
    assert [n for c in [chunks[0], *retried] for n in c] == list(range(24))  # nothing twice
    assert "decision from chunk 0: msg-000 chose topic" in retry_model.prompts[0]
    assert second.cursor_after == 23


def test_a_bad_answer_is_retried_once_with_half_the_chunk(store: MemoryStore) -> None:
    seed(store, 40)  # 24 pending, one chunk
    model = ScriptedJsonModel(numbered_summary, fail_on={0})
    result = run(make(store, model).run(SID))
    assert (result.stopped, result.folded, result.passes) == ("done", 24, 2)
    assert [tags(p) for p in model.prompts] == [
        list(range(24)),
        list(range(12)),
        list(range(12, 24)),
    ]
    first, second = read_records(folder(store))
    assert first.messages == 12
    assert first.extra["retried_after"] == "scripted failure"
    assert "retried_after" not in second.extra


def test_a_model_that_cannot_run_is_not_retried(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary, fail_on={0}, error=RuntimeError("no memory"))
    result = run(make(store, model).run(SID))
    assert (result.stopped, result.error) == ("failed", "RuntimeError: no memory")
    assert len(model.calls) == 1


def test_empty_answer_is_a_failure(store: MemoryStore) -> None:
    seed(store, 30)
    empty = {"key_decisions": [], "past_discussions": [], "current_discussion": ""}
    result = run(make(store, ScriptedJsonModel([empty, empty])).run(SID))
    assert result.stopped == "failed"
    assert result.error == (
        "model answer: empty summary for 7 messages with content "
        "(and before: model answer: empty summary for 14 messages with content)"
    )
    assert not (folder(store) / SUMMARY_FILE).exists()
    assert not (folder(store) / META_FILE).exists()
    assert [r.kind for r in read_records(folder(store))] == ["failed"]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"key_decisions": "oops", "past_discussions": [], "current_discussion": "x"}, "list"),
        (
            {"key_decisions": [{"decision": "x" * 201}], "past_discussions": []},
            "missing current_discussion",
        ),
        (ModelOutputError("answer cut off at 768 tokens"), "answer cut off at 768 tokens"),
        (RuntimeError("engine exploded"), "RuntimeError: engine exploded"),
    ],
)
def test_bad_answer_leaves_summary_and_cursor_unchanged(
    store: MemoryStore, answer: Any, error: str
) -> None:
    seed(store, 30)
    run(make(store, ScriptedJsonModel(numbered_summary)).run(SID))
    summary_bytes = (folder(store) / SUMMARY_FILE).read_bytes()
    meta_before = load_meta(folder(store))
    store.append(SID, conversation(texts(6, start=30), start=T0 + 100 * SECOND))
    result = run(make(store, ScriptedJsonModel([answer, answer])).run(SID))
    assert result.stopped == "failed"
    assert result.error is not None
    assert error in result.error
    assert (folder(store) / SUMMARY_FILE).read_bytes() == summary_bytes
    assert load_meta(folder(store)) == meta_before
    assert read_records(folder(store))[-1].kind == "failed"


def test_a_repeated_sentence_is_removed_without_asking_again(store: MemoryStore) -> None:
    seed(store, 40)
    looped = {
        "key_decisions": [],
        "past_discussions": [
            {
                "topic": "Hotels",
                "description": "We talked about the hotels.",
                "last_discussed": "2023-11-14",
            }
        ],
        "current_discussion": "We talked about the hotels. We talked about the hotels. Trains?",
    }
    model = ScriptedJsonModel(lambda i, m: looped if i == 0 else numbered_summary(i, m))
    result = run(make(store, model).run(SID))
    assert (result.stopped, result.folded) == ("done", 24)
    assert len(model.calls) == 1  # one generation: no retry for a repeat
    first = read_records(folder(store))[0]
    assert "retried_after" not in first.extra
    assert first.extra["repeats_removed"] == ["we talked about the hotels"]
    assert first.messages == 24
    summary = load_summary(folder(store))
    assert summary is not None
    assert summary.past_discussions[0].description == "We talked about the hotels."
    assert summary.current_discussion == "Trains?"


def test_a_looping_list_of_discussions_keeps_one(store: MemoryStore) -> None:
    """The loop a small model falls into: the same entry again and again."""
    seed(store, 40)
    entry = {
        "topic": "Hotels",
        "description": "Compared three hotels near the station.",
        "last_discussed": "2023-11-14",
    }
    looped = {"key_decisions": [], "past_discussions": [entry] * 5, "current_discussion": ""}
    model = ScriptedJsonModel(lambda i, m: looped if i == 0 else numbered_summary(i, m))
    assert run(make(store, model).run(SID)).stopped == "done"
    first = read_records(folder(store))[0]
    assert first.extra["ended_at_repeat"] == "Hotels"  # ended at the second copy
    assert "repeats_removed" not in first.extra
    assert model.stopped_early == 1
    assert len(model.calls) == 1
    summary = load_summary(folder(store))
    assert summary is not None
    assert [p.topic for p in summary.past_discussions] == ["Hotels"]


# -- traceable decisions -------------------------------------------------------------------------
def fold_decisions(
    store: MemoryStore, said: list[str], decisions: list[dict[str, str]], current: str
) -> tuple[list[Message], ScriptedJsonModel]:
    """Fold *said* (and 16 more messages) with a model that answers *decisions*."""
    messages = conversation([*said, *texts(16, start=10)])
    store.import_messages(messages, SID)

    def answer(_i: int, _m: list[Any]) -> dict[str, Any]:
        return {
            "key_decisions": [{"decided_at": "2023-11-14", **d} for d in decisions],
            "past_discussions": [],
            "current_discussion": current,
        }

    model = ScriptedJsonModel(answer)
    assert run(make(store, model).run(SID)).stopped == "done"
    return messages, model


def kept_and_dropped(store: MemoryStore) -> tuple[list[tuple[str, str | None]], list[str]]:
    summary = load_summary(folder(store))
    assert summary is not None
    (record,) = read_records(folder(store))
    kept = [(d.decision, d.source) for d in summary.key_decisions]
    return kept, record.extra["dropped_decisions"]


def test_decisions_are_traced_to_their_message(store: MemoryStore) -> None:
    said = [
        "Which hotel should we book in Kyoto?",
        "Hotel Sakura is near the station; Ryokan Aoi has a garden.",
        "OK, we'll book Hotel Sakura for three nights.",
        "Booked. Take the Haruka Express from the airport.",
    ]
    decisions = [
        {"decision": "Book Hotel Sakura for three nights", "source": "m3"},
        {"decision": "Haruka Express", "source": "m1"},  # not in m1
        {"decision": "Fly business class", "source": "m9"},  # no such message
    ]
    messages, model = fold_decisions(store, said, decisions, "Getting from the airport to Kyoto.")
    schema = model.calls[0].schema
    source = schema["properties"]["key_decisions"]["items"]["properties"]["source"]
    assert source["enum"] == ["m1", "m2", "m3", "m4"]  # the grammar allows only these
    assert "[m3 " in model.prompts[0]
    assert kept_and_dropped(store) == (
        [("Book Hotel Sakura for three nights", messages[2].id)],
        ["'Haruka Express': not stated in m1", "'Fly business class': unknown source 'm9'"],
    )


def test_a_decision_citing_the_question_goes_to_the_message_that_states_it(
    store: MemoryStore,
) -> None:
    said = [
        "Ana's birthday is on the 16th. Any restaurant ideas?",
        "Cervejaria Ramiro is famous for seafood.",
        "Booked: Cervejaria Ramiro, 16 May at 20:00, a table for two.",
        "Thanks!",
    ]
    decisions = [
        # cites the question it answers, which shares none of its words
        {"decision": "Dinner at Cervejaria Ramiro at 20:00", "source": "m1"},
        # a bare name is not re-pointed into a decision
        {"decision": "Cervejaria Ramiro", "source": "m4"},
    ]
    messages, _model = fold_decisions(store, said, decisions, "Ana's birthday dinner.")
    assert kept_and_dropped(store) == (
        [("Dinner at Cervejaria Ramiro at 20:00", messages[2].id)],
        ["'Cervejaria Ramiro': not stated in m4"],
    )


def test_earlier_decisions_keep_their_source_through_their_handle(store: MemoryStore) -> None:
    messages = seed(store, 40)
    run(make(store, ScriptedJsonModel(numbered_summary)).run(SID))
    store.append(SID, conversation(texts(6, start=40), start=T0 + 100 * SECOND))

    def keep(_i: int, _m: list[Any]) -> dict[str, Any]:
        kept = {"decision": "decision from chunk 0 on msg-000", "decided_at": "2023-11-14"}
        return {
            "key_decisions": [{**kept, "source": "p1"}],
            "past_discussions": [],
            "current_discussion": "more",
        }

    model = ScriptedJsonModel(keep)
    assert run(make(store, model).run(SID)).stopped == "done"
    assert '"source": "p1"' in model.prompts[0]
    source = model.calls[0].schema["properties"]["key_decisions"]["items"]["properties"]
    assert source["source"]["enum"][0] == "p1"
    summary = load_summary(folder(store))
    assert summary is not None
    assert summary.key_decisions[0].source == messages[0].id


def test_the_answer_budget_covers_the_longest_answer(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary, context_size=8192)
    run(make(store, model).run(SID))
    assert model.calls[0].max_tokens == ANSWER_TOKENS
    small = ScriptedJsonModel(numbered_summary, context_size=4096)
    seed(store, 40, sid="s2")
    run(make(store, small).run("s2"))
    assert small.calls[0].max_tokens == min(ANSWER_TOKENS, 2048)


def test_corrupt_summary_file_fails_without_touching_it(store: MemoryStore) -> None:
    seed(store, 30)
    path = folder(store) / SUMMARY_FILE
    path.write_text("{broken", "utf-8")
    model = ScriptedJsonModel(numbered_summary)
    result = run(make(store, model).run(SID))
    assert result.stopped == "failed"
    assert str(path) in (result.error or "")
    assert path.read_text("utf-8") == "{broken"
    assert not model.calls


def test_context_too_small_is_a_clear_failure(store: MemoryStore) -> None:
    seed(store, 30)
    model = ScriptedJsonModel(numbered_summary, context_size=512)
    result = run(make(store, model).run(SID))
    assert result.stopped == "failed"
    assert "context of 512 tokens" in (result.error or "")
    assert not model.calls


def test_unknown_session_raises(store: MemoryStore) -> None:
    with pytest.raises(UnknownSessionError):
        run(make(store, ScriptedJsonModel([])).run("nope"))


# -- catch-up, gate, reset ----------------------------------------------------------------------
def test_catch_up_after_compaction_folds_archive_only_messages(
    open_store: StoreFactory,
) -> None:
    store = open_store(max_history_bytes=6000)
    seed(store, 80, pad=8)
    history = store.history(SID).messages
    assert len(history) < 60  # compaction trimmed history.json
    model = ScriptedJsonModel(numbered_summary, context_size=2000)
    result = run(make(store, model, max_answer_tokens=200).run(SID))
    assert result.stopped == "done"
    assert result.folded == 64  # far more than one window
    assert [n for p in model.prompts for n in tags(p)] == list(range(64))
    assert history[0].content.startswith("msg-0")
    assert not history[0].content.startswith("msg-000")


def test_catch_up_pages_through_a_long_backlog(store: MemoryStore) -> None:
    seed(store, 316)  # 300 pending: more than one archive page
    model = ScriptedJsonModel(numbered_summary, context_size=32_768)
    result = run(make(store, model).run(SID))
    assert (result.stopped, result.folded, result.cursor_after) == ("done", 300, 299)
    assert [n for p in model.prompts for n in tags(p)] == list(range(300))


def test_mtime_gate_skips_until_history_changes(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary)
    summarizer = make(store, model)
    assert run(summarizer.run(SID)).stopped == "done"
    assert run(summarizer.run(SID)).stopped == "mtime_gate"
    assert run(summarizer.run(SID, force=True)).stopped == "up_to_date"
    # An append inside the same mtime tick is still seen (size and inode are compared too).
    history = folder(store) / "history.json"
    stamp = history.stat().st_mtime_ns
    store.append(SID, [msg("user", "msg-040 one more", T0 + 50 * SECOND)])
    os.utime(history, ns=(stamp, stamp))
    result = run(summarizer.run(SID))  # the window now starts at msg-026: 24, 25 left it
    assert (result.stopped, result.folded, result.cursor_after) == ("done", 2, 25)
    assert run(summarizer.run(SID)).stopped == "mtime_gate"
    store.append(SID, [msg("assistant", "msg-041 reply", T0 + 51 * SECOND)])
    assert run(summarizer.run(SID)).stopped == "up_to_date"  # checked: nothing left the window
    assert len(model.calls) == 2


def test_force_skips_the_gate(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary)
    summarizer = make(store, model)
    run(summarizer.run(SID))
    store.append(SID, conversation(texts(4, start=40), start=T0 + 60 * SECOND))
    meta = load_meta(folder(store))
    assert meta is not None
    stamp = history_stamp(folder(store) / "history.json")
    save_meta(folder(store), meta.with_(history_stamp=stamp))  # pretend the gate was armed
    assert run(summarizer.run(SID)).stopped == "mtime_gate"
    result = run(summarizer.run(SID, force=True))
    assert result.stopped == "done"
    assert result.folded == 4


def test_store_work_runs_on_the_given_runner(store: MemoryStore) -> None:
    seed(store, 40)
    threads: set[str] = set()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")

    class Runner:
        async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
            def call() -> T:
                threads.add(threading.current_thread().name)
                return fn(*args, **kwargs)

            return await asyncio.get_running_loop().run_in_executor(pool, call)

    model = ScriptedJsonModel(numbered_summary, context_size=960)
    loop_thread: list[str] = []
    summarizer = make(store, model, storage=Runner(), max_answer_tokens=100)
    summarizer.on_pass(lambda _s, _r: loop_thread.append(threading.current_thread().name))
    try:
        result = run(summarizer.run(SID))
    finally:
        pool.shutdown()
    assert result.stopped == "done"
    assert result.passes == 3
    assert {t.split("_")[0] for t in threads} == {"storage"}
    assert loop_thread == ["MainThread"] * 3  # listeners are called on the loop's thread


def test_gate_is_not_armed_by_a_failed_run_nor_for_another_window(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary, fail_on={0, 1})
    summarizer = make(store, model)
    assert run(summarizer.run(SID)).stopped == "failed"
    assert run(summarizer.run(SID)).stopped == "done"
    other = make(store, ScriptedJsonModel(numbered_summary), window_messages=8)
    result = run(other.run(SID))
    assert result.stopped == "done"
    assert result.folded == 8


def test_reset_keeps_the_summary_and_new_messages_fold_into_it(store: MemoryStore) -> None:
    seed(store, 40)
    run(make(store, ScriptedJsonModel(numbered_summary)).run(SID))
    kept = {name: (folder(store) / name).read_bytes() for name in (SUMMARY_FILE, LOG_FILE)}
    reset_session(store, SID)
    for name, data in kept.items():
        assert (folder(store) / name).read_bytes() == data
    store.append(SID, conversation(texts(20, start=100), start=T0 + 500 * SECOND))
    model = ScriptedJsonModel(lambda i, _m: numbered_summary(7))
    result = run(make(store, model).run(SID))
    assert result.stopped == "done"
    assert result.folded == 4
    assert tags(model.prompts[0]) == [100, 101, 102, 103]
    assert "decision from chunk 0: msg-000 chose topic" in model.prompts[0]


def test_remove_deletes_the_summary(store: MemoryStore) -> None:
    seed(store, 40)
    run(make(store, ScriptedJsonModel(numbered_summary)).run(SID))
    remove_session(store, SID)
    assert not folder(store).exists()


def test_stop_session_then_remove(store: MemoryStore) -> None:
    seed(store, 56)
    model = ScriptedJsonModel(numbered_summary, context_size=1000)
    summarizer = make(store, model, max_answer_tokens=100)

    async def scenario() -> SummaryRunResult:
        model.hold, model.hold_from = asyncio.Event(), 1
        task = asyncio.create_task(summarizer.run(SID))
        await model.waiting.wait()
        await summarizer.stop_session(SID)  # the model's gate is never opened
        return await task

    result = run(scenario())
    assert result.stopped == "cancelled"
    assert result.passes == 1  # the answer in flight was stopped, not waited for
    assert [r.kind for r in read_records(folder(store))] == ["pass", "stopped"]
    remove_session(store, SID)
    assert not folder(store).exists()


def test_a_pass_never_recreates_a_removed_session(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary)
    summarizer = make(store, model)

    async def scenario() -> SummaryRunResult:
        model.hold = asyncio.Event()
        task = asyncio.create_task(summarizer.run(SID))
        await model.waiting.wait()
        remove_session(store, SID)
        assert model.hold is not None
        model.hold.set()
        return await task

    result = run(scenario())
    assert result.stopped == "failed"
    assert "was removed during the summary" in (result.error or "")
    assert not folder(store).exists()
    assert store.archive.events(SID) == []


# -- locking ---------------------------------------------------------------------------------
def test_concurrent_runs_get_busy_or_wait(store: MemoryStore) -> None:
    seed(store, 40)
    model = ScriptedJsonModel(numbered_summary)
    model.hold = asyncio.Event()
    summarizer = make(store, model)

    async def scenario() -> tuple[SummaryRunResult, ...]:
        first = asyncio.create_task(summarizer.run(SID))
        await model.waiting.wait()
        assert summarizer.is_running(SID)
        busy = await summarizer.run(SID, force=True)
        waiter = asyncio.create_task(summarizer.run(SID, wait=True))
        await asyncio.sleep(0)
        assert model.hold is not None
        model.hold.set()
        return busy, await first, await waiter

    busy, first, waiter = run(scenario())
    assert busy.stopped == "busy"
    assert first.stopped == "done"
    assert waiter.stopped == "mtime_gate"
    assert len(model.calls) == 1
    assert not (folder(store) / LOCK_FILE).exists()


def _write_lock(store: MemoryStore, pid: int, time_ns: int) -> Path:
    path = folder(store) / LOCK_FILE
    path.write_text(json.dumps({"pid": pid, "time_ns": time_ns, "token": "x"}), "utf-8")
    return path


def test_lock_of_another_live_process_means_busy(store: MemoryStore) -> None:
    seed(store, 40)
    clock = FakeClock(start=T0 + 10_000 * SECOND)
    path = _write_lock(store, os.getppid(), clock.start)
    model = ScriptedJsonModel(numbered_summary)
    result = run(make(store, model, clock=clock).run(SID))
    assert result.stopped == "busy"
    assert not model.calls
    assert path.exists()
    with pytest.raises(SummaryBusyError, match="a summary pass is running"):
        save_user_edit(store, SID, Summary(current_discussion="x"), clock)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("owner", ["dead", "old", "leftover-of-this-pid", "garbage"])
def test_stale_lock_is_taken_over(store: MemoryStore, owner: str) -> None:
    seed(store, 40)
    clock = FakeClock(start=T0 + 10_000 * SECOND)
    if owner == "dead":
        path = _write_lock(store, _dead_pid(), clock.start)
    elif owner == "old":
        path = _write_lock(store, os.getppid(), clock.start - LOCK_STALE_NS - SECOND)
    elif owner == "leftover-of-this-pid":
        path = _write_lock(store, os.getpid(), clock.start)
    else:
        path = folder(store) / LOCK_FILE
        path.write_text("", "utf-8")
        old = path.stat().st_mtime_ns - LOCK_STALE_NS - SECOND
        os.utime(path, ns=(old, old))
    result = run(make(store, ScriptedJsonModel(numbered_summary), clock=clock).run(SID))
    assert result.stopped == "done"
    assert not path.exists()


def test_fresh_half_written_lock_is_respected(store: MemoryStore) -> None:
    seed(store, 40)
    (folder(store) / LOCK_FILE).write_text("", "utf-8")
    assert run(make(store, ScriptedJsonModel(numbered_summary)).run(SID)).stopped == "busy"


def test_lock_is_exclusive_within_the_process(tmp_path: Path) -> None:
    clock = FakeClock()
    lock = SessionLock.acquire(tmp_path, clock)
    assert lock is not None
    assert SessionLock.acquire(tmp_path, clock) is None
    lock.refresh()
    assert SessionLock.acquire(tmp_path, clock) is None
    lock.release()
    again = SessionLock.acquire(tmp_path, clock)
    assert again is not None
    again.release()


# -- cancellation ------------------------------------------------------------------------------
def test_cancel_between_chunks_keeps_what_succeeded(store: MemoryStore) -> None:
    seed(store, 56)
    model = ScriptedJsonModel(numbered_summary, context_size=1155)
    result = run(
        make(store, model, max_answer_tokens=100).run(SID, cancelled=lambda: bool(model.calls))
    )
    assert result.stopped == "cancelled"
    assert result.passes == 1
    meta = load_meta(folder(store))
    assert meta is not None
    assert meta.cursor_seq == result.cursor_after
    assert not meta.caught_up


def test_cancelling_the_task_mid_call_keeps_earlier_chunks(store: MemoryStore) -> None:
    seed(store, 56)
    model = ScriptedJsonModel(numbered_summary, context_size=1155)
    summarizer = make(store, model, max_answer_tokens=100)
    passes: list[PassRecord] = []
    summarizer.on_pass(lambda _s, rec: passes.append(rec))

    async def scenario() -> None:
        model.hold, model.hold_from = asyncio.Event(), 1  # the second call blocks
        task = asyncio.create_task(summarizer.run(SID))
        await model.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    meta = load_meta(folder(store))
    assert meta is not None
    assert meta.cursor_seq == passes[0].cursor_after["seq"]
    assert not (folder(store) / LOCK_FILE).exists()


# -- user edits --------------------------------------------------------------------------------
def test_user_edit_is_saved_like_a_pass(store: MemoryStore) -> None:
    seed(store, 40)
    summarizer = make(store, ScriptedJsonModel(numbered_summary))
    run(summarizer.run(SID))
    meta = load_meta(folder(store))
    current = load_summary(folder(store))
    assert current is not None
    assert meta is not None
    edited = Summary(
        key_decisions=(KeyDecision("Use SQLite, not Postgres", "2023-11-15"),),
        current_discussion=current.current_discussion,
    )
    seen: list[PassRecord] = []
    summarizer.on_pass(lambda _s, rec: seen.append(rec))
    record = run(summarizer.save_edit(SID, edited))
    assert load_summary(folder(store)) == edited
    after = load_meta(folder(store))
    assert after is not None
    assert after.cursor_seq == meta.cursor_seq
    assert after.updated_ns > meta.updated_ns
    assert record.kind == "edit"
    assert record.cursor_before == record.cursor_after
    assert record.cursor_after["seq"] == 23  # type: ignore[index]
    assert [r.kind for r in read_records(folder(store))] == ["pass", "edit"]
    assert seen == [record]
    assert "summary_edit" in [k for _, k, _ in store.archive.events(SID)]
    with pytest.raises(SummaryFormatError, match="decision: 201 characters"):
        save_user_edit(store, SID, Summary((KeyDecision("x" * 201),)))
    assert load_summary(folder(store)) == edited


# -- tool traffic ------------------------------------------------------------------------------
def test_tool_traffic_is_folded_compactly(store: MemoryStore) -> None:
    call = {"id": "c1", "function": {"name": "search_chat_history", "arguments": {"q": "hotel"}}}
    messages = [
        msg("user", "msg-000 which hotel?", T0),
        msg("assistant", "", T0 + 1, tool_calls=[call]),
        msg("tool", "msg-001 Hotel Sakura, booked\n" * 40, T0 + 2, name="search_chat_history"),
        msg("assistant", "msg-002 Hotel Sakura.", T0 + 3),
        *conversation(texts(16, start=10), start=T0 + 10),
    ]
    store.import_messages(messages, SID)
    model = ScriptedJsonModel(numbered_summary)
    assert run(make(store, model).run(SID)).folded == 4
    prompt = model.prompts[0]
    assert 'assistant: [calls search_chat_history({"q": "hotel"})]' in prompt
    assert "tool: [tool search_chat_history → msg-001 Hotel Sakura, booked msg-001" in prompt
    assert prompt.count("Hotel Sakura, booked") < 10


# -- scheduler ---------------------------------------------------------------------------------
class ManualClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def test_after_turn_runs_only_when_enough_left_the_window(store: MemoryStore) -> None:
    seed(store, 20)  # 4 pending
    model = ScriptedJsonModel(numbered_summary)
    scheduler = SummaryScheduler(make(store, model), idle_seconds=60, clock=ManualClock())

    async def turn() -> None:
        scheduler.after_turn(SID)
        await scheduler.idle()

    run(turn())
    assert not model.calls
    store.append(SID, conversation(texts(4, start=20), start=T0 + 100 * SECOND))
    run(turn())
    assert len(model.calls) == 1
    assert tags(model.prompts[0]) == list(range(8))


def test_idle_tick_runs_quiet_sessions_and_backs_off_after_failure(store: MemoryStore) -> None:
    seed(store, 20, sid="a")
    seed(store, 20, sid="b")
    clock = ManualClock()
    model = ScriptedJsonModel(numbered_summary, fail_on={1, 2})
    scheduler = SummaryScheduler(make(store, model), idle_seconds=60, clock=clock)
    clock.now += 30 * SECOND
    scheduler.note_activity("b")  # "b" just had a turn
    assert run(scheduler.tick()) == []  # nobody quiet for 60 s yet
    clock.now += 31 * SECOND
    results = run(scheduler.tick())
    assert [(r.session_id, r.stopped) for r in results] == [("a", "done")]
    clock.now += 30 * SECOND
    results = run(scheduler.tick())
    assert [(r.session_id, r.stopped) for r in results] == [("b", "failed")]
    assert run(scheduler.tick()) == []  # "a" gated, "b" waits for retry_seconds
    clock.now += 901 * SECOND
    results = run(scheduler.tick())
    assert [(r.session_id, r.stopped) for r in results] == [("b", "done")]


def test_idle_timer_and_summarize_now(store: MemoryStore) -> None:
    seed(store, 20)
    model = ScriptedJsonModel(numbered_summary)
    scheduler = SummaryScheduler(
        make(store, model), idle_seconds=0, clock=ManualClock(), poll_seconds=0.01
    )
    records: list[str] = []
    passed = asyncio.Event()

    def on_pass(sid: str, _record: PassRecord) -> None:
        records.append(sid)
        passed.set()

    scheduler.on_pass(on_pass)

    async def scenario() -> SummaryRunResult:
        scheduler.start()
        await asyncio.wait_for(passed.wait(), 5)
        await scheduler.stop()
        return await scheduler.summarize_now(SID)

    result = run(scenario())
    assert records == [SID]
    assert result.stopped == "up_to_date"


def test_a_pass_reports_its_progress_while_the_answer_grows(store: MemoryStore) -> None:
    seed(store, 40)
    summarizer = make(store, ScriptedJsonModel(numbered_summary))
    seen: list[tuple[str, PassProgress]] = []
    unsubscribe = summarizer.on_progress(lambda sid, p: seen.append((sid, p)))

    async def go() -> None:
        await summarizer.run(SID)
        await asyncio.sleep(0)  # the reports are queued on the loop

    run(go())
    unsubscribe()
    assert seen
    assert {sid for sid, _ in seen} == {SID}
    assert seen[0][1].answer == 0.0
    assert seen[0][1].text == "Summarizing 24 messages… 0 %"
    shares = [p.answer for _, p in seen]
    assert shares == sorted(shares)
    assert max(shares) <= 0.95
