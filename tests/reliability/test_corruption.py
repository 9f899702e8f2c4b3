"""Every store rebuilds from the others when its file is damaged, and the user is told.

Each case damages one file of a small profile the way a disk or a careless
hand would, then runs the app's own entry points (the CLI in-process, the
store, AppServices).  The invariants: the command works, nothing that was
readable before is lost, and the damaged file still exists, set aside.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.cli import common
from agenvoy_desktop.core.error_memory import ErrorMemory, error_db_path
from agenvoy_desktop.core.error_types import OUTCOMES
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import load_summary
from agenvoy_desktop.operations.sessions import rename_session
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import T0, conversation
from tests.fakes import HashingEmbedder
from tests.scripted_chat import ScriptedChatModel
from tests.scripted_model import ScriptedJsonModel, numbered_summary

SID = "s1"
MESSAGES = 400
HISTORY_BYTES = 40_000
"""Small enough that the archive holds older messages history.json no longer has."""


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=64))


@pytest.fixture
def profile(tmp_path: Path) -> AppPaths:
    """One session of MESSAGES messages; history.json keeps the recent part."""
    paths = app_paths(tmp_path / "profile")
    texts = [f"message {i:03d} about topic{i % 7} " + "words " * 20 for i in range(MESSAGES)]
    with open_memory(paths, None, max_history_bytes=HISTORY_BYTES) as store:
        store.import_messages(conversation(texts), SID, title="trip")
    return paths


def cli_run(capsys: pytest.CaptureFixture[str], paths: AppPaths, *args: str) -> tuple[int, str]:
    code = cli.main([*args, "--data-dir", str(paths.config_dir.parent)])
    out, err = capsys.readouterr()
    return code, out + err


def history_ids(paths: AppPaths) -> list[str]:
    with open_memory(paths, None, reconcile=False) as store:
        return [m.id for m in store.history(SID).messages]


def archived_ids(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {str(r[0]) for r in db.execute("SELECT msg_id FROM messages")}
    finally:
        db.close()


def readable_ids(path: Path) -> set[str]:
    """Ids of the messages SQLite can still read whole from a damaged file, one at a time.

    A row whose overflow pages lay past a truncated file's end reads without
    an error, its end as zeros: a session id with a NUL is not read whole.
    """
    copy = path.with_name("probe.sqlite3")
    copy.write_bytes(path.read_bytes())
    db = sqlite3.connect(copy)
    out: set[str] = set()
    try:
        db.execute("PRAGMA writable_schema = ON")
        for rowid in range(1, MESSAGES + 1):
            try:
                row = db.execute(
                    "SELECT msg_id, session_id, * FROM messages WHERE id = ?", (rowid,)
                ).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row and "\x00" not in str(row[1]):
                out.add(str(row[0]))
    except sqlite3.DatabaseError:
        pass
    finally:
        db.close()
        copy.unlink()
    return out


def set_aside(path: Path) -> list[Path]:
    found = path.parent.glob(f"{path.name}.damaged-*")
    return sorted(p for p in found if not p.name.endswith(("-wal", "-shm")))


def damage(path: Path, how: str) -> bytes:
    data = path.read_bytes()
    if how == "truncated":
        damaged = data[: len(data) // 2]
    elif how == "middle":
        middle = len(data) // 2
        noise = random.Random(7).randbytes(16384)
        damaged = data[:middle] + noise + data[middle + len(noise) :]
    else:
        damaged = random.Random(8).randbytes(len(data))
    path.write_bytes(damaged)
    return damaged


def checkpointed(paths: AppPaths) -> None:
    """Fold the write-ahead log into the file, so damaging the file damages everything."""
    db = sqlite3.connect(paths.archive_db)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


@pytest.mark.parametrize("how", ["truncated", "middle", "garbage"])
def test_damaged_archive_is_set_aside_and_rebuilt(
    profile: AppPaths, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    recent = history_ids(profile)
    assert len(archived_ids(profile.archive_db)) == MESSAGES > len(recent)
    checkpointed(profile)
    damaged = damage(profile.archive_db, how)
    readable = readable_ids(profile.archive_db)

    code, text = cli_run(capsys, profile, "search", "topic3", "--mode", "keyword")
    assert code == 0, text
    assert "archive was damaged" in text
    code, text = cli_run(capsys, profile, "sessions")
    assert code == 0, text
    assert f"{len(recent)} recent" in text

    [aside] = set_aside(profile.archive_db)
    assert aside.read_bytes() == damaged  # kept exactly as found
    after = archived_ids(profile.archive_db)
    assert readable <= after  # nothing that could be read is lost
    assert set(recent) <= after  # history.json filled in the rest
    assert history_ids(profile) == recent
    code, text = cli_run(capsys, profile, "doctor", "--repair")
    assert code == 0, text
    assert cli_run(capsys, profile, "doctor")[0] == 0


def test_a_rebuilt_archive_titles_sessions_again(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_memory(profile, None, reconcile=False) as store:
        store.import_messages(conversation(["untitled talk", "an answer"]), "s2")
    checkpointed(profile)
    damage(profile.archive_db, "garbage")
    assert cli.main(["sessions", "--json", "--data-dir", str(profile.config_dir.parent)]) == 0
    titles = {s["session_id"]: s["title"] for s in json.loads(capsys.readouterr().out)}
    # the title given at import is kept beside the session's settings; an automatic
    # one is made again from the first message that survived, not left blank
    assert titles == {SID: "trip", "s2": "untitled talk"}


def test_a_rebuilt_archive_keeps_the_title_the_person_typed(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_memory(profile, None, reconcile=False) as store:
        rename_session(store, SID, "Trip to Graz")
    checkpointed(profile)
    damage(profile.archive_db, "garbage")
    assert cli.main(["sessions", "--json", "--data-dir", str(profile.config_dir.parent)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["title"] for s in listed if s["session_id"] == SID] == ["Trip to Graz"]


def test_doctor_reports_a_damaged_archive_and_repair_fixes_it(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpointed(profile)
    damaged = damage(profile.archive_db, "garbage")
    code, text = cli_run(capsys, profile, "doctor", "--json")
    assert code == 3
    assert '"repaired": false' in text
    assert profile.archive_db.read_bytes() == damaged  # plain doctor touches nothing
    code, text = cli_run(capsys, profile, "doctor", "--repair")
    assert code == 0, text
    assert "repaired: archive" in text
    assert set_aside(profile.archive_db)
    assert cli_run(capsys, profile, "doctor")[0] == 0


def test_damaged_error_memory_is_set_aside_and_started_fresh(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    path = error_db_path(profile)
    with ErrorMemory(path, None) as memory:
        memory.add("shell", "permission denied", cause="read-only", outcome=OUTCOMES[0])
    garbage = random.Random(9).randbytes(path.stat().st_size)
    path.write_bytes(garbage)
    for name in ("-wal", "-shm"):
        path.with_name(path.name + name).unlink(missing_ok=True)

    code, text = cli_run(capsys, profile, "doctor")
    assert code == 3
    assert "error memory" in text
    code, text = cli_run(capsys, profile, "errors", "list")
    assert code == 0, text
    assert "error memory was damaged" in text
    code, text = cli_run(capsys, profile, "errors", "search", "permission", "--keyword-only")
    assert code == 0, text
    [aside] = set_aside(path)
    assert aside.read_bytes() == garbage
    assert cli_run(capsys, profile, "doctor", "--repair")[0] == 0


def test_chat_runs_after_the_error_memory_was_damaged(profile: AppPaths) -> None:
    path = error_db_path(profile)
    path.write_bytes(b"not a database at all" * 100)
    services = AppServices.open(
        profile, embedder=HashingEmbedder(), chat_model=ScriptedChatModel([["hello there"]])
    )
    try:
        assert any("error memory was damaged" in n for n in services.notices)
        assert services.agent is not None
        result = asyncio.run(services.agent.run_turn(SID, "hi"))
        assert not result.interrupted
    finally:
        services.close()
    assert set_aside(path)


def test_damaged_summary_is_set_aside_and_summarize_starts_fresh(profile: AppPaths) -> None:
    folder = profile.sessions_dir / SID
    (folder / "summary.json").write_text("{not json", "utf-8")
    with open_memory(profile, None, max_history_bytes=HISTORY_BYTES) as store:
        assert any("summary starts fresh" in n for n in store.notices)
        [aside] = folder.glob("summary.json.damaged-*")
        assert aside.read_text("utf-8") == "{not json"
        summarizer = Summarizer(store, ScriptedJsonModel(numbered_summary), window_messages=16)
        result = asyncio.run(summarizer.run(SID))
        assert result.stopped != "failed", result.error
        assert load_summary(folder) is not None


@pytest.mark.parametrize("how", ["random", "truncated"])
def test_damaged_history_gets_its_recent_messages_back(
    profile: AppPaths, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    recent = history_ids(profile)
    path = profile.sessions_dir / SID / "history.json"
    data = path.read_bytes()
    damaged = os.urandom(len(data)) if how == "random" else data[: len(data) // 3]
    path.write_bytes(damaged)

    code, text = cli_run(capsys, profile, "sessions")
    assert code == 0, text
    assert f"{len(recent)} recent" in text
    assert history_ids(profile) == recent
    if how == "random":  # the unreadable file is kept, byte for byte
        [moved] = path.parent.glob("history.json.corrupt-*")
        assert moved.read_bytes() == damaged
        assert "restored from the archive" in text


def test_missing_vectors_are_embedded_in_the_background_at_start(profile: AppPaths) -> None:
    # An import killed after history.json and the archive were written, before its vectors.
    embedder = HashingEmbedder()
    services = AppServices.open(profile, embedder=embedder, chat_model=ScriptedChatModel([]))
    try:
        store = services.store
        lacking = services.missing_vectors()
        assert lacking == len(history_ids(profile)) > 64  # counted, not embedded at open
        seen: list[tuple[int, int]] = []
        done = asyncio.run(services.embed_missing(progress=lambda d, t: seen.append((d, t))))
        assert done == lacking
        assert seen[-1] == (lacking, lacking)
        assert services.storage.run_sync(store.pending_vectors, SID) == []
        assert services.missing_vectors() == 0
    finally:
        services.close()
    with open_memory(profile, HashingEmbedder()) as again:
        assert again.missing_vectors == {}


def test_search_tops_up_missing_vectors(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = cli_run(capsys, profile, "search", "topic3", "--mode", "semantic", "--json")
    assert code == 0, text
    with open_memory(profile, HashingEmbedder(dim=64)) as store:
        assert store.missing_vectors == {}
        assert store.pending_vectors(SID) == []


def test_nothing_is_lost_when_archive_and_history_are_fine(profile: AppPaths) -> None:
    before = archived_ids(profile.archive_db)
    with open_memory(profile, None) as store:
        assert store.notices == []
    assert archived_ids(profile.archive_db) == before
    assert T0 > 0


def test_doctor_repair_exits_3_when_something_is_left(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    error_db_path(profile).mkdir(parents=True)  # not a file: nothing a repair may touch
    code, text = cli_run(capsys, profile, "doctor", "--repair", "--json")
    assert code == 3
    assert '"kind": "error memory"' in text
    assert '"repaired": false' in text
    assert error_db_path(profile).is_dir()
