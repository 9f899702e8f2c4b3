"""Chat sampling settings on their way to llama.cpp's sampler chain, and in settings.json.

The sampler chain is built by llama.cpp's ``llama_sampler_init_*`` calls; a
recorder wraps them (calling the real ones), so the tests see exactly which
samplers a request made with which parameters, on the tiny real model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage, ModelOutputError
from agenvoy_desktop.llm.catalogue import STARTER_NAME, STARTER_SAMPLING, sampling_defaults
from agenvoy_desktop.llm.engine import ChatEngine, last_user_text
from agenvoy_desktop.llm.sampler import (
    JSON_REPETITION_GUARD,
    PROSE_BREAKERS,
    RepetitionGuard,
    chat_guard,
)
from agenvoy_desktop.settings import (
    SamplingSettings,
    Settings,
    load_settings,
    resolve_sampling,
    save_settings,
    store_sampling,
)
from tests.tiny_gguf import write_tiny_llama

HELLO: list[ChatMessage] = [{"role": "user", "content": "Tell me a story."}]
TOOL = {
    "type": "function",
    "function": {
        "name": "search_chat_history",
        "description": "Search earlier messages.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}
RECORDED = ("top_k", "top_p", "min_p", "temp", "dist", "greedy", "penalties", "dry")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-chat.gguf")


@pytest.fixture
def chain(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Every sampler a request adds to its chain, with its arguments, in order."""
    made: list[tuple[str, tuple[Any, ...]]] = []
    for kind in RECORDED:
        real = getattr(llama_cpp, f"llama_sampler_init_{kind}")

        def record(*args: Any, _kind: str = kind, _real: Any = real) -> Any:
            made.append((_kind, args))
            return _real(*args)

        monkeypatch.setattr(llama_cpp, f"llama_sampler_init_{kind}", record)
    return made


def run_chat(engine: ChatEngine, **kwargs: Any) -> ChatFinished:
    async def go() -> ChatFinished:
        events = [e async for e in engine.chat(HELLO, max_tokens=8, **kwargs)]
        last = events[-1]
        assert isinstance(last, ChatFinished)
        return last

    return asyncio.run(go())


