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
- the derived full-text index is rebuilt if its integrity check fails.

At start-up a quick pass looks only at cheap signals (file tail, row counts)
and checks a session fully only when they disagree; ``doctor`` checks all.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agenvoy_desktop.core.history import HistoryFile, quick_tail
from agenvoy_desktop.core.lifecycle import finish_pending, ops_dir
from agenvoy_desktop.core.messages import Message, new_message_id

if TYPE_CHECKING:
    from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement between layers, and whether it was repaired."""

    session_id: str | None
    kind: str
    detail: str
    repaired: bool

    def __str__(self) -> str:
        where = f"[{self.session_id}] " if self.session_id else ""
        state = "repaired" if self.repaired else "found"
        return f"{state}: {where}{self.kind}: {self.detail}"


def reconcile(store: MemoryStore, *, repair: bool, deep: bool) -> list[Finding]:
    """Check (and with *repair*, fix) every session; returns the findings."""
    findings: list[Finding] = []
    if repair:
        findings += [Finding(None, "interrupted operation", d, True) for d in finish_pending(store)]
    elif (folder := ops_dir(store)).is_dir():
        findings += [
            Finding(None, "interrupted operation", f"journal {j.name} pending", False)
            for j in folder.glob("*.json")
        ]
    for sid in store.session_ids():
        if deep or not _looks_consistent(store, sid):
            findings += _check_session(store, sid, repair=repair)
    if deep and not store.archive.fts_ok():
        if repair:
            store.archive.rebuild_fts()
        findings.append(Finding(None, "full-text index", "integrity check failed", repair))
    for finding in findings:
        log.info("%s", finding)
    return findings


def _looks_consistent(store: MemoryStore, sid: str) -> bool:
    meta = store.archive.session(sid)
    history_path = store.folder(sid) / "history.json"
    if meta is None:
        return not history_path.exists()
    tail = quick_tail(history_path) if history_path.exists() else (0, None)
    if tail is None:
        return False
    count, last_id = tail
    if count != store.archive.count_from(sid, meta.cut_seq):
        return False
    if last_id is not None and not store.archive.rowids_for([last_id]):
        return False
    if store.embedder is not None:
        return len(store.archive.vector_rowids(sid)) == count
    return True


def _check_session(store: MemoryStore, sid: str, *, repair: bool) -> list[Finding]:
    out: list[Finding] = []
    if repair:
        hist = store.history(sid)
        hist.load()
    else:
        hist = HistoryFile(store.folder(sid) / "history.json", store.clock(), readonly=True)
        hist.load()
    report = hist.last_report
    if report.corrupt_moved_to is not None:
        out.append(
            Finding(
                sid, "history.json", f"not readable; moved to {report.corrupt_moved_to}", repair
            )
        )
    if report.torn_tail_dropped:
        out.append(Finding(sid, "history.json", "torn tail from a crash cut back", repair))
    if report.migrated:
        out.append(Finding(sid, "history.json", "reference format migrated", repair))
    if report.skipped:
        kept = f"; the original is kept as {report.original_kept_at}" if repair else ""
        detail = f"{report.skipped} unreadable message(s) left out{kept}"
        out.append(Finding(sid, "history.json", detail, repair))
    messages = hist.messages
    if store.archive.session(sid) is None:
        out.append(Finding(sid, "archive", "session unknown to the archive", repair))
        if repair:
            store.archive.ensure_session(sid, store.clock())
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
    out += _check_cut(store, sid, known, repair=repair, hist=hist)
    out += _check_vectors(store, sid, repair=repair, hist=hist)
    return out


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
    store: MemoryStore, sid: str, *, repair: bool, hist: HistoryFile
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
        can = repair and store.embedder is not None
        detail = f"{lacking} message(s) without a vector"
        out.append(Finding(sid, "vectors", detail + (": embedded" if can else ""), can))
        if can:
            store.index_pending(sid)
    if repair and (live or stored):
        vectors = store.vectors(sid)
        vectors.count  # noqa: B018 - opening heals the index file
        if vectors.healed:
            out.append(Finding(sid, "vector index", vectors.healed, True))
            vectors.healed = None  # reported once, not by every later check
            vectors.flush()
    return out
