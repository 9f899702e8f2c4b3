"""Fixtures for the real embedding model: converted once per session into a tmp dir."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.llm.embedder import Embedder
from agenvoy_desktop.llm.minilm_convert import convert_minilm
from agenvoy_desktop.llm.model_prep import (
    EMBEDDING_MODEL_FILENAME,
    ModelUnavailableError,
    find_source_dir,
)

REFERENCE_FILE = "minilm_reference_embeddings.json"
SHARED_DATA_ENV = "AGENVOY_SHARED_DATA"


def shared_data_dir() -> Path:
    """``../shared/data`` next to the repository, or ``$AGENVOY_SHARED_DATA``."""
    here = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    if (here / REFERENCE_FILE).is_file() or SHARED_DATA_ENV not in os.environ:
        return here
    return Path(os.environ[SHARED_DATA_ENV])


@pytest.fixture(scope="session")
def minilm_source_dir() -> Path:
    try:
        return find_source_dir()
    except ModelUnavailableError as exc:
        pytest.skip(f"embedding model package not installed: {exc}")


@pytest.fixture(scope="session")
def minilm_gguf(minilm_source_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The converted GGUF, in a session tmp dir (never the user's profile)."""
    out = tmp_path_factory.mktemp("minilm") / EMBEDDING_MODEL_FILENAME
    return convert_minilm(minilm_source_dir, out)


@pytest.fixture(scope="session")
def minilm_embedder(minilm_gguf: Path) -> Iterator[Embedder]:
    with Embedder(minilm_gguf) as embedder:
        yield embedder


@pytest.fixture(scope="session")
def minilm_reference() -> dict[str, Any]:
    path = shared_data_dir() / REFERENCE_FILE
    if not path.is_file():
        pytest.skip(f"reference embeddings not found at {path} (set ${SHARED_DATA_ENV})")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
