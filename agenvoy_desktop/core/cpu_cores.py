"""How many cores this process may use: physical (one per hyper-thread pair) and logical.

A machine fact, apart from any model: the settings' default thread count and
llama.cpp's thread plan (:func:`agenvoy_desktop.llm.cpu_features.thread_plan`)
are both built on it.  Linux's ``/sys`` topology is read first, then
``/proc/cpuinfo``; where neither says, every logical CPU counts as a core.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

_SYS_CPU = Path("/sys/devices/system/cpu")


def logical_cores() -> int:
    """Logical CPUs this process may run on (its affinity mask, else ``os.cpu_count``)."""
    return len(_allowed_cpus()) or max(1, os.cpu_count() or 1)


@cache
def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (one per hyper-thread pair).

    Linux's ``/sys`` topology first, then ``/proc/cpuinfo``; where neither
    says (other systems, a container hiding both) every logical CPU counts
    as a core, which is what llama.cpp would be given anyway.
    """
    allowed = _allowed_cpus()
    cores = _cores_from_sysfs(_SYS_CPU, allowed) or _cores_from_cpuinfo(
        _read("/proc/cpuinfo"), allowed
    )
    return cores or logical_cores()


def _allowed_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set()


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""


def _cores_from_sysfs(root: Path, allowed: set[int]) -> int:
    """Distinct (package, core) pairs of the allowed CPUs in ``/sys``'s topology; 0 if unknown."""
    cpus = []
    for cpu in sorted(allowed):
        topology = root / f"cpu{cpu}" / "topology"
        package, core = _read(topology / "physical_package_id"), _read(topology / "core_id")
        cpus.append((cpu, package.strip() or None, core.strip() or None))
    return count_cores(cpus, allowed)


def _cores_from_cpuinfo(text: str, allowed: set[int]) -> int:
    """Distinct (physical id, core id) pairs of the allowed processors; 0 if not stated."""
    return count_cores(_cpuinfo_blocks(text), allowed)


def count_cores(cpus: Iterable[tuple[int, str | None, str | None]], allowed: set[int]) -> int:
    """Distinct (package, core) pairs among *cpus* (processor, package, core) in *allowed*.

    An empty *allowed* means every processor.  0 when a processor does not
    say which core it is (the count would be a guess).
    """
    pairs: set[tuple[str, str]] = set()
    for processor, package, core in cpus:
        if allowed and processor not in allowed:
            continue
        if core is None:
            return 0
        pairs.add((package or "0", core))
    return len(pairs)


def _cpuinfo_blocks(text: str) -> list[tuple[int, str | None, str | None]]:
    cpus = []
    for block in re.split(r"\n\s*\n", text):
        fields = {
            key.strip(): value.strip()
            for key, sep, value in (line.partition(":") for line in block.splitlines())
            if sep
        }
        if fields.get("processor", "").isdigit():
            cpus.append(
                (int(fields["processor"]), fields.get("physical id"), fields.get("core id"))
            )
    return cpus
