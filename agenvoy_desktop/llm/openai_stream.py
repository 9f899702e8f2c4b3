"""Reading one streamed chat answer: server-sent events in, chat events out.

:func:`payloads` reads the ``data:`` lines of a response and stops the
moment a stop or halt event is set (the socket closes with the response, so
the server stops generating); :class:`Answer` turns the chunks into the
events :class:`~agenvoy_desktop.core.model_api.ChatModel` promises, with the
same tool-call parsing as the in-process engine.

A server is not trusted to behave: a finished ``chat.completion`` body (the
server ignored ``stream``) is taken as one chunk; an HTML page or other
text is named for what it is; nothing is read past a byte cap, the answer
limit or an overall deadline; and an event cut off by a dropped connection
is reported as the drop it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncGenerator, Coroutine, Sequence
from typing import Any

import httpx

from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    FinishReason,
    TextDelta,
)
from agenvoy_desktop.llm.openai_wire import (
    Chunk,
    EndpointError,
    ToolCallAssembler,
    dropped_mid_chunk,
    empty_body,
    estimate_prompt,
    html_page,
    malformed,
    parse_chunk,
    parse_completion,
    past_answer_limit,
    past_deadline,
    too_big,
    transport_error,
)
from agenvoy_desktop.llm.tool_calls import ToolCallStream, tool_names

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}
MAX_BODY_BYTES = 8 * 2**20
"""The least a response may send before reading stops (more with a high answer limit).

A default answer (1,024 tokens) streams in well under 1 MB of events; 8 MB
leaves room for verbose servers (log-probabilities, long ids) while a server
that sends a 50 MB page or answer is stopped before it costs memory.
"""
BYTES_PER_TOKEN_CAP = 4096
"""Event bytes allowed per answer token when the answer limit is high (see above)."""
CHARS_PER_TOKEN_CEILING = 32
"""Characters an answer may average per token before it counts as past the limit.

