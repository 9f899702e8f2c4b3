"""What makes an imported message "already there": importing twice adds nothing twice.

An import run again, or resumed after it was killed, must not add a
message a second time.  Each imported message is known by the keys it
carries:

- the id the other app gave it (``Message.ref``: ChatGPT's node id, a JSON
  Lines ``id``), where the format has one;
- otherwise ``extra["import_key"]``, a hash of its role, text, the time the
  file gave it (not a time filled in at import, which differs from run to
  run) and how many identical messages came before it in the same
  conversation (two "ok" replies are two messages);
- its own id, for our own export read back (ids are globally unique).

A conversation's session id is derived the same way
(:func:`conversation_session_id`), so a second import finds the session the
first one made and appends only what is new.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from agenvoy_desktop.core.messages import Message

IMPORT_KEY = "import_key"
"""The ``extra`` field holding a message's key where it has no id of its own."""


def content_key(role: str, content: str, time_ns: int | None, occurrence: int) -> str:
    """A stable key for a message with no id: the same input gives the same key on every run."""
    data = json.dumps([role, content, time_ns, occurrence], ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:24]


def keys_of(message: Message) -> list[str]:
    """Every key *message* is known by."""
    keys = [f"id:{message.id}"]
    if message.ref is not None:
        keys.append(f"ref:{message.ref}")
    key = message.extra.get(IMPORT_KEY)
    if isinstance(key, str):
        keys.append(f"key:{key}")
    return keys


def only_new(existing: Iterable[Message], incoming: Sequence[Message]) -> list[Message]:
    """The messages of *incoming* that no message of *existing* is known by.

    Two messages of one file that share an id both stay: a file that repeats an
    id is ambiguous, and keeping both loses nothing (identical messages without
    ids already differ by their place, see :func:`content_key`).
    """
    known = {key for message in existing for key in keys_of(message)}
    return [m for m in incoming if not any(key in known for key in keys_of(m))]


def conversation_session_id(app: str, source_id: str | None, messages: Sequence[Message]) -> str:
    """The session a conversation imports into, the same on every run.

    From the other app's conversation id where it has one; else from the
    keys of the first three messages (a file that grew since the last import
    still begins the same way).
    """
    if source_id:
        basis = f"{app}\0{source_id}"
    else:
        first = [";".join(keys_of(m)[1:]) or m.content for m in messages[:3]]
        basis = "\0".join([app, *first])
    digest = hashlib.sha256(basis.encode("utf-8")).hexdigest()[:12]
    return f"import-{digest}"
