"""The Models tab's llama.cpp section: threads, GPU, measured batches, read off the GUI thread."""

from __future__ import annotations

import threading

import pytest
from pytestqt.qtbot import QtBot

from agenvoy_desktop.llm.build_info import LlamaBuild
from agenvoy_desktop.llm.calibration import Calibration
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector import llama_section
from agenvoy_desktop.ui.inspector.common import esc
from agenvoy_desktop.ui.inspector.llama_section import (
    details_html,
    fact_rows,
    gist,
    newest_per_model,
)
from agenvoy_desktop.ui.inspector.models_tab import ModelsTab
from tests.ui.conftest import Wait
from tests.ui.inspector_profile import Profile

QWEN = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def calibration(model: str, batch: int, rates: dict[int, float], key: str) -> Calibration:
    return Calibration(batch=batch, rates=rates, model=model, key=key, threads_batch=4)


NEWEST = calibration(QWEN, 512, {128: 73.0, 512: 81.0}, "a")
OLDER = calibration(QWEN, 256, {256: 60.0}, "b")
CHAT = calibration("scripted-chat", 128, {128: 40.0}, "c")


def build(calibrations: list[Calibration] | None = None) -> LlamaBuild:
    return LlamaBuild(
        version="9.9.9",
        cpu_features=["AVX2", "REPACK"],
        gpu_offload=False,
        extra_buffers=False,
        extra_buffers_reason="llama.cpp was killed by SIGSEGV with them on",
        threads=(3, 6),
        cores=(3, 6),
        calibrations=[NEWEST, OLDER, CHAT] if calibrations is None else calibrations,
    )


def test_one_line_per_model_with_its_newest_summary() -> None:
    assert newest_per_model([NEWEST, OLDER, CHAT]) == [NEWEST, CHAT]
    html = details_html(build(), "", None, "#888")
    assert html.count(QWEN) == 1
    assert esc(NEWEST.summary()) in html
    assert esc(OLDER.summary()) not in html
    assert "<b>Threads:</b> 3 decoding, 6 for prompts (3 physical / 6 logical cores)" in html
    assert "<b>GPU offload:</b> not in this build" in html
    assert "SIGSEGV" in html


def test_fact_rows_follow_lines_without_the_batches() -> None:
    rows = dict(fact_rows(build()))
    assert rows["Threads"].startswith("3 decoding")
    assert rows["CPU features"] == "AVX2 REPACK"
    assert not any(label.startswith("Prompt batch") for label in rows)
    plain = dict(fact_rows(build([])))  # nothing measured yet: the default, as --version says
    assert any(label.startswith("Prompt batch") for label in plain)


def test_gist_names_the_chat_models_batch() -> None:
    line = gist(build(), "", {"scripted-chat"})
    assert line == "extra buffers off · 3 / 6 threads · CPU only · prompt batch 128"
    assert "prompt batch" not in gist(build(), "", {"other"})
    assert gist(None, "extra buffers off — why", set()) == "extra buffers off — why"


@pytest.fixture
def fixed_build(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``llama_build`` returns fixed facts; the idents of the threads that asked.

    Idents, not ``current_thread()``: the workers are QThreads, and asking for a
    foreign thread's object leaves a dummy behind for the leak check to trip on.
    """
    callers: list[int] = []

    def fake(_threads: int | None) -> LlamaBuild:
        callers.append(threading.get_ident())
        return build()

    monkeypatch.setattr(llama_section, "llama_build", fake)
    return callers


def models_tab(qtbot: QtBot, inspected: Profile, runner: AsyncRunner, width: int) -> ModelsTab:
    tab = ModelsTab(inspected.services, runner, discover=list, look=list)
    qtbot.addWidget(tab)
    tab.resize(width, 900)
    tab.show()
    tab.refresh()
    return tab


def test_narrow_tab_folds_the_facts_and_opens_on_click(
    qtbot: QtBot,
    inspected: Profile,
    runner: AsyncRunner,
    wait_for: Wait,
    fixed_build: list[int],
) -> None:
    tab = models_tab(qtbot, inspected, runner, 240)
    wait_for(lambda: tab.view is not None)
    section = tab.llama_section
    assert fixed_build
    assert threading.get_ident() not in fixed_build
    assert not section.is_open()
    assert "3 / 6 threads · CPU only · prompt batch 128" in section.text()
    section.toggle.click()
    assert section.is_open()
    assert "<b>Threads:</b> 3 decoding, 6 for prompts" in section.text()
    assert section.text().count(QWEN) == 1
    tab.resize(900, 900)  # the person's choice outlives a reflow
    wait_for(lambda: tab._wide)
    assert section.is_open()


def test_wide_tab_shows_the_facts_open(
    qtbot: QtBot,
    inspected: Profile,
    runner: AsyncRunner,
    wait_for: Wait,
    fixed_build: list[int],
) -> None:
    tab = models_tab(qtbot, inspected, runner, 900)
    wait_for(lambda: tab.view is not None)
    assert tab.llama_section.is_open()
    assert "<b>GPU offload:</b> not in this build" in tab.llama_section.text()


def test_an_unreadable_llama_cpp_leaves_the_rest_of_the_tab(
    qtbot: QtBot,
    inspected: Profile,
    runner: AsyncRunner,
    wait_for: Wait,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(_threads: int | None) -> LlamaBuild:
        raise OSError("libllama.so: cannot open shared object file")

    monkeypatch.setattr(llama_section, "llama_build", broken)
    tab = models_tab(qtbot, inspected, runner, 900)
    wait_for(lambda: tab.view is not None)
    assert "scripted-chat" in tab.in_use_label.text()
    text = tab.llama_section.text()
    assert "<b>Kernels:</b> extra buffers" in text
    assert "llama.cpp could not be asked about this build: libllama.so" in text
