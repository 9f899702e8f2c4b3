"""The sessions list: titles and which sessions contain a text."""

from __future__ import annotations

from agenvoy_desktop.core.store import MemoryStore

TITLE_CHARS = 48
CONTENT_HITS = 500


def content_matches(store: MemoryStore, text: str) -> dict[str, int]:
    """Sessions whose messages contain *text* (keyword index), with hit counts."""
    counts: dict[str, int] = {}
    for item, _score in store.archive.keyword_search(text, limit=CONTENT_HITS):
        counts[item.session_id] = counts.get(item.session_id, 0) + 1
    return counts


def auto_title(store: MemoryStore, session_id: str) -> str | None:
    """Title an untitled session after its first user message (storage thread)."""
    meta = store.archive.session(session_id)
    if meta is None or meta.title:
        return None
    first = next(
        (
            r.message
            for r in store.archive.messages(session_id, 0, 20)
            if r.message.role == "user" and r.message.content.strip()
        ),
        None,
    )
    if first is None:
        return None
    flat = " ".join(first.content.split())
    title = flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1].rstrip() + "…"
    store.archive.set_title(session_id, title)
    return title
