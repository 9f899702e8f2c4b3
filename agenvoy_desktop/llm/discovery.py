"""Find GGUF models that other local apps already downloaded, without touching them.

Looks in the usual folders of LM Studio, GPT4All, Jan, Ollama, llama.cpp's
download cache and the Hugging Face hub cache.  Everything is read-only: files
are only stat-ed and their headers read (:func:`read_gguf_info`); nothing is
copied, moved or written.  Walks are bounded (depth, entries per root, symlink
loops), so a huge or strange folder costs little.

Ollama stores weights as content-addressed blobs (``blobs/sha256-<hex>``, no
extension): they are recognised by the GGUF magic, and named from the
manifests (``llama3.2:3b``).  Hugging Face snapshots are symlinks into
``blobs/``; each file is reported once, under its snapshot name.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agenvoy_desktop.llm.gguf_info import GgufInfo, ModelFileError, has_gguf_magic, read_gguf_info

log = logging.getLogger(__name__)

MAX_DEPTH = 6
MAX_ENTRIES_PER_ROOT = 20_000
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
OLLAMA_DEFAULT_REGISTRY = ("registry.ollama.ai", "library")


@dataclass(frozen=True)
class SearchRoot:
    """One folder to look in. ``kind``: ``tree`` (``*.gguf`` files), ``ollama``, ``hf``."""

    app: str
    path: Path
    kind: str = "tree"


@dataclass(frozen=True)
class DiscoveredModel:
    path: Path
    app: str
    display_name: str
    size_bytes: int
    info: GgufInfo | None
    error: str | None
    """Why the header could not be read (the file is still listed)."""


def default_roots(
    home: Path | None = None, env: Mapping[str, str] | None = None
) -> list[SearchRoot]:
    """Where the known apps keep models on Linux, macOS and Windows (missing ones are skipped)."""
    real_machine = home is None
    home = Path.home() if home is None else home
    env = os.environ if env is None else env
    support = home / "Library" / "Application Support"
    local = home / ".local" / "share"
    roots = [
        SearchRoot("LM Studio", home / ".lmstudio" / "models"),
        SearchRoot("LM Studio", home / ".cache" / "lm-studio" / "models"),
        SearchRoot("GPT4All", local / "nomic.ai" / "GPT4All"),
        SearchRoot("GPT4All", support / "nomic.ai" / "GPT4All"),
        SearchRoot("Jan", home / "jan" / "models"),
        SearchRoot("Jan", local / "Jan" / "data" / "models"),
        SearchRoot("Jan", local / "Jan" / "data" / "llamacpp" / "models"),
        SearchRoot("Jan", support / "Jan" / "data" / "models"),
        SearchRoot("Jan", support / "Jan" / "data" / "llamacpp" / "models"),
        SearchRoot(
            "llama.cpp", _env_path(env, "LLAMA_CACHE") or _cache_home(home, env) / "llama.cpp"
        ),
        SearchRoot("Hugging Face", _hf_cache(home, env), "hf"),
        SearchRoot(
            "Ollama", _env_path(env, "OLLAMA_MODELS") or home / ".ollama" / "models", "ollama"
        ),
    ]
    if real_machine:  # Linux service install of Ollama
        roots.append(SearchRoot("Ollama", Path("/usr/share/ollama/.ollama/models"), "ollama"))
    if local_app := _env_path(env, "LOCALAPPDATA"):
        roots.append(SearchRoot("GPT4All", local_app / "nomic.ai" / "GPT4All"))
    if roaming := _env_path(env, "APPDATA"):
        roots.append(SearchRoot("Jan", roaming / "Jan" / "data" / "models"))
        roots.append(SearchRoot("Jan", roaming / "Jan" / "data" / "llamacpp" / "models"))
    return roots


def _env_path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name, "").strip()
    return Path(value).expanduser() if value else None


def _cache_home(home: Path, env: Mapping[str, str]) -> Path:
    return _env_path(env, "XDG_CACHE_HOME") or home / ".cache"


def _hf_cache(home: Path, env: Mapping[str, str]) -> Path:
    """huggingface_hub's rule: HF_HUB_CACHE, else HF_HOME/hub, else <cache>/huggingface/hub."""
    if hub := _env_path(env, "HF_HUB_CACHE"):
        return hub
    if hf_home := _env_path(env, "HF_HOME"):
        return hf_home / "hub"
    return _cache_home(home, env) / "huggingface" / "hub"


