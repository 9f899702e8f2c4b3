"""Start-up reconciliation and ``doctor``: the three layers checked against each other.

history.json is the truth for what is *recent*; the archive is the truth for
*everything*; vectors are derived.  Repairs never delete a message:

- pending reset/remove operations are finished first (see :mod:`lifecycle`);
- a torn history.json tail is cut back, a foreign-format file migrated, an
  unreadable one moved aside;
- a message in history.json missing from the archive is added (a session
  seen for the first time is back-filled whole);
- ``session_meta.start_at`` follows history.json's first message;
- a history message without a vector is embedded; a vector whose message is
  no longer in history.json (an orphan) is dropped; a broken index file is
  rebuilt from the stored vectors;
- the derived full-text index is rebuilt if its integrity check fails;
- history.json that lost recent messages (moved aside as unreadable, torn,
  truncated) gets them back from the archive, in their place;
- a summary file that cannot be read is set aside and the summary starts
  fresh;
- ``doctor`` also runs SQLite's integrity check on the archive (a damaged one
  is set aside and rebuilt, see :mod:`recovery`) and on the error memory (a
  damaged one is set aside and started fresh).

At start-up a few missing vectors are embedded at once; a backlog is only
counted (``MemoryStore.missing_vectors``): the window embeds it in the
background, ``doctor --repair`` at once.

At start-up a quick pass looks only at cheap signals (file tail, row counts)
and checks a session fully only when they disagree; ``doctor`` checks all.
The file tail of a history.json unchanged since it was last read comes from
its stamp (:mod:`history_stamps`): an untouched session costs one ``stat()``
and a few indexed queries, however long its history.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from agenvoy_desktop.core import recovery
from agenvoy_desktop.core.archive import ArchivedMessage
from agenvoy_desktop.core.atomic import atomic_write_bytes
from agenvoy_desktop.core.findings import Finding
from agenvoy_desktop.core.history import HistoryFile, LoadReport
from agenvoy_desktop.core.lifecycle import finish_pending, ops_dir
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.summary import check_summary_files

if TYPE_CHECKING:
    from agenvoy_desktop.core.session_settings import SessionSettings
    from agenvoy_desktop.core.store import MemoryStore

__all__ = [
    "START_EMBED_LIMIT",
    "Finding",
    "check_case_twins",
    "check_error_memory",
    "check_summaries",
    "count_missing_vectors",
    "doctor",
    "reconcile",
    "repair_archive",
]

log = logging.getLogger(__name__)

START_EMBED_LIMIT = 64
"""A session lacking at most this many vectors is embedded at start-up (a crash's leftovers,
well under a second); a bigger backlog (an import killed halfway) is only counted, and
embedded in the background so the window opens at once."""


def reconcile(
    store: MemoryStore, *, repair: bool, deep: bool, embed_limit: int | None = None
) -> list[Finding]:
    """Check (and with *repair*, fix) every session; returns the findings.

    A session lacking more than *embed_limit* vectors (None: no limit) is
    only reported, not embedded: start-up leaves such a backlog to the
    background (see :data:`START_EMBED_LIMIT`).

    Another process may be writing meanwhile.  Each session is checked
    under its lock; at start-up (not *deep*) a busy session is skipped: its
    writer is alive and leaves it consistent.  ``doctor`` (*deep*) waits
    for the locks instead, and a deep repair holds the whole profile, so no
    write slips between its checks.
    """
    import contextlib

    from agenvoy_desktop.core.locks import StoreBusyError

    wait = None if deep else 0.0
    with contextlib.ExitStack() as profile:
        if repair and deep:
            profile.enter_context(store.locks.profile("doctor --repair"))
        findings: list[Finding] = []
        if repair:  # each under its session's lock; a busy one is an operation still at work
            done = finish_pending(store)
            findings += [Finding(None, "interrupted operation", d, True) for d in done]
        elif (folder := ops_dir(store)).is_dir():
            findings += [
                Finding(None, "interrupted operation", f"journal {j.name} pending", False)
                for j in folder.glob("*.json")
            ]
        sids = store.session_ids()
        for sid in sids:
            with contextlib.ExitStack() as session:
                try:
                    session.enter_context(store.locked(sid, "check", wait_s=wait))
                except StoreBusyError as exc:
                    if deep:
                        findings.append(Finding(sid, "session", f"not checked: {exc}", False))
                    log.debug("not checked now: %s", exc)
                    continue
                if repair and (ops_dir(store) / f"{sid}.json").exists():
                    continue  # a reset/remove still to finish: nothing to back-fill from
                if deep or not _looks_consistent(store, sid):
                    findings += _check_session(store, sid, repair=repair, embed_limit=embed_limit)
                    _stamp_checked(store, sid)
        if repair:  # a check that only reports writes nothing, not even its stamps
            store.history_stamps.keep_only(set(sids))
            store.history_stamps.save()
        if deep and not store.archive.fts_ok():
            if repair:
                store.archive.rebuild_fts()
            findings.append(Finding(None, "full-text index", "integrity check failed", repair))
    for finding in findings:
        log.info("%s", finding)
    return findings


def _looks_consistent(store: MemoryStore, sid: str) -> bool:
    """The quick check: history.json's tail against the archive's counts.

    The tail comes from the file's stamp while the file is unchanged (one
    ``stat()``), else from reading it (see :mod:`history_stamps`).
    """
    meta = store.archive.session(sid)
    if meta is None:
        return not (store.folder(sid) / "history.json").exists()
    tail = store.history_tail(sid)
    if tail is None:
        return False
    count, last_id = tail[0]
    if count != store.archive.count_from(sid, meta.cut_seq):
        return False
    if last_id is not None and not store.archive.rowids_for([last_id]):
        return False
    if store.embedder is not None:
        return store.archive.vector_message_count(sid) == count
    return True


def _stamp_checked(store: MemoryStore, sid: str) -> None:
    """Stamp the history.json a full check just read (or wrote), as it is cached."""
    hist = store.history(sid)
    stamp = hist.tail_stamp() if hist.loaded else None
    if stamp is not None:
        store.history_stamps.record(sid, *stamp)


def _check_session(
    store: MemoryStore, sid: str, *, repair: bool, embed_limit: int | None = None
) -> list[Finding]:
    out: list[Finding] = []
    if repair:
        hist = store.history(sid)
        hist.load()
    else:
        hist = HistoryFile(store.folder(sid) / "history.json", store.clock(), readonly=True)
        hist.load()
    report = hist.last_report
    if report.corrupt_moved_to is not None:
        detail = f"not readable; moved to {report.corrupt_moved_to}"
        out.append(Finding(sid, "history.json", detail, repair, notice=repair))
    if report.torn_tail_dropped:
        out.append(_torn_finding(sid, report, repair=repair))
    if report.migrated:
        out.append(Finding(sid, "history.json", "reference format migrated", repair))
    out += _skipped_findings(sid, report, repair=repair)
    if store.archive.session(sid) is None:
        out.append(Finding(sid, "archive", "session unknown to the archive", repair))
        if repair:
            store.archive.ensure_session(sid, store.clock())
    restored = _restore_tail(store, sid, hist, repair=repair)
    out += restored
    messages = hist.messages
    known = store.archive.all_msg_ids(sid)
    missing = [m for m in messages if m.id not in known]
    if missing:
        what = "back-filled whole" if not known else f"{len(missing)} message(s) added"
        out.append(Finding(sid, "archive", f"missing from archive: {what}", repair))
        if repair:
            missing, renamed = _claim_ids(store, hist, missing)
            if renamed:
                detail = f"{renamed} message id(s) already used elsewhere (a copied folder?)"
                out.append(Finding(sid, "history.json", detail + ": given new ids", True))
            store.archive.add_messages(sid, missing, store.clock())
            known = store.archive.all_msg_ids(sid)
    if repair and restored and store.maybe_compact(sid):
        known = store.archive.all_msg_ids(sid)
    out += _check_cut(store, sid, known, repair=repair, hist=hist)
    out += _check_vectors(store, sid, repair=repair, hist=hist, embed_limit=embed_limit)
    out += _check_summary(store, sid, repair=repair)
    out += _check_settings(store, sid, repair=repair)
    return out


def _skipped_findings(sid: str, report: LoadReport, *, repair: bool) -> list[Finding]:
    """Messages left out when history.json was read: times out of range apart, with counts."""
    kept = f"; the original is kept as {report.original_kept_at}" if repair else ""
    unreadable = report.skipped - report.out_of_range
    out: list[Finding] = []
    if report.out_of_range:
        detail = (
            f"{report.out_of_range} message(s) with a time out of range"
            f" (before 1970 or after 2261) left out{kept}"
        )
        out.append(Finding(sid, "history.json", detail, repair))
    if unreadable:
        detail = f"{unreadable} unreadable message(s) left out{kept}"
        out.append(Finding(sid, "history.json", detail, repair))
    return out


def _torn_finding(sid: str, report: LoadReport, *, repair: bool) -> Finding:
    """A torn tail cut back; one that held something unreadable names where the original is."""
    if not report.tail_lost:
        return Finding(sid, "history.json", "torn tail from a crash cut back", repair)
    detail = "torn tail cut back; what it held could not be read"
    if repair and report.original_kept_at is not None:
        detail += f"; the original is kept as {report.original_kept_at}"
    return Finding(sid, "history.json", detail, repair, notice=repair)


def _restore_tail(
    store: MemoryStore, sid: str, hist: HistoryFile, *, repair: bool
) -> list[Finding]:
    """Give history.json back the recent messages only the archive still holds.

    Messages are written to history.json before the archive, so a message
    the archive holds after the session's cut point but history.json lacks
    means history.json lost it (moved aside as unreadable, torn, truncated
    by hand).  The rows count from history.json's first message in the
    archive (from the cut point when it has none): rows before it are the
    ones a compaction interrupted after rewriting the file had already
    dropped, and stay dropped.  The normal compaction then keeps the file
    within its size limit.
    """
    meta = store.archive.session(sid)
    if meta is None:
        return []
    messages = hist.messages
    known = store.archive.all_msg_ids(sid)
    seqs = {m.id: known[m.id] for m in messages if m.id in known}
    start = min(seqs.values()) if seqs else meta.cut_seq
    present = {m.id for m in messages}
    missing = [r for r in store.archive.messages(sid, start) if r.message.id not in present]
    if not missing:
        return []
    if repair:
        hist.rewrite(_merged(messages, seqs, missing))
        detail = f"{len(missing)} recent message(s) restored from the archive"
    else:
        detail = f"lacks {len(missing)} recent message(s) the archive holds"
    return [Finding(sid, "history.json", detail, repair, notice=repair)]


def _merged(
    messages: list[Message], seqs: dict[str, int], missing: list[ArchivedMessage]
) -> list[Message]:
    """history.json's messages with the archive's *missing* rows in their places.

    A message only history.json has (not archived yet) stays right after
    the message it followed.
    """
    blocks: list[tuple[int, list[Message]]] = [(-1, [])]
    for message in messages:
        if message.id in seqs:
            blocks.append((seqs[message.id], [message]))
        else:
            blocks[-1][1].append(message)
    blocks += [(row.seq, [row.message]) for row in missing]
    blocks.sort(key=lambda block: block[0])
    return [message for _, block in blocks for message in block]


def _check_summary(store: MemoryStore, sid: str, *, repair: bool) -> list[Finding]:
    folder = store.folder(sid)
    if not folder.is_dir():
        return []
    details = check_summary_files(folder, repair=repair)
    return [Finding(sid, "summary", d, repair, notice=repair) for d in details]


def _check_settings(store: MemoryStore, sid: str, *, repair: bool) -> list[Finding]:
    """A session.json that cannot be read (or has fields of the wrong type) is named.

    Turns quietly use the defaults for what is wrong; ``--repair`` keeps the
    file as ``session.json.corrupt-…`` and writes what was usable in its place.
    """
    from agenvoy_desktop.core.session_settings import SETTINGS_FILE, read_settings_file

    folder = store.folder(sid)
    reading = read_settings_file(folder)
    if not reading.problem:
        return []
    detail = f"{reading.problem}; the defaults are used for it"
    if not repair:
        return [Finding(sid, SETTINGS_FILE, detail, False)]
    try:
        kept = _rewrite_settings(folder, reading.settings, store.clock())
    except (OSError, ValueError) as exc:  # a prompt over the limit, a read-only folder
        return [Finding(sid, SETTINGS_FILE, f"{detail}; not repaired: {exc}", False)]
    detail += f"; the original is kept as {kept}"
    return [Finding(sid, SETTINGS_FILE, detail, True, notice=True)]


def _rewrite_settings(folder: Path, settings: SessionSettings, now: int) -> Path:
    """Keep session.json as ``session.json.corrupt-<now>``, then write *settings* in its place."""
    from agenvoy_desktop.core.session_settings import SETTINGS_FILE, save_session_settings

    original = folder / SETTINGS_FILE
    kept = original.with_name(f"{SETTINGS_FILE}.corrupt-{now}")
    atomic_write_bytes(kept, original.read_bytes())
    save_session_settings(folder, settings)
    return kept


def check_summaries(store: MemoryStore, *, repair: bool) -> list[Finding]:
    """Every session's summary files parse; a damaged one is set aside (the summary starts fresh).

    Cheap enough for every start (two small JSON files per session), so a
    damaged summary never fails a turn or a ``summarize`` twice.
    """
    findings: list[Finding] = []
    for sid in store.session_ids():
        findings += _check_summary(store, sid, repair=repair)
    return findings


def count_missing_vectors(store: MemoryStore) -> dict[str, int]:
    """Per session, recent messages without a vector (from counts: no history.json is read).

    Two index-only counts per session: one query over all sessions picked
    a plan that read every message row (3 s at a million messages).
    """
    missing: dict[str, int] = {}
    for meta in store.archive.sessions():
        recent = store.archive.count_from(meta.session_id, meta.cut_seq)
        have = store.archive.vector_message_count(meta.session_id)
        if recent > have:
            missing[meta.session_id] = recent - have
    return missing


def doctor(store: MemoryStore, *, repair: bool, error_db: Path | None = None) -> list[Finding]:
    """Every store checked in full: the archive's integrity, every session, the error memory.

    A damaged archive is set aside and rebuilt first (with *repair*), so the
    session checks run against the rebuilt one.
    """
    findings = _check_archive(store, repair=repair)
    if repair or not findings:  # a damaged archive cannot be compared with anything
        findings += reconcile(store, repair=repair, deep=True)
        findings += check_case_twins(store)
    if error_db is not None:
        findings += check_error_memory(error_db, repair=repair)
    return findings


def check_case_twins(store: MemoryStore) -> list[Finding]:
    """Session ids that differ only in case (made before new ones were refused).

    Only reported: both sessions stay as they are, and the person decides
    which to export and remove before copying the profile to Windows or macOS.
    """
    from agenvoy_desktop.core.store import case_twins

    return [
        Finding(
            None,
            "session ids",
            f"{' and '.join(map(repr, group))} differ only in case: on Windows and macOS"
            " they would share one folder; export and remove all but one before moving"
            " the profile there",
            False,
        )
        for group in case_twins(store.session_ids())
    ]


def _check_archive(store: MemoryStore, *, repair: bool) -> list[Finding]:
    problems = store.archive.integrity_problems()
    if not problems:
        return []
    reason = f"integrity check failed: {problems[0]}"
    if not repair:
        return [Finding(None, "archive", reason, False)]
    report = repair_archive(store, reason)
    return [Finding(None, "archive", report.notice(), True)]


def repair_archive(store: MemoryStore, reason: str) -> recovery.ArchiveRecovery:
    """Set the store's damaged archive aside and rebuild it (:mod:`recovery`); the user hears of it.

    The rebuild runs under the profile lock, with the store's caches dropped
    (:meth:`MemoryStore.replace_archive`); its notice joins ``store.notices``.
    """
    paths = store.paths
    report = store.replace_archive(
        lambda: recovery.rebuild_archive(paths.archive_db, paths.sessions_dir, store.clock, reason)
    )
    store.notices.append(report.notice())
    return report


def check_error_memory(path: Path, *, repair: bool) -> list[Finding]:
    """The error memory opens and passes SQLite's integrity check; else set aside and fresh."""
    from agenvoy_desktop.core.error_memory import ErrorMemoryError, open_error_memory

    if not path.exists():
        return []
    try:
        memory, notice = open_error_memory(path, None, repair=repair, purge_on_open=False)
    except ErrorMemoryError as exc:
        return [Finding(None, "error memory", str(exc), False)]
    with memory:
        problems = [] if notice else memory.integrity_problems()
    if notice:
        return [Finding(None, "error memory", notice, True)]
    if not problems:
        return []
    reason = f"integrity check failed: {problems[0]}"
    if not repair:
        return [Finding(None, "error memory", reason, False)]
    from agenvoy_desktop.core.error_memory import start_fresh

    return [Finding(None, "error memory", start_fresh(path, reason), True)]


