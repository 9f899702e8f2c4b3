"""The prompt batch calibration: choice, budget, storage, and the real path on the tiny GGUF.

No timing is asserted: the fake model's clock is made up, and the real runs
only check that a choice is made, stored, reused and applied.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage
from agenvoy_desktop.llm import calibration
from agenvoy_desktop.llm.build_info import llama_build
from agenvoy_desktop.llm.calibration import (
    ATTENTION_DEPTH,
    ATTENTION_STEPS,
    CALIBRATION_FILE,
    CANDIDATES,
    DEFAULT_BATCH,
    Calibration,
    calibrate,
    calibration_key,
    measure,
    measure_attention,
    pick,
    pick_attention,
    store,
    stored_calibration,
    stored_for_this_machine,
)
from agenvoy_desktop.llm.cpu_features import thread_plan
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.llama_model import PROMPT_BATCH
from agenvoy_desktop.paths import MACHINE_CACHE_ENV
from tests.tiny_gguf import write_tiny_llama

HELLO: list[ChatMessage] = [{"role": "user", "content": "Say something."}]


class FakeModel:
    """Prefill at a made-up rate per batch size, on a made-up clock."""

    def __init__(
        self,
        rates: dict[int, float],
        attention: dict[bool, tuple[float, float]] | None = None,
    ) -> None:
        self.rates = rates
        self.attention = attention or {True: (100.0, 10.0), False: (100.0, 20.0)}
        self.now = 0.0
        self.calls: list[tuple[int, int]] = []
        self.turns: list[tuple[int, bool | None, int]] = []

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        return list(range(len(text.split())))

    def time_prefill(self, tokens: Sequence[int], batch: int) -> float:
        self.calls.append((len(tokens), batch))
        seconds = len(tokens) / self.rates.get(batch, min(self.rates.values()))
        self.now += seconds
        return seconds

    def time_turn(
        self, tokens: Sequence[int], batch: int, *, flash_attn: bool | None, steps: int
    ) -> tuple[float, float]:
        self.turns.append((len(tokens), flash_attn, steps))
        prefill, decode = self.attention[bool(flash_attn)]
        return len(tokens) / prefill, steps / decode

    def clock(self) -> float:
        return self.now


def never() -> bool:
    return False


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine cache of this test's own (calibrations stored by the engine land here)."""
    folder = tmp_path / "machine"
    monkeypatch.setenv(MACHINE_CACHE_ENV, str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("calibration") / "tiny-chat.gguf")


# -- choosing ------------------------------------------------------------------------------------
def test_the_fastest_batch_is_picked() -> None:
    assert pick({128: 90.0, 256: 120.0, 512: 100.0}) == 256


def test_a_near_tie_goes_to_the_smaller_batch() -> None:
    assert pick({128: 90.0, 256: 118.0, 512: 120.0}) == 256  # within 3 %
    assert pick({256: 100.0, 512: 110.0}) == 512


def test_nothing_measured_keeps_the_default() -> None:
    assert pick({}) == DEFAULT_BATCH == PROMPT_BATCH


def test_a_fast_model_measures_every_candidate_twice() -> None:
    model = FakeModel({128: 2000.0, 256: 2400.0, 512: 2300.0})
    rates = measure(model, never, clock=model.clock)
    assert rates == {128: 2000.0, 256: 2400.0, 512: 2300.0}
    measured = [batch for length, batch in model.calls if length == batch and batch in CANDIDATES]
    assert sorted(measured) == sorted(CANDIDATES * 2)
    assert model.calls[2][1] == max(CANDIDATES)  # the default first, after the warm-up


def test_a_slow_model_keeps_the_default_after_the_warm_up() -> None:
    model = FakeModel({16: 10.0, 64: 10.0, 128: 10.0, 256: 10.0, 512: 10.0})
    assert measure(model, never, clock=model.clock) == {}
    assert len(model.calls) == 2  # the warm-ups only


def test_smaller_sizes_are_measured_only_while_the_budget_lasts() -> None:
    # at 90 tokens/s 512 take 5.7 s of the 8 s budget: 256 more would overrun it, 128 not
    model = FakeModel({16: 90.0, 64: 90.0, 128: 90.0, 256: 90.0, 512: 90.0})
    rates = measure(model, never, clock=model.clock)
    assert rates is not None
    assert set(rates) == {512, 128}


def test_cancelling_stops_between_measurements() -> None:
    model = FakeModel({128: 2000.0, 256: 2000.0, 512: 2000.0})
    assert measure(model, lambda: True, clock=model.clock) is None
    assert len(model.calls) == 2


# -- flash attention -------------------------------------------------------------------------------
def test_the_setting_that_answers_a_turn_sooner_is_picked() -> None:
    # decoding twice as fast without it outweighs a slightly faster prompt with it
    assert pick_attention({True: (110.0, 9.0), False: (100.0, 17.0)}) is False
    assert pick_attention({True: (200.0, 20.0), False: (100.0, 19.0)}) is True


