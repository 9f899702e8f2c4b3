"""What a stored measurement of this machine depends on: the CPU and the llama.cpp build.

The extra-buffers verdict (:mod:`.buffer_probe`) and the prompt-batch calibration
(:mod:`.calibration`) are both kept per machine; both compare this digest so that a new
CPU or a new llama.cpp measures again.  It lives on its own so that neither of them has
to import the other.
"""

from __future__ import annotations

import hashlib
import platform


def machine_key() -> str:
    """A digest of the CPU (model name, feature flags) and the llama.cpp build."""
    import llama_cpp  # heavy: only when a verdict or calibration is read or written

    parts = [platform.machine(), _cpu_line("model name"), _cpu_line("flags")]
    parts.append(str(getattr(llama_cpp, "__version__", "?")))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cpu_line(name: str) -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith(name):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor()
