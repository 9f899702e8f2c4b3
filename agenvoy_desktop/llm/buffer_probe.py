"""Whether llama.cpp's extra weight buffers run on this machine, found out once.

llama.cpp can keep a quantised model's weights in *extra buffer types*: AMX
tiles on recent Xeons and repacked Q4/Q8 layouts for AVX2/AVX-512 kernels.
They make decoding markedly faster, but on a machine that advertises AMX and
faults when a process uses it (seen on virtual machines) the first matmul
kills the process.  A guess from ``/proc/cpuinfo`` therefore either wastes
the speed or risks the crash.

Instead a child process loads the chat model with the buffers on and
generates a few tokens.  If it exits cleanly the buffers stay on; if it dies
(SIGSEGV, SIGILL) or hangs they stay off.  The verdict is kept in the data
folder with what it depends on — the CPU (model name and feature flags) and
the llama.cpp build — so each machine pays for the probe once, and a new
llama.cpp or a moved profile probes again.  ``AGENVOY_LLAMA_EXTRA_BUFFERS``
still forces either setting.

The child is this module run as a program (``python -m`` in a virtual
environment; the frozen app passes :data:`PROBE_FLAG` to its own executable).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.llm.cpu_features import EXTRA_BUFFERS_ENV, set_probe_verdict
from agenvoy_desktop.llm.machine_identity import machine_key

log = logging.getLogger(__name__)

VERDICT_FILE = "llama-extra-buffers.json"
PROBE_FLAG = "--probe-extra-buffers"
"""First argument that makes the (frozen) executable run :func:`probe_main` instead of the app."""
PROBE_TIMEOUT_S = 180.0
"""Loading a 0.5B model and generating 8 tokens takes seconds; a hang means "off"."""
PROBE_TOKENS = 8
_DONE = "extra-buffers-probe: ok"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The probe's answer for one machine and llama.cpp build."""

    enabled: bool
    reason: str
    """One line a person can read: why the buffers are on or off."""
    machine: str
    """Digest of what the verdict depends on (see :func:`machine_key`)."""
    probed_at: float = 0.0
    conclusive: bool = True
    """False when the child failed for another reason (an unreadable model, a Python
    error): such a verdict is not stored, and the next start probes again."""


