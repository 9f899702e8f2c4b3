"""Collections: hostile names and patterns refused, roots checked, the registry file robust."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection, check_collection_name, check_roots
from agenvoy_desktop.rag.errors import (
    DuplicateCollectionError,
    InvalidCollectionNameError,
    InvalidGlobError,
    InvalidRootError,
    RegistryTooNewError,
    UnknownCollectionError,
)
from agenvoy_desktop.rag.globs import PathFilter, check_patterns
from agenvoy_desktop.rag.registry import CollectionRegistry, registry_file


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n")
    return folder


@pytest.fixture
def registry(paths: AppPaths) -> CollectionRegistry:
    ticks = iter(range(1, 10_000))
    return CollectionRegistry(paths, clock=lambda: next(ticks))


@pytest.mark.parametrize(
    "name",
    ["", "../x", "a/b", "a\\b", ".hidden", "x.", "CON", "nul.txt", "a b", "é", "x" * 65, "a\n"],
)
def test_hostile_collection_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidCollectionNameError, match="invalid collection name"):
        check_collection_name(name)


def test_good_names() -> None:
    for name in ("notes", "Mail-2024", "code_v1.2"):
        assert check_collection_name(name) == name


@pytest.mark.parametrize(
    "pattern",
    ["**/../*", "../secret", "a/../../b", "/etc/*", "C:/x", "~/x", "", "  ", "a//b", "./x"],
)
def test_hostile_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidGlobError):
        check_patterns([pattern])


@pytest.mark.parametrize(
    ("include", "exclude", "path", "wanted"),
    [
        ((), (), "deep/x.md", True),
        (("*.md",), (), "deep/down/x.md", True),
        (("*.md",), (), "x.txt", False),
        (("docs/**",), (), "docs/a/b.md", True),
        (("docs/**",), (), "other/docs/a.md", False),
        (("**/docs/*.md",), (), "docs/a.md", True),
        (("**/docs/*.md",), (), "x/docs/a.md", True),
        (("docs/*.md",), (), "docs/a/b.md", False),
        (("?.md",), (), "ab.md", False),
        (("[ab].md",), (), "b.md", True),
        (("[!ab].md",), (), "b.md", False),
        ((), ("drafts",), "drafts/x.md", True),  # a folder pattern prunes, not a file match
        ((), ("*.log",), "a/b.log", False),
        (("*.md",), ("private/**",), "private/x.md", False),
        (("notes\\*.md",), (), "notes/a.md", True),
    ],
)
def test_path_filter(
    include: tuple[str, ...], exclude: tuple[str, ...], path: str, wanted: bool
) -> None:
    pf = PathFilter(check_patterns(include), check_patterns(exclude))
    assert pf.wants_file(path) is wanted


def test_folders_are_pruned_by_exclude() -> None:
    pf = PathFilter((), check_patterns(["node_modules", "build/**", "**/tmp/**"]))
    assert pf.prunes_folder("node_modules")
    assert pf.prunes_folder("a/node_modules")
    assert pf.prunes_folder("build")
    assert pf.prunes_folder("x/tmp")
    assert not pf.prunes_folder("src")


def test_roots_must_be_absolute_existing_and_not_nested(notes: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidRootError, match="absolute"):
        check_roots(["notes"])
    with pytest.raises(InvalidRootError, match="not found"):
        check_roots([tmp_path / "missing"])
    (notes / "sub").mkdir()
    with pytest.raises(InvalidRootError, match="inside"):
        check_roots([notes / "sub", tmp_path])
    with pytest.raises(InvalidRootError, match="at least one"):
        check_roots([])
    assert check_roots([notes, str(notes), f"{notes}/../notes"]) == (notes,)


def test_a_binary_file_named_directly_is_refused(tmp_path: Path) -> None:
    blob = tmp_path / "photo.jpg"
    blob.write_bytes(b"\xff\xd8\xff\x00\x10JFIF\x00")
    with pytest.raises(InvalidRootError, match="binary file") as caught:
        check_roots([blob])
    assert "\n" not in str(caught.value)
    text = tmp_path / "journal"
    text.write_text("plain words")
    assert check_roots([text]) == (text,)


def test_add_get_list_remove(registry: CollectionRegistry, notes: Path) -> None:
    made = registry.add("notes", [notes], include=["*.md"], exclude=["drafts/**"])
    assert made == Collection("notes", (notes,), ("*.md",), ("drafts/**",), created_ns=1)
    assert registry.get("notes") == made
    assert [c.name for c in registry.list()] == ["notes"]
    with pytest.raises(DuplicateCollectionError, match="exists already"):
        registry.add("Notes", [notes])
    assert registry.remove("notes") == made
    assert registry.list() == []
    with pytest.raises(UnknownCollectionError, match="no document collection 'notes'"):
        registry.get("notes")
    with pytest.raises(UnknownCollectionError):
        registry.remove("notes")


def test_the_file_is_versioned_json_and_survives_a_new_registry(
    registry: CollectionRegistry, paths: AppPaths, notes: Path
) -> None:
    registry.add("notes", [notes])
    data = json.loads(registry_file(paths).read_text())
    assert data["version"] == 1
    assert data["collections"][0]["roots"] == [str(notes)]
    assert CollectionRegistry(paths).get("notes").roots == (notes,)


def test_a_missing_root_stays_in_the_registry(
    registry: CollectionRegistry, paths: AppPaths, tmp_path: Path
) -> None:
    usb = tmp_path / "usb"
    usb.mkdir()
    registry.add("usb", [usb])
    usb.rmdir()
    assert CollectionRegistry(paths).get("usb").roots == (usb,)
    assert not registry.notices


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00garbage",
        b'["a list"]',
        b'{"collections": []}',
        b'{"version": 1, "collections": {"a": 1}}',
    ],
)
def test_a_damaged_file_is_set_aside_never_fatal(
    registry: CollectionRegistry, paths: AppPaths, notes: Path, content: bytes
) -> None:
    path = registry_file(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert registry.list() == []
    assert len(registry.notices) == 1
    assert "set aside" in registry.notices[0]
    assert not path.exists()
    (aside,) = path.parent.glob("collections.json.damaged-*")
    assert aside.read_bytes() == content
    registry.add("notes", [notes])  # and the feature goes on working
    assert [c.name for c in CollectionRegistry(paths).list()] == ["notes"]


def test_bad_entries_are_dropped_and_the_good_kept(
    registry: CollectionRegistry, paths: AppPaths, notes: Path
) -> None:
    good = Collection("good", (notes,), created_ns=5).to_json()
    entries = [
        good,
        {"name": "../evil", "roots": [str(notes)]},
        {"name": "globs", "roots": [str(notes)], "include": ["**/../*"]},
        {"name": "rel", "roots": ["relative/path"]},
        "not an object",
        dict(good),  # duplicate
    ]
    path = registry_file(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "collections": entries}))
    assert [c.name for c in registry.list()] == ["good"]
    assert "5 of its entries" in registry.notices[0]
    assert [c.name for c in CollectionRegistry(paths).list()] == ["good"]  # rewritten
    assert len(list(path.parent.glob("collections.json.damaged-*"))) == 1


def test_a_newer_file_is_read_but_never_overwritten(
    registry: CollectionRegistry, paths: AppPaths, notes: Path
) -> None:
    path = registry_file(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"version": 99, "collections": [Collection("n", (notes,)).to_json()], "new": 1}
    path.write_text(json.dumps(body))
    assert [c.name for c in registry.list()] == ["n"]
    assert "newer version" in registry.notices[0]
    with pytest.raises(RegistryTooNewError) as caught:
        registry.add("other", [notes])
    assert isinstance(caught.value, KnownError)
    assert json.loads(path.read_text()) == body


def test_errors_are_known_one_liners(registry: CollectionRegistry, tmp_path: Path) -> None:
    calls: tuple[Callable[[], object], ...] = (
        lambda: registry.add("../x", [tmp_path]),
        lambda: registry.add("x", [tmp_path / "nope"]),
        lambda: registry.add("x", [tmp_path], include=["**/../*"]),
        lambda: registry.get("nope"),
    )
    for call in calls:
        with pytest.raises(KnownError) as caught:
            call()
        assert "\n" not in str(caught.value)


def test_changes_wait_for_another_process(
    registry: CollectionRegistry, paths: AppPaths, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenvoy_desktop.core.locks import FileLock, StoreBusyError
    from agenvoy_desktop.rag import registry as registry_module

    monkeypatch.setattr(registry_module, "LOCK_WAIT_S", 0.0)
    other = FileLock(registry_file(paths).with_name("collections.lock"), "the list", "other")
    other.acquire("editing", shared=False, wait_s=0)
    try:
        with pytest.raises(StoreBusyError, match="in use"):
            registry.add("notes", [notes])
    finally:
        other.release()
    assert registry.add("notes", [notes]).name == "notes"
