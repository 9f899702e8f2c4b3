"""Guessed tokens: the n-gram lookup, and generate() keeping its KV cache true with them.

The generation tests run the real llama.cpp on the tiny GGUF.  Which tokens
a model picks may differ between a batched and a one-token decode (and
between CPUs), so they assert what holds everywhere: the cache mirrors
``_past``, guesses were evaluated in batches, the context limit holds, and a
cancel leaves nothing half-done.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from agenvoy_desktop.llm.llama_model import LlamaModel
from agenvoy_desktop.llm.lookup import NgramDrafts
from tests.tiny_gguf import write_tiny_llama


def test_a_seen_suffix_guesses_what_followed_it() -> None:
    drafts = NgramDrafts([1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3], max_draft=3)
    assert drafts.draft() == [4, 5, 6]
    assert drafts.draft(limit=2) == [4, 5]
    assert drafts.draft(limit=0) == []


def test_an_unseen_suffix_guesses_nothing() -> None:
    assert NgramDrafts([1, 2, 3, 4, 5]).draft() == []
    assert NgramDrafts([]).draft() == []
    assert NgramDrafts([7, 8]).draft() == []


def test_the_latest_occurrence_wins_and_the_longer_suffix_first() -> None:
    drafts = NgramDrafts([5, 1, 2, 3, 10, 6, 1, 2, 3, 20, 8, 1, 2, 3], max_draft=1)
    assert drafts.draft() == [20]
    drafts = NgramDrafts([9, 2, 3, 4, 30, 7, 2, 3, 4, 40, 9, 2, 3, 4], max_draft=1)
    assert drafts.draft() == [30]  # "9 2 3 4" (four tokens) beats the later "2 3 4"


def test_a_refused_guess_shortens_the_next_and_a_kept_one_lengthens_it() -> None:
    drafts = NgramDrafts([1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3], max_draft=4)
    assert drafts.draft() == [4, 5, 6, 7]
    drafts.settle(0)
    assert drafts.draft() == [4]
    drafts.settle(1)
    assert drafts.draft() == [4, 5]
    drafts.settle(2)
    assert drafts.draft() == [4, 5, 6]
    drafts.settle(4)
    assert drafts.draft(limit=2) == [4, 5]
    assert drafts.draft() == [4, 5, 6, 7]


def test_appended_tokens_are_looked_up_too() -> None:
    drafts = NgramDrafts([1, 2, 3, 4, 5], max_draft=2)
    drafts.extend([6, 2, 3, 4])
    assert drafts.draft() == [5, 6]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("lookup") / "tiny-chat.gguf")


@pytest.fixture
def model(tiny: Path) -> Iterator[LlamaModel]:
    loaded = LlamaModel(tiny, n_ctx=512, threads=1, gpu_layers=0, name="tiny", prompt_batch=64)
    yield loaded
    loaded.close()


def _repetitive(model: LlamaModel, length: int) -> list[int]:
    """A prompt that repeats itself, so its suffix has been seen and guesses are made."""
    tokens: list[int] = []
    text = "alpha beta gamma delta"
    while len(tokens) < length:
        text += " alpha beta gamma delta"
        tokens = model.prompt_tokens(text)
    return tokens[:length]


def _generate(
    model: LlamaModel, prompt: list[int], max_new: int, *, stop_after: int | None = None
) -> tuple[str, list[int], list[int]]:
    """(finish reason, emitted tokens, sizes of the decodes after the prompt)."""
    sizes: list[int] = []
    original = model._decode

    def counting(batch: Any) -> None:
        sizes.append(int(batch.n_tokens))
        original(batch)

    emitted: list[int] = []
    model._decode = counting  # type: ignore[method-assign]
    sampler = model.make_sampler(temperature=0.0, seed=1, grammar=None)
    try:
        model._prefill(prompt, lambda: False)  # evaluated here, so sizes count the answer only
        sizes.clear()
        reason, generated = model.generate(
            prompt,
            sampler,
            max_new,
            lambda: stop_after is not None and len(emitted) >= stop_after,
            emitted.append,
            drafts=True,
        )
    finally:
        sampler.close()
        model._decode = original  # type: ignore[method-assign]
    assert generated == len(emitted)
    return reason, emitted, sizes


def _assert_cache_mirrors_past(model: LlamaModel, prompt: list[int], emitted: list[int]) -> None:
    said = prompt + emitted
    assert said[: len(model._past)] == model._past
    assert len(model._past) >= len(said) - 1  # only the last token may be left undecoded
    assert llama_cpp.llama_memory_seq_pos_max(model._memory, 0) == len(model._past) - 1


def test_guesses_are_decoded_in_batches_and_the_cache_stays_true(model: LlamaModel) -> None:
    prompt = _repetitive(model, 120)
    reason, emitted, sizes = _generate(model, prompt, 40)
    assert reason in ("length", "stop")
    assert any(size > 1 for size in sizes), "a repeated prompt gets guesses"
    _assert_cache_mirrors_past(model, prompt, emitted)
    # The next request reuses the cache as it is.
    follow = prompt + emitted
    reason, more, _ = _generate(model, follow, 8)
    _assert_cache_mirrors_past(model, follow, more)


def test_the_context_limit_holds_with_guesses(model: LlamaModel) -> None:
    prompt = _repetitive(model, model.n_ctx - 6)
    reason, emitted, _ = _generate(model, prompt, 40)
    assert reason in ("length", "stop")
    assert len(model._past) <= model.n_ctx
    _assert_cache_mirrors_past(model, prompt, emitted)


def test_a_cancel_between_guessed_tokens_leaves_the_cache_true(model: LlamaModel) -> None:
    prompt = _repetitive(model, 120)
    reason, emitted, _ = _generate(model, prompt, 40, stop_after=5)
    assert reason == "cancelled"
    assert len(emitted) == 5
    _assert_cache_mirrors_past(model, prompt, emitted)
