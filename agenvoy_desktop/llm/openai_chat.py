"""A chat model behind an OpenAI-compatible HTTP server (llama.cpp, Ollama, LM Studio, ...).

:class:`EndpointChatModel` satisfies :class:`~agenvoy_desktop.core.model_api.ChatModel`
the way :class:`~agenvoy_desktop.llm.engine.ChatEngine` does, so the agent and the
summary use either without knowing which: the same events, the oldest messages
trimmed to fit the context, tool calls whether the server parses them or the
model writes them as text, cancel by the ``stop`` event or by closing the
iterator.  Requests to one model take turns, as on the engine's worker (some
servers, llama-cpp-python's among them, abort a running answer when another
request arrives).

Failures are :class:`EndpointError` lines.  A server that ignores the answer
limit, sends more than a few megabytes or trickles past the overall deadline
(:data:`ANSWER_DEADLINE_S`) is cut off with one.  A half-streamed answer is never
retried — the error is raised after the deltas already yielded, so the turn
keeps them — while :meth:`EndpointChatModel.complete_json` (the summary)
retries a server that was away, with backoff.  Each request uses its own
HTTP connection (no keep-alive), closed when the request ends: nothing
outlives the caller's event loop, and a cancelled stream's socket closes at
once, which is how the server learns to stop generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from functools import cache
from typing import Any

import httpx

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    JsonCompletion,
    ModelOutputError,
    StopWhen,
)
from agenvoy_desktop.llm.chat_format import fit_messages
from agenvoy_desktop.llm.openai_stream import Answer, StreamEnd, payloads, until_set
from agenvoy_desktop.llm.openai_wire import (
    EndpointError,
    ErrorKind,
    estimate_prompt,
    estimate_tokens,
    http_error,
    sampling_fields,
    transport_error,
    wire_messages,
)
from agenvoy_desktop.llm.worker import ModelClosedError
from agenvoy_desktop.settings import SamplingSettings

__all__ = ["EndpointChatModel", "EndpointError", "ErrorKind"]

log = logging.getLogger(__name__)

SIDE_BODY_BYTES = 4 << 20
"""The most a request beside the answer may send (a model list, ``/props``, a tokenization,
an error page): those are kilobytes; megabytes are not what was asked for."""
SIDE_DEADLINE_S = 30.0
"""Seconds such a request may take in all: a server that trickles bytes is never caught by
the read timeout (a model list trickled forever kept ``chat`` waiting forever)."""
DEFAULT_CONTEXT = 4096
"""Context assumed when neither the caller nor the server says (a common server default)."""
DEFAULT_ANSWER_TOKENS = 1024
ANSWER_DEADLINE_S = 900.0
"""Longest one answer may take, request to last chunk, before reading stops.

