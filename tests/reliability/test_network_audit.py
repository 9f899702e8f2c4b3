"""No code path reaches the network: the audit hook works, and the app gives it nothing to see.

``tests/conftest.py`` installs an audit hook for the whole suite that fails
any test during which a socket other than AF_UNIX is opened (or a host name
looked up).  These tests prove the hook fires, then run import, search and
chat and check that it stayed quiet.  The hook sees only Python's ``socket``
module, so a last test watches real CLI processes from outside with strace,
which also sees the C libraries (llama.cpp, hnswlib, SQLite).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.cli import common
from agenvoy_desktop.paths import AppPaths
from tests import conftest
from tests.fakes import HashingEmbedder
from tests.reliability.torture import minilm_or_skip
from tests.scripted_chat import ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "AF_UNIX"), reason="the audit hook needs AF_UNIX to tell local from network"
)
ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 300.0
"""Only so a hung process fails the test instead of the suite; not a timing claim."""
ROWS = [
    {"role": "user", "content": "we should book a hotel in Kyoto", "time": "2024-03-01T02:00:00Z"},
    {"role": "assistant", "content": "The Granvia hotel is next to Kyoto station"},
]


def _taken() -> list[str]:
    """What the hook recorded so far in this test; cleared so the test itself passes."""
    found = list(conftest.NETWORK_EVENTS)
    conftest.NETWORK_EVENTS.clear()
    return found


def test_the_hook_sees_an_inet_socket_and_a_lookup() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM):
        pass
    inet = _taken()
    socket.getaddrinfo("localhost", None)  # /etc/hosts, but a look-up is a look-up
    lookup = _taken()
    left, right = socket.socketpair(socket.AF_UNIX)
    left.close()
    right.close()
    assert [e.split()[0] for e in inet] == ["socket.__new__"]
    assert lookup
    assert lookup[0].startswith("socket.getaddrinfo")
    assert _taken() == []  # AF_UNIX is local: asyncio's self-pipe uses it


def test_the_fixture_fails_a_test_that_opens_one(tmp_path: Path) -> None:
    test = tmp_path / "test_opens_a_socket.py"
    test.write_text(
        "import socket\n\n"
        "def test_opens() -> None:\n"
        "    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()\n",
        "utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         str(test)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed, 1 error" in proc.stdout
    assert "must never reach the network" in proc.stdout


def test_import_search_and_chat_open_no_network_socket(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=256))

    def start(cls: type[AppServices], /, paths: AppPaths, **_: object) -> AppServices:
        model = ScriptedChatModel([["the answer"]])
        return cls.open(paths, embedder=HashingEmbedder(dim=256), chat_model=model)

    monkeypatch.setattr(AppServices, "start", classmethod(start))
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    data_dir = ["--data-dir", str(tmp_path / "profile")]
    commands = [
        ["import", str(source), "--session", "s1"],
        ["search", "hotel", "--mode", "hybrid"],
        ["chat", "where do we stay in Kyoto?", "--session", "s1"],
        ["doctor", "--repair"],
    ]
    codes = [cli.main([*command, *data_dir]) for command in commands]
    assert codes == [0, 0, 0, 0], capsys.readouterr().err
    assert "the answer" in capsys.readouterr().out
    assert _taken() == []


# -- from outside: strace sees the C libraries too ------------------------------------------
SOCKET_CALL = re.compile(r"\bsocket\((AF_[A-Z0-9]+)")


def _strace() -> str:
    """strace's path, or skip (not installed, or ptrace not allowed here)."""
    found = shutil.which("strace")
    if found is None:
        pytest.skip("strace is not installed")
    probe = subprocess.run(
        [found, "-f", "-o", "/dev/null", "true"], capture_output=True, check=False, timeout=60
    )
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.decode(errors='replace')[:200]}")
    return found


@pytest.mark.slow
def test_real_processes_open_no_network_socket(tmp_path: Path) -> None:
    """import, hybrid search and chat with a real (tiny) llama.cpp model, under strace."""
    strace = _strace()
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    embedder = minilm_or_skip(tmp_path)
    data_dir = tmp_path / "profile"
    settings = {
        "version": 1,
        "models": {"chat_model": str(model), "embedding_model": str(embedder),
                   "max_answer_tokens": 8, "context_size": 512},
    }  # fmt: skip
    (data_dir / "config").mkdir(parents=True)
    (data_dir / "config" / "settings.json").write_text(json.dumps(settings), "utf-8")
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    families: list[str] = []
    for number, command in enumerate(
        [
            ["import", str(source), "--session", "s1"],
            ["search", "hotel", "--mode", "hybrid"],
            ["chat", "where do we stay?", "--session", "s1"],
        ]
    ):
        trace = tmp_path / f"trace-{number}"
        proc = subprocess.run(
            [strace, "-f", "-qq", "-e", "trace=socket", "-o", str(trace),
             sys.executable, "-m", "agenvoy_desktop", "--data-dir", str(data_dir), *command],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, (command, proc.stderr[-500:])
        families += SOCKET_CALL.findall(trace.read_text("utf-8", errors="replace"))
    assert [f for f in families if f != "AF_UNIX"] == []
