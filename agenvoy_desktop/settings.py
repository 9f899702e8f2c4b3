"""User settings: one versioned JSON file, ``settings.json`` in the config dir.

Qt-free so the CLI, the agent and the window read the same values.  Unknown
keys are kept on save (a newer version's settings survive a downgrade round
trip), missing keys take defaults, and a corrupt file is moved aside with a
warning rather than stopping the app (settings are never worth a crash).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.cpu_cores import physical_cores
from agenvoy_desktop.core.timeutil import now_ns

log = logging.getLogger(__name__)

SETTINGS_VERSION = 1


def default_threads() -> int:
    """Physical cores: decoding gains nothing from hyper-threads (prompts use them all)."""
    return physical_cores()


@dataclass(slots=True)
class ModelSettings:
    """Which model files to run and how.

    ``chat_model`` / ``embedding_model`` are catalogue names or file paths;
    empty means "the starter model" / "the prepared MiniLM".  ``gpu_layers``
    of -1 offloads everything where llama.cpp was built with GPU support and
    is ignored otherwise.  ``load_at_start`` loads a local chat model as soon
    as the window is up, so the first message does not wait for it.
    ``read_ahead``: a local chat model reads the next prompt's start after an
    answer, and a message's prompt while it is typed, so answers start sooner
    (the CPU works between messages; off for a laptop that should rest).
    """

    chat_model: str = ""
    embedding_model: str = ""
    context_size: int = 8192
    threads: int = field(default_factory=default_threads)
    gpu_layers: int = -1
    temperature: float = 0.7
    max_answer_tokens: int = 1024
    load_at_start: bool = True
    read_ahead: bool = True


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    """How the tokens of a chat answer are drawn (the chat model's Sampling dialog).

    The defaults are llama.cpp's usual top-k / top-p / min-p with the flat
    repeat penalty and DRY off; a model's catalogue entry may name better
    ones (the starter's were measured: ``benchmarks/sampling_loops.py``).
    ``dry_multiplier`` 0 turns DRY off; ``repeat_penalty`` 1 turns the flat
    penalty off; ``seed`` -1 draws a fresh random stream per answer.
    JSON answers (summaries, facts) keep their own tuned guard.
    """

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    seed: int = -1


def sampling_overrides(raw: object) -> dict[str, Any]:
    """The valid sampling values in *raw* (one model's stored overrides); the rest is dropped."""
    defaults = SamplingSettings()
    found: dict[str, Any] = {}
    for item in dataclasses.fields(SamplingSettings):
        if not isinstance(raw, dict) or item.name not in raw:
            continue
        value = _checked(raw[item.name], getattr(defaults, item.name), item.name)
        if value is None:
            log.warning("settings: ignoring sampling %s=%r", item.name, raw[item.name])
        else:
            found[item.name] = value
    return found


def resolve_sampling(
    settings: Settings, model: str, defaults: dict[str, Any] | None = None
) -> SamplingSettings:
    """*model*'s sampling: the user's overrides over the model's *defaults* over the global ones.

    ``models.temperature`` is the default temperature, so a settings file
    from before per-model sampling keeps its temperature.
    """
    base = SamplingSettings(temperature=settings.models.temperature)
    base = dataclasses.replace(base, **sampling_overrides(defaults or {}))
    return dataclasses.replace(base, **settings.sampling.get(model, {}))


def store_sampling(
    settings: Settings, model: str, chosen: SamplingSettings, defaults: dict[str, Any] | None = None
) -> None:
    """Keep only what *chosen* changes from *model*'s defaults (an empty entry is removed)."""
    settings.sampling.pop(model, None)
    base = resolve_sampling(settings, model, defaults)
    changed = {
        item.name: getattr(chosen, item.name)
        for item in dataclasses.fields(SamplingSettings)
        if getattr(chosen, item.name) != getattr(base, item.name)
    }
    if changed:
        settings.sampling[model] = changed


@dataclass(slots=True)
class MemorySettings:
    """Knobs of the memory layers (docs/ARCHITECTURE.md, "The memory model")."""

    window_messages: int = 16
    max_history_bytes: int = 5 * 1024 * 1024
    summary_idle_seconds: int = 300
    proactive_recall: bool = True
    """Put what the user said before, when relevant, into each turn's system prompt."""


@dataclass(slots=True)
class DocumentSettings:
    """The user's document collections (opt-in: off until turned on)."""

    enabled: bool = False
    """Offer the collections to the assistant (``list_rag``/``search_rag``)."""


THEMES = ("system", "light", "dark")


@dataclass(slots=True)
class AppearanceSettings:
    """How the window looks: ``theme`` is one of :data:`THEMES`; ``font_size`` 0 = the system's."""

    theme: str = "system"
    font_size: int = 0


@dataclass(slots=True)
class Settings:
    """Everything the user can change; see :func:`load_settings`."""

    models: ModelSettings = field(default_factory=ModelSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    documents: DocumentSettings = field(default_factory=DocumentSettings)
    appearance: AppearanceSettings = field(default_factory=AppearanceSettings)
    allowed_folders: list[str] = field(default_factory=list)
    sampling: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per chat model (catalogue name): the sampling values the user changed from its defaults."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this version does not know, kept verbatim."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        data.update(
            version=SETTINGS_VERSION,
            models=dataclasses.asdict(self.models),
            memory=dataclasses.asdict(self.memory),
            documents=dataclasses.asdict(self.documents),
            appearance=dataclasses.asdict(self.appearance),
            allowed_folders=list(self.allowed_folders),
            sampling={name: dict(values) for name, values in self.sampling.items()},
        )
        return data


RANGES: dict[str, tuple[float, float]] = {
    "context_size": (256, 1 << 20),
    "threads": (1, 512),
    "gpu_layers": (-1, 100_000),
    "temperature": (0.0, 5.0),
    "max_answer_tokens": (1, 1 << 20),
    "window_messages": (1, 10_000),
    "max_history_bytes": (16 * 1024, 1 << 40),
    "summary_idle_seconds": (1, 30 * 86_400),
    "font_size": (0, 48),
    "top_k": (0, 1000),
    "top_p": (0.0, 1.0),
    "min_p": (0.0, 1.0),
    "repeat_penalty": (0.5, 2.0),
    "repeat_last_n": (0, 1 << 16),
    "dry_multiplier": (0.0, 5.0),
    "dry_base": (1.0, 4.0),
    "dry_allowed_length": (1, 64),
    "seed": (-1, 0xFFFFFFFF),
}
"""Sane bounds of every numeric setting (inclusive).

A hand-edited settings.json can hold anything JSON can (0, -5, 1e300, a
64-bit overflow, NaN): such a value is ignored with a warning, the default
is used, and nothing downstream has to guard against it.  16 KiB of history
is the smallest budget that still holds a few exchanges.
"""


def _section(cls: type[Any], raw: object) -> Any:
    """Build a dataclass from a dict, ignoring unknown keys, wrong types and wild numbers."""
    instance = cls()
    if not isinstance(raw, dict):
        return instance
    for item in dataclasses.fields(cls):
        if item.name not in raw:
            continue
        value = _checked(raw[item.name], getattr(instance, item.name), item.name)
        if value is None:
            log.warning("settings: ignoring %s.%s=%r", cls.__name__, item.name, raw[item.name])
            continue
        setattr(instance, item.name, value)
    return instance


def _checked(value: object, default: object, name: str) -> Any:
    """*value* converted to the type of *default* and within :data:`RANGES`, else None."""
    if isinstance(value, bool) or isinstance(default, bool):
        return value if type(value) is type(default) else None
    if isinstance(default, float) and isinstance(value, int):
        value = float(value)
    if not isinstance(value, type(default)):
        return None
    low, high = RANGES.get(name, (float("-inf"), float("inf")))
    if isinstance(value, (int, float)) and not low <= value <= high:
        return None  # NaN fails this comparison too
    return value


def settings_from_json(data: dict[str, Any]) -> Settings:
    folders = data.get("allowed_folders", [])
    known = {
        "version",
        "models",
        "memory",
        "documents",
        "appearance",
        "allowed_folders",
        "sampling",
    }
    appearance = _section(AppearanceSettings, data.get("appearance"))
    if appearance.theme not in THEMES:
        appearance.theme = "system"
    return Settings(
        models=_section(ModelSettings, data.get("models")),
        memory=_section(MemorySettings, data.get("memory")),
        documents=_section(DocumentSettings, data.get("documents")),
        appearance=appearance,
        allowed_folders=[str(f) for f in folders] if isinstance(folders, list) else [],
        sampling=_sampling_section(data.get("sampling")),
        extra={k: v for k, v in data.items() if k not in known},
    )


def _sampling_section(raw: object) -> dict[str, dict[str, Any]]:
    """The stored per-model sampling overrides; anything malformed is dropped."""
    if not isinstance(raw, dict):
        return {}
    section = {str(name): sampling_overrides(values) for name, values in raw.items()}
    return {name: values for name, values in section.items() if values}


def load_settings(path: Path) -> Settings:
    """Read ``path``; defaults when it is missing; a corrupt file is set aside.

    Bytes that are not UTF-8 count as damage like broken JSON: a single stray
    byte must not stop every command and the window from opening the profile.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings()
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except UnicodeDecodeError as exc:
        return _set_aside(path, f"not UTF-8 text: {exc.reason}")
    except ValueError as exc:
        return _set_aside(path, str(exc))
    return settings_from_json(data)


def _set_aside(path: Path, why: str) -> Settings:
    """Move a damaged settings file out of the way (kept, never deleted); defaults follow."""
    aside = path.with_name(f"{path.name}.corrupt-{now_ns()}")
    path.replace(aside)
    log.warning("settings file %s was unreadable (%s); moved to %s", path, why, aside)
    return Settings()


def save_settings(path: Path, settings: Settings) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(settings.to_json(), ensure_ascii=False, indent=2) + "\n"
    atomic_write_text(path, text)
