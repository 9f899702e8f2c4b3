"""Streaming through the endpoint backend vs reading the same server's stream directly.

One ``llama_cpp.server`` process (llama-cpp-python's OpenAI-compatible
server) serves the starter model on 127.0.0.1.  Two clients stream the same
greedy answer from it, interleaved, alternating which goes first:

* direct: one long-lived ``httpx.AsyncClient`` POSTs the request body and
  reads the server-sent events itself (json.loads per line, nothing else) —
  the least a client can do;
* ours: ``EndpointChatModel.chat`` (context fit, request building, a fresh
  connection per request, the stop watcher, tool-call-aware parsing, events).

Each round uses a new system prompt, and each measured request is preceded
by an unmeasured 1-token request with it, so that both find the prompt in
the server's KV cache (llama-cpp-python reuses the longest matching prefix,
but evaluates the whole prompt again after a long answer) and pay the same
one-token prompt evaluation: what differs is the client.

* Throughput: tokens / seconds from the request to the end of the stream,
  ``ours / direct`` as the ratio of totals over the long rounds (and the
  median of the per-round paired ratios).  Acceptance >= 0.95.
* Added time to first token: the server's first token takes a different
  time for each request (a few ms of noise on a shared machine), so each
  request is timed on the wire too (a transport wrapper: request headers
  sent -> first content byte received = the server's share).  A client's
  own share is its time to first token (call -> first ``TextDelta`` / first
  content chunk parsed) minus the server's share: building the request,
  connecting, reading, parsing and handing the event on.  Added = ours'
  share - direct's share, per pair, over the long rounds and extra short
  (4-token) rounds.  Acceptance p95 <= 5 ms.  The raw paired difference of
  the two times to first token is reported as well.  Our client is given
  the timing transport with the backend's own settings (no keep-alive).

    .venv/bin/python benchmarks/endpoint_stream.py [--quick]
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import benchlib
import httpx
from benchlib import fmt_stats, stats_ms, verdict

from agenvoy_desktop.core.model_api import ChatFinished, ChatMessage, TextDelta
from agenvoy_desktop.llm.cpu_features import extra_buffers_enabled, thread_plan
from agenvoy_desktop.llm.openai_chat import EndpointChatModel
from agenvoy_desktop.llm.openai_wire import sampling_fields, wire_messages
from agenvoy_desktop.settings import SamplingSettings

ACCEPT_RATIO = 0.95
ACCEPT_ADDED_TTFT_MS = 5.0
INSTALLED_MODEL = (
    Path.home() / ".local/share/AgenvoyDesktop/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
)
CONTEXT = 2048
QUESTION = (
    "Write a complete Python module that implements a red-black tree with insert, delete, "
    "search, in-order traversal and a pretty printer. Include docstrings and type hints."
)
SAMPLING = SamplingSettings(temperature=0.0, seed=42)
NO_KEEPALIVE = httpx.Limits(max_keepalive_connections=0)
"""As the backend's client (see ``EndpointChatModel._client``)."""
SERVER_MAIN = """
import runpy
import llama_cpp.llama_cpp as low
default_params = low.llama_model_default_params
def params():
    p = default_params()
    p.use_extra_bufts = {extra}
    return p
low.llama_model_default_params = params
runpy.run_module("llama_cpp.server", run_name="__main__")
"""
"""``python -m llama_cpp.server`` with llama.cpp's extra CPU weight buffers set as the app sets
them: the server has no switch for them, and they fault on CPUs that advertise AMX (this one).
"""


_CONTENT = re.compile(rb'"content": ?"[^"]')


class TimedTransport(httpx.AsyncBaseTransport):
    """Times one request at a time on the wire: headers sent, first content byte received.

    The server's share of time to first token is the gap between the two; the
    rest of a client's time to first token is the client's own (building the
    request, connecting, reading and parsing the events, handing them on).
    """

    def __init__(self, **kwargs: Any) -> None:
        self._inner = httpx.AsyncHTTPTransport(**kwargs)
        self.events: dict[str, float] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.events = {"entered": time.perf_counter()}
        request.extensions = {**request.extensions, "trace": self._trace}
        response = await self._inner.handle_async_request(request)
        response.stream = _TimedStream(response.stream, self.events)  # type: ignore[arg-type]
        return response

    async def _trace(self, name: str, info: dict[str, Any]) -> None:
        self.events.setdefault(name, time.perf_counter())

    def server_share(self) -> float:
        return self.events["first_content"] - self.events["http11.send_request_headers.started"]

    def connect_s(self) -> float:
        started = self.events.get("connection.connect_tcp.started")
        done = self.events.get("connection.connect_tcp.complete")
        return done - started if started is not None and done is not None else 0.0

    async def aclose(self) -> None:
        await self._inner.aclose()


