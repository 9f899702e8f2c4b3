"""A versioned registry file: newer ones left alone, damaged ones moved aside, safe writes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.versioned_json import VersionedJsonFile


class RegistryError(KnownError, ValueError):
    """Stands in for a registry's own error class."""


def _names(data: Any) -> list[str]:
    """A strict parser like the registries': anything unexpected raises."""
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise ValueError("no entry list")
    return [str(raw["name"]) for raw in data["entries"]]


class Recovered:
    """Records what ``recover`` was told and answers with a marker list."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Path]] = []

    def __call__(self, why: str, aside: Path) -> list[str]:
        self.calls.append((why, aside))
        return ["recovered"]


@pytest.fixture
def store(tmp_path: Path) -> VersionedJsonFile:
    return VersionedJsonFile(tmp_path / "things.json", 1, RegistryError, "nothing is offered")


def _asides(store: VersionedJsonFile) -> list[Path]:
    return sorted(store.path.parent.glob(store.path.name + ".corrupt-*"))


def test_missing_file_gives_none(store: VersionedJsonFile) -> None:
    recover = Recovered()
    assert store.load(_names, recover) is None
    assert recover.calls == []
    assert not store.path.exists(), "reading never creates the file"


def test_save_then_load_round_trips(store: VersionedJsonFile) -> None:
    store.save([{"name": "a"}, {"name": "ü"}])
    assert store.load(_names, Recovered()) == ["a", "ü"]
    text = store.path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    assert "ü" in text, "non-ASCII is kept readable"
    assert json.loads(text) == {"version": 1, "entries": [{"name": "a"}, {"name": "ü"}]}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_save_is_owner_only(store: VersionedJsonFile) -> None:
    store.save([])
    assert store.path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff\xfe\x00", "not UTF-8 text"),
        (b"{not json", "not valid JSON"),
        (b"[]", "no entry list"),
        (json.dumps({"version": 1, "entries": [{"other": 1}]}).encode(), "'name'"),
    ],
)
def test_damage_is_moved_aside_then_recovered(
    store: VersionedJsonFile, content: bytes, why: str
) -> None:
    store.path.write_bytes(content)
    recover = Recovered()
    assert store.load(_names, recover) == ["recovered"]
    (aside,) = _asides(store)
    assert aside.read_bytes() == content, "the damaged file is kept, byte for byte"
    assert not store.path.exists()
    ((told, where),) = recover.calls
    assert told.startswith(why)
    assert where == aside


def test_newer_version_is_refused_and_left_untouched(store: VersionedJsonFile) -> None:
    newer = json.dumps({"version": 2, "entries": [{"unknown": True}]})
    store.path.write_text(newer, encoding="utf-8")
    recover = Recovered()
    with pytest.raises(RegistryError) as info:
        store.load(_names, recover)
    assert str(info.value) == (
        f"{store.path} was written by a newer version of the app (format 2); "
        "it is left as it is and nothing is offered"
    )
    assert recover.calls == []
    assert store.path.read_text(encoding="utf-8") == newer
    assert _asides(store) == []


def test_older_or_unversioned_file_goes_to_the_parser(store: VersionedJsonFile) -> None:
    store.path.write_text(json.dumps({"version": 0, "entries": [{"name": "old"}]}), "utf-8")
    assert store.load(_names, Recovered()) == ["old"]
    store.path.write_text(json.dumps({"entries": [{"name": "bare"}]}), "utf-8")
    assert store.load(_names, Recovered()) == ["bare"]


def test_damage_note_reads_as_one_line(store: VersionedJsonFile, tmp_path: Path) -> None:
    aside = tmp_path / "things.json.corrupt-7"
    assert store.damage_note("not valid JSON (x)", aside, "the list starts empty") == (
        f"{store.path} was damaged (not valid JSON (x)); it was moved to "
        "things.json.corrupt-7 and the list starts empty"
    )


def test_damage_that_cannot_be_moved_raises_the_registry_error(
    store: VersionedJsonFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: Path, dst: Path) -> None:
        raise PermissionError(13, "Permission denied")

    store.path.write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(os, "replace", refuse)
    recover = Recovered()
    with pytest.raises(RegistryError, match=r"is damaged \(not valid JSON .*cannot be moved aside"):
        store.load(_names, recover)
    assert recover.calls == []
    assert store.path.read_text(encoding="utf-8") == "{not json"


def test_unreadable_file_raises_the_registry_error(store: VersionedJsonFile) -> None:
    store.path.mkdir()  # reading a folder fails with an OSError other than "not found"
    with pytest.raises(RegistryError, match="cannot read"):
        store.load(_names, Recovered())