def test_a_near_tie_goes_to_off_and_no_measurement_leaves_it_to_llama_cpp() -> None:
    assert pick_attention({True: (100.0, 20.4), False: (100.0, 20.0)}) is False
    assert pick_attention({True: (100.0, 20.0)}) is None
    assert pick_attention({}) is None


def test_both_settings_decode_after_the_same_prompt() -> None:
    model = FakeModel({512: 1000.0})
    rates = measure_attention(model, 512, never, prefill_rate=1000.0)
    assert rates == {True: (100.0, 10.0), False: (100.0, 20.0)}
    assert model.turns == [
        (ATTENTION_DEPTH, True, ATTENTION_STEPS),
        (ATTENTION_DEPTH, False, ATTENTION_STEPS),
    ]


def test_a_machine_too_slow_for_the_budget_measures_no_attention() -> None:
    model = FakeModel({512: 10.0})
    assert measure_attention(model, 512, never, prefill_rate=10.0) == {}
    assert model.turns == []


def test_cancelling_stops_the_attention_measurement() -> None:
    model = FakeModel({512: 1000.0})
    assert measure_attention(model, 512, lambda: True, prefill_rate=1000.0) is None


def test_calibrate_stores_the_flash_attention_choice(tmp_path: Path) -> None:
    model = FakeModel({16: 5000.0, 64: 5000.0, 128: 5000.0, 256: 5000.0, 512: 5000.0})
    chosen = calibrate(
        model, key="k", model_name="m.gguf", threads_batch=2, cancelled=never, folder=tmp_path
    )
    assert chosen is not None
    assert chosen.flash_attn is False
    assert stored_calibration(tmp_path, "k") == chosen
    assert "flash attention off (decoding 20 tok/s off, 10 on" in chosen.summary()


def test_a_model_on_a_gpu_leaves_flash_attention_to_llama_cpp(tmp_path: Path) -> None:
    model = FakeModel({16: 5000.0, 64: 5000.0, 128: 5000.0, 256: 5000.0, 512: 5000.0})
    chosen = calibrate(
        model,
        key="k",
        model_name="m.gguf",
        threads_batch=2,
        cancelled=never,
        folder=tmp_path,
        attention=False,
    )
    assert chosen is not None
    assert chosen.flash_attn is None
    assert model.turns == []
    assert "flash attention: llama.cpp's choice" in chosen.summary()


def test_a_record_from_before_flash_attention_reads_as_llama_cpps_choice(tmp_path: Path) -> None:
    record = {"batch": 256, "rates": {"256": 1.0}, "model": "m", "threads_batch": 2}
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps({"k": record}))
    found = stored_calibration(tmp_path, "k")
    assert found is not None
    assert found.flash_attn is None
    assert found.attention == {}


# -- storing -------------------------------------------------------------------------------------
def _calibration(key: str, batch: int = 256, at: float = 1.0) -> Calibration:
    return Calibration(batch, {256: 100.0, 512: 90.0}, "m.gguf", key, 4, measured_at=at)


def test_a_calibration_is_stored_and_read_back(tmp_path: Path) -> None:
    store(tmp_path, _calibration("k1"))
    found = stored_calibration(tmp_path, "k1")
    assert found == _calibration("k1")
    assert stored_calibration(tmp_path, "other") is None
    assert [c.key for c in stored_for_this_machine(tmp_path)] == ["k1"]


def test_the_store_keeps_the_newest_entries(tmp_path: Path) -> None:
    for n in range(calibration.MAX_ENTRIES + 5):
        store(tmp_path, _calibration(f"k{n}", at=float(n)))
    data = json.loads((tmp_path / CALIBRATION_FILE).read_text())
    assert len(data) == calibration.MAX_ENTRIES
    assert "k0" not in data
    assert f"k{calibration.MAX_ENTRIES + 4}" in data


def test_a_damaged_store_reads_as_nothing(tmp_path: Path) -> None:
    (tmp_path / CALIBRATION_FILE).write_text("{not json")
    assert stored_calibration(tmp_path, "k1") is None
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps({"k1": {"batch": "x"}}))
    assert stored_calibration(tmp_path, "k1") is None
    store(tmp_path, _calibration("k2"))  # and it is replaced by a good one
    assert stored_calibration(tmp_path, "k2") is not None