def _claim_ids(
    store: MemoryStore, hist: HistoryFile, missing: list[Message]
) -> tuple[list[Message], int]:
    """Give fresh ids to messages whose id the archive already holds (or that repeat).

    Message ids are unique across the archive; a session folder copied by
    hand would otherwise make every start-up fail.  history.json is
    rewritten with the new ids.
    """
    taken = set(store.archive.rowids_for(m.id for m in missing))
    seen: set[str] = set()
    renamed: dict[int, Message] = {}
    for index, message in enumerate(missing):
        if message.id in taken or message.id in seen:
            renamed[index] = dataclasses.replace(message, id=new_message_id())
        seen.add(message.id)
    if not renamed:
        return missing, 0
    by_identity = {id(missing[i]): new for i, new in renamed.items()}
    hist.rewrite([by_identity.get(id(m), m) for m in hist.messages])
    return [renamed.get(i, m) for i, m in enumerate(missing)], len(renamed)


def _check_cut(
    store: MemoryStore, sid: str, known: dict[str, int], *, repair: bool, hist: HistoryFile
) -> list[Finding]:
    meta = store.archive.session(sid)
    messages = hist.messages
    if meta is None or not messages or messages[0].id not in known:
        return []
    first_seq = known[messages[0].id]
    if first_seq == meta.cut_seq:
        return []
    if repair:
        store.archive.set_cut(sid, first_seq, messages[0].time_ns)
    return [Finding(sid, "start_at", "cut point did not match history.json", repair)]


