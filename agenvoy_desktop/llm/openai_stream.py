"""Reading one streamed chat answer: server-sent events in, chat events out.

:func:`payloads` reads the ``data:`` lines of a response and stops the
moment a stop or halt event is set (the socket closes with the response, so
the server stops generating); :class:`Answer` turns the chunks into the
events :class:`~agenvoy_desktop.core.model_api.ChatModel` promises, with the
same tool-call parsing as the in-process engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
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
    estimate_prompt,
    parse_chunk,
    transport_error,
)
from agenvoy_desktop.llm.tool_calls import ToolCallStream, tool_names

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


class StreamEnd(enum.Enum):
    DONE = "done"
    """The server said the answer is complete."""
    STOPPED = "stopped"
    """We stopped reading (the user's stop, or the model was closed)."""


class Answer:
    """One answer as it streams in: events for the caller, and its accounting."""

    def __init__(self, tools: Sequence[dict[str, Any]] | None, started: float) -> None:
        self.started = started
        self.end: StreamEnd | None = None
        self.finish_reason: str | None = None
        self.first_token: float | None = None
        self._parser = ToolCallStream(tool_names(tools)) if tools else None
        self._calls = ToolCallAssembler()
        self._parts: list[str] = []
        self._pieces = 0
        self._usage: dict[str, Any] | None = None
        self._tool_calls = 0

    @property
    def text(self) -> str:
        """Everything the server sent as content."""
        return "".join(self._parts)

    def feed(self, chunk: Chunk) -> list[ChatEvent]:
        """The events one chunk completes (text waits while it may open a tool call)."""
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self.finish_reason = chunk.finish_reason
        if chunk.tool_parts:
            self._calls.feed(chunk.tool_parts)
            self._count_piece()
        if not chunk.text:
            return []
        self._count_piece()
        self._parts.append(chunk.text)
        if self._parser is None:
            return [TextDelta(chunk.text)]
        events: list[ChatEvent] = list(self._parser.feed(chunk.text))
        return events

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
) -> AsyncGenerator[Chunk, None]:
    """The chunks of a streamed answer until ``[DONE]``, or until any of ``events`` is set.

    Sets ``answer.end``; a stream that ends without saying it is complete
    (the server died, a proxy cut it) raises :class:`EndpointError`.
    The response is closed on the way out, whatever the reason.
    """
    lines = response.aiter_lines()
    watched = [event for event in events if event is not None]
    waiters = [asyncio.ensure_future(event.wait()) for event in watched]
    step: asyncio.Future[str] | None = None
    try:
        while not any(event.is_set() for event in watched):
            step = asyncio.ensure_future(anext(lines))
            done, _ = await asyncio.wait([step, *waiters], return_when=asyncio.FIRST_COMPLETED)
            if step not in done:
                break
            try:
                line = step.result()
            except StopAsyncIteration:
                _at_end_of_stream(answer, base_url)
                return
            except httpx.TransportError as exc:
                raise transport_error(exc, base_url, timeouts) from exc
            step = None
            chunk = _line(line, base_url)
            if chunk is StreamEnd.DONE:
                answer.end = StreamEnd.DONE
                return
            if isinstance(chunk, Chunk):
                yield chunk
        answer.end = StreamEnd.STOPPED
    finally:
        for pending in (*waiters, step):
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                    await pending
        await response.aclose()


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
