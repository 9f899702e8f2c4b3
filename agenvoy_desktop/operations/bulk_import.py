"""Bringing history in: plan what a set of paths holds, then import it, idempotently.

Two steps, so the CLI's ``--dry-run`` and the window's preview show exactly
what the import will do before anything is written:

1. :func:`plan_import` reads every path (a file, a folder or a zip of
   ChatGPT, Claude, Open WebUI, LM Studio or Jan, or our own JSON Lines,
   history.json and export) within the bounds of
   :class:`~agenvoy_desktop.core.import_formats.model.Limits`, and turns each
   conversation into messages with a session id that is the same on every
   run (``core/import_keys.py``).  A path that cannot be read becomes one line
   in ``failed``; the other paths go on.
2. :func:`run_import` adds each conversation's messages that its session does
   not hold yet (:meth:`MemoryStore.import_new`): importing twice, or again
   after a killed import, adds nothing twice.  One progress count runs over
   all messages; a cancel stops between conversations (what was imported
   stays, and the next import adds the rest).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.import_formats.bounded import read_file
from agenvoy_desktop.core.import_formats.detect import read_source
from agenvoy_desktop.core.import_formats.model import (
    ImportedConversation,
    Limits,
    Skip,
)
from agenvoy_desktop.core.import_keys import conversation_session_id, only_new
from agenvoy_desktop.core.importers import (
    ImportFormatError,
    RawMessage,
    build_messages,
    decode_text,
    read_import_text,
)
from agenvoy_desktop.core.messages import Message, encoded_size
from agenvoy_desktop.core.store import (
    ImportCount,
    MemoryStore,
    OperationCancelledError,
    check_session_id,
)
from agenvoy_desktop.operations.changes import Changed, session_changes

OURS = "agenvoy"
"""The app name :func:`read_source` gives our own formats."""

Progress = Callable[[int, int], None]
Cancelled = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class PlannedConversation:
    """One conversation as it will be imported."""

    path: Path
    app: str
    title: str | None
    session_id: str
    messages: list[Message]
    skipped: list[Skip] = field(default_factory=list)

    @property
    def span_ns(self) -> tuple[int, int]:
        """The times of its first and last message."""
        times = [m.time_ns for m in self.messages]
        return min(times), max(times)


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What a set of paths holds: conversations to import, what was left out, what failed."""

    conversations: list[PlannedConversation]
    skipped: list[Skip] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """One line per path that could not be read at all (the others still import)."""

    @property
    def message_count(self) -> int:
        return sum(len(c.messages) for c in self.conversations)

    @property
    def skipped_count(self) -> int:
        return len(self.skipped) + sum(len(c.skipped) for c in self.conversations)

    def apps(self) -> list[str]:
        """The apps the conversations came from, in order of first appearance."""
        return list(dict.fromkeys(c.app for c in self.conversations))


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`run_import` did."""

    counts: list[ImportCount]
    cancelled: bool = False

    @property
    def added(self) -> int:
        return sum(c.added for c in self.counts)

    @property
    def already(self) -> int:
        return sum(c.already for c in self.counts)


class ImportPlanError(KnownError, ValueError):
    """The import as asked cannot be planned (``--session`` for several conversations)."""


def plan_import(
    paths: Sequence[Path],
    fallback_ns: int,
    *,
    max_message_bytes: int,
    session_id: str | None = None,
    title: str | None = None,
    limits: Limits | None = None,
) -> ImportPlan:
    """Read *paths* and settle every conversation's messages and session (nothing is written).

    *fallback_ns*: the time of messages whose file gives none.  *session_id* /
    *title*: where a single conversation goes and what it is called.
    """
    limits = limits or Limits()
    conversations: list[PlannedConversation] = []
    skipped: list[Skip] = []
    failed: list[str] = []
    for path in paths:
        try:
            found, left_out = _read_path(path, fallback_ns, max_message_bytes, limits)
        except (ImportFormatError, OSError) as exc:
            failed.append(str(exc))
            continue
        conversations += found
        skipped += left_out
    conversations, repeated = _merge_repeats(conversations)
    skipped += repeated
    if session_id is not None:
        check_session_id(session_id)
        if len(conversations) > 1:
            raise ImportPlanError(
                f"--session names one session, but the paths hold {len(conversations)} "
                "conversations; leave it out to import each into its own"
            )
        conversations = [_placed(c, session_id, title) for c in conversations]
    elif title is not None and len(conversations) == 1:
        conversations = [_placed(conversations[0], conversations[0].session_id, title)]
    return ImportPlan(conversations, skipped, failed)


def _merge_repeats(
    conversations: Sequence[PlannedConversation],
) -> tuple[list[PlannedConversation], list[Skip]]:
    """One row per session: a conversation listed twice (an export that repeats one, two
    copies of a file) joins the first; a copy with nothing new is left out, with why.

    Each would import into the same session anyway (the session id comes from
    the other app's id or the first messages), so the preview would otherwise
    show two rows where the second adds nothing.
    """
    first: dict[str, int] = {}
    kept: list[PlannedConversation] = []
    skipped: list[Skip] = []
    for conv in conversations:
        at = first.get(conv.session_id)
        if at is None:
            first[conv.session_id] = len(kept)
            kept.append(conv)
            continue
        earlier = kept[at]
        fresh = only_new(earlier.messages, conv.messages)
        name = earlier.title or earlier.session_id
        if not fresh:
            skipped.append(Skip(f"{conv.path}: {conv.title or name}", f"same as '{name}' above"))
            continue
        kept[at] = replace(
            earlier,
            messages=[*earlier.messages, *fresh],
            skipped=[*earlier.skipped, *conv.skipped],
        )
    return kept, skipped


def _placed(conv: PlannedConversation, session_id: str, title: str | None) -> PlannedConversation:
    return PlannedConversation(
        conv.path, conv.app, title or conv.title, session_id, conv.messages, conv.skipped
    )


def _read_path(
    path: Path, fallback_ns: int, max_bytes: int, limits: Limits
) -> tuple[list[PlannedConversation], list[Skip]]:
    """The conversations of one path, and what was left out above the message level."""
    source = read_source(path, limits=limits)
    if source.app == OURS:
        return [_ours(path, fallback_ns, max_bytes, limits)], list(source.skipped)
    planned = [_planned(path, conv, fallback_ns, max_bytes) for conv in source.conversations]
    kept = [p for p in planned if p.messages]
    empty = [
        Skip(f"{path}: {p.title or p.session_id}", "no messages to import")
        for p in planned
        if not p.messages
    ]
    return kept, [*source.skipped, *empty]


def _ours(path: Path, fallback_ns: int, max_bytes: int, limits: Limits) -> PlannedConversation:
    """Our JSON Lines, history.json or export: read once more, bounded, by the strict reader."""
    text = decode_text(read_file(path, limits), str(path))
    messages = read_import_text(path, text, fallback_ns, max_message_bytes=max_bytes)
    title = _exported_title(text) or path.stem
    sid = conversation_session_id(OURS, None, messages)
    return PlannedConversation(path, OURS, title, sid, messages)


def _exported_title(text: str) -> str | None:
    """The title our own JSON export carries (None for JSON Lines and history.json)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    title = data.get("title") if isinstance(data, dict) else None
    return title if isinstance(title, str) and title.strip() else None


def _planned(
    path: Path, conv: ImportedConversation, fallback_ns: int, max_bytes: int
) -> PlannedConversation:
    """Another app's conversation as our messages; a message over the size limit is left out."""
    raws: list[RawMessage] = []
    skipped = list(conv.skipped)
    for number, message in enumerate(conv.messages, start=1):
        raw = RawMessage(
            role=message.role,
            content=message.content,
            time_ns=message.time_ns,
            ref=message.source_id,
            extra=dict(message.extra),
        )
        where = f"{conv.title or 'conversation'}: message {number}"
        try:
            size = encoded_size({"role": raw.role, "content": raw.content, **raw.extra})
        except ValueError as exc:  # a lone surrogate, NaN: nothing could read it back
            skipped.append(Skip(where, f"cannot be stored ({exc})"))
            continue
        if size > max_bytes:
            skipped.append(Skip(where, "larger than the limit for one message"))
            continue
        raws.append(raw)
    messages = build_messages(raws, fallback_ns)
    sid = conversation_session_id(conv.app, conv.source_id, messages)
    return PlannedConversation(path, conv.app, conv.title, sid, messages, skipped)


def run_import(
    store: MemoryStore,
    plan: ImportPlan,
    *,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> ImportReport:
    """Storage thread: store each planned conversation's new messages, then embed them.

    Every conversation is stored first (history and archive: seconds even for
    10,000 messages), so all of it can be found by keyword while the embedding
    model works through it; *progress* counts the embedded messages.  A cancel
    stops the embedding, never the storing: what was imported stays, and the
    missing vectors are made at the next start (``agent/services`` tops them up).
    The window stores and embeds in separate steps (:func:`store_conversation`,
    then the app's background embedding), so it can search meanwhile.
    """
    counts: list[ImportCount] = []
    for conv in plan.conversations:
        if cancelled is not None and cancelled():
            return ImportReport(counts, cancelled=True)
        counts.append(store_conversation(store, conv))
    try:
        embed_imported(store, counts, progress=progress, cancelled=cancelled)
    except OperationCancelledError:
        return ImportReport(counts, cancelled=True)
    return ImportReport(counts)


def store_conversation(store: MemoryStore, conv: PlannedConversation) -> ImportCount:
    """Storage thread: add one conversation's new messages, without vectors (one short job)."""
    return store.import_new(conv.messages, conv.session_id, title=conv.title, embed=False)


def embed_imported(
    store: MemoryStore,
    counts: Sequence[ImportCount],
    *,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> None:
    """Storage thread: embed the imported sessions' messages that lack a vector.

    Raises :class:`OperationCancelledError` when *cancelled* (what was embedded stays).
    """
    if store.embedder is None:
        return
    pending = {c.session_id: len(store.pending_vectors(c.session_id)) for c in counts}
    total, done = sum(pending.values()), 0
    for sid, todo in pending.items():
        if not todo:
            continue

        def step(embedded: int, _todo: int, base: int = done) -> None:
            if progress is not None:
                progress(base + embedded, total)

        store.index_pending(sid, progress=step, cancelled=cancelled)
        done += todo


def report_changes(report: ImportReport) -> Changed[ImportReport]:
    """The report with what it changed, for the window (the first session's views)."""
    first = report.counts[0].session_id if report.counts else None
    return Changed(report, session_changes(first))


def describe(plan: ImportPlan, report: ImportReport) -> str:
    """One line: "2 conversations from ChatGPT: 412 new, 3,088 already there; skipped 3 (…)"."""
    sessions = len(report.counts)
    where = ", ".join(app_name(a) for a in plan.apps())
    line = (
        f"{sessions:,} conversation{'s' if sessions != 1 else ''} from {where}: "
        f"{report.added:,} new, {report.already:,} already there"
    )
    # "no messages to import; 4 skipped" and "…; 13 skipped" are one kind of skip here:
    # the per-conversation detail is in the preview and the --dry-run listing
    skipped = [s.reason.split("; ", 1)[0] for s in plan.skipped] + [
        s.reason.split("; ", 1)[0] for c in plan.conversations for s in c.skipped
    ]
    if skipped:
        reasons = ", ".join(f"{skipped.count(r)} {r}" for r in dict.fromkeys(skipped))
        line += f"; skipped {len(skipped):,} ({reasons})"
    if report.cancelled:
        line += "; stopped before the rest (importing again adds it)"
    return line


_APP_NAMES = {
    OURS: "Agenvoy",
    "chatgpt": "ChatGPT",
    "claude": "Claude",
    "open_webui": "Open WebUI",
    "lm_studio": "LM Studio",
    "jan": "Jan",
}


def app_name(app: str) -> str:
    """How the app is named to the user."""
    return _APP_NAMES.get(app, app)
