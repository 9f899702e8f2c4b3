"""The model catalogue: built-ins, user files, persistence, damage and verification."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from agenvoy_desktop.llm import catalogue as catalogue_module
from agenvoy_desktop.llm import starter
from agenvoy_desktop.llm.catalogue import (
    CATALOGUE_FILE,
    EMBEDDING_NAME,
    EMBEDDING_SHA256_BY_CONVERTER,
    STARTER_NAME,
    CatalogueError,
    ModelCatalogue,
    ModelChecksumError,
)
from agenvoy_desktop.llm.gguf_info import ModelFileError
from agenvoy_desktop.llm.minilm_convert import CONVERTER_VERSION
from agenvoy_desktop.llm.model_prep import EMBEDDING_MODEL_FILENAME
from tests.conftest import FakeClock
from tests.tiny_gguf import write_tiny_llama


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("src") / "tiny.gguf")


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


@pytest.fixture
def cat(models: Path) -> ModelCatalogue:
    return ModelCatalogue(models, clock=FakeClock())


@pytest.fixture
def user_model(tmp_path: Path, tiny: Path) -> Path:
    path = tmp_path / "elsewhere" / "My-Model-Q4.gguf"
    path.parent.mkdir()
    shutil.copyfile(tiny, path)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fake_builtin(
    models: Path, tiny: Path, filename: str, digest: str, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A tiny file under a built-in name, with a sidecar that vouches for it."""
    path = models / filename
    shutil.copyfile(tiny, path)
    st = path.stat()
    record = {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    path.with_name(path.name + ".sha256").write_text(json.dumps(record))
    return path


@pytest.fixture
def builtins(models: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    digest = sha(tiny)
    monkeypatch.setattr(starter, "EXPECTED_SHA256", digest)
    monkeypatch.setitem(EMBEDDING_SHA256_BY_CONVERTER, CONVERTER_VERSION, digest)
    chat = fake_builtin(models, tiny, starter.STARTER_FILENAME, digest, monkeypatch)
    emb = fake_builtin(models, tiny, EMBEDDING_MODEL_FILENAME, digest, monkeypatch)
    return chat, emb


# -- built-ins ---------------------------------------------------------------------
def test_empty_folder(cat: ModelCatalogue) -> None:
    assert cat.entries() == []
    assert not (cat.models_dir / CATALOGUE_FILE).exists(), "reading writes nothing"


def test_builtins_appear_when_their_files_exist(
    cat: ModelCatalogue, builtins: tuple[Path, Path]
) -> None:
    entries = {e.name: e for e in cat.entries()}
    assert set(entries) == {STARTER_NAME, EMBEDDING_NAME}
    chat = entries[STARTER_NAME]
    assert (chat.role, chat.source, chat.status, chat.builtin) == ("chat", "starter", "ok", True)
    assert chat.sha256 == starter.EXPECTED_SHA256
    assert chat.info is not None
    assert chat.info.architecture == "llama"
    assert entries[EMBEDDING_NAME].role == "embedding"
    assert entries[EMBEDDING_NAME].source == "prepared"


def test_touched_builtin_shows_changed(cat: ModelCatalogue, builtins: tuple[Path, Path]) -> None:
    os.utime(builtins[0], ns=(1, 1))
    assert cat.get(STARTER_NAME).status == "changed"
    assert cat.verify(STARTER_NAME).outcome == "verified"


def test_known_embedding_digest_is_current() -> None:
    """Bumping the converter version needs the new output's sha256 here."""
    assert CONVERTER_VERSION in EMBEDDING_SHA256_BY_CONVERTER


@pytest.mark.slow
def test_known_embedding_digest_matches_the_converter(minilm_gguf: Path) -> None:
    assert sha(minilm_gguf) == EMBEDDING_SHA256_BY_CONVERTER[CONVERTER_VERSION]


def test_resolve_defaults(cat: ModelCatalogue, builtins: tuple[Path, Path]) -> None:
    chat, emb = builtins
    assert cat.resolve("", "chat") == chat
    assert cat.resolve("", "embedding") == emb
    assert cat.resolve(STARTER_NAME.upper(), "chat") == chat
    with pytest.raises(CatalogueError, match="is a embedding model, not a chat model"):
        cat.resolve(EMBEDDING_NAME, "chat")


def test_resolve_default_missing_says_what_to_do(cat: ModelCatalogue) -> None:
    with pytest.raises(CatalogueError, match=r"starter chat model is not prepared.*setup"):
        cat.resolve("", "chat")
    with pytest.raises(CatalogueError, match="embedding model is not prepared"):
        cat.resolve("", "embedding")


def test_builtins_cannot_be_removed(cat: ModelCatalogue, builtins: tuple[Path, Path]) -> None:
    with pytest.raises(CatalogueError, match="built in"):
        cat.remove(STARTER_NAME)
    assert builtins[0].exists()


# -- user files -----------------------------------------------------------------------
def test_add_in_place(cat: ModelCatalogue, user_model: Path) -> None:
    entry = cat.add(user_model)
    assert entry.name == "My-Model-Q4"
    assert entry.path == user_model
    assert (entry.role, entry.source, entry.copied, entry.status) == ("chat", "user", False, "ok")
    assert entry.sha256 is None, "no hashing on add"
    assert entry.info is not None
    assert entry.info.context_length == 2048
    again = ModelCatalogue(cat.models_dir).entries()
    assert [e.name for e in again] == ["My-Model-Q4"]
    assert again[0].info == entry.info
    assert cat.resolve("my-model-q4", "chat") == user_model
    assert cat.resolve(str(user_model), "chat") == user_model


def test_add_rejects_bad_files_naming_them(cat: ModelCatalogue, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" * 10)
    with pytest.raises(ModelFileError, match=f"{bad}: not a GGUF file"):
        cat.add(bad)
    with pytest.raises(ModelFileError, match="file not found"):
        cat.add(tmp_path / "absent.gguf")
    assert cat.entries() == []


def test_add_duplicates_and_names(cat: ModelCatalogue, user_model: Path, tiny: Path) -> None:
    cat.add(user_model, name="mine")
    with pytest.raises(CatalogueError, match="already in the catalogue as 'mine'"):
        cat.add(user_model)
    other = user_model.with_name("other.gguf")
    shutil.copyfile(tiny, other)
    with pytest.raises(CatalogueError, match="already used"):
        cat.add(other, name="MINE")
    with pytest.raises(CatalogueError, match="bad model name"):
        cat.add(other, name="a/b")
    with pytest.raises(CatalogueError, match="role must be one of"):
        cat.add(other, role="summary")
    assert cat.add(other, role="any").name == "other"


def test_default_names_are_made_unique(cat: ModelCatalogue, tmp_path: Path, tiny: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copyfile(tiny, tmp_path / folder / "same.gguf")
    assert cat.add(tmp_path / "a/same.gguf").name == "same"
    assert cat.add(tmp_path / "b/same.gguf").name == "same-2"


def test_blob_without_extension_is_named_from_metadata(cat: ModelCatalogue, tmp_path: Path) -> None:
    blob = write_tiny_llama(tmp_path / ("sha256-" + "a" * 64))
    assert cat.add(blob, source="discovered").name == "tiny-random-llama"


def test_embedding_model_needs_embedding_role(cat: ModelCatalogue, tmp_path: Path) -> None:
    import gguf
    import numpy as np

    path = tmp_path / "bert.gguf"
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_tensor("w", np.ones(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(CatalogueError, match="looks like an embedding model"):
        cat.add(path)
    assert cat.add(path, role="embedding").role == "embedding"
    assert cat.resolve("bert", "embedding") == path


def test_copy_into_models_dir(cat: ModelCatalogue, user_model: Path) -> None:
    seen: list[float] = []
    entry = cat.add(user_model, copy=True, progress=lambda f, _m: seen.append(f))
    assert entry.copied
    assert entry.path == cat.models_dir / user_model.name
    assert entry.path.read_bytes() == user_model.read_bytes()
    assert entry.sha256 == sha(user_model), "hashed while copying"
    assert seen[-1] == 1.0
    removed = cat.remove(entry.name)
    assert removed.name == entry.name
    assert not entry.path.exists(), "our own copy is deleted"
    assert user_model.exists(), "the original is never touched"
    assert cat.entries() == []


def test_cancelled_copy_leaves_nothing(cat: ModelCatalogue, user_model: Path) -> None:
    from agenvoy_desktop.core.store import OperationCancelledError

    with pytest.raises(OperationCancelledError):
        cat.add(user_model, copy=True, cancelled=lambda: True)
    assert sorted(p.name for p in cat.models_dir.iterdir()) == []


def test_remove_in_place_keeps_the_file(cat: ModelCatalogue, user_model: Path) -> None:
    cat.add(user_model, name="x")
    cat.remove("X")
    assert user_model.exists()
    with pytest.raises(CatalogueError, match="no model named 'x'"):
        cat.remove("x")


def test_vanished_file_is_missing_not_a_crash(cat: ModelCatalogue, user_model: Path) -> None:
    cat.add(user_model, name="gone")
    user_model.unlink()
    entry = cat.get("gone")
    assert entry.status == "missing"
    assert entry.info is not None, "the last known facts are still shown"
    with pytest.raises(ModelFileError, match="file not found"):
        cat.resolve("gone", "chat")
    with pytest.raises(ModelFileError, match="file not found"):
        cat.verify("gone")


def test_file_damaged_after_adding_is_invalid(cat: ModelCatalogue, user_model: Path) -> None:
    cat.add(user_model, name="dmg")
    user_model.write_bytes(user_model.read_bytes()[:5000])
    entry = cat.get("dmg")
    assert entry.status == "invalid"
    assert entry.problem is not None
    assert "truncated" in entry.problem
    with pytest.raises(ModelFileError, match="truncated"):
        cat.resolve("dmg", "chat")


def test_resolve_unknown_lists_names(cat: ModelCatalogue, user_model: Path, tmp_path: Path) -> None:
    cat.add(user_model, name="alpha")
    with pytest.raises(
        CatalogueError, match="neither a catalogued model nor a file; available: alpha"
    ):
        cat.resolve("beta", "chat")
    with pytest.raises(CatalogueError, match="role must be"):
        cat.resolve("alpha", "summary")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"\0" * 64)
    with pytest.raises(ModelFileError, match="bad magic"):
        cat.resolve(str(bad), "chat")


# -- verification ----------------------------------------------------------------------
def test_verify_records_then_checks(cat: ModelCatalogue, user_model: Path) -> None:
    cat.add(user_model, name="v")
    first = cat.verify("v")
    assert (first.outcome, first.sha256) == ("recorded", sha(user_model))
    assert cat.get("v").sha256 == first.sha256
    assert cat.verify("v").outcome == "verified"
    os.utime(user_model, ns=(5, 5))
    assert cat.get("v").status == "changed"
    assert cat.verify("v").outcome == "verified"
    assert cat.get("v").status == "ok"


def test_verify_mismatch_names_the_file(cat: ModelCatalogue, user_model: Path) -> None:
    cat.add(user_model, name="v")
    cat.verify("v")
    data = bytearray(user_model.read_bytes())
    data[-10] ^= 0xFF  # a weight byte: the header still parses
    user_model.write_bytes(bytes(data))
    with pytest.raises(ModelChecksumError, match=f"{user_model}: sha256 mismatch for model 'v'"):
        cat.verify("v")


def test_verify_builtin_mismatch(
    cat: ModelCatalogue, builtins: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(starter, "EXPECTED_SHA256", "0" * 64)
    with pytest.raises(ModelChecksumError, match="sha256 mismatch"):
        cat.verify(STARTER_NAME)


# -- the file itself ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00",
        b"[]",
        json.dumps({"version": 1, "entries": [{"name": "x"}]}).encode(),
        json.dumps({"version": 1, "entries": "nope"}).encode(),
    ],
)
def test_corrupt_file_is_moved_aside_and_rebuilt(
    cat: ModelCatalogue, models: Path, user_model: Path, tiny: Path, content: bytes
) -> None:
    copied = cat.add(user_model, copy=True)
    cat.add(user_model, name="in-place")
    (models / CATALOGUE_FILE).write_bytes(content)
    entries = cat.entries()
    assert [e.name for e in entries] == [copied.name], "copies in the folder come back"
    assert entries[0].copied
    assert cat.last_problem is not None
    assert "moved to catalogue.json.corrupt-" in cat.last_problem
    aside = list(models.glob(CATALOGUE_FILE + ".corrupt-*"))
    assert len(aside) == 1
    assert aside[0].read_bytes() == content, "the damaged file is kept for the user"
    json.loads((models / CATALOGUE_FILE).read_text())  # rebuilt and valid


def test_newer_version_is_left_alone(
    cat: ModelCatalogue, models: Path, builtins: tuple[Path, Path], user_model: Path
) -> None:
    future = json.dumps({"version": 99, "entries": [{"whatever": True}]})
    (models / CATALOGUE_FILE).write_text(future)
    assert {e.name for e in cat.entries()} == {STARTER_NAME, EMBEDDING_NAME}
    assert cat.last_problem is not None
    assert "newer version" in cat.last_problem
    with pytest.raises(CatalogueError, match="newer version"):
        cat.add(user_model)
    assert (models / CATALOGUE_FILE).read_text() == future


def test_two_catalogues_on_one_folder_see_each_other(
    models: Path, user_model: Path, tiny: Path
) -> None:
    a, b = ModelCatalogue(models), ModelCatalogue(models)
    a.add(user_model, name="one")
    other = user_model.with_name("two.gguf")
    shutil.copyfile(tiny, other)
    b.add(other, name="two")
    assert [e.name for e in a.entries()] == ["one", "two"]


def test_saved_file_is_versioned_json(cat: ModelCatalogue, models: Path, user_model: Path) -> None:
    cat.add(user_model, name="j")
    data = json.loads((models / CATALOGUE_FILE).read_text())
    assert data["version"] == catalogue_module.CATALOGUE_VERSION
    (record,) = data["entries"]
    assert record["path"] == str(user_model)
    assert "chat_template" not in record["info"]
