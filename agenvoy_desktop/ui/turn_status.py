"""The line under a pending answer that says what the turn is doing now.

A local model can sit silent for seconds (reading a long prompt, running a
tool); the line tells the user which, in words: "Looking through your
memory…", "Thinking…", "Reading notes.md…", "Writing…".  When the answer is
in, it turns into the answer's speed and time, with the details (prompt
tokens, model, tool calls, rounds) in its tooltip.

A phase that lasts (a small computer reading a long prompt takes 20 s)
counts its seconds — "Thinking… 12 s" — so a slow turn is seen to be
working, and its tooltip says what the model is doing meanwhile.  The
engine does not report how far it has read the prompt, so no percentage.

The phrases are plain functions of the turn's events, so they are tested
without a window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

from agenvoy_desktop.agent.turn import TurnResult
from agenvoy_desktop.ui.markdown_view import WrappingLabel

PHASES = {
    "recall": "Looking through your memory…",
    "loading": "Loading the chat model…",
    "thinking": "Thinking…",
    "writing": "Writing…",
    "checking": "Checking the answer against your memory…",
}
PHASE_TIPS = {
    "thinking": (
        "The model reads what it is sent before it writes: your message, what it recalled "
        "from memory and the conversation so far. A long prompt on a small computer can "
        "take 20 seconds or more; later turns reuse what it has read."
    ),
    "loading": "The chat model is read from disk into memory; this happens once per start.",
    "recall": "Your earlier conversations and documents are searched for what matters here.",
    "checking": "The answer is compared with what you told it before it is shown for good.",
}
"""What each phase's tooltip explains."""
COUNT_AFTER_S = 3
"""A phase shown this long starts counting its seconds."""
UNCOUNTED = frozenset({"Writing…"})
"""Phrases that never count: the streaming answer shows that it is working."""
DETAIL_CHARS = 40


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _arg(arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    return _clip(str(value)) if value not in (None, "") else ""


def _file_name(path: str) -> str:
    return PurePath(path).name or path


def _reading(args: Mapping[str, Any]) -> str:
    path = _arg(args, "path")
    return f"Reading {_file_name(path)}…" if path else "Reading a file…"


def _listing(args: Mapping[str, Any]) -> str:
    path = _arg(args, "path")
    return f"Looking into {_file_name(path)}…" if path else "Looking at your folders…"


def _searching(what: str) -> Callable[[Mapping[str, Any]], str]:
    def phrase(args: Mapping[str, Any]) -> str:
        query = _arg(args, "query")
        return f"Searching {what} for “{query}”…" if query else f"Searching {what}…"

    return phrase


TOOL_PHRASES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "current_time": lambda _a: "Checking the time…",
    "date_calc": lambda _a: "Counting days…",
    "read_text_file": _reading,
    "list_files": _listing,
    "search_chat_history": _searching("your past conversations"),
    "search_rag": _searching("your documents"),
    "list_rag": lambda _a: "Looking at your document collections…",
    "remember_error": lambda _a: "Noting what went wrong…",
    "search_error_history": _searching("what went wrong before"),
    "read_error": lambda _a: "Reading a remembered failure…",
}


def tool_phrase(name: str, arguments: Mapping[str, Any]) -> str:
    """A readable phrase for a running tool call, with its main argument."""
    known = TOOL_PHRASES.get(name)
    if known is not None:
        return known(arguments)
    return f"Using {name.replace('_', ' ')}…"


def phase_text(phase: str, detail: str = "") -> str:
    """The line for a :class:`~agenvoy_desktop.agent.turn.TurnStatus` phase."""
    if phase == "tool":
        return tool_phrase(detail, {})
    if phase == "thinking" and detail.isdigit():  # the share of a long prompt read so far
        return f"Reading your message… {detail} %"
    return PHASES.get(phase, "")


def phase_tip(phase: str) -> str:
    """The tooltip of a phase's line ('' where the phrase says it all)."""
    return PHASE_TIPS.get(phase, "")


