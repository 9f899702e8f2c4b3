"""GGUF header reading: the facts of good files, plain errors for bad ones."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from agenvoy_desktop.llm.gguf_info import (
    GgufInfo,
    ModelFileError,
    has_gguf_magic,
    read_gguf_info,
)
from tests.tiny_gguf import CHATML_TOOLS_TEMPLATE, write_tiny_llama


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def gguf_string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def header(*, version: int = 3, tensors: int = 0, kvs: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, kvs)


def string_kv(key: str, value: str) -> bytes:
    return gguf_string(key) + struct.pack("<I", 8) + gguf_string(value)


def expect_error(path: Path, match: str) -> ModelFileError:
    with pytest.raises(ModelFileError, match=match) as info:
        read_gguf_info(path)
    assert str(path) in str(info.value), "the message names the file"
    return info.value


# -- good files ------------------------------------------------------------------
def test_tiny_llama_facts(tiny: Path) -> None:
    info = read_gguf_info(tiny)
    assert info.path == tiny
    assert info.size_bytes == tiny.stat().st_size
    assert info.gguf_version == 3
    assert info.architecture == "llama"
    assert info.name == "tiny-random-llama"
    assert info.context_length == 2048
    assert info.embedding_length == 64
    assert info.block_count == 2
    assert info.tokenizer_model == "llama"
    assert info.quantisation == "F32"
    assert info.tensor_count == 3 + 2 * 9
    n_vocab, n_embd, n_ff = 259, 64, 128
    per_layer = 2 * n_embd + 4 * n_embd * n_embd + 3 * n_ff * n_embd
    assert info.parameters == 2 * n_vocab * n_embd + n_embd + 2 * per_layer
    assert info.has_chat_template
    assert info.chat_template == CHATML_TOOLS_TEMPLATE
    assert not info.likely_embedding


def test_no_chat_template(tmp_path: Path) -> None:
    info = read_gguf_info(write_tiny_llama(tmp_path / "plain.gguf", chat_template=None))
    assert not info.has_chat_template
    assert info.chat_template is None


def test_json_round_trip_drops_template_by_default(tiny: Path) -> None:
    info = read_gguf_info(tiny)
    data = info.to_json()
    assert "chat_template" not in data
    assert data["path"] == str(tiny)
    back = GgufInfo.from_json(data)
    assert back.has_chat_template
    assert back.chat_template is None
    assert GgufInfo.from_json(info.to_json(with_template=True)) == info


def write_with_gguf(path: Path, **kwargs: object) -> Path:
    """A small file written by the gguf package, with a few extra metadata shapes."""
    writer = gguf.GGUFWriter(str(path), "bert", **kwargs)  # type: ignore[arg-type]
    writer.add_uint32("bert.context_length", 512)
    writer.add_uint32("bert.pooling_type", 1)
    writer.add_array("test.nested", [[1, 2], [3]])
    writer.add_array("test.words", ["a", "bb", ""])
    writer.add_float64("test.f64", 0.5)
    writer.add_tensor("a", np.ones((4, 32), dtype=np.float16))
    writer.add_tensor("b", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_nested_arrays_and_dominant_type(tmp_path: Path) -> None:
    info = read_gguf_info(write_with_gguf(tmp_path / "emb.gguf"))
    assert info.architecture == "bert"
    assert info.context_length == 512
    assert info.parameters == 4 * 32 + 8
    assert info.quantisation == "F16", "no general.file_type: the type with most bytes"
    assert info.likely_embedding


def test_big_endian_file(tmp_path: Path) -> None:
    path = write_with_gguf(tmp_path / "be.gguf", endianess=gguf.GGUFEndian.BIG)
    info = read_gguf_info(path)
    assert info.context_length == 512
    assert info.parameters == 4 * 32 + 8


def test_metadata_only_file(tmp_path: Path) -> None:
    path = tmp_path / "meta.gguf"
    path.write_bytes(header(kvs=1) + string_kv("general.architecture", "llama"))
    info = read_gguf_info(path)
    assert info.architecture == "llama"
    assert info.tensor_count == 0
    assert info.parameters is None
    assert info.quantisation is None


def test_magic_probe(tiny: Path, tmp_path: Path) -> None:
    other = tmp_path / "x.bin"
    other.write_bytes(b"{}")
    assert has_gguf_magic(tiny)
    assert not has_gguf_magic(other)
    assert not has_gguf_magic(tmp_path / "absent")


# -- bad files ---------------------------------------------------------------------
def test_missing_file(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.gguf", "file not found")


def test_directory(tmp_path: Path) -> None:
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    expect_error(folder, "folder|not a regular file")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    expect_error(path, "empty file")


@pytest.mark.parametrize("content", [b"GG", b"PK\x03\x04" + bytes(60), b"\x00" * 100])
def test_bad_magic(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    expect_error(path, r"not a GGUF file \(bad magic\)")


def test_unsupported_version(tmp_path: Path) -> None:
    path = tmp_path / "v1.gguf"
    path.write_bytes(header(version=1))
    expect_error(path, "unsupported GGUF version 1")


@pytest.mark.parametrize("cut", [6, 30, 200, 5000])
def test_truncated_header(tiny: Path, tmp_path: Path, cut: int) -> None:
    path = tmp_path / "cut.gguf"
    path.write_bytes(tiny.read_bytes()[:cut])
    expect_error(path, f"truncated.*at least \\d+ bytes, file has {cut}")


def test_truncated_tensor_data(tiny: Path, tmp_path: Path) -> None:
    data = tiny.read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:-1000])
    err = expect_error(path, "truncated")
    assert f"expected at least {len(data)} bytes, file has {len(data) - 1000}" in str(err)


def test_garbage_counts(tmp_path: Path) -> None:
    path = tmp_path / "counts.gguf"
    path.write_bytes(header(tensors=2**63, kvs=2**62) + bytes(64))
    expect_error(path, "truncated or damaged: .* metadata entries need at least")
    path.write_bytes(header(tensors=2**40, kvs=0) + bytes(64))
    expect_error(path, "truncated or damaged: .* tensors need at least")


def test_huge_string_length(tmp_path: Path) -> None:
    path = tmp_path / "str.gguf"
    path.write_bytes(header(kvs=1) + struct.pack("<Q", 2**60) + b"key" + bytes(16))
    expect_error(path, "string length .* larger than the file")


def test_huge_string_array(tmp_path: Path) -> None:
    kv = gguf_string("tokens") + struct.pack("<IIQ", 9, 8, 2**50)
    path = tmp_path / "arr.gguf"
    path.write_bytes(header(kvs=1) + kv + bytes(100))
    expect_error(path, "truncated or damaged: .* strings in tokens need")


def test_string_array_running_past_the_end(tmp_path: Path) -> None:
    items = gguf_string("ab") + struct.pack("<Q", 10_000) + b"xyz"
    kv = gguf_string("tokens") + struct.pack("<IIQ", 9, 8, 2) + items
    path = tmp_path / "arr.gguf"
    path.write_bytes(header(kvs=1) + kv)
    expect_error(path, "truncated")


def test_unknown_value_type(tmp_path: Path) -> None:
    path = tmp_path / "type.gguf"
    path.write_bytes(header(kvs=1) + gguf_string("k") + struct.pack("<I", 77) + bytes(16))
    expect_error(path, "k has unknown value type 77")


def test_too_many_dimensions(tmp_path: Path) -> None:
    info = gguf_string("t") + struct.pack("<I", 9) + bytes(8 * 9 + 12)
    path = tmp_path / "dims.gguf"
    path.write_bytes(header(tensors=1) + info + bytes(64))
    expect_error(path, "'t' has 9 dimensions")


def test_bad_alignment(tmp_path: Path) -> None:
    kv = gguf_string("general.alignment") + struct.pack("<II", 4, 24)
    path = tmp_path / "align.gguf"
    path.write_bytes(header(kvs=1) + kv)
    expect_error(path, "bad general.alignment 24")


def test_random_garbage_never_crashes(tiny: Path, tmp_path: Path) -> None:
    """Flip bytes all over the header: every outcome is info or ModelFileError."""
    rng = np.random.default_rng(7)
    data = bytearray(tiny.read_bytes())
    path = tmp_path / "fuzz.gguf"
    messages = []
    for _ in range(200):
        mutated = bytearray(data)
        for pos in rng.integers(4, 8000, size=4):
            mutated[pos] = int(rng.integers(0, 256))
        path.write_bytes(mutated)
        try:
            read_gguf_info(path)
        except ModelFileError as exc:
            messages.append(str(exc))
    assert messages, "some mutations must break the header"
    assert all(m.startswith(f"{path}: ") for m in messages)
