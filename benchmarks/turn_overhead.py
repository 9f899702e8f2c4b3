"""Overhead of the agent's turn loop around the model (everything except generation).

Setup: one session whose history.json is filled with LoCoMo turns to just
below the 5 MiB compaction limit (embedded with the real MiniLM model), and
10,000 error-memory records (with MiniLM vectors) spread over 12 tools.  The
chat model is an instant stand-in (it streams a short fixed answer and takes
no time), so what is timed is the loop itself: persisting the user message
and the answer to history.json + archive + vectors (real embeddings), reading
the window and the summary, building the prompt and the tool specs, running
a tool, looking up the error memory, and persisting the tool traffic.

Two kinds of turn are timed: a plain answer, and a turn whose tool call fails
(a file outside the allowed folders) so the error memory is searched (the
error text is embedded) and a hint is stored and shown to the next round.
Overhead = turn wall time - time spent inside the model's stream.  The
error text is embedded in its lookup form (core/error_types.lookup_query:
no tool prefix, no paths, no repeated exception class).  The
interpreter runs with the window's (and the ``chat`` command's) 1 ms GIL
switch interval (agenvoy_desktop/interpreter.py).  The
turn's messages are embedded after the answer (while the user reads it),
and the databases are checkpointed then; that time is reported separately
and kept out of the overhead.  Proactive recall (a hybrid search of the
user's message over every session before the first round) is a search, not
loop overhead: its time is reported on its own line.

Acceptance: loop overhead p95 <= 20 ms.

    .venv/bin/python benchmarks/turn_overhead.py [--quick]
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import benchlib
from benchlib import Stopwatch, fmt_stats, stats_ms, verdict

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.turn import TurnResult
from agenvoy_desktop.core.history import encode_history
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.model_api import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    JsonCompletion,
    StopWhen,
    TextDelta,
    ToolCallRequest,
)
from agenvoy_desktop.core.store import DEFAULT_MAX_HISTORY_BYTES
from agenvoy_desktop.interpreter import responsive_threads
from agenvoy_desktop.settings import Settings

ACCEPT_P95_MS = 20.0
SESSION = "turn-bench"
TOOLS = [f"tool_{i}" for i in range(11)] + ["read_text_file"]
SYMPTOMS = [
    "permission denied: {p} is outside the allowed folders",
    "not found: {p}",
    "{p} timed out after 10 s",
    "invalid arguments: path must be a string, got {p}",
    "no results for {p}",
]


class InstantModel:
    """Streams a fixed answer at once; calls a failing tool when asked to."""

    name = "instant"
    context_size = 8192

    def __init__(self) -> None:
        self.fail_next = False
        self.calls = itertools.count()

    async def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    async def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        stop_when: StopWhen | None = None,
    ) -> JsonCompletion:
        raise NotImplementedError

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: asyncio.Event | None = None,
        avoid_openings: Sequence[str] = (),
    ) -> AsyncIterator[ChatEvent]:
        if self.fail_next and tools:
            self.fail_next = False
            path = f"/etc/secret-{next(self.calls)}.txt"
            yield ToolCallRequest("call_1", "read_text_file", {"path": path}, "{}")
            yield ChatFinished("tool_calls", 100, 10)
            return
        for word in ("Here ", "is ", "the ", "answer."):
            yield TextDelta(word)
        yield ChatFinished("stop", 100, 4)


def fill_history(services: AppServices, target: int) -> dict[str, Any]:
    """Import LoCoMo turns until history.json is just below *target* bytes."""
    convs = benchlib.load_locomo()
    turns = itertools.cycle([(c, t) for c in convs for t in c.turns])
    t0 = 1_700_000_000 * 10**9
    messages: list[Message] = []
    size = 4
    for n, (conv, turn) in enumerate(turns):
        role = "user" if turn.speaker == conv.speaker_a else "assistant"
        msg = Message(new_message_id(), role, f"{turn.speaker}: {turn.text}", t0 + n * 10**9)
        grow = len(encode_history([msg])) - 2
        if size + grow > target:
            break
        messages.append(msg)
        size += grow
    store = services.store
    with Stopwatch() as sw:
        services.storage.run_sync(store.create_session, "turn benchmark", SESSION)
        services.storage.run_sync(store.import_messages, messages, SESSION)
    return {
        "messages": len(messages),
        "history_bytes": services.storage.run_sync(lambda: store.history(SESSION).size_bytes),
        "import_s": round(sw.seconds, 1),
    }


def fill_errors(services: AppServices, n: int) -> dict[str, Any]:
    errors = services.errors
    with Stopwatch() as sw:
        for i in range(n):
            tool = TOOLS[i % len(TOOLS)]
            symptom = SYMPTOMS[i % len(SYMPTOMS)].format(p=f"/data/item-{i}")
            services.storage.run_sync(
                errors.add,
                tool,
                symptom,
                cause=f"cause {i}",
                action=f"used another path for item {i}",
                outcome=("resolved", "failed", "abandoned")[i % 3],
            )
    return {"records": services.storage.run_sync(errors.count), "fill_s": round(sw.seconds, 1)}


DEFERRED: list[float] = []
RECALL: list[float] = []
"""Time each timed turn spent in proactive recall (reported apart from the loop overhead)."""
"""Time the storage thread spent after each timed turn (embedding, checkpoints)."""


async def timed_turns(
    services: AppServices, model: InstantModel, n: int, *, fail: bool
) -> list[float]:
    agent = services.agent
    assert agent is not None
    overheads: list[float] = []
    deferred: list[float] = []
    recalls: list[float] = []
    for i in range(n):
        model.fail_next = fail
        result: TurnResult = await agent.run_turn(SESSION, f"benchmark question {i}")
        if fail:
            assert result.tool_calls == 1, result
        overheads.append(result.total_s - result.model_s - result.recall_s)
        recalls.append(result.recall_s)
        began = time.perf_counter()
        await agent.idle()  # deferred embedding: runs while the user reads the answer
        deferred.append(time.perf_counter() - began)
    DEFERRED[:] = deferred
    RECALL[:] = recalls
    return overheads


def main() -> None:
    args = benchlib.parser(__doc__.splitlines()[0]).parse_args()
    responsive_threads()  # as the window and the `chat` command run
    n_turns = 30 if args.quick else 200
    n_errors = 500 if args.quick else 10_000
    history_target = (512 * 1024) if args.quick else DEFAULT_MAX_HISTORY_BYTES - 256 * 1024
    model_path = benchlib.embedding_model()
    with benchlib.temp_profile("turn") as paths:
        benchlib.install_model(paths, model_path)
        embedder = benchlib.open_embedder(model_path)
        model = InstantModel()
        settings = Settings()
        settings.allowed_folders = [str(paths.config_dir)]
        services = AppServices.open(paths, settings=settings, embedder=embedder, chat_model=model)
        assert services.agent is not None
        services.agent.after_turn = None  # the summary runs in the background, not in the turn
        try:
            filled = fill_history(services, history_target)
            print(f"history: {filled}")
            errs = fill_errors(services, n_errors)
            print(f"error memory: {errs}")

            async def run() -> tuple[list[float], list[float]]:
                await timed_turns(services, model, 10, fail=False)  # warm-up
                await timed_turns(services, model, 5, fail=True)
                plain = await timed_turns(services, model, n_turns, fail=False)
                deferred["plain"] = stats_ms(DEFERRED)
                recall["plain"] = stats_ms(RECALL)
                failing = await timed_turns(services, model, n_turns // 2, fail=True)
                deferred["failing"] = stats_ms(DEFERRED)
                recall["failing"] = stats_ms(RECALL)
                return plain, failing

            deferred: dict[str, Any] = {}
            recall: dict[str, Any] = {}
            started = time.perf_counter()
            plain, failing = asyncio.run(run())
            wall = time.perf_counter() - started
            size_after = services.storage.run_sync(
                lambda: services.store.history(SESSION).size_bytes
            )
        finally:
            services.close()
    plain_stats, failing_stats = stats_ms(plain), stats_ms(failing)
    print(f"plain turn overhead:        {fmt_stats(plain_stats)}")
    print(f"failing-tool turn overhead: {fmt_stats(failing_stats)}")
    for kind, item in deferred.items():
        print(f"work after the answer, embedding + checkpoints ({kind}): {fmt_stats(item)}")
    for kind, item in recall.items():
        print(f"proactive recall before the first round ({kind}): {fmt_stats(item)}")
    worst = max(plain_stats["p95_ms"], failing_stats["p95_ms"])
    ok = worst <= ACCEPT_P95_MS
    print(f"acceptance: overhead p95 {worst:.2f} ms <= {ACCEPT_P95_MS} ms: {verdict(ok)}")
    benchlib.write_result(
        "turn_overhead",
        {
            "history": filled,
            "history_bytes_after": size_after,
            "error_memory": errs,
            "turns_wall_s": round(wall, 1),
            "plain_turn_overhead": plain_stats,
            "failing_tool_turn_overhead": failing_stats,
            "embedding_after_answer": deferred,
            "proactive_recall": recall,
            "acceptance": {
                "criterion": f"turn overhead p95 <= {ACCEPT_P95_MS} ms (5 MiB history, "
                f"{n_errors} error records)",
                "worst_p95_ms": worst,
                "pass": ok,
            },
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