The read timeout only catches a server that goes silent; one that trickles a
token every few seconds would hold the turn (and the model's lock) for
hours.  A slow CPU server (2 tokens/s) writes a default 1,024-token answer
in under 9 minutes after a long prompt, so 15 minutes cuts only a stuck one.
"""
JSON_TEMPERATURE = 0.2
"""As the engine's: low but not zero, so a constrained answer does not loop."""
RETRY_DELAYS_S = (1.0, 2.0, 4.0)
"""Waits before the summary's second, third and fourth try at a server that was away."""
REJECTED = (400, 422)
"""Statuses with which servers refuse a request field they do not know."""
_TOKENIZE_ROUTES = ("/extras/tokenize", "/tokenize")
"""llama-cpp-python's and llama.cpp's tokenizers, relative to the server's root."""


def _refused(exc: EndpointError, field: str | None = None) -> bool:
    """Whether the server refused the request's shape (llama-cpp-python says so with a 500)."""
    if exc.status in REJECTED:
        return True
    return field is not None and exc.status == 500 and field in str(exc)


@cache
def _ssl_context() -> ssl.SSLContext:
    """One verified TLS context for all requests (building one costs milliseconds)."""
    return ssl.create_default_context()


def _is_loopback(base_url: str) -> bool:
    host = (httpx.URL(base_url).host or "").lower()
    return host in {"localhost", "::1"} or host.startswith("127.")


async def _capped(response: httpx.Response, base_url: str) -> bytes:
    """The body of a streamed *response*, refused past :data:`SIDE_BODY_BYTES` (decoded)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > SIDE_BODY_BYTES:
            raise EndpointError(
                f"The server at {base_url} sent more than {SIDE_BODY_BYTES >> 20} MB for "
                f"{response.request.url} — reading stopped there; is it an OpenAI-compatible "
                "server?",
                "oversize",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _json_or_text(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


class EndpointChatModel:
    """One model served over HTTP; constructing it contacts nothing."""

    backend = "endpoint"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        name: str,
        api_key: str | None = None,
        context_size: int | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 120.0,
        answer_deadline: float = ANSWER_DEADLINE_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")
        self.model = model
        self.remote = not _is_loopback(self.base_url)
        self.sampling = SamplingSettings()
        """Chat answers' sampling; read when each request is made."""
        self.max_answer_tokens = DEFAULT_ANSWER_TOKENS
        self.retry_delays: tuple[float, ...] = RETRY_DELAYS_S
        self.answer_deadline = answer_deadline
        """Seconds one answer may take in all (:data:`ANSWER_DEADLINE_S`)."""
        self.extra_body: dict[str, Any] = {}
        """Server-specific fields added to every request (Ollama's ``keep_alive``, a logit bias)."""
        self.token_counts_estimated = False
        """True once the server turned out to have no tokenizer route (counts are estimates)."""
        self.parameters: int | None = None
        """The model's weights as its server reported them (None: unknown); shapes the turn."""
        self._name = name
        self._context_size = context_size
        self._timeout = httpx.Timeout(connect_timeout, read=read_timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._checked = False
        self._closed = False
        self._sampling_extras = True  # off once the server refused llama.cpp's fields
        self._json_format: str | None = None  # "json_schema" / "json_object", once known
        self._tokenizer: tuple[str, int] | None = None  # route and its fixed overhead
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._halts: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    # -- facts ----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def context_size(self) -> int:
        """The context given at construction, else the server's (after :meth:`load`), else 4096."""
        return self._context_size or DEFAULT_CONTEXT

    # -- calls ----------------------------------------------------------------------------------
    async def load(self) -> None:
        """Check that the server answers and serves :attr:`model`; :class:`EndpointError` if not.

        Like every request, it waits for a running answer: llama-cpp-python's
        server aborts an answer when any other request reaches the model.
        """
        async with self._turn():
            await self._load()

    async def _load(self) -> None:
        client = self._client()
        listing = await self._get_json(client, f"{self.base_url}/models")
        ids = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict)]
        if ids and not any(self._same_model(i) for i in ids if isinstance(i, str)):
            raise EndpointError(
                f"The server at {self.base_url} does not have the model {self.model!r} "
                f"loaded (it serves {', '.join(map(str, ids[:5]))}) — load it on the server "
                "or choose another model.",
                "unloaded",
            )
        if self._context_size is None:
            self._context_size = await self._server_context(client)
        self._checked = True

    async def count_tokens(self, text: str) -> int:
        """Tokens by the server's tokenizer where it has one, else an estimate (chars / 4)."""
        async with self._turn():
            client = self._client()
            if self._tokenizer is None and not self.token_counts_estimated:
                self._tokenizer = await self._find_tokenizer(client)
                self.token_counts_estimated = self._tokenizer is None
            if self._tokenizer is None:
                return estimate_tokens(text)
            route, overhead = self._tokenizer
            return max(0, len(await self._tokenize(client, route, text)) - overhead)

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: asyncio.Event | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        avoid_openings: Sequence[str] = (),
    ) -> AsyncIterator[ChatEvent]:
        """Stream the answer: text deltas and tool calls, then :class:`ChatFinished`.

        ``tool_choice`` goes to the server as it is (the agent never sets it).
        ``avoid_openings`` is ignored: the OpenAI API can bias single tokens
        of the server's vocabulary, not ban a phrase, and the starter's
        refusals it is meant for do not come from a server.
        A failure after part of the answer arrived raises :class:`EndpointError`
        from the iterator after those deltas; nothing is retried.
        """
        return self._chat(
            messages=[m.copy() for m in messages],
            tools=[dict(t) for t in tools] if tools else None,
            max_tokens=max_tokens if max_tokens is not None else self.max_answer_tokens,
            temperature=temperature if temperature is not None else self.sampling.temperature,
            stop=stop,
            tool_choice=tool_choice,
        )

    async def complete_json(
        self,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        """An answer constrained by ``schema`` on the server, parsed and checked.

        *stop_when* is not used: the server generates the whole answer (a
        request does not stream), and the summarizer tidies what comes back.

        A server that was away, timed out or failed (5xx) is tried again after
        each of :attr:`retry_delays`; a refusal (4xx) or a bad answer is not.
        Raises :class:`ModelOutputError` when the answer is empty, cut off or
        not JSON.
        """
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        copied = [m.copy() for m in messages]
        for delay in (*self.retry_delays, None):
            try:
                return await self._json_once(copied, schema, max_tokens)
            except EndpointError as exc:
                if delay is None or not exc.transient:
                    raise
                log.warning("%s: %s; trying again in %g s", self.name, exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Refuse new requests and end running streams (their sockets close)."""
        self._closed = True
        for loop, halt in list(self._halts):
            with contextlib.suppress(RuntimeError):  # that loop is already closed
                loop.call_soon_threadsafe(halt.set)

    # -- chat -----------------------------------------------------------------------------------
    async def _chat(
        self,
        *,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]] | None,
        max_tokens: int,
        temperature: float,
        stop: asyncio.Event | None,
        tool_choice: str | dict[str, Any] | None,
    ) -> AsyncGenerator[ChatEvent, None]:
        started = time.perf_counter()
        self._check_open()
        kept, dropped = self._fit(messages, tools, max_tokens)
        bodies = self._chat_bodies(kept, tools, max_tokens, temperature, tool_choice)
        answer = Answer(tools, started, max_tokens)
        async with self._turn() as halt:
            client = self._client()
            response = None
            if stop is None or not stop.is_set():
                if not self._checked:
                    await self._load()
                response = await until_set(
                    self._send_first(client, bodies, on_fallback=self._drop_extras), (halt, stop)
                )
            if response is None:
                answer.end = StreamEnd.STOPPED
            else:
                async with contextlib.aclosing(
                    payloads(
                        response,
                        answer,
                        self.base_url,
                        (halt, stop),
                        self._timeout,
                        deadline_s=self.answer_deadline,
                    )
                ) as stream:
                    async for chunk in stream:
                        for event in answer.feed(chunk):
                            yield event
        if answer.end is StreamEnd.STOPPED:
            yield answer.finished("cancelled", kept, tools, dropped)
            return
        for event in answer.finish_events():
            yield event
        yield answer.finished(None, kept, tools, dropped)

    def _chat_bodies(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]] | None,
        max_tokens: int,
        temperature: float,
        tool_choice: str | dict[str, Any] | None,
    ) -> list[dict[str, Any]]:
        """The request, and (while not known to be needed) the same without llama.cpp's fields."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(messages),
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        plain = body | sampling_fields(self.sampling, temperature, extras=False) | self.extra_body
        if not self._sampling_extras:
            return [plain]
        rich = body | sampling_fields(self.sampling, temperature, extras=True) | self.extra_body
        return [rich, plain]

    def _drop_extras(self, index: int) -> None:
        if index > 0:
            log.info(
                "%s: the server refuses llama.cpp's sampling fields; sending the standard ones",
                self.name,
            )
            self._sampling_extras = False

    def _fit(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None, max_tokens: int
    ) -> tuple[list[ChatMessage], int]:
        """The messages that fit the context with room for the answer, and how many were dropped.

        Counted with a deliberately high estimate (see :func:`estimate_prompt`):
        asking the server to count would add a round trip before every answer.
        """
        budget = self.context_size - min(max_tokens, self.context_size // 2)
        fit = fit_messages(messages, budget, lambda batch: estimate_prompt(batch, tools))
        if fit.dropped or fit.shortened:
            log.info(
                "%s: prompt trimmed to about %d tokens: %d oldest messages dropped, %d shortened",
                self.name,
                budget,
                fit.dropped,
                fit.shortened,
            )
        return fit.messages, fit.dropped

    # -- JSON -----------------------------------------------------------------------------------
    async def _json_once(
        self, messages: list[ChatMessage], schema: dict[str, Any], max_tokens: int
    ) -> JsonCompletion:
        self._check_open()
        formats = [self._json_format] if self._json_format else ["json_schema", "json_object"]
        base = {
            "model": self.model,
            "messages": wire_messages(messages),
            "max_tokens": max_tokens,
            "temperature": JSON_TEMPERATURE,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        bodies = [
            base | {"response_format": _response_format(kind, schema)} | self.extra_body
            for kind in formats
        ]
        answer = Answer(None, time.perf_counter(), max_tokens)
        async with self._turn() as halt:
            client = self._client()
            if not self._checked:
                await self._load()
            response = await self._send_first(
                client,
                bodies,
                on_fallback=lambda i: self._remember_format(formats[i]),
                refused=lambda exc: _refused(exc, "response_format"),
            )
            async with contextlib.aclosing(
                payloads(
                    response,
                    answer,
                    self.base_url,
                    (halt, None),
                    self._timeout,
                    deadline_s=self.answer_deadline,
                )
            ) as stream:
                async for chunk in stream:
                    answer.feed(chunk)
        if answer.end is StreamEnd.STOPPED:
            raise ModelClosedError(f"chat model {self.name!r} was closed")
        finished = answer.finished(None, messages, None, 0)
        return _parsed(self.name, answer.text, finished, max_tokens)

    def _remember_format(self, kind: str) -> None:
        if self._json_format != kind:
            log.info("%s: the server takes JSON schemas as %s", self.name, kind)
        self._json_format = kind

    # -- HTTP -----------------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        """This event loop's client (building one costs about a millisecond).

        Without keep-alive, no connection outlives its request, so a client
        holds nothing open between requests and needs no closing.
        """
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(
                timeout=self._timeout,
                headers=self._headers,
                verify=_ssl_context(),
                trust_env=False,
                limits=httpx.Limits(max_keepalive_connections=0),
            )
            self._clients[loop] = client
        return client

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[asyncio.Event]:
        """One request at a time per model (per event loop); yields the stream's halt event."""
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        halt = asyncio.Event()
        entry = (loop, halt)
        async with lock:
            self._check_open()
            self._halts.add(entry)
            try:
                yield halt
            finally:
                self._halts.discard(entry)

    async def _send_first(
        self,
        client: httpx.AsyncClient,
        bodies: list[dict[str, Any]],
        *,
        on_fallback: Callable[[int], None],
        refused: Callable[[EndpointError], bool] = _refused,
    ) -> httpx.Response:
        """POST the first body the server accepts; a refusal of its shape moves on to the next."""
        for index, body in enumerate(bodies):
            try:
                response = await self._post(client, body)
            except EndpointError as exc:
                if not refused(exc) or index == len(bodies) - 1:
                    raise
                continue
            on_fallback(index)
            return response
        raise AssertionError("unreachable")

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        request = client.build_request("POST", f"{self.base_url}/chat/completions", json=body)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise transport_error(exc, self.base_url, self._timeout) from exc
        if response.status_code < 300:
            return response
        try:  # what the error page says, as far as it is a page
            raw = await asyncio.wait_for(_capped(response, self.base_url), SIDE_DEADLINE_S)
        except (httpx.TransportError, EndpointError, TimeoutError):
            raw = b""
        finally:
            await response.aclose()
        raise http_error(response.status_code, _json_or_text(raw), self.base_url, self.model)

    async def _side_request(
        self, client: httpx.AsyncClient, method: str, url: str, body: Any = None
    ) -> tuple[int, bytes]:
        """A request beside the answer, read whole: its status and at most
        :data:`SIDE_BODY_BYTES` of body, within :data:`SIDE_DEADLINE_S`."""

        async def read() -> tuple[int, bytes]:
            request = client.build_request(method, url, json=body)
            response = await client.send(request, stream=True)
            try:
                return response.status_code, await _capped(response, self.base_url)
            finally:
                await response.aclose()

        try:
            return await asyncio.wait_for(read(), SIDE_DEADLINE_S)
        except TimeoutError:
            raise EndpointError(
                f"The server at {self.base_url} was still sending {url} after "
                f"{SIDE_DEADLINE_S:g} s — it is too slow or stuck; reading stopped there. "
                "Is it an OpenAI-compatible server?",
                "deadline",
            ) from None
        except httpx.TransportError as exc:
            raise transport_error(exc, self.base_url, self._timeout) from exc

    async def _get_json(self, client: httpx.AsyncClient, url: str) -> dict[str, Any]:
        status, raw = await self._side_request(client, "GET", url)
        body = _json_or_text(raw)
        if status >= 300:
            raise http_error(status, body, self.base_url, self.model)
        if not isinstance(body, dict):
            raise EndpointError(
                f"The server at {self.base_url} answered {url} with something other than JSON — "
                "is it an OpenAI-compatible server?",
                "malformed",
            )
        return body

    async def _server_context(self, client: httpx.AsyncClient) -> int | None:
        """llama.cpp's context size from ``/props``; None where the server does not say."""
        with contextlib.suppress(EndpointError):
            props = await self._get_json(client, f"{self.root_url}/props")
            settings = props.get("default_generation_settings")
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            if isinstance(n_ctx, int) and n_ctx > 0:
                return n_ctx
        return None

    async def _find_tokenizer(self, client: httpx.AsyncClient) -> tuple[str, int] | None:
        """The first tokenizer route the server has, with the tokens it adds to any text."""
        for route in _TOKENIZE_ROUTES:
            try:
                overhead = len(await self._tokenize(client, route, ""))
            except EndpointError as exc:
                if exc.kind in ("http", "unloaded", "malformed"):
                    continue
                raise
            return route, overhead
        log.info("%s: the server has no tokenizer; token counts are estimates", self.name)
        return None

    async def _tokenize(self, client: httpx.AsyncClient, route: str, text: str) -> list[Any]:
        body = {"input": text} if route == "/extras/tokenize" else {"content": text}
        status, raw = await self._side_request(client, "POST", f"{self.root_url}{route}", body)
        parsed = _json_or_text(raw)
        if status >= 300:
            raise http_error(status, parsed, self.base_url, self.model)
        tokens = parsed.get("tokens") if isinstance(parsed, dict) else None
        if not isinstance(tokens, list):
            raise EndpointError(f"{self.root_url}{route} gave no token list", "malformed")
        return tokens

    def _check_open(self) -> None:
        if self._closed:
            raise ModelClosedError(f"chat model {self.name!r} is closed")

    def _same_model(self, served: str) -> bool:
        """Ollama lists ``name:latest`` for a model asked for as ``name``."""
        return served in (self.model, f"{self.model}:latest")


def _response_format(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's (and llama.cpp's, Ollama's) form, or llama-cpp-python's ``json_object``."""
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return {"type": "json_object", "schema": schema}


def _parsed(name: str, text: str, finished: ChatFinished, max_tokens: int) -> JsonCompletion:
    """The JSON answer parsed, or :class:`ModelOutputError` saying why it is unusable."""
    text = text.strip()
    if not text:
        raise ModelOutputError(f"{name}: the model gave an empty answer")
    try:
        value = json.loads(text, strict=False)
    except ValueError as exc:
        if finished.finish_reason == "length":
            raise ModelOutputError(
                f"{name}: the JSON answer was cut off at {max_tokens} tokens"
            ) from exc
        raise ModelOutputError(f"{name}: the answer is not valid JSON ({exc})") from exc
    return JsonCompletion(value, text, finished.prompt_tokens, finished.completion_tokens)
