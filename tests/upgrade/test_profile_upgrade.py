"""A profile written by a released version opens in this one with every memory kept.

``profiles/0.1.0`` was written by release 0.1.0 itself (``scripts/make_profile_fixture.py``
run against that release's code; see its docstring), never edited by hand.
Opening it here migrates the archive (schema 3 → current) and stamps the
profile; the files a migration changes are backed up first.  A profile from
a *newer* version is refused and left byte for byte as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.cli import main as cli_main
from agenvoy_desktop.core import archive as archive_module
from agenvoy_desktop.core.profile import (
    KEEP_BACKUPS,
    PROFILE_FORMAT,
    ProfileTooNewError,
    prepare_profile,
    read_stamp,
    write_stamp,
)
from agenvoy_desktop.core.reconcile import doctor
from agenvoy_desktop.core.search import SearchQuery, search_chat_history
from agenvoy_desktop.core.summary import load_summary
from agenvoy_desktop.llm.catalogue import ModelCatalogue
from agenvoy_desktop.llm.embedder import Embedder
from agenvoy_desktop.operations.documents import collection_files, list_collections
from agenvoy_desktop.paths import AppPaths, app_paths
from agenvoy_desktop.settings import load_settings
from tests.llm.conftest import minilm_gguf, minilm_source_dir

__all__ = ["minilm_gguf", "minilm_source_dir"]  # fixtures shared with the model tests

RELEASES = Path(__file__).parent / "profiles"


def copy_release(tmp_path: Path, release: str = "0.1.0") -> tuple[AppPaths, dict[str, Any]]:
    """A copy of the release's profile (tests never write into the fixture itself)."""
    shutil.copytree(RELEASES / release / "home", tmp_path / "home")
    expected = json.loads((RELEASES / release / "expected.json").read_text("utf-8"))
    return app_paths(tmp_path / "home"), expected


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and modification time."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def check_memory(services: AppServices, expected: dict[str, Any]) -> None:
    """Storage thread: sessions, messages, vectors, the summary and the error records."""
    store = services.store
    titles = {info.session_id: info.title for info in store.sessions()}
    for sid, want in expected["sessions"].items():
        assert titles[sid] == want["title"]
        assert [m.id for m in store.history(sid).messages] == want["messages"]
        assert store.archive.count(sid) == len(want["messages"])
        assert len(store.archive.vector_rowids(sid)) == len(want["messages"])
    summary = load_summary(store.folder(expected["summary_session"]))
    assert summary is not None
    assert summary.to_json() == expected["summary"]
    for record_id, outcome in expected["error_records"].items():
        record = services.errors.get(int(record_id))
        assert record is not None
        assert record.outcome == outcome


def test_every_memory_of_0_1_0_survives_the_upgrade(tmp_path: Path) -> None:
    paths, expected = copy_release(tmp_path)
    services = AppServices.open(paths)
    try:
        services.storage.run_sync(check_memory, services, expected)
        assert services.settings.memory.window_messages == expected["settings"]["window_messages"]
        assert services.settings.models.temperature == expected["settings"]["temperature"]
    finally:
        services.close()
    names = {entry.name for entry in ModelCatalogue(paths.models_dir).entries()}
    assert expected["catalogue_entry"] in names
    collection = expected["collection"]
    assert [view.name for view in list_collections(paths)] == [collection["name"]]
    indexed = collection_files(paths, collection["name"], check_disk=False)
    assert sorted(Path(view.path).name for view in indexed) == collection["files"]


