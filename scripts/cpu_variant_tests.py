"""Run the real-model tests a second time, the way another CPU would run them.

llama.cpp chooses its matrix kernels by CPU: with its extra weight buffers
(AMX tiles, repacked quantised layouts) a model computes the same answer by a
different route, and greedy decoding can pick different tokens.  A test that
passes only with one kernel set passes only on machines like the one it was
written on.  ``make test`` therefore runs the suite with this machine's
default (``AGENVOY_LLAMA_EXTRA_BUFFERS`` unset), then the ``slow`` tests
(those that run real models) again with the other setting.

Switching the buffers ON can kill the process with SIGILL on a machine that
advertises AMX but faults when a process uses it (seen on virtual machines).
So before such a pass, a subprocess loads the starter model with the buffers
on and generates a few tokens; if it dies, the pass is skipped and says why.

    .venv/bin/python scripts/cpu_variant_tests.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_MODEL_TESTS = ["tests/agent", "tests/core", "tests/llm"]
PROBE_TIMEOUT_S = 600


def say(text: str) -> None:
    sys.stderr.write(f"cpu-variant: {text}\n")
    sys.stderr.flush()


def other_setting() -> str:
    """The extra-buffers value the main test run did not use ("0" or "1")."""
    from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled

    return "0" if extra_buffers_enabled() else "1"


def probe_extra_buffers() -> str | None:
    """None when the starter model generates with extra buffers on, else why not.

    The app's own one-time probe (:mod:`agenvoy_desktop.llm.buffer_probe`),
    run fresh here; the model is assembled into a temporary folder (the tests
    do the same) so nothing outside it is touched.
    """
    from agenvoy_desktop.llm.buffer_probe import probe
    from agenvoy_desktop.llm.model_prep import ModelUnavailableError
    from agenvoy_desktop.llm.starter import prepare_starter_model

    with tempfile.TemporaryDirectory(prefix="agenvoy-probe-") as folder:
        try:
            model = prepare_starter_model(Path(folder))
        except ModelUnavailableError as exc:
            return f"the starter model is not installed ({exc})"
        verdict = probe(model, timeout_s=PROBE_TIMEOUT_S)
    return None if verdict.enabled else verdict.reason


def main() -> int:
    from agenvoy_desktop.llm.cpu_features import EXTRA_BUFFERS_ENV

    setting = other_setting()
    if setting == "1":
        why_not = probe_extra_buffers()
        if why_not is not None:
            say(f"SKIPPED the real-model tests with {EXTRA_BUFFERS_ENV}=1: {why_not}.")
            return 0
    say(f"running the real-model (slow) tests again with {EXTRA_BUFFERS_ENV}={setting}")
    env = {**os.environ, EXTRA_BUFFERS_ENV: setting}
    command = [sys.executable, "-m", "pytest", "-m", "slow", *REAL_MODEL_TESTS]
    code = subprocess.run(command, env=env, cwd=ROOT, check=False).returncode
    if code == 5:  # pytest: no tests collected, which must not pass silently
        say("pytest collected no tests")
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
