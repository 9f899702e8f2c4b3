"""A real OpenAI-compatible server for tests: llama-cpp-python's own, on 127.0.0.1.

The endpoint backend is tested against a server process, never mocked HTTP:
:func:`start_server` launches ``python -m llama_cpp.server`` on a free
loopback port with the given GGUF (the tiny test model), waits until it
answers, and the returned :class:`EndpointServer` can kill, pause (a "slow"
server: the kernel still accepts connections, nothing answers) and resume it.

The suite's network audit fails any test that opens an AF_INET socket;
:func:`loopback_only` is the replacement for modules that talk to such a
server: it still fails a test that reaches any address but the loopback one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests import conftest

HOST = "127.0.0.1"
READY_TIMEOUT_S = 120.0
"""Only so a server that never comes up fails the test instead of hanging it."""
STOP_GRACE_S = 5.0
_LOOPBACK_MARKS = (f"'{HOST}'", "'localhost'", "'::1'")


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class EndpointServer:
    """One running ``llama_cpp.server`` process."""

    process: subprocess.Popen[bytes]
    port: int
    alias: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def kill(self) -> None:
        """SIGKILL: the server dies with its sockets, mid-answer if it was answering."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel, but nothing is answered."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """End the server (resumed first, in case it was paused)."""
        if self.process.poll() is not None:
            return
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def start_server(
    model: Path,
    log_dir: Path,
    *,
    alias: str = "tiny",
    chat_format: str | None = None,
    n_ctx: int = 2048,
    extra_args: Sequence[str] = (),
) -> EndpointServer:
    """Start the server with ``model`` and return once it lists its model."""
    port = free_port()
    log_path = log_dir / f"llama-server-{port}.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        HOST,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        "1",
        "--verbose",
        "False",
    ]
    if chat_format is not None:
        command += ["--chat_format", chat_format]
    command += extra_args
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"NO_PROXY": "*"}
        )
    server = EndpointServer(process, port, alias, log_path)
    try:
        _wait_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: EndpointServer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    with httpx.Client(timeout=1.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited early:\n{server.log_tail()}")
            try:
                client.get(f"{server.base_url}/models")  # any answer (even 401) means it is up
                return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"llama_cpp.server did not come up:\n{server.log_tail()}")


def _is_loopback_event(event: str) -> bool:
    """A socket's creation (its address shows in the connect that follows) or a loopback use."""
    return event.startswith("socket.__new__") or any(mark in event for mark in _LOOPBACK_MARKS)


def loopback_only() -> Iterator[None]:
    """Body of a ``_no_network`` override: loopback traffic is allowed, anything else fails."""
    conftest.NETWORK_EVENTS.clear()
    yield
    found = [e for e in conftest.NETWORK_EVENTS if not _is_loopback_event(e)]
    conftest.NETWORK_EVENTS.clear()
    if found:
        pytest.fail(f"only the loopback server may be reached, but this test did: {found[:3]}")
