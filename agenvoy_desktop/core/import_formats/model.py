"""What every reader of another app's export produces, and the limits they read under.

The readers turn ChatGPT, Claude, Open WebUI, LM Studio and Jan exports into
the same few frozen records, so the CLI and the window import them one way
and can say, per conversation, what was left out and why ("skipped 3: empty
message").  Nothing here touches the store: ids and storage checks come later.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agenvoy_desktop.core.importers import ImportFormatError
from agenvoy_desktop.core.messages import ROLES
from agenvoy_desktop.core.timeutil import MAX_TIME_NS, MIN_TIME_NS, TimeFormatError, parse_iso

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Skip:
    """Something in the export that was not imported: where it was and why."""

    where: str
    reason: str


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    """One message as the other app showed it; ``role`` is always one of ``ROLES``.

    ``time_ns`` is None only when neither the message nor its conversation
    had a usable time; the importer then falls back to its own clock.
    """

    role: str
    content: str
    time_ns: int | None
    source_id: str | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ImportedConversation:
    """One conversation: the branch the user last saw, oldest message first."""

    app: str
    source_id: str | None
    title: str | None
    messages: list[ImportedMessage]
    skipped: list[Skip] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ImportedSource:
    """Everything read from one path (a file, a folder or a zip).

    ``app`` is ``"agenvoy"`` with no conversations when the path is our own
    export, JSON Lines or history.json: those go to the existing importer.
    ``skipped`` holds what was left out above the message level (a whole
    conversation that was not an object, or had nothing to import).
    """

    app: str
    conversations: list[ImportedConversation]
    skipped: list[Skip] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one import may read; every bound is checked before and while reading.

    ``max_file_bytes`` (512 MiB): Python needs several times a JSON text's
    size to parse it (the text, then one object per value), so 512 MiB of
    JSON already costs a few GiB of memory, while the largest chat exports
    people report are a few hundred MB.  ``max_total_bytes`` (1 GiB) bounds
    everything one import reads (a folder of LM Studio files, the members of
    a zip).  ``max_entries`` (100,000) bounds a zip's member list and a folder
    walk, so pointing at a home folder fails fast instead of scanning it.
    ``max_ratio`` (200): chat JSON compresses about 5 to 20 times; a member
    that expands past 200 times its compressed size is a zip bomb.
    ``max_zip_index_bytes`` (16 MiB) bounds a zip's table of contents, read
    before the member count can be checked: 100,000 members with names of
    about 120 characters, while the Python objects for the most members
    16 MiB can list stay near 200 MB.
    ``max_depth`` bounds how deep a folder walk goes (exports nest 1 to 3).
    """

    max_file_bytes: int = 512 * MIB
    max_total_bytes: int = 1024 * MIB
    max_entries: int = 100_000
    max_ratio: int = 200
    max_zip_index_bytes: int = 16 * MIB
    max_depth: int = 6


# -- helpers the readers share --------------------------------------------------------
def epoch_to_ns(value: object) -> int | None:
    """A Unix time of unknown unit as ns, or None when absent or not storable.

    Apps write seconds (float or int), milliseconds, and a few microseconds or
    ns; the magnitude tells them apart, since any date between 1973 and 2262
    falls in exactly one band (1e11 s is the year 5138; 1e11 ms is 1973).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    magnitude = abs(value)
    scale = (
        1_000_000_000
        if magnitude < 1e11
        else 1_000_000
        if magnitude < 1e14
        else 1_000
        if magnitude < 1e17
        else 1
    )
    ns = int(value * scale) if isinstance(value, float) else value * scale
    return ns if MIN_TIME_NS <= ns < MAX_TIME_NS else None


def iso_to_ns(value: object) -> int | None:
    """An ISO 8601 time as ns, or None when absent, unreadable or not storable."""
    if not isinstance(value, str):
        return epoch_to_ns(value)
    try:
        ns = parse_iso(value)
    except TimeFormatError:
        return None
    return ns if MIN_TIME_NS <= ns < MAX_TIME_NS else None


def text_or_none(value: object) -> str | None:
    """*value* when it is non-empty text (titles, ids), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) and value.strip() else None


