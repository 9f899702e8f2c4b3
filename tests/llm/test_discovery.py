"""Finding other apps' GGUF files in a fake home folder, read-only."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from agenvoy_desktop.llm.discovery import (
    MAX_DEPTH,
    DiscoveredModel,
    SearchRoot,
    default_roots,
    discover_gguf_files,
)
from tests.tiny_gguf import write_tiny_llama

OLLAMA_DIGEST = "sha256:" + "a" * 64
UNNAMED_DIGEST = "sha256:" + "c" * 64


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("src") / "tiny.gguf")


def put(tiny: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tiny, path)
    return path


def ollama_manifest(path: Path, digest: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "b" * 64},
        {"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": 1},
    ]
    path.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))


@pytest.fixture
def home(tmp_path: Path, tiny: Path) -> Path:
    home = tmp_path / "home"
    put(tiny, home / ".lmstudio/models/lmstudio-community/Tiny-GGUF/tiny-Q4_K_M.gguf")
    (home / ".lmstudio/models/lmstudio-community/Tiny-GGUF/README.md").write_text("hi")
    (home / ".lmstudio/models/loop").symlink_to(home / ".lmstudio/models")
    put(tiny, home / ".lmstudio/models/" / "/".join(["d"] * (MAX_DEPTH + 1)) / "deep.gguf")
    bad = home / ".local/share/nomic.ai/GPT4All/broken.gguf"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    (home / ".local/share/nomic.ai/GPT4All/old-ggml.bin").write_bytes(b"ggml")
    put(tiny, home / "jan/models/tiny/tiny.GGUF")
    # Hugging Face: two revisions link to one blob; it is reported once.
    repo = home / ".cache/huggingface/hub/models--org--tiny-GGUF"
    blob = put(tiny, repo / "blobs" / ("f" * 64))
    for rev in ("rev1", "rev2"):
        link = repo / "snapshots" / rev / "q4" / "tiny.gguf"
        link.parent.mkdir(parents=True)
        link.symlink_to(blob)
    # Ollama: a named model blob, an unnamed GGUF blob, and non-model blobs.
    ollama = home / ".ollama/models"
    put(tiny, ollama / "blobs" / OLLAMA_DIGEST.replace(":", "-"))
    put(tiny, ollama / "blobs" / UNNAMED_DIGEST.replace(":", "-"))
    (ollama / "blobs" / ("sha256-" + "b" * 64)).write_text("{{ .Prompt }}")
    ollama_manifest(ollama / "manifests/registry.ollama.ai/library/llama3.2/3b", OLLAMA_DIGEST)
    ollama_manifest(ollama / "manifests/hf.co/someone/repo/latest", "sha256:" + "e" * 64)
    (ollama / "manifests/registry.ollama.ai/library/junk/x").parent.mkdir(parents=True)
    (ollama / "manifests/registry.ollama.ai/library/junk/x").write_text("not json")
    return home


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
        if not p.is_symlink() or p.exists()
    }


def by_app(found: list[DiscoveredModel]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for model in found:
        out.setdefault(model.app, []).append(model.display_name)
    return out


def test_finds_each_app_once(home: Path) -> None:
    before = snapshot(home)
    found = discover_gguf_files(home=home, env={})
    assert by_app(found) == {
        "GPT4All": ["broken.gguf"],
        "Hugging Face": ["org/tiny-GGUF/q4/tiny.gguf"],
        "Jan": ["tiny/tiny.GGUF"],
        "LM Studio": ["lmstudio-community/Tiny-GGUF/tiny-Q4_K_M.gguf"],
        "Ollama": ["llama3.2:3b", f"unnamed Ollama blob {UNNAMED_DIGEST.replace(':', '-')[:19]}…"],
    }
    assert snapshot(home) == before, "discovery never writes"


def test_infos_and_errors(home: Path, tiny: Path) -> None:
    found = {m.display_name: m for m in discover_gguf_files(home=home, env={})}
    ollama = found["llama3.2:3b"]
    assert ollama.path.name == OLLAMA_DIGEST.replace(":", "-")
    assert ollama.info is not None
    assert ollama.info.architecture == "llama"
    assert ollama.size_bytes == tiny.stat().st_size
    assert ollama.error is None
    broken = found["broken.gguf"]
    assert broken.info is None
    assert broken.error is not None
    assert str(broken.path) not in broken.error, "the path is shown separately"


def test_hf_cache_follows_env(home: Path, tmp_path: Path, tiny: Path) -> None:
    other = tmp_path / "hfhome"
    link = other / "hub/models--a--b/snapshots/r/x.gguf"
    put(tiny, link)
    found = discover_gguf_files(home=home, env={"HF_HOME": str(other)})
    assert by_app(found)["Hugging Face"] == ["a/b/x.gguf"]
    found = discover_gguf_files(home=home, env={"HF_HUB_CACHE": str(other / "hub")})
    assert by_app(found)["Hugging Face"] == ["a/b/x.gguf"]


def test_windows_env_folders(tmp_path: Path, tiny: Path) -> None:
    roaming, local = tmp_path / "Roaming", tmp_path / "Local"
    put(tiny, roaming / "Jan/data/models/m/m.gguf")
    put(tiny, local / "nomic.ai/GPT4All/g.gguf")
    found = discover_gguf_files(
        home=tmp_path / "empty-home", env={"APPDATA": str(roaming), "LOCALAPPDATA": str(local)}
    )
    assert by_app(found) == {"Jan": ["m/m.gguf"], "GPT4All": ["g.gguf"]}


def test_ollama_models_env(tmp_path: Path, tiny: Path) -> None:
    models = tmp_path / "ollama-store"
    put(tiny, models / "blobs" / OLLAMA_DIGEST.replace(":", "-"))
    ollama_manifest(models / "manifests/registry.ollama.ai/me/mine/q8", OLLAMA_DIGEST)
    found = discover_gguf_files(home=tmp_path / "h", env={"OLLAMA_MODELS": str(models)})
    assert [m.display_name for m in found] == ["me/mine:q8"]


def test_explicit_roots(tmp_path: Path, tiny: Path) -> None:
    put(tiny, tmp_path / "mine/a.gguf")
    put(tiny, tmp_path / "mine/sub/b.gguf")
    (tmp_path / "mine/c.txt").write_text("x")
    found = discover_gguf_files([tmp_path / "mine", SearchRoot("X", tmp_path / "absent")])
    assert [(m.app, m.display_name) for m in found] == [
        ("Folder", "a.gguf"),
        ("Folder", "sub/b.gguf"),
    ]


def test_default_roots_cover_the_apps(tmp_path: Path) -> None:
    roots = default_roots(tmp_path, {})
    assert {r.app for r in roots} == {
        "LM Studio",
        "GPT4All",
        "Jan",
        "Ollama",
        "Hugging Face",
        "llama.cpp",
    }
    assert all(str(r.path).startswith(str(tmp_path)) for r in roots), "a fake home is respected"


def test_nothing_installed(tmp_path: Path) -> None:
    assert discover_gguf_files(home=tmp_path, env={}) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_special_files_are_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.gguf")
    assert discover_gguf_files([tmp_path]) == []


def test_real_folder_wins_over_a_link_to_it(tmp_path: Path, tiny: Path) -> None:
    put(tiny, tmp_path / "z-real/m.gguf")
    (tmp_path / "a-link").symlink_to(tmp_path / "z-real")
    found = discover_gguf_files([tmp_path])
    assert [m.display_name for m in found] == ["z-real/m.gguf"]
