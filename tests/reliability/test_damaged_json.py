"""A damaged JSON file of the profile is set aside (or rebuilt) with one clear line.

Each case writes the kind of damage a disk or a careless hand leaves in one
JSON file (a stray non-UTF-8 byte, ``null``, a list, a dict of the wrong
types) and runs the app's own entry points: the command works, the user is
told, and nothing stored is lost.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.vectors import META_FILE
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import conversation
from tests.fakes import HashingEmbedder

SID = "s1"
DIM = 64

BAD_SHAPES = [b"null", b"[]", b'"text"', b'{"dim": "64", "count": [], "capacity": null}']


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=DIM))


@pytest.fixture
def profile(tmp_path: Path) -> AppPaths:
    """One small session with its vectors and vector index files written."""
    paths = app_paths(tmp_path / "profile")
    texts = [f"message {i:02d} about topic{i % 5} " + "words " * 5 for i in range(30)]
    with open_memory(paths, HashingEmbedder(dim=DIM)) as store:
        store.import_messages(conversation(texts), SID, title="trip")
        store.vectors(SID).flush()
    assert (paths.sessions_dir / SID / META_FILE).exists()
    return paths


def cli_run(capsys: pytest.CaptureFixture[str], paths: AppPaths, *args: str) -> tuple[int, str]:
    code = cli.main([*args, "--data-dir", str(paths.config_dir.parent)])
    out, err = capsys.readouterr()
    return code, out + err


def aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


# -- settings.json ------------------------------------------------------------


@pytest.mark.parametrize("damaged", [b'{"x": "\xff"}', b"\xff\xfe", *BAD_SHAPES[:3]])
def test_damaged_settings_are_set_aside_and_commands_work(
    profile: AppPaths,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    damaged: bytes,
) -> None:
    profile.settings_file.parent.mkdir(parents=True, exist_ok=True)
    profile.settings_file.write_bytes(damaged)
    with caplog.at_level(logging.WARNING):
        code, text = cli_run(capsys, profile, "sessions", "--json")
    assert code == 0, text
    assert "internal error" not in text
    assert SID in text
    kept = aside(profile.settings_file)
    assert [p.read_bytes() for p in kept] == [damaged]  # the user's file is kept as it was
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("settings file" in w and "moved to" in w for w in warnings), warnings


def test_non_utf8_settings_do_not_stop_doctor_repair(
    profile: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    profile.settings_file.parent.mkdir(parents=True, exist_ok=True)
    profile.settings_file.write_bytes(b'{"x": "\xff"}')
    code, text = cli_run(capsys, profile, "doctor", "--repair")
    assert code == 0, text
    assert aside(profile.settings_file)


# -- vectors.meta.json --------------------------------------------------------


@pytest.mark.parametrize("damaged", [*BAD_SHAPES, b"{not json", b'{"dim": \xff}'])
def test_plain_doctor_reports_a_damaged_vector_meta_file(
    profile: AppPaths, capsys: pytest.CaptureFixture[str], damaged: bytes
) -> None:
    meta = profile.sessions_dir / SID / META_FILE
    meta.write_bytes(damaged)
    code, text = cli_run(capsys, profile, "doctor")
    assert code == 3, text
    assert f"found: [{SID}] vector index: {META_FILE} damaged" in text
    assert meta.read_bytes() == damaged  # plain doctor touches nothing


@pytest.mark.parametrize("damaged", BAD_SHAPES)
def test_doctor_repair_rebuilds_a_damaged_vector_meta_file(
    profile: AppPaths, capsys: pytest.CaptureFixture[str], damaged: bytes
) -> None:
    meta = profile.sessions_dir / SID / META_FILE
    meta.write_bytes(damaged)
    code, text = cli_run(capsys, profile, "doctor", "--repair")
    assert code == 0, text
    assert f"repaired: [{SID}] vector index: {META_FILE} damaged" in text
    assert cli_run(capsys, profile, "doctor") == (0, "all layers consistent: nothing to repair\n")
    with open_memory(profile, HashingEmbedder(dim=DIM)) as store:
        assert store.vectors(SID).count == 30  # every stored vector is back in the index


@pytest.mark.parametrize("damaged", BAD_SHAPES)
def test_search_works_over_a_damaged_vector_meta_file(
    profile: AppPaths, capsys: pytest.CaptureFixture[str], damaged: bytes
) -> None:
    (profile.sessions_dir / SID / META_FILE).write_bytes(damaged)
    code, text = cli_run(capsys, profile, "search", "topic3", "--mode", "semantic", "--json")
    assert code == 0, text
    assert "topic3" in text
