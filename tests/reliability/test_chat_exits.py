"""``agenvoy-desktop chat`` returns once its answer is done.

It used to wait for the summary pass the turn triggered, which on a small
CPU took minutes (300 s in the bug report); a summary can run next time.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.model_api import ChatMessage, JsonCompletion, StopWhen
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.conftest import conversation
from tests.fakes import HashingEmbedder
from tests.scripted_chat import ScriptedChatModel

HANG_GUARD_S = 120.0
"""Only so a regression fails instead of hanging the suite; not a timing claim."""


class EndlessSummaries(ScriptedChatModel):
    """Answers chat from its script; a summary request never finishes."""

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_chat_does_not_wait_for_the_summary_it_triggered(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = app_paths(tmp_path / "profile")
    with open_memory(paths, HashingEmbedder()) as store:  # enough history to summarise
        store.create_session("t", "s1")
        store.append("s1", conversation([f"message {i}" for i in range(60)]))

    def start(cls: type[AppServices], paths: AppPaths, **_: object) -> AppServices:
        model = EndlessSummaries([["the answer"]])
        return cls.open(paths, embedder=HashingEmbedder(), chat_model=model)

    monkeypatch.setattr(AppServices, "start", classmethod(start))
    result: list[int] = []
    argv = ["chat", "hello", "--session", "s1", "--data-dir", str(tmp_path / "profile")]
    worker = threading.Thread(target=lambda: result.append(cli.main(argv)), daemon=True)
    worker.start()
    worker.join(HANG_GUARD_S)
    assert not worker.is_alive(), "chat kept waiting after its answer"
    assert result == [0]
    assert capsys.readouterr().out == "the answer\n"


def test_a_new_chat_session_is_named_after_its_first_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def start(cls: type[AppServices], paths: AppPaths, **_: object) -> AppServices:
        model = ScriptedChatModel([["4.5 bar"]])
        return cls.open(paths, embedder=HashingEmbedder(), chat_model=model)

    monkeypatch.setattr(AppServices, "start", classmethod(start))
    profile = tmp_path / "profile"
    argv = ["chat", "What is my front tyre pressure?", "--data-dir", str(profile)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    with open_memory(app_paths(profile)) as store:
        assert [s.title for s in store.sessions()] == ["What is my front tyre pressure?"]