def read_verdict(folder: Path) -> Verdict | None:
    """The stored verdict if it was made on this machine with this llama.cpp, else None."""
    try:
        data: Any = json.loads((folder / VERDICT_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    verdict = _verdict_from_json(data)
    return verdict if verdict is not None and verdict.machine == machine_key() else None


def _verdict_from_json(data: object) -> Verdict | None:
    """The stored verdict, or None unless every field has its JSON type.

    ``"enabled": "no"`` must not read as enabled: a damaged file means
    "probe again", never a guess.
    """
    if not isinstance(data, dict):
        return None
    enabled, reason, machine = data.get("enabled"), data.get("reason"), data.get("machine")
    probed_at = data.get("probed_at", 0.0)
    if not isinstance(enabled, bool) or not isinstance(reason, str):
        return None
    number = isinstance(probed_at, (int, float)) and not isinstance(probed_at, bool)
    if not isinstance(machine, str) or not number:
        return None
    return Verdict(enabled=enabled, reason=reason, machine=machine, probed_at=float(probed_at))


UNQUANTISED = frozenset({"F32", "F16", "BF16"})


def exercises_extra_buffers(model_path: Path) -> bool:
    """Whether running *model_path* tells anything: only quantised weights take the
    repacked and AMX paths, so an F32/F16 model would pass where the starter faults."""
    from agenvoy_desktop.llm.gguf_info import ModelFileError, read_gguf_info

    try:
        quantisation = read_gguf_info(model_path).quantisation
    except (ModelFileError, OSError):
        return False  # loading it fails anyway, with its own message
    return quantisation is not None and quantisation.upper() not in UNQUANTISED


def probe_command(model_path: Path) -> list[str]:
    """The child's command line: this module, or the frozen executable with :data:`PROBE_FLAG`."""
    if getattr(sys, "frozen", False):
        return [sys.executable, PROBE_FLAG, str(model_path)]
    return [sys.executable, "-m", "agenvoy_desktop.llm.buffer_probe", str(model_path)]


def probe(model_path: Path, *, timeout_s: float = PROBE_TIMEOUT_S) -> Verdict:
    """Run the child with the buffers forced on; a clean exit with its marker means they work."""
    env = {**os.environ, EXTRA_BUFFERS_ENV: "1"}
    machine = machine_key()
    began = time.monotonic()
    try:
        done = subprocess.run(
            probe_command(model_path),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Verdict(
            False, f"the probe did not finish in {timeout_s:.0f} s", machine, time.time()
        )
    except OSError as exc:
        return Verdict(False, f"the probe could not start ({exc})", machine, time.time())
    took = time.monotonic() - began
    if done.returncode == 0 and _DONE in done.stdout:
        return Verdict(True, f"the probe ran them ({took:.1f} s)", machine, time.time())
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return Verdict(False, f"llama.cpp was killed by {name} with them on", machine, time.time())
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    why = f"the probe exited with status {done.returncode}: {tail[0][:160]}"
    return Verdict(False, why, machine, time.time(), conclusive=False)


def ensure_verdict(folder: Path, model_path: Path) -> Verdict | None:
    """The stored verdict, or a fresh probe (stored); applied to every later model load.

    None when ``AGENVOY_LLAMA_EXTRA_BUFFERS`` decides (nothing to probe).
    Never raises: a verdict that cannot be stored is still applied for this
    run and probed again next time.
    """
    if os.environ.get(EXTRA_BUFFERS_ENV, "").strip() in {"0", "1"}:
        return None
    verdict = read_verdict(folder)
    if verdict is None:
        if not exercises_extra_buffers(model_path):
            return None  # nothing to learn from this model: the CPU rule stays
        log.info("probing llama.cpp's extra buffers with %s", model_path.name)
        verdict = probe(model_path)
        log.info("extra buffers %s: %s", "on" if verdict.enabled else "off", verdict.reason)
        if not verdict.conclusive:
            return verdict  # the CPU rule stays in force; the next start probes again
        try:
            atomic_write_text(folder / VERDICT_FILE, json.dumps(asdict(verdict), indent=1))
        except OSError as exc:
            log.warning("could not store the extra-buffers verdict: %s", exc)
    set_probe_verdict(verdict.enabled, verdict.reason)
    return verdict


def apply_stored_verdict(folder: Path) -> Verdict | None:
    """Apply a stored verdict without probing (commands that load no chat model first)."""
    verdict = read_verdict(folder)
    if verdict is not None:
        set_probe_verdict(verdict.enabled, verdict.reason)
    return verdict


def probe_main(argv: list[str]) -> int:
    """The child: load the model (buffers as the environment says), generate a few tokens."""
    import asyncio

    from agenvoy_desktop.core.model_api import ChatMessage
    from agenvoy_desktop.llm.engine import ChatEngine

    if len(argv) != 1:
        sys.stderr.write("usage: buffer_probe MODEL.gguf\n")
        return 2

    async def generate() -> int:
        threads = max(1, os.cpu_count() or 1)
        with ChatEngine(
            Path(argv[0]), context_size=256, threads=threads, temperature=0.0, calibrate=False
        ) as engine:
            events = 0
            messages: list[ChatMessage] = [{"role": "user", "content": "Count from one to ten."}]
            async for _event in engine.chat(messages, max_tokens=PROBE_TOKENS):
                events += 1
        return events

    events = asyncio.run(generate())
    sys.stdout.write(f"{_DONE} ({events} events)\n")
    return 0


if __name__ == "__main__":
    sys.exit(probe_main(sys.argv[1:]))
