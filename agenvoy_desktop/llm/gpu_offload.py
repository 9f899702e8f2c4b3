"""How many of a model's layers go to the GPU: as many as fit in its free memory.

llama.cpp's "all layers" (``n_gpu_layers = -1``) makes a model larger than
the free video memory fail to load, and 0 leaves a GPU idle.  So the
``gpu_layers`` setting's automatic value (-1) is resolved here before a load:
the GGUF header says what each layer's weights weigh, the context size says
what its KV cache will, ggml says how much memory the GPUs have free, and
layers are counted from the last one down (llama.cpp offloads the last
``n`` layers) until the next would not fit beside a reserve for compute
buffers.  When every layer fits, the output layer goes too.

On a build without GPU support (``llama_supports_gpu_offload()`` false)
the answer is 0 without reading anything.  This llama.cpp has no fitting
helper of its own, and its Python bindings do not wrap ggml's device API,
so the free memory is read through ctypes from the ggml library that
llama-cpp-python ships.
"""

from __future__ import annotations

import ctypes
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

GPU_RESERVE_BYTES = 768 << 20
"""Left free per GPU for llama.cpp's compute buffers and the driver's own context."""
KV_BYTES_PER_VALUE = 2
"""The KV cache's type: f16."""
_GPU_DEVICE_TYPES = frozenset({1, 2})
"""ggml_backend_dev_type: GPU, integrated GPU (0 is the CPU, 3 an accelerator)."""
_LAYER = re.compile(r"blk\.(\d+)\.")


@dataclass(frozen=True, slots=True)
class GpuMemory:
    """The GPUs llama.cpp can offload to and their free memory, together."""

    names: tuple[str, ...]
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class OffloadPlan:
    """The layers chosen for one model, and why (``--version``, About, the log)."""

    layers: int
    """``n_gpu_layers`` for llama.cpp: 0 … block count + 1 (the output layer)."""
    block_count: int
    reason: str


_last_plan: dict[str, OffloadPlan] = {}
"""The chat model's plan once it loaded (key ``"chat"``), for the about text."""


def last_plan() -> OffloadPlan | None:
    """The plan of the chat model loaded last in this process, if any."""
    return _last_plan.get("chat")


def layers_that_fit(
    layer_bytes: Sequence[int], output_bytes: int, kv_bytes_per_layer: int, budget: int
) -> int:
    """How many layers (counted from the last) fit in *budget* bytes, +1 if the output does too.

    Pure arithmetic, so it is tested with made-up numbers.
    """
    used = 0
    fitted = 0
    for size in reversed(layer_bytes):
        need = size + kv_bytes_per_layer
        if used + need > budget:
            return fitted
        used += need
        fitted += 1
    return fitted + 1 if used + output_bytes <= budget else fitted


def layer_sizes(tensor_bytes: Mapping[str, int], block_count: int) -> tuple[list[int], int]:
    """Bytes of each repeating layer (``blk.N.*``) and of the output layer.

    A model whose output shares the token embedding (no ``output.weight``)
    gets a copy of the embedding on the GPU, so that is what the output weighs.
    """
    layers = [0] * block_count
    for name, size in tensor_bytes.items():
        match = _LAYER.match(name)
        if match and int(match.group(1)) < block_count:
            layers[int(match.group(1))] += size
    output = tensor_bytes.get("output.weight", tensor_bytes.get("token_embd.weight", 0))
    return layers, output + tensor_bytes.get("output_norm.weight", 0)


def kv_bytes_per_layer(metadata: Mapping[str, Any], n_ctx: int) -> int:
    """The f16 K and V cache of one layer for *n_ctx* tokens (0 when the header does not say)."""
    arch = metadata.get("general.architecture")

    def value(key: str) -> int:
        found = metadata.get(f"{arch}.{key}")
        return found if isinstance(found, int) and not isinstance(found, bool) else 0

    heads = value("attention.head_count")
    kv_heads = value("attention.head_count_kv") or heads
    embedding = value("embedding_length")
    head_dim = embedding // heads if heads else 0
    key_dim = value("attention.key_length") or head_dim
    value_dim = value("attention.value_length") or head_dim
    return n_ctx * kv_heads * (key_dim + value_dim) * KV_BYTES_PER_VALUE


