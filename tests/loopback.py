"""Tiny real HTTP servers on 127.0.0.1 that answer like Ollama, LM Studio or llama.cpp.

The endpoint registry probes servers over HTTP; these stand-ins run the
standard library's ``http.server`` in a thread on a free loopback port and
answer the routes the probe asks (``/v1/models`` and each server's own
context-size route) from a table.  ``allow_loopback`` lets a test open
loopback sockets: the conftest's audit fails any test that opens a network
socket, and a loopback one is the point here (an address off this machine
still fails the test).
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests import conftest

Route = tuple[str, str]
"""(method, path)."""


@dataclass
class Reply:
    """What a route answers: a JSON value (or raw bytes), a status, an optional delay."""

    body: Any
    status: int = 200
    delay_s: float = 0.0
    raw: bool = False


@dataclass
class FakeServer:
    """A running stand-in server; ``base_url`` is its ``/v1`` address."""

    port: int
    routes: dict[Route, Reply]
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path, authorization header) of each request."""

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"


def models_listing(*ids: str, **per_item: Any) -> dict[str, Any]:
    """An OpenAI ``/v1/models`` answer."""
    return {"object": "list", "data": [{"id": i, "object": "model", **per_item} for i in ids]}


def ollama_routes(
    model: str = "llama3.1:8b", n_ctx: int = 131072, n_params: int = 8_030_261_248
) -> dict[Route, Reply]:
    info = {"llama.context_length": n_ctx, "general.parameter_count": n_params}
    return {
        ("GET", "/v1/models"): Reply(models_listing(model, owned_by="library")),
        ("POST", "/api/show"): Reply({"model_info": info}),
    }


def lmstudio_routes(model: str = "qwen2.5-7b-instruct", n_ctx: int = 32768) -> dict[Route, Reply]:
    return {
        ("GET", "/v1/models"): Reply(models_listing(model, owned_by="organization_owner")),
        ("GET", "/api/v0/models"): Reply(
            {"data": [{"id": model, "max_context_length": n_ctx, "state": "loaded"}]}
        ),
    }


def llamacpp_routes(
    model: str = "tiny.gguf", n_ctx: int = 4096, n_params: int = 494_032_768
) -> dict[Route, Reply]:
    listing = models_listing(model, owned_by="llamacpp", meta={"n_params": n_params})
    return {
        ("GET", "/v1/models"): Reply(listing),
        ("GET", "/props"): Reply({"default_generation_settings": {"n_ctx": n_ctx}}),
    }


def plain_routes(*models: str) -> dict[Route, Reply]:
    """llama-cpp-python's server: a model list and nothing else."""
    return {("GET", "/v1/models"): Reply(models_listing(*models))}


class _Server(ThreadingHTTPServer):
    """Binds without ``getfqdn`` (a host-name look-up this test has no need for)."""

    daemon_threads = True

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            server.seen.append((method, self.path, self.headers.get("Authorization") or ""))
            reply = server.routes.get((method, self.path.split("?")[0]))
            if reply is None:
                reply = Reply({"error": "not found"}, status=404)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            data = reply.body if reply.raw else json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a timeout test)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def allow_loopback() -> Iterator[None]:
    """Let the test use 127.0.0.1; anything beyond this machine still fails it."""
    yield
    conftest.NETWORK_EVENTS[:] = [e for e in conftest.NETWORK_EVENTS if not _local(e)]


def _local(event: str) -> bool:
    if event.startswith("socket.__new__"):
        return True  # the family alone; where it connects is checked below
    if event.startswith(("socket.connect", "socket.bind")):
        return "'127.0.0.1'" in event or "'::1'" in event
    if event.startswith(("socket.getaddrinfo", "socket.getnameinfo")):
        return event.split("(", 1)[1].startswith(("'127.0.0.1'", "('127.0.0.1'"))
    return False


@pytest.fixture
def fake_server(allow_loopback: None) -> Iterator[Any]:
    """``start(routes) -> FakeServer``; every server started is shut down after the test."""
    running: list[ThreadingHTTPServer] = []

    def start(routes: dict[Route, Reply], port: int = 0) -> FakeServer:
        fake = FakeServer(0, routes)
        httpd = _Server(("127.0.0.1", port), _handler(fake))
        fake.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        running.append(httpd)
        return fake

    yield start
    for httpd in running:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