def test_the_upgrade_migrates_backs_up_and_stamps(tmp_path: Path) -> None:
    paths, _expected = copy_release(tmp_path)
    assert read_stamp(paths) is None  # 0.1.0 predates the stamp
    before = (paths.archive_db).read_bytes()
    AppServices.open(paths).close()
    stamp = read_stamp(paths)
    assert stamp is not None
    assert stamp.format == PROFILE_FORMAT
    backups = list((paths.config_dir / "backups").iterdir())
    assert len(backups) == 1
    saved = backups[0] / "config" / "memory" / "archive.sqlite3"
    assert saved.read_bytes() == before
    assert (backups[0] / "config" / "settings.json").is_file()
    import sqlite3

    with sqlite3.connect(paths.archive_db) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
    assert version == archive_module.SCHEMA_VERSION
    AppServices.open(paths).close()  # a second open is no upgrade: no second backup
    assert len(list((paths.config_dir / "backups").iterdir())) == 1


def test_the_backup_works_when_config_and_data_are_apart(tmp_path: Path) -> None:
    """The default layout (``~/.config/…`` and ``~/.local/share/…``): the data folder is
    not beside the config folder, and the model catalogue lives in it."""
    release, _expected = copy_release(tmp_path)
    paths = AppPaths(
        config_dir=tmp_path / "dot-config" / "agenvoy-desktop",
        data_dir=tmp_path / "local" / "share" / "agenvoy-desktop",
    )
    shutil.copytree(release.config_dir, paths.config_dir)
    shutil.copytree(release.data_dir, paths.data_dir)
    assert (paths.models_dir / "catalogue.json").is_file()
    folder = prepare_profile(paths)
    assert folder is not None
    assert (folder / "config" / "memory" / "archive.sqlite3").is_file()
    assert (folder / "data" / "models" / "catalogue.json").is_file()


def test_only_the_newest_backups_are_kept(tmp_path: Path) -> None:
    paths, _expected = copy_release(tmp_path)
    for _ in range(KEEP_BACKUPS + 2):
        paths.config_dir.joinpath("profile.json").unlink(missing_ok=True)
        assert prepare_profile(paths) is not None
    folders = sorted(p.name for p in (paths.config_dir / "backups").iterdir())
    assert len(folders) == KEEP_BACKUPS


def test_a_profile_from_a_newer_version_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths, _expected = copy_release(tmp_path)
    write_stamp(paths)
    stamp_file = paths.config_dir / "profile.json"
    stamp_file.write_text(json.dumps({"format": PROFILE_FORMAT + 1, "written_by": "9.0.0"}))
    before = snapshot(tmp_path / "home")
    with pytest.raises(ProfileTooNewError, match=r"9\.0\.0.*nothing in it was changed"):
        AppServices.open(paths)
    code = cli_main(["--data-dir", str(tmp_path / "home"), "sessions"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "written by Agenvoy Desktop 9.0.0" in err[0]
    assert snapshot(tmp_path / "home") == before


def test_a_fresh_profile_is_stamped_without_a_backup(tmp_path: Path) -> None:
    paths = app_paths(tmp_path / "new").ensure()
    assert prepare_profile(paths) is None
    stamp = read_stamp(paths)
    assert stamp is not None
    assert stamp.format == PROFILE_FORMAT
    assert not (paths.config_dir / "backups").exists()
    assert load_settings(paths.settings_file).memory.window_messages > 0


@pytest.mark.slow
def test_the_release_vectors_still_answer_with_the_real_embedder(
    tmp_path: Path, minilm_gguf: Path
) -> None:
    """The MiniLM vectors 0.1.0 stored are used as they are: nothing to re-embed, and a
    search by meaning finds the bike lock code."""
    paths, expected = copy_release(tmp_path)
    with Embedder(minilm_gguf) as embedder:
        services = AppServices.open(paths, embedder=embedder)
        try:
            store = services.store
            findings = services.storage.run_sync(doctor, store, repair=False)
            assert [f for f in findings if "vector" in str(f).lower()] == []
            query = SearchQuery("bicycle lock number", mode="semantic", limit=3)
            result = services.storage.run_sync(search_chat_history, store, query)
        finally:
            services.close()
    trip = expected["sessions"][expected["summary_session"]]["messages"]
    assert {hit.item.message.id for hit in result.hits} & set(trip[4:6])
