"""Changing a collection in the registry; the ``watch`` flag, and registries written before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.errors import InvalidGlobError, InvalidRootError, UnknownCollectionError
from agenvoy_desktop.rag.registry import CollectionRegistry, registry_file


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    return folder


@pytest.fixture
def mail(tmp_path: Path) -> Path:
    folder = tmp_path / "mail"
    folder.mkdir()
    return folder


def test_a_registry_written_before_watching_loads_unwatched(paths: AppPaths, notes: Path) -> None:
    old_entry = {"name": "old", "roots": [str(notes)], "include": [], "exclude": []}
    path = registry_file(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "collections": [old_entry]}))
    registry = CollectionRegistry(paths)
    (old,) = registry.list()
    assert (old.name, old.watch) == ("old", False)
    assert not registry.notices
    assert path.read_text() == json.dumps({"version": 1, "collections": [old_entry]})


def test_watch_is_kept_in_the_file(paths: AppPaths, notes: Path) -> None:
    CollectionRegistry(paths).add("notes", [notes], watch=True)
    assert json.loads(registry_file(paths).read_text())["collections"][0]["watch"] is True
    assert CollectionRegistry(paths).get("notes").watch


def test_a_watch_that_is_not_true_or_false_is_a_bad_entry(paths: AppPaths, notes: Path) -> None:
    good = Collection("good", (notes,)).to_json()
    bad = {**good, "name": "bad", "watch": "yes"}
    path = registry_file(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "collections": [good, bad]}))
    registry = CollectionRegistry(paths)
    assert [c.name for c in registry.list()] == ["good"]
    assert "1 of its entries could not be read" in registry.notices[0]


def test_update_changes_only_what_it_is_given(paths: AppPaths, notes: Path, mail: Path) -> None:
    registry = CollectionRegistry(paths)
    made = registry.add("docs", [notes], include=["*.md"])
    before, after = registry.update("docs", roots=[notes, str(mail)], exclude=["drafts/**"])
    assert before == made
    assert after == Collection(
        "docs", (notes, mail), ("*.md",), ("drafts/**",), made.created_ns, watch=False
    )
    assert CollectionRegistry(paths).get("docs") == after
    _, watched = registry.update("docs", include=[], watch=True)
    assert (watched.roots, watched.include, watched.watch) == ((notes, mail), (), True)


def test_update_refuses_bad_input_and_changes_nothing(
    paths: AppPaths, notes: Path, tmp_path: Path
) -> None:
    registry = CollectionRegistry(paths)
    made = registry.add("docs", [notes])
    with pytest.raises(UnknownCollectionError):
        registry.update("nope", watch=True)
    with pytest.raises(InvalidRootError, match="not found"):
        registry.update("docs", roots=[notes, tmp_path / "missing"])
    with pytest.raises(InvalidRootError, match="at least one"):
        registry.update("docs", roots=[])
    (notes / "sub").mkdir()
    with pytest.raises(InvalidRootError, match="inside"):
        registry.update("docs", roots=[notes, notes / "sub"])
    with pytest.raises(InvalidGlobError):
        registry.update("docs", exclude=["../up"])
    assert CollectionRegistry(paths).get("docs") == made


def test_a_root_on_an_unplugged_disk_does_not_block_an_update(
    paths: AppPaths, notes: Path, tmp_path: Path
) -> None:
    usb = tmp_path / "usb"
    usb.mkdir()
    registry = CollectionRegistry(paths)
    registry.add("docs", [notes, usb])
    usb.rmdir()
    _, after = registry.update("docs", exclude=["*.log"], watch=True)
    assert after.roots == (notes, usb)
