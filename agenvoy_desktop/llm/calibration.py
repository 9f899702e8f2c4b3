"""The prompt batch size that evaluates prompts fastest here, measured once per machine and model.

llama.cpp evaluates a prompt in micro-batches of ``n_ubatch`` tokens.  Larger
ones use the matrix kernels better until they spill the caches, and where
that turns depends on the CPU, the model's width and quantisation and the
threads, so no constant is right everywhere.  At the first load of a model
the chat engine's worker (never the GUI thread) evaluates the same prompt
with a few candidate sizes on the loaded weights and keeps the fastest;
the answer is stored in the machine cache keyed by the CPU and llama.cpp
build, the model file and the settings that change the result (prompt
threads, GPU layers, the extra-buffers choice), so a new llama.cpp, another
model or other settings measure again.

It costs a few seconds once: a measurement that would overrun a budget of
:data:`BUDGET_S` is skipped, and where even the default size cannot be
measured in it (a big model on a slow CPU) the default is kept and stored
after the warm-up alone.  Nothing is stored until it finishes: a
process killed meanwhile measures again at the next start, and closing the
engine stops it between two measurements.  Memory stays sane because the
candidates stop at 512 (llama.cpp's default; its compute buffers grow with
the micro-batch) and every measuring context is small and freed at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agenvoy_desktop.core.atomic import atomic_write_text

log = logging.getLogger(__name__)

CALIBRATION_FILE = "llama-prompt-batch.json"
CANDIDATES = (128, 256, 512)
"""Micro-batch sizes tried; the last is llama.cpp's default and the fallback."""
DEFAULT_BATCH = CANDIDATES[-1]
BUDGET_S = 8.0
"""Seconds of measuring at most (after a warm-up of :data:`WARM_UP_TOKENS`)."""
WARM_UP_TOKENS = 64
TIE = 0.03
"""Rates within 3 % of the best count as equal: the smaller batch wins (less memory)."""
MAX_ENTRIES = 32
_FILLER = (
    "The committee met on Tuesday to review the quarterly figures, the new office layout and a "
    "proposal to move the archive to cheaper storage. Questions about retention, access rights "
    "and the cost of restoring old records took most of the afternoon; the minutes list twelve "
    "actions, each with an owner and a date. "
)


class Prefiller(Protocol):
    """What calibration needs of a loaded model (a :class:`.llama_model.LlamaModel`)."""

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int]: ...

    def time_prefill(self, tokens: Sequence[int], batch: int) -> float:
        """Seconds to evaluate *tokens* in a fresh context with ``n_batch = n_ubatch = batch``."""
        ...


