"""``agenvoy-desktop chat`` returns once its answer is done, and keeps it when stopped.

It used to wait for the summary pass the turn triggered, which on a small
CPU took minutes (300 s in the bug report); a summary can run next time.
Ended mid-answer by Ctrl+C, by SIGTERM (a logout, a shutdown) or by SIGHUP
(the terminal window closed), it keeps what the model had written, marked
interrupted; under ``nohup`` SIGHUP stays ignored.  A new session whose
answer failed is named after its question all the same.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.cli.output_guard import READER_GONE_STATUS
from agenvoy_desktop.core.model_api import ChatEvent, ChatMessage, JsonCompletion, StopWhen
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.llm.openai_wire import EndpointError
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

    def start(cls: type[AppServices], /, paths: AppPaths, **_: object) -> AppServices:
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


class FailingChat(ScriptedChatModel):
    """A model whose server breaks before it says anything."""

    async def chat(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatEvent]:
        raise EndpointError("the server went away", "refused")
        yield  # pragma: no cover - makes this an async generator


def test_a_new_session_whose_answer_failed_is_named_all_the_same(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The question is kept: the sessions list shows it, not a blank title (as the window)."""

    def start(cls: type[AppServices], /, paths: AppPaths, **_: object) -> AppServices:
        return cls.open(paths, embedder=HashingEmbedder(), chat_model=FailingChat([]))

    monkeypatch.setattr(AppServices, "start", classmethod(start))
    profile = tmp_path / "profile"
    argv = ["chat", "What is my front tyre pressure?", "--data-dir", str(profile)]
    assert cli.main(argv) == 1
    assert "the server went away" in capsys.readouterr().err
    with open_memory(app_paths(profile)) as store:
        (session,) = store.sessions()
        assert session.title == "What is my front tyre pressure?"
        assert [m.content for m in store.history(session.session_id).messages] == [
            "What is my front tyre pressure?"
        ]


def test_a_new_chat_session_is_named_after_its_first_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def start(cls: type[AppServices], /, paths: AppPaths, **_: object) -> AppServices:
        model = ScriptedChatModel([["4.5 bar"]])
        return cls.open(paths, embedder=HashingEmbedder(), chat_model=model)

    monkeypatch.setattr(AppServices, "start", classmethod(start))
    profile = tmp_path / "profile"
    argv = ["chat", "What is my front tyre pressure?", "--data-dir", str(profile)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    with open_memory(app_paths(profile)) as store:
        assert [s.title for s in store.sessions()] == ["What is my front tyre pressure?"]


# -- ended by a signal mid-answer --------------------------------------------------
WAITING = "scripted model: waiting"
HANG_DUMP_S = 60
"""The child prints its threads' stacks and exits if still running then (well before the
test's own guard), so a hang shows where it hangs."""
CHILD = f"""
import asyncio, faulthandler, signal, sys
# A terminal's Ctrl+C reaches a process with Python's own handler; a test runner may have
# left SIGINT ignored, which a child inherits.  A hang prints where it is and ends.
signal.signal(signal.SIGINT, signal.default_int_handler)
faulthandler.dump_traceback_later({HANG_DUMP_S}, exit=True)
from agenvoy_desktop import cli
from agenvoy_desktop.agent.services import AppServices
from tests.fakes import HashingEmbedder
from tests.scripted_chat import WAIT, ScriptedChatModel

class Gate(asyncio.Event):
    async def wait(self):
        print({WAITING!r}, file=sys.stderr, flush=True)
        return await super().wait()  # never set: the answer stops here

def start(cls, paths, **_):
    script = ["the partial ", "answer", WAIT, " never said"]
    model = ScriptedChatModel([script if "--wait" in sys.argv else script[:2]])
    model.gate = Gate()
    return cls.open(paths, embedder=HashingEmbedder(), chat_model=model)

AppServices.start = classmethod(start)
sys.exit(cli.main([arg for arg in sys.argv[1:] if arg != "--wait"]))
"""
"""A real ``chat`` process whose model writes part of an answer (then, with --wait, waits)."""


@pytest.mark.skipif(os.name != "posix", reason="signals to a child are POSIX")
@pytest.mark.parametrize(
    ("signum", "status"),
    [
        pytest.param(signal.SIGTERM, 143, id="term"),
        pytest.param(signal.SIGINT, 130, id="int"),
        pytest.param(
            getattr(signal, "SIGHUP", 1),
            129,
            id="hup",
            marks=pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP"),
        ),
    ],
)
def test_a_signal_mid_answer_keeps_the_answer_so_far(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    profile = tmp_path / "profile"
    # a run under nohup would hand the child an ignored SIGHUP, which chat keeps ignored
    default_hup = "import signal; signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
    child = _waiting_chat(profile, prelude=default_hup if signum.name == "SIGHUP" else "")
    try:
        assert child.stderr is not None
        seen = _read_until(child.stderr, WAITING)
        child.send_signal(signum)  # the model is mid-answer: it has written, not finished
        out, err = child.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise AssertionError(f"the child hung after the signal:\n{err}") from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == status, seen + err
    assert "internal error" not in err
    assert "Traceback" not in err
    assert out.startswith("the partial answer")
    with open_memory(app_paths(profile)) as store:
        answer = store.history("s1").messages[-1]
    assert (answer.role, answer.content) == ("assistant", "the partial answer")
    assert answer.extra.get("interrupted") is True


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP")
def test_under_nohup_a_hangup_is_still_ignored(tmp_path: Path) -> None:
    """``nohup agenvoy-desktop chat …`` outlives the terminal: SIGHUP must not end it."""
    ignore_hup = "import signal; signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
    child = _waiting_chat(tmp_path / "profile", prelude=ignore_hup)
    try:
        assert child.stderr is not None
        _read_until(child.stderr, WAITING)
        child.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1.0)  # still answering: the hangup was ignored
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=HANG_GUARD_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 143, err
    assert "hung up" not in err


def _waiting_chat(profile: Path, prelude: str = "") -> subprocess.Popen[str]:
    """``chat hello`` in session s1 of *profile*, its model stopped mid-answer (:data:`CHILD`
    with --wait); *prelude* runs first in the child."""
    argv = ["chat", "hello", "--session", "s1", "--data-dir", str(profile)]
    return subprocess.Popen(
        [sys.executable, "-c", prelude + CHILD, "--wait", *argv],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until(stream: IO[str], marker: str) -> str:
    """The lines of *stream* before the line *marker* (all of them if the child ends first)."""
    seen = []
    for line in iter(stream.readline, ""):
        if line.strip() == marker:
            break
        seen.append(line)
    return "".join(seen)


@pytest.mark.skipif(os.name != "posix", reason="a pipe's EPIPE is POSIX")
def test_an_answer_into_a_closed_pipe_is_still_kept(tmp_path: Path) -> None:
    """``chat … | head -c 0``: the reader is gone, the answer is stored all the same."""
    profile = tmp_path / "profile"
    argv = ["chat", "hello", "--session", "s1", "--data-dir", str(profile)]
    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader from the first byte on: no race on when it leaves
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, *argv],
            cwd=Path(__file__).resolve().parents[2],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == READER_GONE_STATUS, done.stderr
    assert "Broken pipe" not in done.stderr
    with open_memory(app_paths(profile)) as store:
        answer = store.history("s1").messages[-1]
    assert (answer.role, answer.content) == ("assistant", "the partial answer")
    assert not answer.extra.get("interrupted")
