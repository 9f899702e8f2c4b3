"""A real OpenAI-compatible server for tests: llama-cpp-python's own, on 127.0.0.1.

The endpoint backend is tested against a server process, never mocked HTTP:
:func:`start_server` launches ``python -m llama_cpp.server`` on a free
loopback port with the given GGUF (the tiny test model), waits until it
answers, and the returned :class:`EndpointServer` can kill, pause (a "slow"
server: the kernel still accepts connections, nothing answers) and resume it.

:func:`fault_server` is the other kind: a stand-in that misbehaves on
purpose (a finished answer where a stream was asked for, an HTML page, a
50 MB body, a stream that never ends or trickles, a chunk cut by a dropped
connection), for the faults a real server cannot be made to show.

The suite's network audit fails any test that opens an AF_INET socket;
:func:`loopback_only` is the replacement for modules that talk to such a
server: it still fails a test that reaches any address but the loopback one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

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


# -- a server that misbehaves on purpose -------------------------------------------------------
FAULT_MODEL = "fault"
MB = 2**20

Behaviour = Callable[["FaultHandler", threading.Event], None]
"""Writes the whole answer to a chat request (status, headers, body); the event says stop."""


class FaultHandler(BaseHTTPRequestHandler):
    """Lists :data:`FAULT_MODEL`, and answers chat the way the server's behaviour says.

    HTTP/1.0 (the handler's default): the connection closes after each answer,
    so a body without a length ends where the server stops writing — the way a
    dropped connection looks to the client.
    """

    server: _FaultTCP

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/v1/models":
            self._json(404, {"error": "not found"})
            return
        if self.server.listing is not None:  # the model list misbehaves too
            with contextlib.suppress(OSError):
                self.server.listing(self, self.server.stopping)
            return
        self._json(200, {"object": "list", "data": [{"id": FAULT_MODEL, "object": "model"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.requests.append(json.loads(self.rfile.read(length) or b"{}"))
        if self.path.split("?")[0] != "/v1/chat/completions":
            self._json(404, {"error": "not found"})
            return
        with contextlib.suppress(OSError):  # the client hung up: the point of most behaviours
            self.server.behaviour(self, self.server.stopping)

    def start(self, content_type: str, length: int | None = None) -> None:
        """Status 200 and headers; without ``length`` the body runs until the connection ends."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _FaultTCP(socketserver.ThreadingTCPServer):
    """Binds without ``http.server``'s host-name look-up (not loopback for the audit)."""

    daemon_threads = True

    def __init__(self, behaviour: Behaviour, listing: Behaviour | None = None) -> None:
        self.behaviour = behaviour
        self.listing = listing
        self.stopping = threading.Event()
        self.requests: list[dict[str, Any]] = []
        super().__init__((HOST, 0), FaultHandler)


@dataclass
class FaultServer:
    """A running misbehaving server; ``requests`` holds each chat request's JSON body."""

    port: int
    requests: list[dict[str, Any]]
    model: str = FAULT_MODEL

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"


@contextlib.contextmanager
def fault_server(
    behaviour: Behaviour, *, listing: Behaviour | None = None
) -> Iterator[FaultServer]:
    """Serve ``behaviour`` on a free loopback port until the block ends.

    *listing*: how ``GET /v1/models`` answers instead of listing :data:`FAULT_MODEL`.
    """
    httpd = _FaultTCP(behaviour, listing)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield FaultServer(httpd.server_address[1], httpd.requests)
    finally:
        httpd.stopping.set()
        httpd.shutdown()
        httpd.server_close()


def sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One streamed chunk as a server-sent event."""
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def whole_answer(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> Behaviour:
    """Ignores ``stream`` and answers with one finished ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
        }
    ).encode()

    def answer(handler: FaultHandler, _stopping: threading.Event) -> None:
        handler.start("application/json", len(body))
        handler.wfile.write(body)

    return answer


def html_page(handler: FaultHandler, _stopping: threading.Event) -> None:
    """A web page with status 200, as a site's front page behind a wrong URL answers."""
    page = b"<!DOCTYPE html>\n<html><head><title>Welcome</title></head><body>Hi</body></html>\n"
    handler.start("text/html; charset=utf-8", len(page))
    handler.wfile.write(page)


def empty_body(handler: FaultHandler, _stopping: threading.Event) -> None:
    """Status 200 and nothing else, as a server that failed to load its model may answer."""
    handler.start("text/event-stream", 0)


def huge_body(
    total: int = 50 * MB, *, prefix: bytes = b"", line: bytes = b"x" * 1023 + b"\n"
) -> Behaviour:
    """``total`` bytes (``prefix`` then ``line`` repeated), written until the client hangs up."""

    def answer(handler: FaultHandler, stopping: threading.Event) -> None:
        handler.start("application/json", total)
        handler.wfile.write(prefix)
        sent = len(prefix)
        while sent < total and not stopping.is_set():
            piece = line[: total - sent]
            handler.wfile.write(piece)
            sent += len(piece)

    return answer


def endless_stream(*, interval_s: float = 0.0, total: int = 50 * MB) -> Behaviour:
    """Token chunks that ignore ``max_tokens``: up to ``total`` bytes, ``interval_s`` apart."""

    def answer(handler: FaultHandler, stopping: threading.Event) -> None:
        handler.start("text/event-stream")
        sent = 0
        while sent < total and not stopping.is_set():
            event = sse({"content": "word "})
            handler.wfile.write(event)
            sent += len(event)
            if interval_s:
                stopping.wait(interval_s)

    return answer


def trickle(*, interval_s: float = 0.05, prefix: bytes = b'{"data": [') -> Behaviour:
    """``prefix``, then one space every ``interval_s`` until the client hangs up: the read
    timeout never fires, and the body never ends."""

    def answer(handler: FaultHandler, stopping: threading.Event) -> None:
        handler.start("application/json")
        handler.wfile.write(prefix)
        while not stopping.is_set():
            handler.wfile.write(b" ")
            handler.wfile.flush()
            stopping.wait(interval_s)

    return answer


def cut_mid_chunk(handler: FaultHandler, _stopping: threading.Event) -> None:
    """Two chunks, then half of a third: the connection drops inside its JSON."""
    handler.start("text/event-stream")
    handler.wfile.write(sse({"role": "assistant", "content": "Hello"}) + sse({"content": " there"}))
    handler.wfile.write(sse({"content": " again"})[:30])