def test_the_key_changes_with_what_the_result_depends_on(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF one")
    key = calibration_key(model, threads_batch=4, gpu_layers=0)
    assert key == calibration_key(model, threads_batch=4, gpu_layers=0)
    assert key != calibration_key(model, threads_batch=8, gpu_layers=0)
    assert key != calibration_key(model, threads_batch=4, gpu_layers=10)
    model.write_bytes(b"GGUF two, longer")
    assert key != calibration_key(model, threads_batch=4, gpu_layers=0)


# -- the real path (tiny GGUF) ----------------------------------------------------------------
@pytest.fixture
def engine(tiny: Path, cache: Path) -> Iterator[ChatEngine]:
    with ChatEngine(tiny, context_size=1024, seed=3) as chat_engine:
        yield chat_engine


def _chat(engine: ChatEngine) -> ChatFinished:
    async def run() -> ChatFinished:
        events = [event async for event in engine.chat(HELLO, max_tokens=8)]
        last = events[-1]
        assert isinstance(last, ChatFinished)
        return last

    return asyncio.run(run())


def test_the_first_load_calibrates_stores_and_applies(engine: ChatEngine, cache: Path) -> None:
    done = _chat(engine)
    assert done.finish_reason in {"stop", "length"}
    chosen = engine.calibration
    assert chosen is not None
    assert chosen.batch in CANDIDATES
    assert set(chosen.rates) == set(CANDIDATES)  # the tiny model is quick enough for all
    assert engine.prompt_batch == chosen.batch
    assert set(chosen.attention) == {True, False}  # measured on the CPU
    assert (cache / CALIBRATION_FILE).is_file()


def test_a_later_load_reuses_the_stored_batch(
    tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = calibration_key(tiny, threads_batch=thread_plan(None)[1], gpu_layers=0)
    store(cache, Calibration(128, {128: 1.0, 512: 0.5}, tiny.name, key, thread_plan(None)[1]))
    monkeypatch.setattr(calibration, "measure", _fail("measured again"))
    with ChatEngine(tiny, context_size=1024, seed=3) as engine:
        done = _chat(engine)
        assert done.finish_reason in {"stop", "length"}
        assert engine.prompt_batch == 128


def test_calibration_can_be_turned_off(tiny: Path, cache: Path) -> None:
    with ChatEngine(tiny, context_size=1024, calibrate=False) as engine:
        _chat(engine)
        assert engine.prompt_batch == PROMPT_BATCH
        assert engine.calibration is None
    assert not (cache / CALIBRATION_FILE).exists()


def test_a_failing_calibration_keeps_the_default(
    tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("llama_decode (calibration) failed with code -3")

    monkeypatch.setattr(calibration, "measure", broken)
    with ChatEngine(tiny, context_size=1024) as engine:
        assert _chat(engine).finish_reason in {"stop", "length"}
        assert engine.prompt_batch == PROMPT_BATCH
    assert not (cache / CALIBRATION_FILE).exists()


def test_a_long_prompt_is_evaluated_in_calibrated_chunks(
    tiny: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenvoy_desktop.llm.llama_model import LlamaModel

    model = LlamaModel(tiny, n_ctx=1024, threads=1, gpu_layers=0, name="tiny", prompt_batch=7)
    try:
        sampler = model.make_sampler(temperature=0.0, seed=1, grammar=None)
        tokens = model.prompt_tokens("a fairly long prompt " * 8)
        assert len(tokens) > 7
        reason, generated = model.generate(tokens, sampler, 4, never, lambda _t: None)
        sampler.close()
        assert generated > 0 or reason == "stop"
        model.use_prompt_batch(64)
        assert model.prompt_batch == 64
        assert model.time_prefill(tokens, 16) > 0
        for flash in (True, False):
            model.time_turn(tokens, 16, flash_attn=flash, steps=3)  # runs with either
        model.use_settings(64, False)
        assert model.flash_attn is False
        sampler = model.make_sampler(temperature=0.0, seed=1, grammar=None)
        reason, generated = model.generate(tokens, sampler, 4, never, lambda _t: None)
        sampler.close()
        assert generated > 0 or reason == "stop"
    finally:
        model.close()


def test_the_threads_follow_the_plan(tiny: Path) -> None:
    engine = ChatEngine(tiny)
    assert (engine.threads, engine.threads_batch) == thread_plan(None)
    engine.close()
    engine = ChatEngine(tiny, threads=1)
    assert (engine.threads, engine.threads_batch) == thread_plan(1)
    engine.close()


def test_the_about_text_names_threads_batch_and_gpu(engine: ChatEngine) -> None:
    _chat(engine)
    lines = "\n".join(llama_build().lines())
    decode, prompt = thread_plan(None)
    assert f"threads: {decode} decoding, {prompt} for prompts" in lines
    assert f"prompt batch for {engine.model_path.name}:" in lines
    assert "GPU offload:" in lines


def test_the_about_text_before_any_calibration(cache: Path) -> None:
    assert f"prompt batch: {DEFAULT_BATCH}" in "\n".join(llama_build().lines())


def _fail(message: str) -> Callable[..., None]:
    def fail(*_args: object, **_kwargs: object) -> None:
        pytest.fail(message)

    return fail