def as_mapping(value: object) -> Mapping[str, Any]:
    """*value* if it is a JSON object, else an empty one (wrong types read as absent)."""
    return value if isinstance(value, Mapping) else {}


def fill_times(
    messages: Iterable[ImportedMessage], fallback_ns: int | None
) -> list[ImportedMessage]:
    """Give each timeless message its predecessor's time (the first known one at the start).

    ChatGPT leaves ``create_time`` null on some nodes and other apps omit
    times on edits; the neighbour's time keeps the order and the day right.
    *fallback_ns* (the conversation's own time) serves when no message has one.
    """
    items = list(messages)
    last = next((m.time_ns for m in items if m.time_ns is not None), fallback_ns)
    out: list[ImportedMessage] = []
    for message in items:
        if message.time_ns is not None:
            last = message.time_ns
            out.append(message)
        else:
            out.append(replace(message, time_ns=last))
    return out


def conversation(
    app: str,
    *,
    source_id: str | None,
    title: str | None,
    messages: list[ImportedMessage],
    skipped: list[Skip],
    created_ns: int | None,
) -> ImportedConversation:
    """Assemble a conversation, filling missing message times from its neighbours."""
    return ImportedConversation(
        app=app,
        source_id=source_id,
        title=title,
        messages=fill_times(messages, created_ns),
        skipped=skipped,
    )


def known_role(role: object) -> str | None:
    """*role* when the store knows it, else None (the caller says why it skipped)."""
    return role if isinstance(role, str) and role in ROLES else None


def collect(
    data: object,
    where: str,
    read_one: Callable[[Mapping[str, Any], str], ImportedConversation],
) -> tuple[list[ImportedConversation], list[Skip]]:
    """Read each conversation of an export's list (a single object counts as one).

    A list item that is not an object, or a conversation left with no
    messages, becomes a :class:`Skip` instead of failing the whole import;
    only a file that is not a list of conversations at all is an error.
    """
    items = [data] if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise ImportFormatError(f"{where}: expected a list of conversations, got {json_type(data)}")
    conversations: list[ImportedConversation] = []
    skipped: list[Skip] = []
    for index, item in enumerate(items, start=1):
        place = f"{where}: conversation {index}"
        if not isinstance(item, Mapping):
            skipped.append(Skip(place, f"not a conversation object ({json_type(item)})"))
            continue
        found = read_one(item, place)
        if found.messages:
            conversations.append(found)
        else:
            why = f"; {len(found.skipped)} skipped" if found.skipped else ""
            skipped.append(Skip(_titled(place, found.title), f"no messages to import{why}"))
    return conversations, skipped


def _titled(place: str, title: str | None) -> str:
    if not title:
        return place
    short = title if len(title) <= 60 else title[:59] + "…"
    return f"{place} “{short}”"


_JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", str: "text"}


def json_type(value: object) -> str:
    """How JSON would name *value*'s type, for error lines."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def read_messages(
    raws: object,
    where: str,
    read: Callable[[object, str], ImportedMessage | Skip],
    missing: str,
) -> tuple[list[ImportedMessage], list[Skip]]:
    """Each of *raws* through *read* ("<where>: message N"), kept or skipped; a *raws*
    that is no list, or an empty one, is one skip saying *missing*."""
    messages: list[ImportedMessage] = []
    skipped: list[Skip] = []
    if not isinstance(raws, list) or not raws:
        return messages, [Skip(where, missing)]
    for number, raw in enumerate(raws, start=1):
        found = read(raw, f"{where}: message {number}")
        if isinstance(found, Skip):
            skipped.append(found)
        else:
            messages.append(found)
    return messages, skipped
