"""Saved KV states: a prompt of one kind after another kind reuses its own earlier cache.

Runs the real llama.cpp on the tiny GGUF: the answers after a restore must be
the tokens a fresh context gives, and the restored prompt must not be
evaluated again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.llm import kv_snapshots
from agenvoy_desktop.llm.kv_snapshots import MIN_GAIN, KvSnapshots, common_prefix
from agenvoy_desktop.llm.llama_model import LlamaModel
from tests.tiny_gguf import write_tiny_llama


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("snapshots") / "tiny-chat.gguf")


@pytest.fixture
def model(tiny: Path) -> Iterator[LlamaModel]:
    loaded = LlamaModel(tiny, n_ctx=1024, threads=1, gpu_layers=0, name="tiny", prompt_batch=64)
    yield loaded
    loaded.close()


def never() -> bool:
    return False


def _answer(model: LlamaModel, tokens: list[int], evaluated: list[int]) -> list[int]:
    """Greedy tokens for *tokens*; *evaluated* collects the prompt tokens decoded."""
    original = model._decode

    def counting(batch: Any) -> None:
        evaluated.append(int(batch.n_tokens))
        original(batch)

    model._decode = counting  # type: ignore[method-assign]
    out: list[int] = []
    sampler = model.make_sampler(temperature=0.0, seed=1, grammar=None)
    try:
        model.generate(tokens, sampler, 6, never, out.append)
    finally:
        sampler.close()
        model._decode = original  # type: ignore[method-assign]
    return out


def _prompt(model: LlamaModel, words: str, length: int) -> list[int]:
    tokens: list[int] = []
    text = words
    while len(tokens) < length:
        text += " " + words
        tokens = model.prompt_tokens(text)
    return tokens[:length]


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([5, 6], [5, 6, 7]) == 2


def test_a_prompt_after_another_kind_restores_its_own_cache(model: LlamaModel, tiny: Path) -> None:
    chat = _prompt(model, "the chat system prompt and a long history of messages", 300)
    summary = _prompt(model, "summary instructions: fold these messages into JSON", 300)
    first = _answer(model, chat, [])
    _answer(model, summary, [])  # the chat's state is saved before it is dropped
    again: list[int] = []
    assert _answer(model, chat, again) == first
    assert model._snapshots.restored == 1
    assert sum(again) - len(first) <= 1  # only the last prompt token is decoded again
    fresh = LlamaModel(tiny, n_ctx=1024, threads=1, gpu_layers=0, name="tiny", prompt_batch=64)
    try:
        assert _answer(fresh, chat, []) == first
    finally:
        fresh.close()


def test_a_continued_prompt_extends_the_live_cache_without_a_copy(model: LlamaModel) -> None:
    chat = _prompt(model, "one conversation growing turn after turn", 300)
    _answer(model, chat, [])
    _answer(model, chat + chat[:40], [])
    assert model._snapshots.held == 0  # nothing long was dropped: nothing saved
    assert model._snapshots.restored == 0


def test_a_short_detour_is_not_worth_a_copy(model: LlamaModel) -> None:
    chat = _prompt(model, "the chat system prompt and history", MIN_GAIN - 20)
    other = _prompt(model, "a different request", 200)
    _answer(model, chat, [])
    _answer(model, other, [])
    assert model._snapshots.held == 0


def test_a_newer_state_of_the_same_kind_replaces_the_older(model: LlamaModel) -> None:
    chat = _prompt(model, "the chat system prompt and a long history of messages", 300)
    summary = _prompt(model, "summary instructions: fold these messages into JSON", 300)
    other = _prompt(model, "a third kind of prompt entirely unrelated", 300)
    _answer(model, chat, [])
    _answer(model, summary, [])  # saves chat
    _answer(model, chat[:250] + summary[:60], [])  # restores chat, saves summary
    _answer(model, other, [])  # saves the newer chat state, replacing the old one
    assert model._snapshots.held == 2


def test_states_over_the_budget_are_not_kept(
    model: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kv_snapshots, "BUDGET_BYTES", 1024)
    chat = _prompt(model, "the chat system prompt and a long history of messages", 300)
    _answer(model, chat, [])
    _answer(model, _prompt(model, "another long prompt", 300), [])
    assert model._snapshots.held == 0


def test_a_rebuilt_context_forgets_the_states(model: LlamaModel) -> None:
    chat = _prompt(model, "the chat system prompt and a long history of messages", 300)
    _answer(model, chat, [])
    _answer(model, _prompt(model, "summary instructions", 300), [])
    assert model._snapshots.held == 1
    model.use_settings(32, False)
    assert model._snapshots.held == 0


def test_an_empty_store_restores_nothing() -> None:
    store = KvSnapshots()
    assert store.best([1, 2, 3]) == (0, None)
    assert store.restore(None, [1, 2, 3]) is False


def test_a_long_prompt_reports_how_much_is_read(model: LlamaModel) -> None:
    tokens = _prompt(model, "a long message to read in several batches", 200)
    read: list[tuple[int, int]] = []
    sampler = model.make_sampler(temperature=0.0, seed=1, grammar=None)
    try:
        model.generate(
            tokens, sampler, 2, never, lambda _t: None, on_read=lambda d, t: read.append((d, t))
        )
        # the same prompt again: all of it is cached but the last token, one batch: no report
        model.generate(
            tokens, sampler, 2, never, lambda _t: None, on_read=lambda d, t: read.append((d, t))
        )
    finally:
        sampler.close()
    assert read == [(64, 200), (128, 200), (192, 200), (200, 200)]