def discover_gguf_files(
    roots: Sequence[Path | SearchRoot] | None = None,
    *,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[DiscoveredModel]:
    """Every GGUF under *roots* (default: the known apps' folders), each once, sorted by app/name.

    Plain paths in *roots* are searched for ``*.gguf`` files (app "Folder").
    """
    search = (
        default_roots(home, env)
        if roots is None
        else [r if isinstance(r, SearchRoot) else SearchRoot("Folder", Path(r)) for r in roots]
    )
    found: list[DiscoveredModel] = []
    seen: set[tuple[int, int]] = set()
    for root in search:
        for path, name in _candidates(root):
            identity = _identity(path)
            if identity is None or identity in seen:
                continue
            seen.add(identity)
            found.append(_describe(path, root.app, name))
    found.sort(key=lambda m: (m.app, m.display_name.lower(), str(m.path)))
    return found


def _candidates(root: SearchRoot) -> Iterator[tuple[Path, str]]:
    if not root.path.is_dir():
        return iter(())
    if root.kind == "ollama":
        return _ollama_candidates(root.path)
    if root.kind == "hf":
        return _hf_candidates(root.path)
    return ((p, _relative_name(p, root.path)) for p in _walk_gguf(root.path))


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file a path leads to: one report per real file."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _describe(path: Path, app: str, name: str) -> DiscoveredModel:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    info: GgufInfo | None = None
    error: str | None = None
    try:
        info = read_gguf_info(path)
    except ModelFileError as exc:
        error = str(exc).removeprefix(f"{path}: ")
    return DiscoveredModel(path, app, name, size, info, error)


def _relative_name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


# -- bounded walking ---------------------------------------------------------------
def _walk_files(root: Path, max_depth: int = MAX_DEPTH) -> Iterator[Path]:
    """Regular files (or links to them) under *root*, depth- and size-bounded, loop-safe."""
    visited: set[tuple[int, int]] = set()
    budget = MAX_ENTRIES_PER_ROOT
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            st = folder.stat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in visited:
            continue  # a symlink loop, or a folder reached twice
        visited.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue
        linked: list[Path] = []
        plain: list[Path] = []
        for entry in listed:
            budget -= 1
            if budget < 0:
                log.info("stopped scanning %s after %d entries", root, MAX_ENTRIES_PER_ROOT)
                return
            try:
                if entry.is_dir():
                    if depth < max_depth and not entry.name.startswith("."):
                        (linked if entry.is_symlink() else plain).append(Path(entry.path))
                elif entry.is_file():
                    yield Path(entry.path)
            except OSError:
                continue
        # Popped in name order, real folders before links to them: a file is named by its real path.
        stack.extend((sub, depth + 1) for sub in reversed(linked))
        stack.extend((sub, depth + 1) for sub in reversed(plain))


def _walk_gguf(root: Path) -> Iterator[Path]:
    return (p for p in _walk_files(root) if p.suffix.lower() == ".gguf")


def _hf_candidates(hub: Path) -> Iterator[tuple[Path, str]]:
    """``models--org--name/snapshots/<rev>/**/*.gguf`` named ``org/name/file.gguf``."""
    try:
        repos = sorted(p for p in hub.iterdir() if p.name.startswith("models--"))
    except OSError:
        return
    for repo in repos:
        repo_name = repo.name.removeprefix("models--").replace("--", "/")
        snapshots = repo / "snapshots"
        if not snapshots.is_dir():
            continue
        for path in _walk_gguf(snapshots):
            rel = path.relative_to(snapshots).parts[1:]  # drop the revision folder
            yield path, f"{repo_name}/{'/'.join(rel)}"


# -- Ollama ------------------------------------------------------------------------
def _ollama_candidates(models: Path) -> Iterator[tuple[Path, str]]:
    """Named blobs from the manifests first, then any other blob that is a GGUF."""
    blobs = models / "blobs"
    named: dict[str, str] = {}
    for digest, name in _ollama_manifest_models(models / "manifests"):
        named.setdefault(digest, name)
    for digest, name in sorted(named.items(), key=lambda kv: kv[1]):
        path = blobs / digest.replace(":", "-", 1)
        if path.is_file():
            yield path, name
    for path in _walk_files(blobs, max_depth=0):
        blob = path.name.replace("-", ":", 1)
        if blob not in named and path.name.startswith("sha256-") and has_gguf_magic(path):
            yield path, f"unnamed Ollama blob {path.name[:19]}…"


def _ollama_manifest_models(manifests: Path) -> Iterator[tuple[str, str]]:
    """(blob digest, "name:tag") for every manifest's model layer."""
    if not manifests.is_dir():
        return
    for manifest in _walk_files(manifests, max_depth=4):
        digest = _ollama_model_digest(manifest)
        if digest is not None:
            yield digest, _ollama_name(manifest.relative_to(manifests).parts)


def _ollama_model_digest(manifest: Path) -> str | None:
    try:
        if manifest.stat().st_size > 1 << 20:
            return None
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    layers = data.get("layers") if isinstance(data, dict) else None
    for layer in layers if isinstance(layers, list) else []:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER:
            digest = layer.get("digest")
            if isinstance(digest, str) and digest.startswith("sha256:"):
                return digest
    return None


def _ollama_name(parts: tuple[str, ...]) -> str:
    """``registry.ollama.ai/library/llama3.2/3b`` -> ``llama3.2:3b`` (others keep their prefix)."""
    *where, model, tag = parts if len(parts) >= 2 else ("", *parts)
    if tuple(where) == OLLAMA_DEFAULT_REGISTRY:
        return f"{model}:{tag}"
    if where and where[0] == OLLAMA_DEFAULT_REGISTRY[0]:
        where = where[1:]
    return "/".join([*where, f"{model}:{tag}"])
