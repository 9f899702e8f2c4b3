"""A reset or removed session leaves the archive copies the app set aside earlier.

Upgrade backups of every older schema and damaged archives SQLite still reads
lose the session's rows (and other sessions' quotes of it) without being
migrated; their full-text index is rebuilt when the app next opens them.  A
copy SQLite cannot read is left as it was and reported, never raised.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path

import pytest

from agenvoy_desktop.core import lifecycle
from agenvoy_desktop.core.archive import Archive
from agenvoy_desktop.core.set_aside_copies import (
    SCRUBBED_KEY,
    CopiesReport,
    archive_copies,
    delete_copies,
    take_session_out,
)
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import AppPaths
from tests.conftest import StoreFactory, conversation
from tests.set_aside import damaged_copy, garbage_copy, old_archive, upgrade_backup

SECRET = "quokkalock4721"
SESSIONS = {
    "doomed": [f"My bike lock code is {SECRET}.", f"Noted: {SECRET}."],
    "keeper": ["The lighthouse keeper is called Marguerite", "A fine name."],
}


def _backup_of(paths: AppPaths, version: int) -> Path:
    """An upgrade backup's archive of schema *version*, where profile.back_up puts it."""
    folder = paths.config_dir / "backups" / f"20261201T000000Z-format-1-to-{version}"
    archive = folder / paths.archive_db.relative_to(paths.config_dir.parent)
    old_archive(archive, version, SESSIONS)
    return archive


def _bytes_hold(archive: Path, word: str = SECRET) -> list[str]:
    """The files of the copy (it and its companions) whose bytes hold *word*."""
    return [
        p.name
        for p in archive.parent.iterdir()
        if p.name.startswith(archive.name) and word.encode() in p.read_bytes()
    ]


