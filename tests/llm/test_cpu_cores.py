"""Counting physical cores (hyper-thread pairs are one core) and the thread plan built on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop.core import cpu_cores
from agenvoy_desktop.core.cpu_cores import count_cores, logical_cores, physical_cores
from agenvoy_desktop.llm import cpu_features
from agenvoy_desktop.llm.cpu_features import thread_plan
from agenvoy_desktop.settings import ModelSettings, default_threads

# Two packages, two cores each, two hyper-threads per core: 8 logical, 4 physical.
SMT_CPUINFO = "\n\n".join(
    f"processor\t: {cpu}\nmodel name\t: Some CPU\nphysical id\t: {cpu // 4}\n"
    f"core id\t\t: {(cpu // 2) % 2}\nflags\t\t: fpu sse"
    for cpu in range(8)
)


def test_hyper_thread_pairs_count_once() -> None:
    cpus = [(0, "0", "0"), (1, "0", "0"), (2, "0", "1"), (3, "0", "1")]
    assert count_cores(cpus, set()) == 2


def test_the_same_core_id_in_two_packages_is_two_cores() -> None:
    assert count_cores([(0, "0", "0"), (1, "1", "0")], set()) == 2


def test_only_the_cpus_the_process_may_use_count() -> None:
    cpus = [(0, "0", "0"), (1, "0", "0"), (2, "0", "1"), (3, "0", "1")]
    assert count_cores(cpus, {0, 1}) == 1


def test_a_cpu_without_a_core_id_makes_the_count_unknown() -> None:
    assert count_cores([(0, "0", "0"), (1, "0", None)], set()) == 0


def test_proc_cpuinfo_is_parsed() -> None:
    assert cpu_cores._cores_from_cpuinfo(SMT_CPUINFO, set()) == 4
    assert cpu_cores._cores_from_cpuinfo(SMT_CPUINFO, {0, 1, 2, 3}) == 2
    assert cpu_cores._cores_from_cpuinfo("processor : 0\nvendor : x\n", set()) == 0
    assert cpu_cores._cores_from_cpuinfo("", set()) == 0


def _fake_sysfs(root: Path, topology: dict[int, tuple[int, int]]) -> None:
    for cpu, (package, core) in topology.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(f"{package}\n")
        (folder / "core_id").write_text(f"{core}\n")


def test_sysfs_topology_is_read(tmp_path: Path) -> None:
    _fake_sysfs(tmp_path, {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)})
    assert cpu_cores._cores_from_sysfs(tmp_path, {0, 1, 2, 3}) == 2
    assert cpu_cores._cores_from_sysfs(tmp_path, {0, 1, 2, 3, 4}) == 0  # cpu4 unknown


def test_the_real_machine_has_at_least_one_core_of_each_kind() -> None:
    assert 1 <= physical_cores() <= logical_cores()


def test_the_default_threads_setting_is_the_physical_cores() -> None:
    assert default_threads() == physical_cores()
    assert ModelSettings().threads == physical_cores()


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, (4, 8)),  # automatic: physical cores decode, every logical core for prompts
        (0, (4, 8)),
        (4, (4, 8)),  # the default setting: the same
        (2, (2, 2)),  # fewer than the cores: kept for prompts too
        (6, (6, 8)),
        (12, (12, 12)),  # more than the machine has: as asked
    ],
)
def test_thread_plan(
    monkeypatch: pytest.MonkeyPatch, setting: int | None, expected: tuple[int, int]
) -> None:
    monkeypatch.setattr(cpu_features, "physical_cores", lambda: 4)
    monkeypatch.setattr(cpu_features, "logical_cores", lambda: 8)
    assert thread_plan(setting) == expected