def kinds(chain: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    return [kind for kind, _ in chain]


# -- settings -> sampler chain ------------------------------------------------------------------
def test_chat_answers_use_the_engines_sampling(tiny_model: Path, chain: list[Any]) -> None:
    sampling = SamplingSettings(
        temperature=0.9,
        top_k=12,
        top_p=0.8,
        min_p=0.1,
        repeat_penalty=1.1,
        repeat_last_n=32,
        dry_multiplier=0.6,
        dry_base=2.0,
        dry_allowed_length=3,
        seed=5,
    )
    with ChatEngine(tiny_model, context_size=512, sampling=sampling) as engine:
        assert run_chat(engine).completion_tokens > 0
    assert kinds(chain) == ["penalties", "dry", "top_k", "top_p", "min_p", "temp", "dist"]
    args = dict(chain)
    assert args["penalties"][1:] == (32, pytest.approx(1.1), 0.0, 0.0)
    assert args["dry"][1:5] == (pytest.approx(0.6), 2.0, 3, 1024)
    assert args["dry"][6] == len(PROSE_BREAKERS)
    assert args["top_k"] == (12,)
    assert args["top_p"] == (pytest.approx(0.8), 1)
    assert args["min_p"] == (pytest.approx(0.1), 1)
    assert args["temp"] == (pytest.approx(0.9),)
    assert args["dist"] == (5,)


def test_the_requests_temperature_wins_and_zero_is_greedy(
    tiny_model: Path, chain: list[Any]
) -> None:
    with ChatEngine(tiny_model, context_size=512, sampling=SamplingSettings()) as engine:
        run_chat(engine, temperature=0.0)
    assert kinds(chain) == ["greedy"]  # the old defaults: no penalty, no DRY, no truncation


def test_a_sampling_change_reaches_the_next_answer(tiny_model: Path, chain: list[Any]) -> None:
    with ChatEngine(tiny_model, context_size=512) as engine:
        assert engine.sampling == SamplingSettings()
        run_chat(engine)
        assert "dry" not in kinds(chain)
        engine.sampling = SamplingSettings(dry_multiplier=0.8, top_k=0)
        chain.clear()
        run_chat(engine)
    assert kinds(chain) == ["dry", "top_p", "min_p", "temp", "dist"]  # top_k 0: no limit


def test_json_answers_keep_their_own_guard(tiny_model: Path, chain: list[Any]) -> None:
    sampling = SamplingSettings(top_k=3, repeat_penalty=1.3, dry_multiplier=2.0)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    with (
        ChatEngine(tiny_model, context_size=512, sampling=sampling) as engine,
        contextlib.suppress(ModelOutputError),  # the tiny model may ramble past the cap
    ):
        asyncio.run(engine.complete_json(HELLO, schema, max_tokens=24))
    assert "penalties" not in kinds(chain)
    dry = dict(chain)["dry"]
    guard = JSON_REPETITION_GUARD
    assert dry[1:5] == (pytest.approx(guard.multiplier), guard.base, 4, guard.last_n)
    assert dict(chain)["top_k"] == (40,)


def test_chat_answers_count_the_users_message_as_said(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The penalties see the user's last message, so copying it back is penalised."""
    accepted: list[int] = []
    real = llama_cpp.llama_sampler_accept

    def record(sampler: Any, token: int) -> None:
        accepted.append(token)
        real(sampler, token)

    monkeypatch.setattr(llama_cpp, "llama_sampler_accept", record)
    messages: list[ChatMessage] = [
        {"role": "user", "content": "An old question."},
        {"role": "assistant", "content": "An answer."},
        {"role": "user", "content": "I locked myself out again."},
    ]
    sampling = SamplingSettings(dry_multiplier=0.8, repeat_penalty=1.1)
    with ChatEngine(tiny_model, context_size=512, sampling=sampling) as engine:

        async def go() -> None:
            async for _event in engine.chat(messages, max_tokens=4):
                pass

        asyncio.run(go())
        model = engine._model
        assert model is not None
        assert accepted == model.tokenize("I locked myself out again.")
        accepted.clear()

        async def with_tools() -> None:
            async for _event in engine.chat(messages, tools=[TOOL], max_tokens=4):
                pass

        asyncio.run(with_tools())
        assert accepted == []  # a tool call may quote the user's words


def test_last_user_text() -> None:
    assert last_user_text([]) == ""
    assert last_user_text([{"role": "system", "content": "S"}]) == ""
    said: list[ChatMessage] = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        {"role": "tool", "content": "result"},
    ]
    assert last_user_text(said) == "second"


def test_chat_guard() -> None:
    assert chat_guard(SamplingSettings()) is None
    guard = chat_guard(SamplingSettings(dry_multiplier=0.8, repeat_last_n=2048))
    assert guard == RepetitionGuard(0.8, 1.75, 2, 2048, PROSE_BREAKERS)


def test_from_settings_passes_sampling(tiny_model: Path) -> None:
    from agenvoy_desktop.settings import ModelSettings

    sampling = SamplingSettings(top_k=7)
    with ChatEngine.from_settings(tiny_model, ModelSettings(), sampling) as engine:
        assert engine.sampling is sampling
    with ChatEngine.from_settings(tiny_model, ModelSettings(temperature=0.3)) as engine:
        assert engine.sampling == SamplingSettings(temperature=0.3)


# -- settings.json --------------------------------------------------------------------------------
def test_old_settings_files_load_and_keep_their_temperature(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 1, "models": {"temperature": 0.4}}), "utf-8")
    settings = load_settings(path)
    assert settings.sampling == {}
    assert resolve_sampling(settings, "any-model") == SamplingSettings(temperature=0.4)
    starter = resolve_sampling(settings, STARTER_NAME, sampling_defaults(STARTER_NAME))
    assert starter == SamplingSettings(temperature=0.4, **STARTER_SAMPLING)


def test_only_changes_from_the_defaults_are_stored_and_round_trip(tmp_path: Path) -> None:
    settings = Settings()
    defaults = {"dry_multiplier": 0.8}
    chosen = SamplingSettings(temperature=0.7, top_p=0.9, dry_multiplier=0.8)
    store_sampling(settings, "m", chosen, defaults)
    assert settings.sampling == {"m": {"top_p": 0.9}}
    path = tmp_path / "settings.json"
    save_settings(path, settings)
    again = load_settings(path)
    assert again.sampling == {"m": {"top_p": 0.9}}
    assert resolve_sampling(again, "m", defaults) == chosen
    again.models.temperature = 0.2  # an untouched value follows the global default
    assert resolve_sampling(again, "m", defaults).temperature == 0.2
    store_sampling(again, "m", resolve_sampling(Settings(models=again.models), "m", defaults))
    assert again.sampling == {"m": {"dry_multiplier": 0.8}}  # differs from the global default
    store_sampling(
        again, "m", resolve_sampling(Settings(models=again.models), "m", defaults), defaults
    )
    assert again.sampling == {}  # back to the model's defaults: nothing stored


def test_wild_sampling_values_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    raw = {
        "version": 1,
        "sampling": {
            "a": {"top_p": 7, "top_k": "many", "seed": 3, "new_knob": 1},
            "b": "not a dict",
            "c": {"min_p": -1},
        },
    }
    path.write_text(json.dumps(raw), "utf-8")
    settings = load_settings(path)
    assert settings.sampling == {"a": {"seed": 3}}
    assert resolve_sampling(settings, "a").seed == 3