def _read(archive: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(archive)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def _opened_by_the_app(archive: Path, tmp_path: Path) -> Archive:
    """The copy as the app opens it (migrated: on a copy of it, so the original stays)."""
    target = tmp_path / "restored" / "archive.sqlite3"
    target.parent.mkdir()
    shutil.copyfile(archive, target)
    return Archive(target)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_a_backup_of_an_older_schema_loses_the_session_and_keeps_its_version(
    paths: AppPaths, tmp_path: Path, version: int
) -> None:
    backup = _backup_of(paths, version)
    schema = _read(backup, "SELECT type, name, sql FROM sqlite_master ORDER BY name")
    config = _read(backup, "SELECT k, v FROM messages_fts_config ORDER BY k")
    assert _bytes_hold(backup)

    report = take_session_out(paths, "doomed")

    assert report == CopiesReport(cleaned=(backup,))
    assert _bytes_hold(backup) == []  # no row, index segment, free page or log frame
    assert not backup.with_name(backup.name + "-wal").exists()
    assert _read(backup, "PRAGMA user_version") == [(version,)]  # not migrated
    assert _read(backup, "SELECT type, name, sql FROM sqlite_master ORDER BY name") == schema
    assert _read(backup, "SELECT k, v FROM messages_fts_config ORDER BY k") == config
    assert _read(backup, "SELECT DISTINCT session_id FROM messages") == [("keeper",)]
    assert _read(backup, "SELECT session_id FROM sessions") == [("keeper",)]
    assert _read(backup, "SELECT DISTINCT session_id FROM vectors") == [("keeper",)]
    assert _read(backup, "SELECT count(*) FROM meta WHERE key = 'fts_text_version'") == [(0,)]
    (recall,) = _read(backup, "SELECT detail FROM events WHERE kind = 'recall'")
    assert "doomed-0" not in str(recall[0])  # the other session's quote of it went
    # The app that opens it again rebuilds the index from the rows: the others are found.
    archive = _opened_by_the_app(backup, tmp_path)
    try:
        (hit,) = archive.keyword_search("Marguerite", limit=5)
        assert hit[0].session_id == "keeper"
        assert archive.keyword_search(SECRET, limit=5) == []
        assert archive.fts_ok()
    finally:
        archive.close()


def test_the_backup_the_app_makes_before_an_upgrade_is_cleaned(
    open_store: StoreFactory, paths: AppPaths, tmp_path: Path
) -> None:
    """profile.back_up's copy of the live archive, set back to schema 4."""
    store = open_store()
    doomed, kept = _seed(store)
    backup = upgrade_backup(paths)
    assert _bytes_hold(backup)
    assert lifecycle.remove_session(store, doomed) == CopiesReport(cleaned=(backup,))
    assert _bytes_hold(backup) == []
    assert _read(backup, "PRAGMA user_version") == [(4,)]
    archive = _opened_by_the_app(backup, tmp_path)
    try:
        assert archive.count(doomed) == 0
        assert archive.count(kept) == 2
        assert {h.session_id for h, _ in archive.keyword_search("lighthouse", limit=5)} == {kept}
    finally:
        archive.close()


def _seed(store: MemoryStore) -> tuple[str, str]:
    doomed = store.import_messages(conversation(SESSIONS["doomed"]), "doomed")
    kept = store.import_messages(conversation(SESSIONS["keeper"]), "keeper")
    return doomed, kept


def test_a_damaged_copy_sqlite_can_read_is_cleaned_by_a_reset(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    store = open_store()
    doomed, kept = _seed(store)
    aside = damaged_copy(paths)
    db = sqlite3.connect(aside)  # its damage: the full-text index's structure record
    db.execute("UPDATE messages_fts_data SET block = x'00' WHERE id = 10")
    db.commit()
    db.close()
    assert _bytes_hold(aside)
    report = lifecycle.reset_session(store, doomed)
    assert report == CopiesReport(cleaned=(aside,))
    assert _bytes_hold(aside) == []
    assert _read(aside, "SELECT DISTINCT session_id FROM messages") == [(kept,)]
    assert _read(aside, "PRAGMA integrity_check") == [("ok",)]


def test_a_damaged_copy_is_rewritten_whole_once_then_only_for_a_session_it_holds(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    """Rewriting a large damaged copy at every reset would keep the storage thread busy
    for nothing: once scrubbed whole (its lost pages dropped by VACUUM), a reset of a
    session it does not hold leaves it alone; one it holds still goes."""
    store = open_store()
    doomed, _kept = _seed(store)
    aside = damaged_copy(paths)
    later, newest = store.create_session("later"), store.create_session("newest")
    assert lifecycle.reset_session(store, later) == CopiesReport(cleaned=(aside,))  # whole
    assert _read(aside, f"SELECT value FROM meta WHERE key = '{SCRUBBED_KEY}'") == [("1",)]
    before = aside.read_bytes()
    assert lifecycle.reset_session(store, newest) == CopiesReport()
    assert aside.read_bytes() == before
    assert _bytes_hold(aside)
    assert lifecycle.reset_session(store, doomed) == CopiesReport(cleaned=(aside,))
    assert _bytes_hold(aside) == []


def test_a_copy_kept_with_its_write_ahead_log_keeps_no_frame_of_the_session(
    open_store: StoreFactory, paths: AppPaths
) -> None:
    """A copy taken while the app had it open: what was committed is still in its log."""
    store = open_store()
    doomed, _kept = _seed(store)
    aside = damaged_copy(paths)
    log_file = aside.with_name(aside.name + "-wal")
    assert _bytes_hold(aside) == [log_file.name]  # not checkpointed yet
    assert lifecycle.remove_session(store, doomed) == CopiesReport(cleaned=(aside,))
    assert _bytes_hold(aside) == []
    assert not log_file.exists()


def test_a_copy_sqlite_cannot_read_is_left_as_it_was_and_reported(
    open_store: StoreFactory, paths: AppPaths, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage, and an archive cut short: a reset still succeeds and names them."""
    store = open_store()
    doomed, _kept = _seed(store)
    garbage = garbage_copy(paths)
    truncated = damaged_copy(paths, "20261204T000000Z")
    truncated.with_name(truncated.name + "-wal").unlink(missing_ok=True)
    truncated.write_bytes(_checkpointed(store)[:1000])
    before = {p: p.read_bytes() for p in (garbage, truncated)}
    with caplog.at_level(logging.WARNING):
        report = lifecycle.reset_session(store, doomed)
    assert report == CopiesReport(not_cleaned=(garbage, truncated))
    assert {p: p.read_bytes() for p in (garbage, truncated)} == before
    assert f"could not take session {doomed} out of the copy {garbage}" in caplog.text
    assert store.archive.count(doomed) == 0  # the reset itself went through


def _checkpointed(store: MemoryStore) -> bytes:
    store.archive.truncate_log()
    return store.archive.path.read_bytes()


def test_taking_out_again_is_harmless_and_a_copy_without_the_session_is_left_alone(
    paths: AppPaths,
) -> None:
    backup = _backup_of(paths, 4)
    assert take_session_out(paths, "doomed").cleaned == (backup,)
    after = backup.read_bytes()
    assert take_session_out(paths, "doomed") == CopiesReport()  # a roll-forward's rerun
    assert take_session_out(paths, "never-there") == CopiesReport()
    assert backup.read_bytes() == after


def test_an_interrupted_remove_cleans_the_copies_when_rolled_forward(
    open_store: StoreFactory, paths: AppPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    doomed, _kept = _seed(store)
    backup = upgrade_backup(paths)

    def crash(*_args: object, **_options: object) -> None:
        raise OSError("killed")

    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "take_session_out", crash)
        with pytest.raises(OSError, match="killed"):
            lifecycle.remove_session(store, doomed)
    assert _bytes_hold(backup)
    assert lifecycle.finish_pending(store) == [f"finished interrupted remove of session {doomed}"]
    assert _bytes_hold(backup) == []


def test_delete_copies_deletes_only_copies_set_aside(paths: AppPaths) -> None:
    garbage = garbage_copy(paths)
    garbage.with_name(garbage.name + "-wal").write_bytes(b"log")
    backup = _backup_of(paths, 4)
    assert archive_copies(paths) == [backup, garbage]
    stranger = paths.config_dir / "settings.json"
    stranger.write_text("{}")
    assert delete_copies(paths, [garbage, stranger]) == [garbage]
    assert not garbage.exists()
    assert not garbage.with_name(garbage.name + "-wal").exists()
    assert stranger.exists()
    assert backup.exists()