Text averages about 4 characters a token and code fewer; no vocabulary comes
near 32 over a whole answer, so a server that does is ignoring ``max_tokens``.
"""
SLACK_TOKENS = 16
"""Pieces beyond ``max_tokens`` forgiven: tool-call openings and role chunks carry no token."""
_EVENT_FIELDS = ("data:", "event:", "id:", "retry:", ":", "error:")
"""How a line of a server-sent event stream starts (``error:`` is llama.cpp's)."""


class StreamEnd(enum.Enum):
    DONE = "done"
    """The server said the answer is complete."""
    STOPPED = "stopped"
    """We stopped reading (the user's stop, or the model was closed)."""


class Answer:
    """One answer as it streams in: events for the caller, and its accounting."""

    def __init__(
        self,
        tools: Sequence[dict[str, Any]] | None,
        started: float,
        max_tokens: int | None = None,
    ) -> None:
        self.started = started
        self.max_tokens = max_tokens
        """The answer limit; a server that sends more is cut off (:attr:`over_limit`)."""
        self.over_limit = False
        self.end: StreamEnd | None = None
        self.finish_reason: str | None = None
        self.first_token: float | None = None
        self._parser = ToolCallStream(tool_names(tools)) if tools else None
        self._calls = ToolCallAssembler()
        self._parts: list[str] = []
        self._pieces = 0
        self._usage: dict[str, Any] | None = None
        self._tool_calls = 0
        self._chars = 0

    @property
    def text(self) -> str:
        """Everything the server sent as content (up to the answer limit)."""
        return "".join(self._parts)

    @property
    def byte_cap(self) -> int:
        """Bytes the response may send for this answer (:data:`MAX_BODY_BYTES` at least)."""
        if self.max_tokens is None:
            return MAX_BODY_BYTES
        return max(MAX_BODY_BYTES, self.max_tokens * BYTES_PER_TOKEN_CAP)

    def feed(self, chunk: Chunk) -> list[ChatEvent]:
        """The events one chunk completes (text waits while it may open a tool call).

        Text past the answer limit is cut and :attr:`over_limit` set; nothing
        more is taken after that.
        """
        if self.over_limit:
            return []
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self.finish_reason = chunk.finish_reason
        text = self._within_limit(chunk)
        if chunk.tool_parts and not self.over_limit:
            self._calls.feed(chunk.tool_parts)
            self._count_piece()
        if not text:
            return []
        self._count_piece()
        self._parts.append(text)
        if self._parser is None:
            return [TextDelta(text)]
        events: list[ChatEvent] = list(self._parser.feed(text))
        return events

    def _within_limit(self, chunk: Chunk) -> str:
        """The chunk's text that fits the answer limit; sets :attr:`over_limit` past it."""
        size = len(chunk.text) + sum(len(str(part.get("function"))) for part in chunk.tool_parts)
        if self.max_tokens is None or not size:  # a finish or usage chunk carries no token
            return chunk.text
        allowed = self.max_tokens + SLACK_TOKENS
        room = allowed * CHARS_PER_TOKEN_CEILING - self._chars
        self._chars += size
        if size > room or self._pieces >= allowed:
            self.over_limit = True
            return chunk.text[: max(room, 0)] if self._pieces < allowed else ""
        return chunk.text

    def finish_events(self) -> list[ChatEvent]:
        """Held-back text and tool calls, once the answer is complete."""
        events: list[ChatEvent] = []
        if self._parser is not None:
            events.extend(self._parser.finish())
            self._tool_calls += self._parser.calls
        calls = self._calls.requests()
        self._tool_calls += len(calls)
        events.extend(calls)
        return events

    def finished(
        self,
        reason: FinishReason | None,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None,
        dropped: int,
    ) -> ChatFinished:
        """The closing event; counts are the server's, or estimates where it gave none."""
        if reason is None:
            reason = _FINISH_REASONS.get(self.finish_reason or "stop", "stop")
            if self._tool_calls:
                reason = "tool_calls"
        usage = self._usage or {}
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        return ChatFinished(
            finish_reason=reason,
            prompt_tokens=prompt if isinstance(prompt, int) else estimate_prompt(messages, tools),
            completion_tokens=completion if isinstance(completion, int) else self._pieces,
            trimmed_messages=dropped,
            first_token_s=None if self.first_token is None else self.first_token - self.started,
            duration_s=time.perf_counter() - self.started,
        )

    def _count_piece(self) -> None:
        """Servers send one chunk per token; without usage, chunks are the count."""
        self._pieces += 1
        if self.first_token is None:
            self.first_token = time.perf_counter()


async def payloads(
    response: httpx.Response,
    answer: Answer,
    base_url: str,
    events: Sequence[asyncio.Event | None],
    timeouts: httpx.Timeout,
    *,
    deadline_s: float | None = None,
) -> AsyncGenerator[Chunk, None]:
    """The chunks of an answer until ``[DONE]``, or until any of ``events`` is set.

    Sets ``answer.end``; a stream that ends without saying it is complete
    (the server died, a proxy cut it) raises :class:`EndpointError`, as do a
    body past ``answer.byte_cap``, an answer past its limit (after the chunk
    that crossed it, so its allowed part is shown) and an answer still
    coming ``deadline_s`` after ``answer.started``.  The response is closed
    on the way out, whatever the reason.
    """
    items = _items(response, base_url, answer.byte_cap)
    watched = [event for event in events if event is not None]
    waiters = [asyncio.ensure_future(event.wait()) for event in watched]
    step: asyncio.Future[Chunk | StreamEnd | None] | None = None
    try:
        while not any(event.is_set() for event in watched):
            step = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait(
                [step, *waiters], timeout=_left(answer, deadline_s), return_when=FIRST_COMPLETED
            )
            if not done:  # only the deadline ends the wait with nothing done
                raise past_deadline(base_url, deadline_s or 0.0)
            if step not in done:
                break
            try:
                item = step.result()
            except StopAsyncIteration:
                _at_end_of_stream(answer, base_url)
                return
            except httpx.TransportError as exc:
                raise transport_error(exc, base_url, timeouts) from exc
            step = None
            if item is StreamEnd.DONE:
                answer.end = StreamEnd.DONE
                return
            if isinstance(item, Chunk):
                yield item
                if answer.over_limit and answer.max_tokens is not None:
                    raise past_answer_limit(base_url, answer.max_tokens)
        answer.end = StreamEnd.STOPPED
    finally:
        for pending in (*waiters, step):
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                    await pending
        with contextlib.suppress(httpx.HTTPError, EndpointError):
            await items.aclose()
        await response.aclose()


def _left(answer: Answer, deadline_s: float | None) -> float | None:
    """Seconds until the answer's deadline (None: no deadline)."""
    if deadline_s is None:
        return None
    return max(0.0, answer.started + deadline_s - time.perf_counter())


async def _items(
    response: httpx.Response, base_url: str, cap: int
) -> AsyncGenerator[Chunk | StreamEnd | None, None]:
    """What the body holds: an event stream's items, or a finished answer as one chunk.

    The first line that is not blank tells which: an event field, JSON (a
    ``chat.completion``: the server ignored ``stream``), or anything else,
    named for what it is (an HTML page is usually a wrong address; a body
    with nothing in it is no answer, not one cut short).
    """
    async with contextlib.aclosing(_lines(response, base_url, cap)) as lines:
        seen = False
        async for line, ended in lines:
            if not line.strip():
                continue
            seen = True
            head = line.lstrip("\ufeff \t")
            if head.startswith(_EVENT_FIELDS):
                yield _event(line, ended, base_url)
                break
            if head.startswith("{"):
                rest = [text async for text, _ in lines]
                yield parse_completion("\n".join([line, *rest]), base_url)
                yield StreamEnd.DONE
                return
            if head.startswith("<") or "html" in response.headers.get("content-type", ""):
                raise html_page(base_url)
            raise malformed(base_url, line)
        if not seen:
            raise empty_body(base_url)
        async for line, ended in lines:
            yield _event(line, ended, base_url)


async def _lines(
    response: httpx.Response, base_url: str, cap: int
) -> AsyncGenerator[tuple[str, bool], None]:
    """The body's lines, each with whether its line break arrived; at most ``cap`` bytes.

    A last line without its break is one the connection cut short.
    """
    buffer = bytearray()
    total = 0
    async for piece in response.aiter_bytes():
        total += len(piece)
        if total > cap:
            raise too_big(base_url, cap)
        buffer += piece
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            yield bytes(buffer[start:end]).rstrip(b"\r").decode("utf-8", "replace"), True
            start = end + 1
        del buffer[:start]
    if buffer:
        yield bytes(buffer).decode("utf-8", "replace"), False


def _event(line: str, ended: bool, base_url: str) -> Chunk | StreamEnd | None:
    """One event-stream line; a chunk cut off by the connection is the drop, not bad JSON."""
    try:
        return _line(line, base_url)
    except EndpointError as exc:
        if not ended and exc.kind == "malformed":
            raise dropped_mid_chunk(base_url) from None
        raise


async def until_set(
    work: Coroutine[Any, Any, httpx.Response], events: Sequence[asyncio.Event | None]
) -> httpx.Response | None:
    """``work``'s response, or None (and ``work`` cancelled) if any of ``events`` is set first.

    A server may send nothing, not even headers, while it evaluates a long
    prompt: a stop must not wait for that.
    """
    watched = [event for event in events if event is not None]
    task = asyncio.ensure_future(work)
    waiters = [asyncio.ensure_future(event.wait()) for event in watched]
    try:
        await asyncio.wait([task, *waiters], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        # The caller was cancelled just as the response arrived: nobody will read it.
        if task.done() and not task.cancelled() and task.exception() is None:
            await task.result().aclose()
        raise
    finally:
        for waiter in waiters:
            waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return task.result() if not task.cancelled() else None


def _at_end_of_stream(answer: Answer, base_url: str) -> None:
    """End of the body without ``[DONE]``: fine after a finish reason, else a broken stream."""
    if answer.finish_reason is None:
        raise EndpointError(
            f"The server at {base_url} stopped sending mid-answer — check that it is still "
            "running, then send again.",
            "stream",
        )
    answer.end = StreamEnd.DONE


def _line(line: str, base_url: str) -> Chunk | StreamEnd | None:
    """One line of the event stream: a chunk, the end, or nothing (blank, comment, event name)."""
    if line.startswith("data:"):
        data = line[5:].strip()
        return StreamEnd.DONE if data == "[DONE]" else parse_chunk(data, base_url)
    if line.startswith("error:"):  # llama.cpp's server reports a failure this way
        return parse_chunk('{"error": ' + line[6:].strip() + "}", base_url)
    return None
