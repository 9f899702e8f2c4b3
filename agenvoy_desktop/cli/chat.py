"""``agenvoy-desktop chat``: one assistant turn, headless.

The turn runs in full (tools included): the answer streams to stdout, tool
calls, results and error-memory hints go to stderr, so
``agenvoy-desktop chat "…" > answer.txt`` keeps only the answer.  Ctrl+C
stops the answer; what was said so far is kept, marked interrupted.  SIGTERM
(a logout, a shutdown, ``kill``) takes the same path and exits with status
143; so does SIGHUP (the terminal window closed), with status 129, unless
the command was started to ignore it (``nohup``).  A new session is named
after its first message even when the answer failed or was stopped, as the
window names it.  Everything printed is shown with control characters escaped
(:mod:`~agenvoy_desktop.cli.safe_text`): a model can be led to write escapes.  The
command returns as soon as the answer is stored and embedded: a summary pass
the turn may have started is stopped, not awaited (the next start, or the
window's idle timer, folds those messages; nothing is summarised twice).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.cli.common import AddCommand, CliError, open_services
from agenvoy_desktop.cli.safe_text import json_shown, shown, shown_line
from agenvoy_desktop.interpreter import responsive_threads
from agenvoy_desktop.operations.sessions import auto_title, create_session

if TYPE_CHECKING:
    from agenvoy_desktop.agent.services import AppServices
    from agenvoy_desktop.agent.turn import TurnEvent


def register(add: AddCommand) -> None:
    """Add ``chat`` through build_parser's ``add`` helper."""
    chat = add("chat", cmd_chat, "run one assistant turn; the answer streams to stdout")
    chat.add_argument("message")
    chat.add_argument("--session", help="session id (created if new; default: a new session)")


def _print_event(event: TurnEvent) -> None:
    from agenvoy_desktop.agent.turn import (
        AnswerDelta,
        AnswerRetracted,
        ToolCallFinished,
        ToolCallStarted,
    )

    if isinstance(event, AnswerDelta):
        sys.stdout.write(shown(event.text))
        sys.stdout.flush()
    elif isinstance(event, AnswerRetracted):
        # stdout cannot take back what it printed: the replacement follows on its own line
        problem = shown_line(event.problem)
        print(f"\n[checked against your memory ({problem}); corrected answer:]", flush=True)
    elif isinstance(event, ToolCallStarted):
        args = json_shown(json.dumps(event.arguments, ensure_ascii=False))
        print(f"\n→ {shown_line(event.name)}({args})", file=sys.stderr, flush=True)
    elif isinstance(event, ToolCallFinished):
        outcome = event.outcome
        status = "error" if outcome.is_error else "empty" if outcome.empty else "ok"
        first = outcome.content.strip().splitlines()[0] if outcome.content.strip() else ""
        said = shown_line(f"← {outcome.name} [{status}] {first[:200]}")
        print(said, file=sys.stderr, flush=True)
        if event.hint:
            print(f"  hint from error memory:\n{_indent(shown(event.hint))}", file=sys.stderr)


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def cmd_chat(args: argparse.Namespace) -> int:
    from agenvoy_desktop.core.store import check_session_id

    if args.session is not None:
        check_session_id(args.session)  # before minutes of model loading
    responsive_threads()  # as the window: the turn hands work between threads
    with open_services(args) as services:
        return asyncio.run(_until_terminated(_chat(services, args.session, args.message)))


TERMINATED_STATUS = 128 + signal.SIGTERM
"""143: the status of a program ended by SIGTERM, as a shell reports it."""
ENDING_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""What ends ``chat`` as Ctrl+C does: SIGTERM (a shutdown, ``kill``) and, where there is
one, SIGHUP (the terminal closed, a logout); the status is 128 plus its number."""
_SAID = {"SIGTERM": "terminated", "SIGHUP": "the terminal hung up"}


async def _until_terminated(work: Coroutine[Any, Any, int]) -> int:
    """Run *work*; SIGTERM or SIGHUP cancels it as Ctrl+C does, so the answer so far is kept.

    Cancelling the running turn is what ``asyncio.run`` does on Ctrl+C: the
    turn stores its partial answer, marked interrupted, before it ends.  A
    second signal while that happens is ignored (it would cut the saving).
    """
    main = asyncio.current_task()
    assert main is not None
    ended_by: list[signal.Signals] = []

    def stop(signum: signal.Signals) -> None:
        if not ended_by:
            ended_by.append(signum)
            main.cancel()

    restore = _on_ending_signals(asyncio.get_running_loop(), stop)
    try:
        return await work
    except asyncio.CancelledError:
        if not ended_by:
            raise  # Ctrl+C: asyncio.run turns it into KeyboardInterrupt
        main.uncancel()
        said = _SAID.get(ended_by[0].name, ended_by[0].name)
        with contextlib.suppress(OSError):  # a hung-up terminal takes no more text
            print(f"agenvoy-desktop: {said}; the answer so far is kept", file=sys.stderr)
        return 128 + int(ended_by[0])
    finally:
        restore()


def _on_ending_signals(
    loop: asyncio.AbstractEventLoop, stop: Callable[[signal.Signals], None]
) -> Callable[[], object]:
    """Call *stop* on the loop at :data:`ENDING_SIGNALS`; returns what puts the old handling back.

    A signal the command was started to ignore (``nohup`` ignores SIGHUP)
    stays ignored.  Only the main thread can take a signal (a test may run
    the command in another; it then keeps the default).  Windows' loop has
    no signal handlers: there ``signal.signal`` hands it over.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    undo: list[Callable[[], object]] = []
    for signum in ENDING_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue
        try:
            loop.add_signal_handler(signum, stop, signum)
            undo.append(functools.partial(loop.remove_signal_handler, signum))
            continue
        except NotImplementedError:
            pass

        def handler(_sig: int, _frame: object, signum: signal.Signals = signum) -> None:
            loop.call_soon_threadsafe(stop, signum)

        undo.append(functools.partial(signal.signal, signum, signal.signal(signum, handler)))
    return lambda: [step() for step in reversed(undo)]


async def _chat(services: AppServices, session: str | None, message: str) -> int:
    store, agent = services.store, services.agent
    if agent is None:
        raise CliError("no chat model")
    if not message.strip():
        raise CliError("empty message")
    sid = session
    if sid is None or not await services.storage.run(store.exists, sid):
        sid = (await services.storage.run(create_session, store, None, sid)).value
        print(f"session {sid}", file=sys.stderr)
    try:
        result = await agent.run_turn(sid, message, on_event=_print_event)
    finally:
        with contextlib.suppress(OSError):  # a hung-up terminal takes no more text
            sys.stdout.write("\n")  # the answer (so far) ends its line; a failure follows
        # As the window names a new session after any turn (answered, stopped or failed):
        # its question is kept, so the session is not left without a name.
        await asyncio.shield(services.storage.run(auto_title, store, sid))
    if result.interrupted:  # kept even when empty: the question shows as unanswered
        said = "answer interrupted" if result.answer.strip() else "stopped before its first word"
        print(f"({said})", file=sys.stderr)
    await agent.idle()  # the turn's messages are embedded after the answer (milliseconds)
    if services.summary_scheduler is not None:
        # A summary the turn triggered can take minutes on a small CPU; what it
        # folded so far is saved, the rest waits for the next run.
        await services.summary_scheduler.stop()
    return 0
