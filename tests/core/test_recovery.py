"""Archive recovery: damage detection, set-aside, salvage, and the rebuild plan."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import sessions as cli_sessions
from agenvoy_desktop.core.archive import Archive, ArchiveDamagedError, ArchiveError
from agenvoy_desktop.core.error_memory import (
    ErrorMemoryDamagedError,
    error_db_path,
    open_error_memory,
)
from agenvoy_desktop.core.reconcile import reconcile
from agenvoy_desktop.core.recovery import (
    Salvage,
    open_archive,
    plan_restore,
    salvage,
)
from agenvoy_desktop.core.sqlite_db import StoreDamagedError, set_aside_database
from agenvoy_desktop.core.sqlite_pages import leaf_rows
from agenvoy_desktop.core.summary import check_summary_files
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, FakeClock, StoreFactory, conversation


def _seeded(open_store: StoreFactory, count: int = 40) -> list[str]:
    store = open_store()
    messages = conversation([f"line {i}" for i in range(count)])
    store.import_messages(messages, "s", title="kept title")
    store.archive.add_event("s", T0, "note", {"n": 1})
    store.close()
    return [m.id for m in messages]


def test_damage_has_its_own_error_type(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    path.write_bytes(b"this is not a database, only text " * 200)
    with pytest.raises(ArchiveDamagedError) as info:
        Archive(path)
    assert isinstance(info.value, ArchiveError)
    assert isinstance(info.value, StoreDamagedError)
    assert "not an archive database" in str(info.value)
    error = Archive(tmp_path / "b.sqlite3")
    try:
        full = sqlite3.OperationalError("database or disk is full")
        full.sqlite_errorname = "SQLITE_FULL"
        friendly = error._friendly(full)
        assert type(friendly) is ArchiveError
        assert "disk is full" in str(friendly)
    finally:
        error.close()


def test_set_aside_moves_the_file_with_its_log_and_never_reuses_a_name(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    names = []
    for round_ in range(2):
        path.write_bytes(b"main %d" % round_)
        path.with_name("x.sqlite3-wal").write_bytes(b"log")
        moved = set_aside_database(path)
        names.append(moved.name)
        assert not path.exists()
        assert not path.with_name("x.sqlite3-wal").exists()
        assert moved.read_bytes() == b"main %d" % round_
        assert moved.with_name(moved.name + "-wal").read_bytes() == b"log"
    assert names[0] != names[1]


def test_salvage_of_a_sound_file_reads_everything(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    ids = _seeded(open_store)
    found = salvage(paths.archive_db)
    assert [row[3].id for row in sorted(found.messages, key=lambda r: r[2])] == ids
    assert [row[2] for row in sorted(found.messages, key=lambda r: r[2])] == list(range(40))
    assert [s.title for s in found.sessions] == ["kept title"]
    assert any(e[3] == "note" for e in found.events)
    assert found.unreadable == 0
    scanned = {rowid: row for rowid, row in leaf_rows(paths.archive_db) if len(row) == 10}
    for rowid, _sid, seq, message in found.messages:  # the page reader agrees with SQLite
        assert rowid is not None
        assert scanned[rowid][1:4] == [message.id, "s", seq]
    assert not list(paths.archive_db.parent.glob("*.salvage*"))  # the working copy is gone


def test_rebuild_keeps_rowids_seqs_title_and_fills_in_from_history(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    store = open_store(max_history_bytes=1500)
    store.import_messages(conversation([f"line {i:02d} " + "x" * 40 for i in range(40)]), "s")
    store.archive.set_title("s", "kept title")
    recent = [m.id for m in store.history("s").messages]
    rows_before = {r.message.id: (r.rowid, r.seq) for r in store.archive.messages("s")}
    store.close()
    full = salvage(paths.archive_db)
    # Lose the rows of two recent messages: history.json still has them.
    lost = set(recent[2:4])
    partial = Salvage(full.sessions, [r for r in full.messages if r[3].id not in lost], [], 0)
    sessions, rows, restored = plan_restore(partial, paths.sessions_dir, FakeClock())
    assert restored == 2
    planned = {row[3].id: (row[0], row[2]) for row in rows}
    for msg_id, (rowid, seq) in rows_before.items():
        assert planned[msg_id][1] == seq  # the lost rows get their old seqs back
        if msg_id not in lost:
            assert planned[msg_id][0] == rowid
    [meta] = sessions
    assert meta.title == "kept title"
    assert meta.cut_seq == rows_before[recent[0]][1]


def test_open_archive_repairs_only_when_asked(paths: AppPaths) -> None:
    paths.ensure()
    paths.archive_db.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(ArchiveDamagedError):
        open_archive(paths.archive_db, paths.sessions_dir, FakeClock(), repair=False)
    assert paths.archive_db.read_bytes() == b"\x00garbage" * 1000
    archive, report = open_archive(paths.archive_db, paths.sessions_dir, FakeClock())
    archive.close()
    assert report is not None
    assert report.set_aside.read_bytes() == b"\x00garbage" * 1000
    assert "set aside as" in report.notice()


def test_damage_found_by_reconcile_is_repaired_once_at_open(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _seeded(open_store)
    calls: list[int] = []

    def flaky(store: object, *, repair: bool, deep: bool, **more: object) -> list[object]:
        calls.append(1)
        if len(calls) == 1:
            raise ArchiveDamagedError("archive x: the file is damaged")
        return []

    monkeypatch.setattr("agenvoy_desktop.core.reconcile.reconcile", flaky)
    store = open_store()
    assert len(calls) == 2
    assert any("set aside" in n for n in store.notices)
    assert {r.message.id for r in store.archive.messages("s")} == set(ids)


def test_history_tail_is_restored_but_compaction_stays_done(open_store: StoreFactory) -> None:
    store = open_store(max_history_bytes=10_000_000)
    messages = conversation([f"m{i}" for i in range(10)])
    store.import_messages(messages, "s")
    hist = store.history("s")
    # A compaction that rewrote the file but stopped before moving the cut point:
    # the first two stay dropped; a lost tail (the last three) comes back.
    hist.rewrite(messages[2:7])
    findings = reconcile(store, repair=True, deep=True)
    assert [m.id for m in store.history("s").messages] == [m.id for m in messages[2:]]
    assert any("3 recent message(s) restored" in f.detail for f in findings)
    assert reconcile(store, repair=True, deep=True) == []


def test_history_only_message_keeps_its_place_when_the_middle_comes_back(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    messages = conversation([f"m{i}" for i in range(6)])
    store.import_messages(messages, "s")
    late = conversation(["not archived yet"], start=T0 + 100 * SECOND)[0]
    store.history("s").rewrite([*messages[:2], *messages[4:], late])
    reconcile(store, repair=True, deep=True)
    assert [m.id for m in store.history("s").messages] == [*(m.id for m in messages), late.id]
    assert store.archive.messages("s")[-1].message.id == late.id


def test_error_memory_damage_is_refused_or_set_aside(paths: AppPaths) -> None:
    path = error_db_path(paths.ensure())
    path.write_bytes(b"garbage!" * 512)
    with pytest.raises(ErrorMemoryDamagedError):
        open_error_memory(path, None, repair=False)
    memory, notice = open_error_memory(path, None)
    with memory:
        assert memory.count() == 0
    assert notice is not None
    assert "fresh one started" in notice
    assert len(list(path.parent.glob("errors.sqlite3.damaged-*"))) == 1


def test_summary_files_set_aside_together_and_only_when_garbled(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"version": 99}), "utf-8")
    (tmp_path / "summary.meta.json").write_text('{"cursor_seq": 3}', "utf-8")
    assert check_summary_files(tmp_path, repair=True) == []  # a newer app's file: left alone
    (tmp_path / "summary.meta.json").write_bytes(b'{"cursor_seq": 3')
    assert check_summary_files(tmp_path, repair=False)
    assert (tmp_path / "summary.meta.json").exists()
    [notice] = check_summary_files(tmp_path, repair=True)
    assert "starts fresh" in notice
    assert not (tmp_path / "summary.json").exists()
    assert len(list(tmp_path.glob("*.damaged-*"))) == 2


def test_cli_repairs_damage_found_mid_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    attempts: list[str] = []

    def damaged_once(args: object) -> int:
        attempts.append("x")
        if len(attempts) == 1:
            raise ArchiveDamagedError("archive x: the file is damaged")
        return 0

    monkeypatch.setattr(cli_sessions, "cmd_sessions", damaged_once)
    assert cli.main(["sessions", "--data-dir", str(tmp_path / "p")]) == 0
    assert len(attempts) == 2  # repaired, then run again: it writes nothing
    assert "notice: the archive was damaged" in capsys.readouterr().err
    attempts.clear()
    monkeypatch.setattr(cli_sessions, "cmd_reset", damaged_once)
    assert cli.main(["reset", "s", "--data-dir", str(tmp_path / "p")]) == 1
    assert len(attempts) == 1  # a writing command is not repeated
    assert "run the command again" in capsys.readouterr().err


def test_rows_below_a_lost_interior_page_are_found_on_the_pages(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    ids = _seeded(open_store, count=600)
    db = sqlite3.connect(paths.archive_db)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = db.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'messages'").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    data = bytearray(paths.archive_db.read_bytes())
    data[(root - 1) * size : root * size] = bytes(size)  # the table's root page, zeroed
    paths.archive_db.write_bytes(bytes(data))
    found = salvage(paths.archive_db, {"s"})
    assert {row[3].id for row in found.messages} == set(ids)
