"""The incremental scan: new, changed, touched, unchanged, deleted and unreadable files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenvoy_desktop.core.store import OperationCancelledError
from agenvoy_desktop.rag import scan as scan_module
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.scan import Manifest, ScanPlan, file_sha256, scan_collection
from agenvoy_desktop.rag.walk import root_labels, walk_collection

NS = 1_000_000_000


def _write(path: Path, text: str, mtime_s: int = 1_700_000_000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, ns=(mtime_s * NS, mtime_s * NS))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    _write(folder / "a.md", "# A\nalpha\n")
    _write(folder / "sub" / "b.txt", "beta\n")
    _write(folder / "code" / "c.py", "def c():\n    pass\n")
    _write(folder / "image.png", "not indexed: unknown extension")
    _write(folder / ".git" / "config.txt", "hidden folder")
    _write(folder / ".secret.md", "hidden file")
    return folder


def _paths(entries: list[scan_module.FileEntry]) -> list[str]:
    return sorted(e.path for e in entries)


def _first(collection: Collection) -> tuple[ScanPlan, Manifest]:
    plan = scan_collection(collection, Manifest())
    return plan, plan.manifest_after(Manifest())


def test_first_scan_finds_everything_new(root: Path) -> None:
    plan, manifest = _first(Collection("n", (root,)))
    assert _paths(plan.new) == ["notes/a.md", "notes/code/c.py", "notes/sub/b.txt"]
    assert [plan.changed, plan.unchanged, plan.deleted, plan.unreadable] == [[], [], [], []]
    assert manifest.files["notes/a.md"].sha256 == file_sha256(root / "a.md")
    assert manifest.files["notes/a.md"].size == len("# A\nalpha\n")


def test_nothing_changed_means_nothing_hashed(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collection = Collection("n", (root,))
    _, manifest = _first(collection)
    hashed: list[Path] = []
    real = scan_module.file_sha256

    def counting(file: Path, cancelled: object = None) -> str:
        hashed.append(file)
        return real(file)

    monkeypatch.setattr(scan_module, "file_sha256", counting)
    plan = scan_collection(collection, manifest)
    assert len(plan.unchanged) == 3
    assert [plan.to_index, plan.touched, plan.deleted] == [[], [], []]
    assert hashed == []
    assert len(scan_collection(collection, manifest, verify=True).unchanged) == 3
    assert len(hashed) == 3


def test_touch_edit_delete_and_add(root: Path) -> None:
    collection = Collection("n", (root,))
    _, manifest = _first(collection)
    os.utime(root / "a.md", ns=(1_800_000_000 * NS, 1_800_000_000 * NS))  # touched only
    _write(root / "sub" / "b.txt", "BETA\n", mtime_s=1_800_000_000)  # same size, new text
    _write(root / "code" / "c.py", "def c():\n    return 2\n", mtime_s=1_700_000_000)  # size
    (root / "code" / "gone.py").unlink(missing_ok=True)
    _write(root / "new.md", "fresh\n")
    plan = scan_collection(collection, manifest)
    assert _paths(plan.new) == ["notes/new.md"]
    assert _paths(plan.changed) == ["notes/code/c.py", "notes/sub/b.txt"]
    assert _paths(plan.touched) == ["notes/a.md"]
    assert _paths(plan.unchanged) == ["notes/a.md"]
    assert plan.changed[0].previous is not None

    after = plan.manifest_after(manifest)
    assert after.files["notes/a.md"].mtime_ns == 1_800_000_000 * NS
    assert after.files["notes/a.md"].sha256 == manifest.files["notes/a.md"].sha256
    (root / "sub" / "b.txt").unlink()
    plan = scan_collection(collection, after)
    assert plan.deleted == ["notes/sub/b.txt"]
    assert plan.to_index == []
    assert "notes/sub/b.txt" not in plan.manifest_after(after).files


def test_same_size_same_mtime_edit_is_only_found_by_verify(root: Path) -> None:
    collection = Collection("n", (root,))
    _, manifest = _first(collection)
    _write(root / "a.md", "# B\nalpha\n")  # same size, same mtime: indistinguishable by stat
    assert scan_collection(collection, manifest).changed == []
    assert _paths(scan_collection(collection, manifest, verify=True).changed) == ["notes/a.md"]


def test_patterns_apply_relative_to_each_root(root: Path) -> None:
    collection = Collection("n", (root,), include=("*.md", "code/**"), exclude=("sub",))
    plan = scan_collection(collection, Manifest())
    assert _paths(plan.new) == ["notes/a.md", "notes/code/c.py"]


def test_too_large_and_broken_links_are_listed_with_reasons(root: Path) -> None:
    _write(root / "big.txt", "x" * 5000)
    (root / "dangling.md").symlink_to(root / "nowhere.md")
    plan = scan_collection(Collection("n", (root,)), Manifest(), max_bytes=1000)
    reasons = {u.path: u.reason for u in plan.unreadable}
    assert reasons == {
        "notes/big.txt": "larger than 1000 bytes (the limit)",
        "notes/dangling.md": "broken link",
    }
    assert "notes/big.txt" not in _paths(plan.new)


def test_symlink_loops_end(root: Path) -> None:
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    (root / "alias").symlink_to(root / "code", target_is_directory=True)
    plan = scan_collection(Collection("n", (root,)), Manifest())
    paths = _paths(plan.new)
    assert len(paths) == len(set(paths))
    assert sum(p.endswith("c.py") for p in paths) == 1


def test_labels_for_several_roots_and_single_files(tmp_path: Path, root: Path) -> None:
    other = tmp_path / "elsewhere" / "notes"
    _write(other / "x.md", "x\n")
    single = _write(tmp_path / "journal.txt", "day one\n")
    collection = Collection("n", (root, other, single))
    assert root_labels(collection.roots) == ["notes", "notes-2", "journal.txt"]
    plan = scan_collection(collection, Manifest())
    assert "notes-2/x.md" in _paths(plan.new)
    assert "journal.txt" in _paths(plan.new)


def test_a_missing_root_deletes_nothing(tmp_path: Path, root: Path) -> None:
    usb = tmp_path / "usb"
    _write(usb / "u.md", "on the stick\n")
    collection = Collection("n", (root, usb))
    _, manifest = _first(collection)
    for file in usb.iterdir():
        file.unlink()
    usb.rmdir()
    plan = scan_collection(collection, manifest)
    assert plan.deleted == []
    assert plan.kept == ["usb"]
    assert plan.unreadable[0].reason.startswith("not found now")
    assert "usb/u.md" in plan.manifest_after(manifest).files


def test_a_folder_that_will_not_open_keeps_its_files(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = Collection("n", (root,))
    _, manifest = _first(collection)
    real = os.scandir

    def scandir(path: os.PathLike[str]) -> Iterator[os.DirEntry[str]]:
        if Path(path).name == "sub":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr("agenvoy_desktop.rag.walk.os.scandir", scandir)
    plan = scan_collection(collection, manifest)
    assert plan.deleted == []
    assert plan.kept == ["notes/sub"]
    assert plan.unreadable[0].reason == "cannot open folder (Permission denied)"


def test_progress_and_cancel(root: Path) -> None:
    seen: list[tuple[int, int]] = []
    scan_collection(Collection("n", (root,)), Manifest(), progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(OperationCancelledError):
        scan_collection(Collection("n", (root,)), Manifest(), cancelled=lambda: True)


def test_hashing_streams_and_stops_between_blocks(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * (3 * scan_module.HASH_BLOCK + 5))
    calls = 0

    def cancelled() -> bool:
        nonlocal calls
        calls += 1
        return calls > 2

    with pytest.raises(OperationCancelledError):
        file_sha256(big, cancelled)
    assert calls == 3
    assert len(file_sha256(big)) == 64


def test_walk_is_sorted_and_skips_hidden(root: Path) -> None:
    walked = walk_collection(Collection("n", (root,)))
    paths = [f.path for f in walked.files]
    assert paths == sorted(paths)
    assert not any("/." in p for p in paths)


def test_skipped_folders_are_never_entered(root: Path) -> None:
    profile = root / "profile"
    _write(profile / "memory" / "history.json", "[]")
    plan = scan_collection(Collection("n", (root,)), Manifest(), skip_dirs=[profile, root / "x"])
    assert not any(e.path.startswith("notes/profile") for e in plan.new)
    assert len(plan.new) == 3
