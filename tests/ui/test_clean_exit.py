"""The window tests, run on their own in a fresh interpreter, end with a clean exit.

Two crashes hid here, both invisible from inside the run that causes them:

- PySide6 6.12 on CPython 3.11 drops a reference to ``None``/``True`` it
  never took on every void call and every ``Signal.emit``; the interpreter
  aborted at exit ("Fatal Python error: bool_dealloc", rc 134) once the
  counts ran out.  ``agenvoy_desktop.ui`` pins those singletons.
- Python-owned Qt objects freed by a garbage collection on a worker thread
  left their timers registered; one fired into freed memory a few tests
  later (a segfault).  The UI fixtures destroy Qt objects on the GUI thread.

Only a child process shows the exit status, hence this test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Signal

from agenvoy_desktop.ui import PINNED_REFS, pin_singletons

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().relative_to(REPO)


def run_child(*args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh interpreter with faulthandler on; its output and status."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONFAULTHANDLER": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.slow
def test_the_ui_tests_alone_exit_cleanly() -> None:
    done = run_child(
        "tests/ui",
        f"--ignore={HERE.as_posix()}",
        "--ignore=tests/ui/test_stall.py",  # timing checks with real models: their own run
        "-m",
        "not slow",
    )
    output = done.stdout + done.stderr
    assert "Fatal Python error" not in output, output[-4000:]
    assert done.returncode == 0, output[-4000:]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the singletons are immortal there")
def test_void_calls_and_emits_cannot_free_none_or_true() -> None:
    class Emitter(QObject):
        fired = Signal()

    emitter = Emitter()
    for _ in range(1000):
        emitter.fired.emit()  # each drops a reference to True on PySide6 6.12
        emitter.blockSignals(False)
        emitter.setObjectName("x")  # a void call: drops one to None there
    assert not pin_singletons()  # already done at import, and only once
    for singleton in (None, True, False):
        assert sys.getrefcount(singleton) > PINNED_REFS // 2
