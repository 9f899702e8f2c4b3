"""Process-wide settings: the GIL switch interval and llama.cpp's OpenMP spinning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agenvoy_desktop.interpreter import GIL_SWITCH_S, responsive_threads
from agenvoy_desktop.llm import OPENMP_SPIN_COUNT


def test_responsive_threads_sets_a_short_switch_interval() -> None:
    before = sys.getswitchinterval()
    try:
        responsive_threads()
        assert sys.getswitchinterval() == GIL_SWITCH_S
    finally:
        sys.setswitchinterval(before)


REPO = Path(__file__).resolve().parents[1]


def _spin_count_seen(env: dict[str, str]) -> str:
    code = "import os, agenvoy_desktop.llm.embedder; print(os.environ['GOMP_SPINCOUNT'])"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


def test_llm_package_bounds_openmp_spinning_before_llama_cpp_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    assert _spin_count_seen(env) == OPENMP_SPIN_COUNT
    assert _spin_count_seen({**env, "GOMP_SPINCOUNT": "123"}) == "123"  # the user's value wins
