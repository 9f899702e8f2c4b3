"""Real all-MiniLM-L6-v2 embeddings through llama.cpp: conversion, accuracy, threading."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from agenvoy_desktop.core.model_name import DEFAULT_MODEL_NAME
from agenvoy_desktop.llm import embedder as embedder_module
from agenvoy_desktop.llm import minilm_convert, model_prep
from agenvoy_desktop.llm.embedder import Embedder, EmbedderError
from agenvoy_desktop.llm.minilm_convert import (
    WEIGHTS_FILE,
    WeightsChecksumError,
    convert_minilm,
)
from agenvoy_desktop.llm.model_prep import (
    EMBEDDING_MODEL_FILENAME,
    ModelUnavailableError,
    prepare_embedding_model,
)

pytestmark = pytest.mark.slow

DIM = 384
# Words the WordPiece vocabulary holds whole: one token each.
ONE_TOKEN_WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "we", "ate", "some", "red"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def words(n: int) -> str:
    return " ".join(ONE_TOKEN_WORDS[i % len(ONE_TOKEN_WORDS)] for i in range(n))


# --- conversion ------------------------------------------------------------------------------


def test_converted_file_is_a_bert_gguf(minilm_gguf: Path) -> None:
    reader = gguf.GGUFReader(minilm_gguf)
    fields = reader.fields

    def scalar(key: str) -> Any:
        return fields[key].contents()

    assert scalar("general.architecture") == "bert"
    assert scalar("bert.attention.causal") is False
    assert scalar("bert.pooling_type") == int(gguf.PoolingType.MEAN)
    assert scalar("bert.embedding_length") == DIM
    assert scalar("tokenizer.ggml.model") == "bert"
    tokens = scalar("tokenizer.ggml.tokens")
    assert tokens[101:103] == ["[CLS]", "[SEP]"]
    assert "\u2581hotel" in tokens  # word-initial piece carries the phantom space
    assert scalar("tokenizer.ggml.bos_token_id") == 101
    assert {t.tensor_type for t in reader.tensors} == {gguf.GGMLQuantizationType.F32}
    names = [t.name for t in reader.tensors]
    assert names[:3] == ["token_embd.weight", "token_types.weight", "position_embd.weight"]
    assert "blk.5.layer_output_norm.bias" in names
    assert not any("pooler" in n for n in names)
    # accents are stripped by the Embedder (exactly), not by llama.cpp (lossily)
    assert scalar("tokenizer.ggml.normalizer.strip_accents") is False
    assert scalar(minilm_convert.KEY_STRIP_ACCENTS) is True
    assert scalar(minilm_convert.KEY_MAX_WORD_CHARS) == 100
    assert embedder_module._KEY_STRIP_ACCENTS == minilm_convert.KEY_STRIP_ACCENTS
    assert embedder_module._KEY_MAX_WORD_CHARS == minilm_convert.KEY_MAX_WORD_CHARS


def test_conversion_is_reproducible(
    minilm_source_dir: Path, minilm_gguf: Path, tmp_path: Path
) -> None:
    again = convert_minilm(minilm_source_dir, tmp_path / "again.gguf")
    assert sha256(again) == sha256(minilm_gguf)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.gguf"]  # no temp leftovers


def test_wrong_weights_hash_is_refused(minilm_source_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "model"
    shutil.copytree(minilm_source_dir, src)
    weights = src / WEIGHTS_FILE
    with weights.open("r+b") as fh:
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    out_dir = tmp_path / "out"
    with pytest.raises(WeightsChecksumError, match="sha256 mismatch") as info:
        convert_minilm(src, out_dir / "x.gguf")
    assert str(weights) in str(info.value)
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_conversion_reports_progress(minilm_source_dir: Path, tmp_path: Path) -> None:
    seen: list[tuple[float, str]] = []
    convert_minilm(minilm_source_dir, tmp_path / "m.gguf", lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions)
    assert (fractions[0], fractions[-1]) == (0.0, 1.0)


# --- model preparation -----------------------------------------------------------------------


def test_prepare_converts_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models"
    path = prepare_embedding_model(models)
    assert path == models / EMBEDDING_MODEL_FILENAME
    sidecar = path.with_name(path.name + ".sha256")
    assert sidecar.is_file()

    def no_conversion(*_args: object) -> Path:
        raise AssertionError("converted again")

    monkeypatch.setattr(model_prep, "convert_minilm", no_conversion)
    hashed: list[Path] = []
    real_sha = minilm_convert.sha256_file

    def recording_sha(path: Path) -> str:
        hashed.append(path)
        return real_sha(path)

    monkeypatch.setattr(model_prep, "sha256_file", recording_sha)
    assert prepare_embedding_model(models) == path
    assert hashed == []  # unchanged size + mtime: no re-hash on start-up

    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # touched, same content
    assert prepare_embedding_model(models) == path
    assert hashed == [path]
    assert prepare_embedding_model(models) == path  # sidecar updated: no second hash
    assert hashed == [path]


def test_prepare_reconverts_a_damaged_file(tmp_path: Path) -> None:
    models = tmp_path / "models"
    path = prepare_embedding_model(models)
    good = sha256(path)
    with path.open("r+b") as fh:
        fh.seek(-5, os.SEEK_END)
        fh.write(b"\x00\x01\x02\x03\x04")
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert prepare_embedding_model(models) == path
    assert sha256(path) == good


def test_missing_package_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_prep, "SOURCE_PACKAGE", "agenvoy_no_such_model_package")
    with pytest.raises(ModelUnavailableError, match="make run"):
        prepare_embedding_model(tmp_path / "models")


# --- accuracy ---------------------------------------------------------------------------------


def test_matches_reference_embeddings(
    minilm_embedder: Embedder, minilm_reference: dict[str, Any]
) -> None:
    items = minilm_reference["items"]
    texts = [item["text"] for item in items]
    assert [len(ids) for ids in minilm_embedder.tokenize(texts)] == [
        item["n_tokens"] for item in items
    ]
    ours = minilm_embedder.embed(texts)
    cosines = [cosine(v, item["embedding"]) for v, item in zip(ours, items, strict=True)]
    report = ", ".join(f"{t[:24]!r}: {c:.6f}" for t, c in zip(texts, cosines, strict=True))
    assert min(cosines) >= 0.999, report
    # one at a time (batch of one) gives the same vectors as the packed batch
    for text, vec in zip(texts, ours, strict=True):
        assert cosine(minilm_embedder.embed([text])[0], vec) > 0.99999


# Ids from the reference tokenizer (tokenizer.json run by Hugging Face `tokenizers`).
REFERENCE_TOKEN_IDS = {
    # NFD splits Hangul syllables into jamo; llama.cpp alone would keep only the first jamo
    "한국어 문장입니다": [
        101,
        1469,
        30006,
        30021,
        29991,
        30014,
        30020,
        29999,
        30008,
        1459,
        30014,
        30021,
        30000,
        30006,
        30025,
        29999,
        30019,
        30024,
        29992,
        30019,
        29993,
        30006,
        102,
    ],
    # vowel signs are Mc (spacing marks): kept by the reference, dropped by llama.cpp alone
    "हिन्दी भाषा": [101, 1339, 29877, 29863, 29861, 29878, 1330, 29876, 29873, 29876, 102],
    "Café crème brûlée": [101, 7668, 13675, 21382, 7987, 9307, 2063, 102],
    "İstanbul ΣΊΣΥΦΟΣ": [101, 9960, 1173, 18199, 29733, 29735, 29736, 29730, 29733, 102],
    "see " + "x" * 101 + ", ok": [101, 2156, 100, 1010, 7929, 102],  # > 100 chars: [UNK]
    "foo[SEP]bar": [101, 29379, 102, 3347, 102],  # special tokens in text, as the reference
    "我們之前討論記憶系統": [101, 1855, 100, 1749, 1776, 100, 100, 100, 100, 100, 100, 102],
}


def test_tokenization_matches_the_reference(minilm_embedder: Embedder) -> None:
    texts = list(REFERENCE_TOKEN_IDS)
    assert minilm_embedder.tokenize(texts) == list(REFERENCE_TOKEN_IDS.values())


def test_output_shape_dtype_and_norm(minilm_embedder: Embedder) -> None:
    vecs = minilm_embedder.embed(["hello world", "", "   ", "記憶系統", "[CLS] [SEP]"])
    assert vecs.shape == (5, DIM)
    assert vecs.dtype == np.float32
    assert np.all(np.isfinite(vecs))
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    assert minilm_embedder.dim == DIM


def test_the_prepared_model_keeps_the_name_its_vectors_are_stored_under(
    minilm_embedder: Embedder,
) -> None:
    # The archive stores vectors under this name (core.model_name.embedding_model_name);
    # another would re-embed every existing profile's messages.
    assert minilm_embedder.model_name == DEFAULT_MODEL_NAME
    # MiniLM has one text kind: questions are embedded as any text.
    text = ["Where do I live?"]
    np.testing.assert_array_equal(minilm_embedder.embed_query(text), minilm_embedder.embed(text))


def test_empty_list(minilm_embedder: Embedder) -> None:
    vecs = minilm_embedder.embed([])
    assert vecs.shape == (0, DIM)
    assert vecs.dtype == np.float32


def test_long_text_is_truncated_like_the_reference(minilm_embedder: Embedder) -> None:
    long_text, kept, one_more = words(400), words(254), words(255)
    assert [len(ids) for ids in minilm_embedder.tokenize([long_text, kept])] == [402, 256]
    v_long, v_kept, v_more = minilm_embedder.embed([long_text, kept, one_more])
    # [CLS] + first 254 tokens + [SEP], exactly like sentence-transformers (max 256)
    assert cosine(v_long, v_kept) > 0.99999
    assert cosine(v_long, v_more) < cosine(v_long, v_kept)


def test_many_texts_in_several_batches(minilm_embedder: Embedder) -> None:
    texts = [f"note {i}: {words(i % 12 + 1)}" for i in range(300)]  # ~3,600 tokens
    together = minilm_embedder.embed(texts)
    for i in (0, 150, 299):
        assert cosine(together[i], minilm_embedder.embed([texts[i]])[0]) > 0.99999


def test_meaning(minilm_embedder: Embedder) -> None:
    q, good, bad = minilm_embedder.embed(
        ["What food allergy do I have?", "I am allergic to shellfish.", "The weather is rainy."]
    )
    assert q @ good > q @ bad + 0.2


# --- threading and lifecycle ------------------------------------------------------------------


def test_aembed_inside_asyncio_run(minilm_embedder: Embedder) -> None:
    async def main() -> np.ndarray[Any, Any]:
        return await minilm_embedder.aembed(["async hello", "second"])

    vecs = asyncio.run(main())
    assert vecs.shape == (2, DIM)
    assert cosine(vecs[0], minilm_embedder.embed(["async hello"])[0]) > 0.99999


def test_submit_from_many_threads(minilm_embedder: Embedder) -> None:
    texts = [[f"thread {t} sentence {i}" for i in range(t + 1)] for t in range(8)]
    expected = [minilm_embedder.embed(batch) for batch in texts]
    start = threading.Barrier(len(texts))

    def work(batch: list[str]) -> np.ndarray[Any, Any]:
        start.wait()
        return minilm_embedder.submit(batch).result()

    with ThreadPoolExecutor(len(texts)) as pool:
        results = list(pool.map(work, texts))
    for got, want in zip(results, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_model_loads_lazily_on_the_worker(
    minilm_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    real_model = embedder_module._EmbeddingModel

    def recording(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real_model(*args)

    monkeypatch.setattr(embedder_module, "_EmbeddingModel", recording)
    with Embedder(minilm_gguf, n_threads=1, max_tokens=8) as emb:
        assert threads == []  # nothing loaded by the constructor
        assert emb.embed(["a fairly long sentence that will be cut short"]).shape == (1, DIM)
        assert len(emb.tokenize([words(20)])[0]) == 22
    assert len(threads) == 1
    assert threads[0] != threading.current_thread().name


def test_forget_texts_zeroes_the_last_text_and_loads_nothing(
    minilm_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[int] = []
    real_model = embedder_module._EmbeddingModel

    def counting(*args: Any) -> Any:
        loads.append(1)
        return real_model(*args)

    monkeypatch.setattr(embedder_module, "_EmbeddingModel", counting)
    with Embedder(minilm_gguf, n_threads=1) as emb:
        emb.forget_texts().result(timeout=30)
        assert loads == []  # nothing loaded just to be cleared
        before = emb.embed(["my bike lock code is 4721"])
        held = emb._run(lambda model: int(np.count_nonzero(model._tokens))).result()
        assert held > 0
        emb.forget_texts().result(timeout=30)
        zeroed = emb._run(lambda model: int(np.count_nonzero(model._tokens))).result()
        assert zeroed == 0
        np.testing.assert_allclose(emb.embed(["my bike lock code is 4721"]), before, atol=1e-5)
    assert loads == [1]
    emb.forget_texts().result(timeout=30)  # closed: nothing to do, no error


def test_close_is_idempotent(minilm_gguf: Path) -> None:
    emb = Embedder(minilm_gguf)
    assert emb.embed(["x"]).shape == (1, DIM)
    emb.close()
    emb.close()
    with pytest.raises(RuntimeError, match="closed"):
        emb.submit(["x"])
    Embedder(minilm_gguf).close()  # never used: nothing to free, no thread to stop


def test_corrupt_model_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with Embedder(bad) as emb:
        for _ in range(2):  # the worker survives and reports again
            with pytest.raises(EmbedderError, match=r"broken\.gguf"):
                emb.embed(["hello"])
    with (
        Embedder(tmp_path / "missing.gguf") as emb,
        pytest.raises(EmbedderError, match="not found"),
    ):
        emb.embed(["hello"])


def test_bad_input_fails_on_the_callers_thread(minilm_embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        minilm_embedder.submit("not a list")
    with pytest.raises(TypeError):
        minilm_embedder.submit(["ok", 3])  # type: ignore[list-item]


def test_a_quantised_embedding_model_loads_and_agrees(
    minilm_gguf: Path, minilm_embedder: Embedder, tmp_path: Path
) -> None:
    """A user's quantised embedding GGUF must not take the process down.

    On CPUs that advertise AMX without granting it, llama.cpp's extra weight
    buffers raise SIGILL on the first quantised matmul; the embedder applies
    the same guard as the chat engine (llm/cpu_features.py).
    """
    import ctypes

    import llama_cpp

    out = tmp_path / "minilm-q8_0.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    assert (
        llama_cpp.llama_model_quantize(
            os.fsencode(minilm_gguf), os.fsencode(out), ctypes.byref(params)
        )
        == 0
    )
    texts = ["the bike lock code is 4721", "東京の天気は晴れです"]
    with Embedder(out) as quantised:
        cosine = (quantised.embed(texts) * minilm_embedder.embed(texts)).sum(axis=1)
    assert float(cosine.min()) > 0.999
