"""The last conversation in front of the model, for "What did we talk about last time?".

Proactive recall searches by the words of the message, and this question has
none to search with ("talk", "last", "time").  Recall found nothing, and the
starter, shown how to say it does not know, answered "I don't know: I can't
find it in what you've told me." with three earlier sessions in the list
beside it.  So a question about the previous conversation gets that
conversation instead: the last things the user said in the most recent
other session, labelled as such, in place of the recall block.

What the user said, not what the assistant answered: the answers may be the
model's own inventions (the same rule as recall's).
"""

from __future__ import annotations

import re

from agenvoy_desktop.agent.recall import (
    RecallBlock,
    RecallItem,
    clip,
    content_terms,
    format_block,
)
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.language import FALLBACK, by_script, language_of, languages
from agenvoy_desktop.language.patterns import compiled, either, every

RECAP = True
"""Whether a recap question gets the last conversation (benchmarks switch it)."""
RECAP_MESSAGES = 5
"""The user's last messages of that conversation shown (within recall's budget)."""
RECAP_ITEM_CHARS = 200
"""Each one clipped to this: five short lines say what it was about."""
SESSIONS_LOOKED_AT = 8
"""Recent sessions read to find one, other than this one, where the user said something."""

_ASKS = compiled(either(*every("recap.patterns")), re.IGNORECASE)
HEADERS = {
    lang.code: header for lang in languages() if (header := lang.text("recap.header")) is not None
}
"""Worded as recall's header (measured with the starter); "what the user said there"
made it answer "The user asked about the topics they discussed…"."""


_RECAP_WORDS = frozenset(content_terms(" ".join(every("recap.words"))))
"""Words of a recap question that name no topic ("talk", "last", "time", …)."""


def asks_for_recap(text: str) -> bool:
    """The message asks what an earlier conversation was about, and nothing more specific
    ("What did we talk about last time?", 上次我们聊了什么？, "Worüber haben wir
    gesprochen?"); "What did we discuss about the trip?" names a topic, which recall's
    search finds better."""
    if not RECAP or _ASKS.search(text) is None:
        return False
    if by_script(text) is not None:  # CJK: no words to tell a topic by
        return True
    return set(content_terms(text)) <= _RECAP_WORDS


def header_for(text: str) -> str:
    """The block's first line in the message's language (English for one without a header)."""
    return HEADERS.get(language_of(text), HEADERS[FALLBACK])


def last_conversation(
    store: MemoryStore, session_id: str, withheld: Withheld = NOTHING_WITHHELD
) -> list[RecallItem]:
    """Storage thread: the user's last messages in the most recent other session that
    has any, oldest first ([] when there is none).  Recap questions do not count: a
    session that only asked "What did we talk about?" is not the conversation meant.
    A session or message *withheld* (removed, reset or deleted in the window's undo
    window) is passed over as if it were gone already."""
    archive = store.archive
    for meta in archive.recent_sessions(SESSIONS_LOOKED_AT):
        if meta.session_id == session_id or meta.session_id in withheld.sessions:
            continue
        said = [
            row.message
            for row in archive.messages(meta.session_id, max(0, meta.next_seq - 60))
            if row.message.role == "user"
            and row.message.content.strip()
            and not row.message.is_tool_traffic
            and not asks_for_recap(row.message.content)  # nothing said in it
            and row.message.id not in withheld.messages
        ]
        if said:
            return [
                RecallItem(
                    message_id=m.id,
                    session_id=meta.session_id,
                    session_title=None,  # one session: its title on every line was copied
                    time_ns=m.time_ns,
                    role=m.role,
                    text=clip(m.content, RECAP_ITEM_CHARS),
                )
                for m in said[-RECAP_MESSAGES:]
            ]
    return []


def recap_block(items: list[RecallItem], message: str) -> RecallBlock:
    """The block that replaces recall's: *items* in the order they were said."""
    return format_block(list(reversed(items)), header=header_for(message))
