"""What llama.cpp may assume about this CPU (shared by every model worker).

Kept apart from the workers so the chat engine and the embedder apply the
same rule: a quantised model of either kind must never take the process
down on a machine whose CPU advertises more than it delivers.

The rule, first match wins: ``AGENVOY_LLAMA_EXTRA_BUFFERS=1`` / ``0``; the
verdict of the one-time probe (:mod:`agenvoy_desktop.llm.buffer_probe`, which
installs it with :func:`set_probe_verdict` before a model loads); without a
verdict, off wherever the CPU advertises AMX (the case that was seen to
fault) and on elsewhere.

It also plans llama.cpp's threads (:func:`thread_plan`).  Decoding one token
is bound by memory bandwidth and gains nothing from a core's second
hyper-thread (two threads on one core fight over its cache), so it gets one
thread per physical core; evaluating a prompt is compute-bound and gets
every logical core the process may run on (counted by
:mod:`agenvoy_desktop.core.cpu_cores`).
"""

from __future__ import annotations

import os
from functools import cache

from agenvoy_desktop.core.cpu_cores import logical_cores, physical_cores

__all__ = [
    "EXTRA_BUFFERS_ENV",
    "extra_buffers_choice",
    "extra_buffers_enabled",
    "logical_cores",
    "physical_cores",
    "set_probe_verdict",
    "thread_plan",
]

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


# -- threads ----------------------------------------------------------------------------------
def thread_plan(setting: int | None) -> tuple[int, int]:
    """(decode threads, prompt threads) for a threads *setting* (None or < 1: automatic).

    Automatic is physical cores for decoding and every logical core for the
    prompt.  A setting is the decode count; the prompt gets every logical
    core as well unless the setting asks for fewer than the physical cores
    (someone keeping cores free for other work means it for prompts too).
    """
    physical, logical = physical_cores(), logical_cores()
    if setting is None or setting < 1:
        return physical, max(physical, logical)
    if setting < physical:
        return setting, setting
    return setting, max(setting, logical)
