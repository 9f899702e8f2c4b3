"""What llama.cpp may assume about this CPU (shared by every model worker).

Kept apart from the workers so the chat engine and the embedder apply the
same rule: a quantised model of either kind must never take the process
down on a machine whose CPU advertises more than it delivers.

The rule, first match wins: ``AGENVOY_LLAMA_EXTRA_BUFFERS=1`` / ``0``; the
verdict of the one-time probe (:mod:`agenvoy_desktop.llm.buffer_probe`, which
installs it with :func:`set_probe_verdict` before a model loads); without a
verdict, off wherever the CPU advertises AMX (the case that was seen to
fault) and on elsewhere.
"""

from __future__ import annotations

import os
from functools import cache

EXTRA_BUFFERS_ENV = "AGENVOY_LLAMA_EXTRA_BUFFERS"

_verdict: dict[str, tuple[bool, str]] = {}
"""The probe's answer once installed (key ``"probe"``)."""


def set_probe_verdict(enabled: bool, reason: str) -> None:
    """Use the probe's answer for every model loaded from now on."""
    _verdict["probe"] = (enabled, reason)


def extra_buffers_enabled() -> bool:
    """Whether llama.cpp may use its extra CPU weight buffers (AMX, repacked layouts)."""
    return extra_buffers_choice()[0]


def extra_buffers_choice() -> tuple[bool, str]:
    """Whether the extra buffers are used, and why, in words (Models tab, ``--version``)."""
    forced = os.environ.get(EXTRA_BUFFERS_ENV, "").strip()
    if forced in {"0", "1"}:
        return forced == "1", f"forced by {EXTRA_BUFFERS_ENV}={forced}"
    if "probe" in _verdict:
        return _verdict["probe"]
    if _advertises_amx():
        return False, "not probed yet; off because the CPU advertises AMX"
    return True, "not probed yet; on (no AMX advertised)"


@cache
def _advertises_amx() -> bool:
    """ggml's AMX kernels die with SIGILL on machines that advertise AMX but do
    not let a process use it (seen on Firecracker VMs)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False
