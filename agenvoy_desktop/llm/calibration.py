"""The prompt batch and flash attention that run fastest here, measured once per machine and model.

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

The same first load also decides flash attention when the model runs on the
CPU alone.  llama.cpp's "auto" turns it on, and on the CPU its kernel makes
each decoded token slower the longer the conversation (measured on a 2-core
Xeon with the starter model: 9 against 17 tokens/s at 1,300 tokens of
context, 5 against 13 at 3,000), while on other CPUs it is a wash or a gain.
So both settings evaluate the same :data:`ATTENTION_DEPTH`-token prompt and
decode :data:`ATTENTION_STEPS` tokens after it; flash attention stays on only
where it would answer a reference turn (:data:`REFERENCE_TURN`) clearly
sooner.  A model on a GPU, or a machine too slow to measure within
:data:`ATTENTION_BUDGET_S`, leaves the choice to llama.cpp.
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
from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled
from agenvoy_desktop.llm.machine_identity import machine_key

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
ATTENTION_DEPTH = 384
"""Prompt tokens in the KV cache when decoding is timed: deep enough for attention to count."""
ATTENTION_STEPS = 16
"""Tokens decoded per flash-attention setting."""
ATTENTION_BUDGET_S = 20.0
"""Seconds both flash-attention measurements may take together (the estimate decides)."""
REFERENCE_TURN = (512, 128)
"""(prompt tokens, answer tokens): the turn whose time decides flash attention."""
FORMAT = "2"
"""Part of the key: a calibration stored before flash attention was measured is redone."""
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

    def time_turn(
        self, tokens: Sequence[int], batch: int, *, flash_attn: bool | None, steps: int
    ) -> tuple[float, float]:
        """(prefill seconds, seconds to decode *steps* tokens after it) in a fresh context."""
        ...


AttentionRates = dict[bool, tuple[float, float]]
"""Flash attention on/off -> (prompt tokens/s, decoded tokens/s) at :data:`ATTENTION_DEPTH`."""


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
    flash_attn: bool | None = None
    """Flash attention for the chat context; None: llama.cpp decides ("auto")."""
    attention: AttentionRates = field(default_factory=dict)

    def summary(self) -> str:
        """One line: ``256 (prefill 128: 90, 256: 104 tok/s); flash attention off (…)``."""
        if not self.rates:
            batch = f"{self.batch} (default: prompts evaluate too slowly here to measure quickly)"
        else:
            rates = ", ".join(f"{size}: {rate:.0f}" for size, rate in sorted(self.rates.items()))
            batch = f"{self.batch} (prefill {rates} tok/s)"
        return f"{batch}; {self.attention_summary()}"

    def attention_summary(self) -> str:
        """``flash attention off (decoding 18 tok/s off, 10 on, …)``, or llama.cpp's choice."""
        if len(self.attention) < 2:
            return "flash attention: llama.cpp's choice (not measured)"
        state = {True: "on", False: "off", None: "llama.cpp's choice"}[self.flash_attn]
        on, off = self.attention[True][1], self.attention[False][1]
        return (
            f"flash attention {state} (decoding {off:.0f} tok/s off, {on:.0f} on, "
            f"at {ATTENTION_DEPTH} tokens)"
        )


def calibration_key(model_path: Path, *, threads_batch: int, gpu_layers: int) -> str:
    """A digest of what the best batch depends on: machine, llama.cpp, model file, settings."""
    try:
        stat = model_path.stat()
        identity = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    except OSError:
        identity = str(model_path)
    parts = [machine_key(), identity, str(threads_batch), str(gpu_layers)]
    parts += [str(extra_buffers_enabled()), FORMAT]
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


def measure_attention(
    model: Prefiller,
    batch: int,
    cancelled: Callable[[], bool],
    prefill_rate: float,
    budget_s: float = ATTENTION_BUDGET_S,
) -> AttentionRates | None:
    """Prompt and decode rates with flash attention on and off; {} if over budget, None if
    cancelled.

    *prefill_rate* (tokens/s, from the batch measurement) estimates the cost:
    when the two prompts alone would overrun *budget_s* nothing is measured.
    Which setting goes first alternates with nothing: both contexts are fresh
    and the weights are already paged in by the batch measurement.
    """
    if 2 * ATTENTION_DEPTH / max(prefill_rate, 1e-9) > budget_s:
        return {}
    tokens = _prompt(model, ATTENTION_DEPTH)
    rates: AttentionRates = {}
    for flash in (True, False):
        if cancelled():
            return None
        prefill_s, decode_s = model.time_turn(
            tokens, batch, flash_attn=flash, steps=ATTENTION_STEPS
        )
        rates[flash] = (
            len(tokens) / max(prefill_s, 1e-9),
            ATTENTION_STEPS / max(decode_s, 1e-9),
        )
    return rates


def pick_attention(rates: AttentionRates) -> bool | None:
    """On only if it answers :data:`REFERENCE_TURN` clearly sooner (by more than
    :data:`TIE`), else off; None (llama.cpp's choice) when not measured.

    A near tie goes to off because the gap found at :data:`ATTENTION_DEPTH`
    only widens in longer conversations where flash attention is the slower.
    """
    if len(rates) < 2:
        return None
    prompt, answer = REFERENCE_TURN
    turn = {flash: prompt / pre + answer / dec for flash, (pre, dec) in rates.items()}
    return turn[True] < turn[False] * (1 - TIE)


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
            flash_attn=_optional_bool(record.get("flash_attn")),
            attention=_attention(record.get("attention", {})),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _optional_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _attention(raw: Any) -> AttentionRates:
    """``{"on": [prefill, decode], "off": [...]}`` as stored, back to rates."""
    rates: AttentionRates = {}
    for name, flash in (("on", True), ("off", False)):
        pair = raw.get(name) if isinstance(raw, dict) else None
        if isinstance(pair, list) and len(pair) == 2:
            rates[flash] = (float(pair[0]), float(pair[1]))
    return rates


def stored_for_this_machine(folder: Path) -> list[Calibration]:
    """Every stored calibration made with this CPU and llama.cpp (``--version``), newest first."""
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
    records = _read_all(folder)
    record: dict[str, Any] = asdict(calibration)
    record.pop("key")
    record["rates"] = {str(size): round(rate, 2) for size, rate in calibration.rates.items()}
    record["attention"] = {
        ("on" if flash else "off"): [round(pre, 2), round(dec, 2)]
        for flash, (pre, dec) in calibration.attention.items()
    }
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
    attention: bool = True,
) -> Calibration | None:
    """Measure, pick and store; None (nothing stored) when cancelled.

    *attention* False (a model on a GPU) skips the flash-attention measurement.
    """
    began = time.perf_counter()
    rates = measure(model, cancelled)
    if rates is None:
        return None
    batch = pick(rates)
    flash: AttentionRates = {}
    if attention and rates:
        measured = measure_attention(model, batch, cancelled, rates.get(batch, 0.0))
        if measured is None:
            return None
        flash = measured
    calibration = Calibration(
        batch=batch,
        rates=rates,
        model=model_name,
        key=key,
        threads_batch=threads_batch,
        seconds=round(time.perf_counter() - began, 2),
        flash_attn=pick_attention(flash),
        attention=flash,
    )
    store(folder, calibration)
    log.info(
        "prompt batch for %s: %s, measured in %.1f s",
        model_name,
        calibration.summary(),
        calibration.seconds,
    )
    return calibration