@dataclass(frozen=True, slots=True)
class Calibration:
    """The chosen prompt batch and what was measured (tokens/s per candidate)."""

    batch: int
    rates: dict[int, float]
    model: str
    key: str
    threads_batch: int
    measured_at: float = field(default_factory=time.time)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: ``256 (prefill 128: 90, 256: 104, 512: 101 tok/s)``."""
        if not self.rates:
            return f"{self.batch} (default: prompts evaluate too slowly here to measure quickly)"
        rates = ", ".join(f"{size}: {rate:.0f}" for size, rate in sorted(self.rates.items()))
        return f"{self.batch} (prefill {rates} tok/s)"


def calibration_key(model_path: Path, *, threads_batch: int, gpu_layers: int) -> str:
    """A digest of what the best batch depends on: machine, llama.cpp, model file, settings."""
    from agenvoy_desktop.llm.buffer_probe import machine_key
    from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled

    try:
        stat = model_path.stat()
        identity = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    except OSError:
        identity = str(model_path)
    parts = [machine_key(), identity, str(threads_batch), str(gpu_layers)]
    parts.append(str(extra_buffers_enabled()))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def pick(rates: dict[int, float]) -> int:
    """The fastest batch; the smallest of those within :data:`TIE` of it."""
    if not rates:
        return DEFAULT_BATCH
    best = max(rates.values())
    return min(size for size, rate in rates.items() if rate >= best * (1 - TIE))


def measure(
    model: Prefiller,
    cancelled: Callable[[], bool],
    candidates: Sequence[int] = CANDIDATES,
    budget_s: float = BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[int, float] | None:
    """Prefill tokens/s of the candidates that fit in *budget_s*; None if cancelled.

    Each measurement evaluates one micro-batch of its size (the same prompt
    prefix for all).  A warm-up pages the weights in, then a short prefill
    gives a rate to plan with.  The largest candidate (the default) goes
    first: if it cannot be measured within the budget nothing is (a smaller
    size could not be compared with it), so a machine too slow to calibrate
    quickly keeps the default after a second or two.  A measurement expected
    to overrun the budget is skipped; a second round (best of two) runs as
    far as the budget allows.  *clock* is for tests.
    """
    sizes = sorted(candidates, reverse=True)
    tokens = _prompt(model, sizes[0])
    model.time_prefill(tokens[:16], 16)  # the first pass pages the weights in: not a rate
    warm = tokens[:WARM_UP_TOKENS]
    planning_rate = len(warm) / max(model.time_prefill(warm, len(warm)), 1e-9)
    rates: dict[int, float] = {}
    began = clock()
    for _round in range(2):
        for size in sizes:
            if cancelled():
                return None
            expected = size / rates.get(size, planning_rate)
            if clock() - began + expected > budget_s:
                if size == sizes[0] and not rates:
                    return rates  # the default cannot be measured: nothing to compare with
                continue
            rate = size / max(model.time_prefill(tokens[:size], size), 1e-9)
            rates[size] = max(rates.get(size, 0.0), rate)
            planning_rate = max(planning_rate, rate)
    return rates


def _prompt(model: Prefiller, length: int) -> list[int]:
    tokens: list[int] = []
    text = _FILLER
    while len(tokens) < length:
        tokens = model.tokenize(text)
        if not tokens:
            return [0] * length  # a vocabulary that makes nothing of English: any ids will do
        text += _FILLER
    return tokens[:length]


# -- the stored answers ----------------------------------------------------------------------------
def stored_calibration(folder: Path, key: str) -> Calibration | None:
    """The calibration stored under *key*, if any."""
    record = _read_all(folder).get(key)
    if not isinstance(record, dict):
        return None
    try:
        return Calibration(
            batch=int(record["batch"]),
            rates={int(size): float(rate) for size, rate in record["rates"].items()},
            model=str(record["model"]),
            key=key,
            threads_batch=int(record["threads_batch"]),
            measured_at=float(record.get("measured_at", 0.0)),
            seconds=float(record.get("seconds", 0.0)),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def stored_for_this_machine(folder: Path) -> list[Calibration]:
    """Every stored calibration made with this CPU and llama.cpp (``--version``), newest first."""
    from agenvoy_desktop.llm.buffer_probe import machine_key

    machine = machine_key()
    found = [
        calibration
        for key, record in _read_all(folder).items()
        if isinstance(record, dict) and record.get("machine") == machine
        if (calibration := stored_calibration(folder, key)) is not None
    ]
    return sorted(found, key=lambda c: c.measured_at, reverse=True)


def store(folder: Path, calibration: Calibration) -> None:
    """Add *calibration* (the oldest entries beyond :data:`MAX_ENTRIES` are dropped)."""
    from agenvoy_desktop.llm.buffer_probe import machine_key

    records = _read_all(folder)
    record: dict[str, Any] = asdict(calibration)
    record.pop("key")
    record["rates"] = {str(size): round(rate, 2) for size, rate in calibration.rates.items()}
    record["machine"] = machine_key()
    records[calibration.key] = record
    newest = sorted(records.items(), key=_measured_at, reverse=True)[:MAX_ENTRIES]
    try:
        atomic_write_text(folder / CALIBRATION_FILE, json.dumps(dict(newest), indent=1))
    except OSError as exc:
        log.warning("could not store the prompt batch calibration: %s", exc)


def _measured_at(item: tuple[str, Any]) -> float:
    value = item[1].get("measured_at", 0.0) if isinstance(item[1], dict) else 0.0
    return float(value) if isinstance(value, (int, float)) else 0.0


def _read_all(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / CALIBRATION_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def calibrate(
    model: Prefiller,
    *,
    key: str,
    model_name: str,
    threads_batch: int,
    cancelled: Callable[[], bool],
    folder: Path,
) -> Calibration | None:
    """Measure, pick and store; None (nothing stored) when cancelled."""
    began = time.perf_counter()
    rates = measure(model, cancelled)
    if rates is None:
        return None
    calibration = Calibration(
        batch=pick(rates),
        rates=rates,
        model=model_name,
        key=key,
        threads_batch=threads_batch,
        seconds=round(time.perf_counter() - began, 2),
    )
    store(folder, calibration)
    log.info(
        "prompt batch for %s: %s, measured in %.1f s",
        model_name,
        calibration.summary(),
        calibration.seconds,
    )
    return calibration
