"""Profiles are private on POSIX: folders 0700, files 0600, old profiles fixed on start."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.profile import BACKUPS_DIR, read_stamp
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import app_paths, secure_tree
from agenvoy_desktop.settings import Settings, save_settings
from tests.conftest import conversation
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    """Start from the usual 022 (files 0644) and restore whatever the process had."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _loose(root: Path) -> list[str]:
    """Everything under *root* (itself included) that group or others can access."""
    found = [root, *root.rglob("*")]
    return [
        f"{p.relative_to(root)} {stat.S_IMODE(p.lstat().st_mode):o}"
        for p in found
        if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]


def _use_profile(root: Path) -> None:
    """Write every kind of file a profile holds: history, archive (+WAL), vectors, settings."""
    paths = app_paths(root)
    with open_memory(paths, HashingEmbedder(dim=32)) as store:
        sid = store.create_session("t", "s1")
        store.append(sid, conversation(["hello there", "hi", "a second pair", "ok"]))
        store.index_pending(sid)
        store.vectors(sid).flush()
    save_settings(paths.settings_file, Settings())


def test_a_new_profile_is_private(tmp_path: Path) -> None:
    root = tmp_path / "profile"
    _use_profile(root)
    paths = app_paths(root)
    names = {p.name for p in paths.config_dir.rglob("*")}
    assert {"history.json", "archive.sqlite3", "settings.json"} <= names
    assert any(n.startswith("vectors") for n in names)
    assert _loose(paths.config_dir) == []
    assert _loose(paths.data_dir) == []
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "first",
    [
        [
            "errors",
            "add",
            "--tool",
            "shell",
            "--symptom",
            "card 4111 refused",
            "--outcome",
            "failed",
        ],
        ["errors", "list"],
        ["models", "use", "default"],
    ],
    ids=["errors-add", "errors-list", "models-use"],
)
def test_a_profile_a_command_outside_the_memory_starts_is_private_and_stamped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: list[str]
) -> None:
    """``errors`` left errors.sqlite3 0644 in 0755 folders, and with ``models use`` no stamp:
    the next command said "This profile was upgraded" of a brand-new profile."""
    root = tmp_path / "profile"
    data_dir = ["--data-dir", str(root)]
    assert cli.main([*first, *data_dir]) == 0
    paths = app_paths(root)
    assert _loose(paths.config_dir) == []
    assert _loose(paths.data_dir) == []
    assert read_stamp(paths) is not None
    capsys.readouterr()
    assert cli.main(["sessions", *data_dir]) == 0
    assert "upgraded" not in capsys.readouterr().err
    assert not (paths.config_dir / BACKUPS_DIR).exists()


def test_an_old_readable_profile_is_fixed_on_start(tmp_path: Path) -> None:
    root = tmp_path / "old"
    _use_profile(root)
    paths = app_paths(root)
    for path in [paths.config_dir, *paths.config_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # what umask 022 used to leave
    assert _loose(paths.config_dir)
    assert secure_tree(paths.config_dir) > 0
    assert _loose(paths.config_dir) == []
    assert secure_tree(paths.config_dir) == 0  # nothing left to do


def test_opening_the_store_fixes_a_profile_from_an_older_version(tmp_path: Path) -> None:
    root = tmp_path / "older"
    config = root / "config" / "memory" / "sessions" / "s1"
    config.mkdir(parents=True)
    (config / "history.json").write_text("[\n]\n", "utf-8")
    for path in [root / "config", *(root / "config").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    with open_memory(app_paths(root)):
        pass
    assert _loose(root / "config") == []


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "shared.txt"
    outside.write_text("not ours", "utf-8")
    outside.chmod(0o644)
    config = tmp_path / "p" / "config"
    config.mkdir(parents=True)
    (config / "link").symlink_to(outside)
    secure_tree(config)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644


def test_atomic_writes_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    atomic_write_text(target, "{}")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