class _TimedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, events: dict[str, float]) -> None:
        self._inner = inner
        self._events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            if "first_content" not in self._events and _CONTENT.search(chunk):
                self._events["first_content"] = time.perf_counter()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def resolve_model(arg: str | None) -> Path:
    """--model, else the installed starter, else the starter assembled into .bench-cache."""
    if arg:
        return Path(arg)
    if INSTALLED_MODEL.is_file():
        return INSTALLED_MODEL
    from agenvoy_desktop.llm.starter import prepare_starter_model

    models = benchlib.BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    return Path(prepare_starter_model(models))


def start_server(model: Path, log_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    threads, batch_threads = (str(n) for n in thread_plan(None))  # the app's threads
    command = [
        sys.executable, "-c", SERVER_MAIN.format(extra=extra_buffers_enabled()),
        "--model", str(model), "--model_alias",
        "starter", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT),
        "--n_threads", threads, "--n_threads_batch", batch_threads, "--flash_attn", "True",
        "--verbose", "False",
    ]  # fmt: skip
    log = (log_dir / "server.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    with httpx.Client(timeout=1.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit(f"server exited: {(log_dir / 'server.log').read_text()[-2000:]}")
            try:
                client.get(f"{base_url}/models")
                return process, base_url
            except httpx.TransportError:
                time.sleep(0.2)
    process.kill()
    raise SystemExit("server did not come up")


def messages_for(tag: str) -> list[ChatMessage]:
    return [
        {"role": "system", "content": f"Session {tag}.\nYou are a careful coding assistant."},
        {"role": "user", "content": QUESTION},
    ]


def body_for(messages: list[ChatMessage], n_tokens: int) -> dict[str, Any]:
    """What the backend sends, built from the same helpers, for the direct client."""
    return {
        "model": "starter",
        "messages": wire_messages(messages),
        "max_tokens": n_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    } | sampling_fields(SAMPLING, SAMPLING.temperature, extras=True)


async def run_direct(
    client: httpx.AsyncClient, base_url: str, messages: list[ChatMessage], n_tokens: int
) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    body = body_for(messages, n_tokens)
    async with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            choices = chunk.get("choices") or [{}]
            text = (choices[0].get("delta") or {}).get("content")
            if text:
                if first is None:
                    first = time.perf_counter()
                parts.append(text)
    return result(started, first, parts, timed(client))


async def run_ours(
    model: EndpointChatModel, messages: list[ChatMessage], n_tokens: int
) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    async for event in model.chat(messages, max_tokens=n_tokens):
        if isinstance(event, TextDelta):
            if first is None:
                first = time.perf_counter()
            parts.append(event.text)
        elif isinstance(event, ChatFinished):
            assert event.finish_reason in ("stop", "length"), event
    return result(started, first, parts, timed(model._clients[asyncio.get_running_loop()]))


def timed(client: httpx.AsyncClient) -> TimedTransport:
    transport = client._transport
    assert isinstance(transport, TimedTransport)
    return transport


def result(
    started: float, first: float | None, parts: list[str], transport: TimedTransport
) -> dict[str, Any]:
    seconds = time.perf_counter() - started
    assert first is not None
    ttft = first - started
    return {
        "seconds": seconds,
        "tokens": len(parts),
        "tokens_per_s": len(parts) / seconds,
        "ttft_s": ttft,
        "server_share_s": transport.server_share(),
        "client_share_s": ttft - transport.server_share(),
        "connect_s": transport.connect_s(),
        "text": "".join(parts),
    }


async def measure(base_url: str, rounds: int, short_rounds: int, n_tokens: int) -> dict[str, Any]:
    model = EndpointChatModel(base_url=base_url, model="starter", name="starter")
    model.sampling = SAMPLING
    await model.load()
    # Our backend's own per-loop client, with the same settings, behind the timing transport.
    model._clients[asyncio.get_running_loop()] = httpx.AsyncClient(
        timeout=120.0, trust_env=False, transport=TimedTransport(limits=NO_KEEPALIVE)
    )
    pairs: list[dict[str, Any]] = []
    direct_transport = TimedTransport()
    async with httpx.AsyncClient(
        timeout=120.0, trust_env=False, transport=direct_transport
    ) as client:
        # Warm-up: both paths once (imports, first connection), not measured.
        await run_direct(client, base_url, messages_for("warm"), 4)
        await run_ours(model, messages_for("warm"), 4)
        plan = [("long", n_tokens)] * rounds + [("short", 4)] * short_rounds
        for index, (kind, tokens) in enumerate(plan):
            messages = messages_for(f"{index}-{time.time_ns()}")
            sides = {"direct": None, "ours": None}
            order = ["ours", "direct"] if index % 2 else ["direct", "ours"]
            for side in order:
                await run_direct(client, base_url, messages, 1)  # primes the prompt's KV cache
                if side == "ours":
                    sides[side] = await run_ours(model, messages, tokens)
                else:
                    sides[side] = await run_direct(client, base_url, messages, tokens)
            ours, direct = sides["ours"], sides["direct"]
            assert ours is not None
            assert direct is not None
            pair = {
                "kind": kind,
                "first": order[0],
                "ours": {k: v for k, v in ours.items() if k != "text"},
                "direct": {k: v for k, v in direct.items() if k != "text"},
                "same_text": ours["text"] == direct["text"],
            }
            pairs.append(pair)
            print(
                f"{kind:5} {index:2}: ours {ours['tokens_per_s']:6.1f} tok/s "
                f"ttft {ours['ttft_s'] * 1000:7.1f} ms | direct {direct['tokens_per_s']:6.1f} "
                f"tok/s ttft {direct['ttft_s'] * 1000:7.1f} ms | same text {pair['same_text']}",
                flush=True,
            )
    return summarise(pairs)


def summarise(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    long = [p for p in pairs if p["kind"] == "long"]
    totals = {
        side: sum(p[side]["tokens"] for p in long) / sum(p[side]["seconds"] for p in long)
        for side in ("ours", "direct")
    }
    ratio = totals["ours"] / totals["direct"]
    paired = [p["ours"]["tokens_per_s"] / p["direct"]["tokens_per_s"] for p in long]
    raw_added = [p["ours"]["ttft_s"] - p["direct"]["ttft_s"] for p in pairs]
    added = [p["ours"]["client_share_s"] - p["direct"]["client_share_s"] for p in pairs]
    added_stats = stats_ms(added)
    return {
        "tokens_per_s": {k: round(v, 2) for k, v in totals.items()},
        "ratio": round(ratio, 4),
        "paired_ratio_median": round(statistics.median(paired), 4),
        "paired_ratios": [round(r, 4) for r in paired],
        "added_ttft": added_stats,
        "added_ttft_raw_pairs": stats_ms(raw_added),
        "client_share_ours": stats_ms([p["ours"]["client_share_s"] for p in pairs]),
        "client_share_direct": stats_ms([p["direct"]["client_share_s"] for p in pairs]),
        "connect_ours": stats_ms([p["ours"]["connect_s"] for p in pairs]),
        "server_share_ours": stats_ms([p["ours"]["server_share_s"] for p in pairs]),
        "server_share_direct": stats_ms([p["direct"]["server_share_s"] for p in pairs]),
        "ttft_ours": stats_ms([p["ours"]["ttft_s"] for p in pairs]),
        "ttft_direct": stats_ms([p["direct"]["ttft_s"] for p in pairs]),
        "same_text_all": all(p["same_text"] for p in pairs),
        "pairs": pairs,
        "accept": {
            "ratio": ratio >= ACCEPT_RATIO,
            "added_ttft_p95": added_stats["p95_ms"] <= ACCEPT_ADDED_TTFT_MS,
        },
    }


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF to serve (default: the installed starter)")
    ap.add_argument("--rounds", type=int, help="long rounds (default 16, quick 2)")
    ap.add_argument("--short-rounds", type=int, help="4-token rounds (default 30, quick 4)")
    ap.add_argument("--tokens", type=int, default=96, help="tokens per long answer")
    args = ap.parse_args()
    rounds = args.rounds or (2 if args.quick else 16)
    short_rounds = args.short_rounds or (4 if args.quick else 30)
    model = resolve_model(args.model)
    with tempfile.TemporaryDirectory(prefix="endpoint-bench-") as tmp:
        process, base_url = start_server(model, Path(tmp))
        try:
            data = asyncio.run(measure(base_url, rounds, short_rounds, args.tokens))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    data |= {"model": str(model), "rounds": rounds, "short_rounds": short_rounds}
    print(
        f"\nthroughput ours {data['tokens_per_s']['ours']} tok/s vs direct "
        f"{data['tokens_per_s']['direct']} tok/s: ratio {data['ratio']} "
        f"(paired median {data['paired_ratio_median']}) "
        f"[{verdict(data['accept']['ratio'])} >= {ACCEPT_RATIO}]"
    )
    print(
        f"added TTFT: {fmt_stats(data['added_ttft'])} "
        f"[{verdict(data['accept']['added_ttft_p95'])} p95 <= {ACCEPT_ADDED_TTFT_MS} ms]"
    )
    print(
        "  raw paired TTFT difference (server noise included): "
        f"{fmt_stats(data['added_ttft_raw_pairs'])}"
    )
    print(f"  client share ours: {fmt_stats(data['client_share_ours'])}")
    print(f"  client share direct: {fmt_stats(data['client_share_direct'])}")
    print(f"  of which TCP connect (ours, no keep-alive): {fmt_stats(data['connect_ours'])}")
    print(f"same greedy text on both sides: {data['same_text_all']}")
    benchlib.write_result("endpoint_stream", data, quick=args.quick)


if __name__ == "__main__":
    main()