def done_text(result: TurnResult) -> str:
    """The line once the answer is in: speed (tokens/s) and time spent writing it."""
    if result.interrupted:
        return "Stopped."
    tokens, seconds = result.answer_tokens, result.answer_s
    total = f"{result.total_s:.1f} s in all"
    if result.checked:  # the answer shown is not the model's first: say so
        total = f"{total} · corrected against your memory"
    if not result.answer.strip():
        return f"No text · {total}"
    if tokens > 1 and seconds > 0:
        return f"{tokens / seconds:.1f} tokens/s · {tokens} tokens in {seconds:.1f} s · {total}"
    if tokens:
        return f"{tokens} token{'s' if tokens > 1 else ''} · {total}"
    return f"{len(result.answer)} characters · {total}"


CHECK_PROBLEMS = {
    "tool call": "wrote a tool call out as text",
    "copied notes": "copied its notes instead of answering",
    "never told": "claimed something you never told",
    "contradicts": "contradicted what you told",
    "older value": "used an older value than the latest you told",
    "not drawn": "did not use what you told",
    "not worked out": "did not use the worked-out result",
}
"""What the answer check found (``agent/answer_check.py``), as the tooltip says it."""
CHECK_OUTCOMES = {
    "second try": "the model's second answer is shown",
    "quote": "what memory holds is quoted instead",
    "not known": "it says it does not know instead",
    "model": "the model's answer is shown",
}


def done_details(result: TurnResult, model_name: str) -> str:
    """The tooltip of the finished line: what the numbers came from."""
    lines = [
        f"Model: {model_name}",
        f"Prompt: {result.prompt_tokens} tokens",
        f"Answer: {result.answer_tokens} tokens",
        f"Tool calls: {result.tool_calls}",
        f"Rounds: {result.rounds}",
    ]
    if result.first_token_s is not None:
        lines.append(f"First text after {result.first_token_s:.1f} s")
    if result.checked:
        problem = CHECK_PROBLEMS.get(result.checked, result.checked)
        outcome = CHECK_OUTCOMES.get(result.answer_from, result.answer_from)
        lines.append(f"Checked against your memory: the first answer {problem}; {outcome}.")
    return "\n".join(lines)


class TurnStatusLine(WrappingLabel):
    """The muted line under the pending answer (hidden when there is nothing to say)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TurnStatus")
        self.phases: list[str] = []
        """Every line shown during the current turn, in order (for tests and logs)."""
        self.clock: Callable[[], float] = time.monotonic
        self._since = 0.0
        self._ticker = QTimer(self)
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self.tick)
        self.hide()

    def begin(self) -> None:
        """A new turn: forget the last one's lines."""
        self.phases = []
        self._ticker.stop()
        self.setToolTip("")
        self.setText("")
        self.hide()

    def say(self, text: str, tip: str = "") -> None:
        """Show a phase's phrase; it counts its seconds while it lasts (see the module)."""
        if not text:
            return
        if not self.phases or self.phases[-1] != text:
            self.phases.append(text)
            self._since = self.clock()
        self.setText(text)
        self.setToolTip(tip)
        self.show()
        if text in UNCOUNTED:
            self._ticker.stop()
        elif not self._ticker.isActive():
            self._ticker.start()

    def tick(self) -> None:
        """Add the seconds the current phase has lasted, once it lasted a while."""
        if not self.phases or self.isHidden():  # the turn's conversation is not shown
            self._ticker.stop()
            return
        waited = int(self.clock() - self._since)
        if waited >= COUNT_AFTER_S:
            self.setText(f"{self.phases[-1]} {waited} s")

    def finish(self, result: TurnResult, model_name: str) -> None:
        self.say(done_text(result))
        self._ticker.stop()
        self.setToolTip(done_details(result, model_name))

    def show_line(self, text: str, tip: str) -> None:
        """Show a finished turn's line again (the session was opened again)."""
        self.phases = [text]
        self._ticker.stop()
        self.setText(text)
        self.setToolTip(tip)
        self.show()

    def fail(self, text: str) -> None:
        self.say(text)
        self._ticker.stop()
