"""``gpu_layers`` automatic: as many layers as fit in the GPUs' free memory (made-up numbers)."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest

from agenvoy_desktop.llm import gpu_offload
from agenvoy_desktop.llm.gguf_info import read_tensor_layout
from agenvoy_desktop.llm.gpu_offload import (
    GPU_RESERVE_BYTES,
    GpuMemory,
    kv_bytes_per_layer,
    layer_sizes,
    layers_that_fit,
    plan_offload,
)
from tests.tiny_gguf import write_tiny_llama

MIB = 1 << 20


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("offload") / "tiny.gguf", n_layer=4)


def test_everything_fits_with_the_output_layer() -> None:
    assert layers_that_fit([100] * 4, output_bytes=50, kv_bytes_per_layer=10, budget=1000) == 5


def test_all_layers_but_not_the_output() -> None:
    assert layers_that_fit([100] * 4, output_bytes=500, kv_bytes_per_layer=10, budget=500) == 4


def test_layers_are_counted_from_the_last_until_one_does_not_fit() -> None:
    # the last layer (300 + 10) and the one before (100 + 10) fit 450; the next would not
    assert layers_that_fit([100, 100, 100, 300], 0, 10, budget=450) == 2
    # the KV cache counts: without it a third layer would fit
    assert layers_that_fit([100, 100, 100, 300], 0, 0, budget=500) == 3


def test_nothing_fits_in_a_budget_smaller_than_the_last_layer() -> None:
    assert layers_that_fit([100] * 4, 0, 0, budget=99) == 0
    assert layers_that_fit([100] * 4, 0, 0, budget=-5) == 0


def test_layer_sizes_sum_each_block_and_the_output() -> None:
    tensors = {
        "token_embd.weight": 1000,
        "blk.0.attn_q.weight": 10,
        "blk.0.ffn_up.weight": 20,
        "blk.1.attn_q.weight": 15,
        "output_norm.weight": 1,
        "output.weight": 900,
    }
    assert layer_sizes(tensors, 2) == ([30, 15], 901)


def test_a_tied_output_weighs_the_token_embedding() -> None:
    assert layer_sizes({"token_embd.weight": 1000, "blk.0.x": 5}, 1) == ([5], 1000)


def test_kv_cache_per_layer_from_the_header() -> None:
    # Qwen2.5-0.5B: 14 heads of 64 over 896, 2 KV heads; f16 K and V for 8,192 tokens
    metadata = {
        "general.architecture": "qwen2",
        "qwen2.embedding_length": 896,
        "qwen2.attention.head_count": 14,
        "qwen2.attention.head_count_kv": 2,
    }
    assert kv_bytes_per_layer(metadata, 8192) == 8192 * 2 * (64 + 64) * 2 == 4 * MIB
    assert kv_bytes_per_layer({"general.architecture": "x"}, 8192) == 0


def test_the_tiny_models_layout_is_read(tiny: Path) -> None:
    layout = read_tensor_layout(tiny)
    layers, output = layer_sizes(layout.tensor_bytes, 4)
    assert len(layers) == 4
    assert all(size > 0 for size in layers)
    assert output > 0
    assert layout.metadata["general.architecture"] == "llama"


def test_a_cpu_build_offloads_nothing(tiny: Path) -> None:
    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama.cpp was built with GPU support")
    plan = plan_offload(tiny, -1, lambda: pytest.fail("read the context for a CPU build"))
    assert plan.layers == 0
    assert "not in this build" in plan.reason


def _gpu_build(monkeypatch: pytest.MonkeyPatch, memory: GpuMemory | None) -> None:
    monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda: True)
    monkeypatch.setattr(gpu_offload, "gpu_memory", lambda: memory)


def test_a_gpu_build_fits_what_the_free_memory_allows(
    monkeypatch: pytest.MonkeyPatch, tiny: Path
) -> None:
    layout = read_tensor_layout(tiny)
    layers, output = layer_sizes(layout.tensor_bytes, 4)
    kv = kv_bytes_per_layer(layout.metadata, 512)
    two_layers = sum(layers[-2:]) + 2 * kv
    _gpu_build(monkeypatch, GpuMemory(("Fake GPU",), GPU_RESERVE_BYTES + two_layers, 8 << 30))
    plan = plan_offload(tiny, -1, lambda: 512)
    assert (plan.layers, plan.block_count) == (2, 4)
    assert "2 of 4 layers fit" in plan.reason
    assert "Fake GPU" in plan.reason
    _gpu_build(monkeypatch, GpuMemory(("Fake GPU",), 8 << 30, 8 << 30))
    plan = plan_offload(tiny, -1, lambda: 512)
    assert plan.layers == 5  # every layer and the output
    assert "and the output" in plan.reason
    assert output < 8 << 30


def test_a_setting_of_zero_or_more_is_kept(monkeypatch: pytest.MonkeyPatch, tiny: Path) -> None:
    _gpu_build(monkeypatch, GpuMemory(("Fake GPU",), 0, 0))
    assert plan_offload(tiny, 3, lambda: 512).layers == 3
    assert plan_offload(tiny, 0, lambda: 512).layers == 0


def test_unknown_free_memory_offloads_everything_as_before(
    monkeypatch: pytest.MonkeyPatch, tiny: Path
) -> None:
    _gpu_build(monkeypatch, None)
    plan = plan_offload(tiny, -1, lambda: 512)
    assert plan.layers == -1
    assert "unknown" in plan.reason


def test_ggml_is_asked_for_its_gpus() -> None:
    memory = gpu_offload.gpu_memory()
    assert memory is not None  # the library is there and answers
    if not llama_cpp.llama_supports_gpu_offload():
        assert memory.names == ()
