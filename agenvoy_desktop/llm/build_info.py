"""What the installed llama.cpp can do on this machine, in words (``--version``, Models tab)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from agenvoy_desktop import __version__
from agenvoy_desktop.llm.cpu_features import extra_buffers_choice
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

    def lines(self) -> list[str]:
        """One fact per line, for a terminal or a tooltip."""
        state = "on" if self.extra_buffers else "off"
        return [
            f"llama.cpp (llama-cpp-python {self.version})",
            f"CPU features: {' '.join(self.cpu_features) or 'none reported'}",
            f"GPU offload: {'available' if self.gpu_offload else 'not in this build'}",
            f"extra buffers (AMX / repacked kernels): {state} — {self.extra_buffers_reason}",
        ]


def llama_build() -> LlamaBuild:
    """Ask the loaded llama.cpp library (no model is loaded)."""
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
    return LlamaBuild(
        version=str(getattr(llama_cpp, "__version__", "unknown")),
        cpu_features=features,
        gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
        extra_buffers=enabled,
        extra_buffers_reason=reason,
    )


def about_lines(paths: AppPaths) -> list[str]:
    """Version, build, folders and llama.cpp's kernel path (``--version``, Help › About)."""
    from agenvoy_desktop.llm.buffer_probe import apply_stored_verdict

    apply_stored_verdict(machine_cache_dir())
    frozen = "frozen app" if getattr(sys, "frozen", False) else "Python package"
    return [
        f"Agenvoy Desktop {__version__} ({frozen}, Python {sys.version.split()[0]})",
        f"memory and settings: {paths.config_dir}",
        f"models: {paths.models_dir}",
        *llama_build().lines(),
    ]