def _check_vectors(
    store: MemoryStore,
    sid: str,
    *,
    repair: bool,
    hist: HistoryFile,
    embed_limit: int | None = None,
) -> list[Finding]:
    out: list[Finding] = []
    live = set(store.archive.rowids_for(m.id for m in hist.messages).values())
    stored = store.archive.vector_rowids(sid)
    orphans = sorted(stored - live)
    if orphans:
        out.append(Finding(sid, "vectors", f"{len(orphans)} orphan vector(s) dropped", repair))
        if repair:
            store.vectors(sid).remove(orphans)
    lacking = len(live - stored)
    if lacking:
        inline = embed_limit is None or lacking <= embed_limit
        can = repair and store.embedder is not None and inline
        detail = f"{lacking} message(s) without a vector"
        out.append(Finding(sid, "vectors", detail + (": embedded" if can else ""), can))
        if can:
            store.index_pending(sid)
    from agenvoy_desktop.core.vectors import meta_problem  # hnswlib: only when checked

    problem = meta_problem(store.folder(sid))
    if problem is not None and not repair:
        out.append(Finding(sid, "vector index", f"{problem}: --repair rebuilds it", False))
    if repair and (live or stored or problem is not None):
        vectors = store.vectors(sid)
        vectors.count  # noqa: B018 - opening heals the index file
        if vectors.healed:
            out.append(Finding(sid, "vector index", vectors.healed, True))
            vectors.healed = None  # reported once, not by every later check
            vectors.flush()
    return out
