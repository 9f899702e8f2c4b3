"""Importing histories: many paths in one run, idempotent, with a summary and a dry run."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.core.import_formats.model import Skip
from agenvoy_desktop.core.import_keys import IMPORT_KEY, conversation_session_id, only_new
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations.bulk_import import (
    ImportPlan,
    ImportReport,
    describe,
    plan_import,
    run_import,
)
from tests.conftest import T0
from tests.core.import_format_samples import claude_conversation, gpt_branching

LIMIT = 1_000_000


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ROWS = [
    {"role": "user", "content": "I live in Graz."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "ok"},
]


def test_identical_messages_without_ids_are_told_apart_by_their_place(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "chat.jsonl", ROWS)
    plan = plan_import([path], T0, max_message_bytes=LIMIT)
    (conv,) = plan.conversations
    keys = [m.extra[IMPORT_KEY] for m in conv.messages]
    assert len(set(keys)) == 5  # the three "ok" are three messages
    # another run, at another time (the file gives none): the same keys and session
    again = plan_import([path], T0 + 10**12, max_message_bytes=LIMIT)
    assert [m.extra[IMPORT_KEY] for m in again.conversations[0].messages] == keys
    assert again.conversations[0].session_id == conv.session_id


def test_importing_twice_adds_nothing_twice(store: MemoryStore, tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "chat.jsonl", ROWS)
    first = run_import(store, plan_import([path], T0, max_message_bytes=LIMIT))
    assert (first.added, first.already) == (5, 0)
    second = run_import(store, plan_import([path], T0, max_message_bytes=LIMIT))
    assert (second.added, second.already) == (0, 5)
    (sid,) = store.session_ids()
    assert len(store.history(sid).messages) == 5
    # the file grew: only the new message is added, to the same session
    _jsonl(path, [*ROWS, {"role": "assistant", "content": "Anything else?"}])
    third = run_import(store, plan_import([path], T0, max_message_bytes=LIMIT))
    assert (third.added, third.already) == (1, 5)
    assert store.session_ids() == [sid]
    assert store.archive.count(sid) == 6


def test_a_killed_import_resumes_without_doubles(store: MemoryStore, tmp_path: Path) -> None:
    """Half the messages already stored (an import killed midway): the rest are added."""
    path = _jsonl(tmp_path / "chat.jsonl", ROWS)
    plan = plan_import([path], T0, max_message_bytes=LIMIT)
    conv = plan.conversations[0]
    store.import_new(conv.messages[:2], conv.session_id, title=conv.title)
    report = run_import(store, plan_import([path], T0, max_message_bytes=LIMIT))
    assert (report.added, report.already) == (3, 2)
    assert [m.content for m in store.history(conv.session_id).messages] == [
        r["content"] for r in ROWS
    ]


def test_other_apps_exports_import_in_one_run(store: MemoryStore, tmp_path: Path) -> None:
    gpt = tmp_path / "chatgpt"
    gpt.mkdir()
    (gpt / "conversations.json").write_text(json.dumps([gpt_branching()]), encoding="utf-8")
    claude_zip = tmp_path / "claude.zip"
    with zipfile.ZipFile(claude_zip, "w") as zf:
        zf.writestr("conversations.json", json.dumps([claude_conversation()]))
    mine = _jsonl(tmp_path / "mine.jsonl", ROWS)
    plan = plan_import([gpt, claude_zip, mine], T0, max_message_bytes=LIMIT)
    assert plan.failed == []
    assert plan.apps() == ["chatgpt", "claude", "agenvoy"]
    report = run_import(store, plan)
    assert report.added == plan.message_count
    assert len(store.session_ids()) == 3
    # the same export again: every session found again, nothing added
    assert (
        run_import(store, plan_import([gpt, claude_zip, mine], T0, max_message_bytes=LIMIT)).added
        == 0
    )
    assert len(store.session_ids()) == 3


def test_a_conversation_listed_twice_is_one_row(store: MemoryStore, tmp_path: Path) -> None:
    """An export that repeats a conversation (or two copies of one file) plans one session;
    a copy that has grown since adds its new messages to that row."""
    gpt = tmp_path / "conversations.json"
    gpt.write_text(json.dumps([gpt_branching(), gpt_branching()]), encoding="utf-8")
    plan = plan_import([gpt], T0, max_message_bytes=LIMIT)
    assert len(plan.conversations) == 1
    (repeat,) = [s for s in plan.skipped if "same as" in s.reason]
    assert plan.conversations[0].title in repeat.reason

    first = _jsonl(tmp_path / "a.jsonl", ROWS)
    grown = _jsonl(tmp_path / "b.jsonl", [*ROWS, {"role": "assistant", "content": "Bye."}])
    both = plan_import([first, grown], T0, max_message_bytes=LIMIT)
    (conv,) = both.conversations
    assert [m.content for m in conv.messages][-2:] == ["ok", "Bye."]
    assert run_import(store, both).added == 6


def test_a_path_that_cannot_be_read_leaves_the_others(tmp_path: Path) -> None:
    good = _jsonl(tmp_path / "good.jsonl", ROWS)
    plan = plan_import([tmp_path / "absent.json", good], T0, max_message_bytes=LIMIT)
    assert len(plan.conversations) == 1
    assert len(plan.failed) == 1
    assert "absent.json" in plan.failed[0]


def test_keys_and_session_ids_are_stable() -> None:
    a = Message("m1", "user", "hi", T0, ref="src-1")
    b = Message("m2", "user", "hi", T0, ref="src-1")
    assert only_new([a], [b]) == []
    assert conversation_session_id("chatgpt", "conv-1", []) == conversation_session_id(
        "chatgpt", "conv-1", [a]
    )
    assert conversation_session_id("chatgpt", "conv-1", []) != conversation_session_id(
        "claude", "conv-1", []
    )


def test_cli_imports_many_paths_and_says_what_was_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "profile"
    one = _jsonl(tmp_path / "one.jsonl", ROWS)
    two = _jsonl(tmp_path / "two.jsonl", [{"role": "user", "content": "My cat is Luna."}])
    assert cli.main(["--data-dir", str(data_dir), "import", str(one), str(two)]) == 0
    out, err = capsys.readouterr()
    assert len(out.split()) == 2
    assert "6 new, 0 already there" in err
    assert cli.main(["--data-dir", str(data_dir), "import", str(one), str(two)]) == 0
    assert "0 new, 6 already there" in capsys.readouterr().err


def test_cli_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "profile"
    one = _jsonl(tmp_path / "one.jsonl", ROWS)
    assert cli.main(["--data-dir", str(data_dir), "import", "--dry-run", str(one)]) == 0
    out, err = capsys.readouterr()
    assert "5 messages" in out
    assert "would import 1 conversation," in err
    assert not (data_dir / "sessions").exists() or not any((data_dir / "sessions").iterdir())


def test_cli_session_for_several_conversations_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _jsonl(tmp_path / "one.jsonl", ROWS)
    two = _jsonl(tmp_path / "two.jsonl", ROWS[:1])
    code = cli.main(
        ["--data-dir", str(tmp_path / "p"), "import", str(one), str(two), "--session", "s1"]
    )
    assert code == 1
    assert "--session names one session" in capsys.readouterr().err


def test_everything_is_stored_before_the_embedding_and_a_cancel_keeps_it(
    store: MemoryStore, tmp_path: Path
) -> None:
    """Keyword search finds the last conversation while (or after) embedding stops."""
    files = []
    for number in range(3):
        rows = [{"role": "user", "content": f"conversation {number}: my locker is {40 + number}"}]
        rows += [{"role": "assistant", "content": f"Noted, locker {40 + number}."}]
        files.append(_jsonl(tmp_path / f"chat{number}.jsonl", rows))
    plan = plan_import(files, T0, max_message_bytes=LIMIT)
    steps: list[tuple[int, int]] = []
    report = run_import(
        store,
        plan,
        progress=lambda done, total: steps.append((done, total)),
        cancelled=lambda: bool(steps),
    )
    assert report.cancelled
    assert report.added == 6  # every message stored
    hits = store.archive.keyword_search("locker 42", limit=5)
    assert any("42" in hit.message.content for hit, _score in hits)
    vectors = sum(store.info(c.session_id).vectors for c in report.counts)
    assert 0 < vectors < 6  # the embedding stopped; the next start makes the rest
    assert steps[0][1] == 6


def test_the_summary_counts_one_kind_of_skip_once() -> None:
    plan = ImportPlan(
        [],
        [
            Skip("a.json: conversation 1", "no messages to import; 4 skipped"),
            Skip("a.json: conversation 2", "no messages to import; 13 skipped"),
            Skip("a.json: conversation 3", "no messages to import"),
        ],
    )
    line = describe(plan, ImportReport([]))
    assert line.endswith("skipped 3 (3 no messages to import)")
