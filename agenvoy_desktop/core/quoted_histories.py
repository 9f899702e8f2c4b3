"""Taking a gone message's lines out of the stored search results in the history files.

The archive takes them out of its own rows in the transaction that deletes
(``core/quoted_results.py`` says what a stored result looks like, and how a
result stored before results listed ids is matched by text); this is the
same for the sessions' ``history.json`` files, run just before it, with the
same :class:`Gone` (ids and texts, read from the archive while it still
holds the messages: :meth:`Archive.gone`).
"""

from __future__ import annotations

import logging

from agenvoy_desktop.core.quoted_results import Gone, withdrawn_message
from agenvoy_desktop.core.store import MemoryStore

log = logging.getLogger(__name__)


def withdraw_from_histories(store: MemoryStore, gone: Gone) -> None:
    """Take the *gone* messages' lines out of the stored results in every history file.

    Runs before the archive transaction that deletes the messages (the
    store's usual order: files first, then the archive), so a crash in
    between is rolled forward by the operation's journal: the archive still
    names the quoting results, and a file already changed no longer lists
    the gone ids or shows the gone texts, so running this again changes
    nothing.  Each session's
    file is rewritten under its own lock (a turn may be appending to it).
    """
    if not gone:
        return
    for session_id, message_ids in store.archive.quoting(gone).items():
        if store.exists(session_id):
            with store.locked(session_id, "withdraw quoted lines"):
                _rewrite(store, session_id, set(message_ids), gone)


def _rewrite(store: MemoryStore, session_id: str, message_ids: set[str], gone: Gone) -> None:
    hist = store.history(session_id)
    messages = list(hist.messages)
    changed = False
    for index, message in enumerate(messages):
        if message.id in message_ids and (new := withdrawn_message(message, gone)) is not None:
            messages[index], changed = new, True
    if changed:
        hist.rewrite(messages)
        log.info("took quoted lines of deleted messages out of session %s", session_id)
