"""The incremental rolling-summary runner and its triggers.

What a run folds: archive messages newer than the cursor (``seq`` order) and
older than the current context window.  The archive, not history.json, is
the source, so messages that compaction already trimmed from history.json
are still folded in, however many accumulated.

How: in chunks sized to the summary model's context (instructions + previous
summary + transcript + room for the answer), one ``complete_json`` call per
chunk that receives the previous summary and returns the merged one.  After
each good chunk: summary.json, then summary.meta.json (cursor = the chunk's
newest message), then the pass history line and a ``summary_pass`` timeline
event.  A failed chunk — a model error, a schema violation, or an empty
summary for messages that had content — stops the run: earlier chunks stay,
the cursor stays at the last success, a ``failed`` record is written, and the
next run resumes at the cursor without redoing anything.

Budget per chunk: the answer gets :data:`ANSWER_TOKENS`, the longest answer
the schema's grammar allows (every list full, every string at its
``maxLength``, one token per character), so the answer always closes inside
its budget.  That needs a context of twice as much (about 5,000 tokens; the
app's default is 8,192); a smaller context reserves half of itself and
relies on the retry below.  The transcript gets what is left of the context
after the instructions, the previous summary and a 64-token margin (token
counts cached per text).  A single message bigger than that is cut in the
middle for the prompt.  A pass whose answer still fails (cut off, not JSON,
off-shape) is retried once with the first half of the chunk; the other half
goes into the next chunk.  A sentence said twice does not fail an answer:
its repeats are removed (and noted in the pass record), since asking again
costs a whole generation and the sentence is still there once.  A list of
past discussions that starts going round (a small model writing one
discussion again and again) is ended while it is written, before the first
repeat (:mod:`.loop_stop`; noted as ``ended_at_repeat``), so those tokens
are never decoded; a string the answer grammar cut at its length limit ends
at a word ("…").

Traceable decisions: every transcript line carries a handle (``m1``…) and
every decision of the previous summary one (``p1``…); the schema makes a
decision name one of them as its ``source``, and
:func:`~agenvoy_desktop.core.summary.trace_decisions` turns the handle into
the message id.  The message a decision cites must share a content term
with it and settle a choice (:mod:`~agenvoy_desktop.core.decision_cues`:
"we'll", "let's", "booked", "decided" …): the starter copies greetings and
remarks into the decisions, which are binding.  A decision that fails goes
to the chunk message that settles a choice and all but writes it (half its
content terms, three or more: the starter cites the question a booking
answers), or is dropped.

Tool traffic is folded in compact form: a tool result becomes
``[tool NAME → first 160 characters]`` and an assistant tool call
``[calls NAME(arguments…)]``, so the summary may keep a fact a tool found
without spending the context on raw results.

The mtime gate (skip work that cannot exist) compares history.json's
(mtime_ns, size, inode) with the stamp recorded when the summary was last
brought fully up to date under the same window size.  Any append, compaction
or reset changes the stamp, so coarse file-system time stamps cannot hide
real work; a run that failed or was cancelled never arms the gate.

Stopping (:meth:`Summarizer.stop`, ``stop_session``, the run's ``cancelled``
flag, or its task cancelled — the Summary tab's Stop): while the model writes
an answer, its call is cancelled at once, which ends the answer at the next
token on the engine (its worker checks the request before every token) and
closes an endpoint's stream.  Nothing of that answer is kept: the summary,
its meta and the cursor stay as the last good chunk left them, the pass
history gets a ``stopped`` line (no timeline event: nothing changed), and
the run returns ``cancelled`` (a cancelled task is cancelled again after the
line is written).  A stop asked while the model loads or between chunks ends
the run before the next answer starts, with no line, as before.

Locking: one asyncio lock per session inside the process (triggers get
``busy`` at once; ``wait=True`` callers — the on-demand button and CLI —
queue behind the running pass), plus ``summary.lock`` in the session folder,
created with O_CREAT|O_EXCL and holding pid + time, so the CLI and the app
never run one session at the same time.  A lock whose process is gone, or
whose time is more than 10 minutes old (it is refreshed after every chunk),
is stale and taken over.  The files themselves are written under the
store's session lock (held only for the write, never across a model call),
the lock every writer of the session takes; a chunk whose messages a reset
removed meanwhile is discarded there instead of saved.

The package, by responsibility: ``runs`` (what a run reports, the shared
budgets), ``session_lock`` (the summary lock file), ``pending`` (cursor,
window, chunks), ``runner`` (:class:`Summarizer`), ``edits`` (the user's own
edits) and ``scheduler`` (:class:`SummaryScheduler`, the triggers).
"""

from __future__ import annotations

from agenvoy_desktop.core.summarizer.edits import save_user_edit
from agenvoy_desktop.core.summarizer.pending import history_stamp
from agenvoy_desktop.core.summarizer.runner import Summarizer
from agenvoy_desktop.core.summarizer.runs import (
    ANSWER_TOKENS,
    GROWTH_TOKENS,
    LOCK_FILE,
    LOCK_STALE_NS,
    MIN_TRANSCRIPT_TOKENS,
    PAGE,
    SAFETY_TOKENS,
    PassListener,
    PassProgress,
    ProgressListener,
    RunListener,
    StopReason,
    StoreRunner,
    SummaryBusyError,
    SummaryRunResult,
)
from agenvoy_desktop.core.summarizer.scheduler import SummaryScheduler
from agenvoy_desktop.core.summarizer.session_lock import SessionLock

__all__ = [
    "ANSWER_TOKENS",
    "GROWTH_TOKENS",
    "LOCK_FILE",
    "LOCK_STALE_NS",
    "MIN_TRANSCRIPT_TOKENS",
    "PAGE",
    "SAFETY_TOKENS",
    "PassListener",
    "PassProgress",
    "ProgressListener",
    "RunListener",
    "SessionLock",
    "StopReason",
    "StoreRunner",
    "Summarizer",
    "SummaryBusyError",
    "SummaryRunResult",
    "SummaryScheduler",
    "history_stamp",
    "save_user_edit",
]
