"""What the installed llama.cpp can do on this machine, in words (``--version``, Models tab).

Besides the build: the threads it is given (decode / prompt), the prompt
batch sizes measured per model (:mod:`agenvoy_desktop.llm.calibration`) and
what GPU offload does here (:mod:`agenvoy_desktop.llm.gpu_offload`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from agenvoy_desktop import __version__
from agenvoy_desktop.llm.calibration import DEFAULT_BATCH, Calibration, stored_for_this_machine
from agenvoy_desktop.llm.cpu_features import (
    extra_buffers_choice,
    logical_cores,
    physical_cores,
    thread_plan,
)
from agenvoy_desktop.llm.gpu_offload import GpuMemory, OffloadPlan, gpu_memory, last_plan
from agenvoy_desktop.paths import AppPaths, machine_cache_dir


@dataclass(frozen=True, slots=True)
class LlamaBuild:
    """The llama.cpp build in use and the kernel path it takes here."""

    version: str
    """llama-cpp-python's version (it pins the llama.cpp it was compiled with)."""
    cpu_features: list[str]
    """Features the build uses on this CPU (``AVX2``, ``AMX_INT8``, ``REPACK``, ...)."""
    gpu_offload: bool
    extra_buffers: bool
    extra_buffers_reason: str
    threads: tuple[int, int] = (1, 1)
    """(decode, prompt) threads the chat model gets with the current setting."""
    cores: tuple[int, int] = (1, 1)
    """(physical, logical) cores this process may use."""
    gpus: GpuMemory | None = None
    offload: OffloadPlan | None = None
    """The chat model's layers on the GPU, when one was loaded in this process."""
    calibrations: list[Calibration] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One fact per line, for a terminal or a tooltip."""
        state = "on" if self.extra_buffers else "off"
        return [
            f"llama.cpp (llama-cpp-python {self.version})",
            f"CPU features: {' '.join(self.cpu_features) or 'none reported'}",
            f"GPU offload: {self._gpu_text()}",
            f"extra buffers (AMX / repacked kernels): {state} — {self.extra_buffers_reason}",
            f"threads: {self.threads[0]} decoding, {self.threads[1]} for prompts "
            f"({self.cores[0]} physical / {self.cores[1]} logical cores)",
            *self._batch_lines(),
        ]

    def _gpu_text(self) -> str:
        if not self.gpu_offload:
            return "not in this build (all layers on the CPU)"
        if self.offload is not None:
            return f"available — chat model: {self.offload.reason}"
        if self.gpus is not None and self.gpus.names:
            gib = self.gpus.free_bytes / (1 << 30)
            names = ", ".join(self.gpus.names)
            return f"available — {names}, {gib:.1f} GiB free; as many layers as fit"
        return "available — as many layers as fit"

    def _batch_lines(self) -> list[str]:
        if not self.calibrations:
            return [f"prompt batch: {DEFAULT_BATCH} (measured at each model's first load)"]
        return [f"prompt batch for {c.model}: {c.summary()}" for c in self.calibrations]


def llama_build(threads_setting: int | None = None) -> LlamaBuild:
    """Ask the loaded llama.cpp library (no model is loaded) and the machine cache."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    features = [
        name.strip()
        for part in info.replace("CPU :", "|").split("|")
        if "=" in part
        for name, _, value in [part.partition("=")]
        if value.strip() == "1"
    ]
    enabled, reason = extra_buffers_choice()
    offload = bool(llama_cpp.llama_supports_gpu_offload())
    return LlamaBuild(
        version=str(getattr(llama_cpp, "__version__", "unknown")),
        cpu_features=features,
        gpu_offload=offload,
        extra_buffers=enabled,
        extra_buffers_reason=reason,
        threads=thread_plan(threads_setting),
        cores=(physical_cores(), logical_cores()),
        gpus=gpu_memory() if offload else None,
        offload=last_plan(),
        calibrations=stored_for_this_machine(machine_cache_dir())[:4],
    )


def about_lines(paths: AppPaths) -> list[str]:
    """Version, build, folders and llama.cpp's kernel path (``--version``, Help › About)."""
    from agenvoy_desktop.llm.buffer_probe import apply_stored_verdict
    from agenvoy_desktop.settings import load_settings

    apply_stored_verdict(machine_cache_dir())
    threads = load_settings(paths.settings_file).models.threads
    frozen = "frozen app" if getattr(sys, "frozen", False) else "Python package"
    return [
        f"Agenvoy Desktop {__version__} ({frozen}, Python {sys.version.split()[0]})",
        f"memory and settings: {paths.config_dir}",
        f"models: {paths.models_dir}",
        *llama_build(threads).lines(),
    ]
