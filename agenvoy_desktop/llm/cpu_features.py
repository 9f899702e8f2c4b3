"""What llama.cpp may assume about this CPU (shared by every model worker).

Kept apart from the workers so the chat engine and the embedder apply the
same rule: a quantised model of either kind must never take the process
down on a machine whose CPU advertises more than it delivers.
"""

from __future__ import annotations

import os
from functools import cache

EXTRA_BUFFERS_ENV = "AGENVOY_LLAMA_EXTRA_BUFFERS"


@cache
def extra_buffers_enabled() -> bool:
    """Whether llama.cpp may use its extra CPU weight buffers (AMX, repacked layouts).

    ggml's AMX kernels die with SIGILL on machines that advertise AMX but do
    not let a process use it (seen on Firecracker VMs), killing the whole app
    on the first quantised matmul.  They are therefore off wherever the CPU
    advertises AMX; ``AGENVOY_LLAMA_EXTRA_BUFFERS=1`` / ``0`` overrides.
    """
    forced = os.environ.get(EXTRA_BUFFERS_ENV, "").strip()
    if forced in {"0", "1"}:
        return forced == "1"
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" not in line.split()
    except OSError:
        pass
    return True