def gpu_memory() -> GpuMemory | None:
    """The GPUs ggml sees and their free memory; None where that cannot be asked."""
    lib = _ggml_library()
    if lib is None:
        return None
    names: list[str] = []
    free_total = total_total = 0
    try:
        for index in range(int(lib.ggml_backend_dev_count())):
            device = lib.ggml_backend_dev_get(index)
            if int(lib.ggml_backend_dev_type(device)) not in _GPU_DEVICE_TYPES:
                continue
            free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
            lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
            names.append((lib.ggml_backend_dev_description(device) or b"GPU").decode())
            free_total += free.value
            total_total += total.value
    except (AttributeError, OSError, UnicodeDecodeError) as exc:
        log.warning("could not ask ggml for the GPUs' free memory: %s", exc)
        return None
    return GpuMemory(tuple(names), free_total, total_total)


def _ggml_library() -> Any:
    """ggml as loaded by llama-cpp-python (the same handle: dlopen returns the loaded copy)."""
    import llama_cpp

    folder = Path(llama_cpp.__file__).parent / "lib"
    name = {"win32": "ggml.dll", "darwin": "libggml.dylib"}.get(sys.platform, "libggml.so")
    try:
        lib = ctypes.CDLL(str(folder / name))
    except OSError:
        return None
    pointer = ctypes.c_void_p
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get.restype = pointer
    lib.ggml_backend_dev_type.argtypes = [pointer]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_description.argtypes = [pointer]
    lib.ggml_backend_dev_description.restype = ctypes.c_char_p
    lib.ggml_backend_dev_memory.argtypes = [pointer] + [ctypes.POINTER(ctypes.c_size_t)] * 2
    lib.ggml_backend_dev_memory.restype = None
    return lib


def plan_offload(model_path: Path, gpu_layers: int, n_ctx: Callable[[], int]) -> OffloadPlan:
    """``n_gpu_layers`` for a load: the setting when it is 0 or more, else as many as fit.

    *n_ctx* (the context the model will get) is asked only when it matters:
    reading it may read the GGUF header.
    """
    import llama_cpp

    if not llama_cpp.llama_supports_gpu_offload():
        return OffloadPlan(0, 0, "not in this build (CPU only)")
    if gpu_layers >= 0:
        return OffloadPlan(gpu_layers, 0, f"{gpu_layers} layers, as set in Settings")
    from agenvoy_desktop.llm.gguf_info import ModelFileError, read_tensor_layout

    memory = gpu_memory()
    try:
        layout = read_tensor_layout(model_path)
    except ModelFileError:
        layout = None  # the load itself will say what is wrong with the file
    if memory is None or layout is None or not memory.names:
        return OffloadPlan(-1, 0, "all layers (free GPU memory unknown)")
    blocks = layout.metadata.get(f"{layout.metadata.get('general.architecture')}.block_count")
    block_count = blocks if isinstance(blocks, int) else 0
    layers, output = layer_sizes(layout.tensor_bytes, block_count)
    budget = memory.free_bytes - GPU_RESERVE_BYTES * len(memory.names)
    fitted = layers_that_fit(layers, output, kv_bytes_per_layer(layout.metadata, n_ctx()), budget)
    gib = memory.free_bytes / (1 << 30)
    reason = (
        f"{min(fitted, block_count)} of {block_count} layers"
        f"{' and the output' if fitted > block_count else ''} fit in {gib:.1f} GiB free on "
        f"{', '.join(memory.names)}"
    )
    return OffloadPlan(fitted, block_count, reason)


def remember_chat_plan(plan: OffloadPlan) -> None:
    """Keep the chat model's plan for :func:`last_plan` (the about text)."""
    _last_plan["chat"] = plan
