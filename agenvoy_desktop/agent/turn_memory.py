"""A turn's first stage: what memory holds for the user's message.

Before any model round, the turn looks in two places at once: the
conversation memory (proactive recall, on the storage thread:
``agent/recall.py``) and the user's documents (a worker thread:
``agent/document_recall.py``).  A question about the user's own life that
finds nothing is searched again in the archive's other languages, by the
chat model's translation (``agent/query_translation.py``); "What did we talk
about last time?" gets the last conversation instead (``agent/recap.py``);
a question about time, a total or a difference gets its result worked out
by code (``agent/worked_out.py``), and the words of the question the user
never said are named (``agent/never_said.py``).

Recall helps an answer but is no precondition for one: every failure here
is logged and leaves the block empty, and the turn answers without it.

Nothing withheld is recalled: a session the window removed or reset, or a
message it deleted, whose undo window is still open (:data:`turn_withheld`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from agenvoy_desktop.agent import query_translation, recap
from agenvoy_desktop.agent.document_recall import DocumentPassages
from agenvoy_desktop.agent.never_said import asks_about_own_past, never_said
from agenvoy_desktop.agent.not_remembered import asks_for_own_fact, language_of
from agenvoy_desktop.agent.policy import wants_recall
from agenvoy_desktop.agent.recall import (
    RecallBlock,
    RecallFloor,
    RecallItem,
    find_block,
    header_for,
    said_at_named_time,
    withholding,
)
from agenvoy_desktop.agent.storage import Storage
from agenvoy_desktop.agent.told_in_window import told_in_window
from agenvoy_desktop.agent.worked_out import WorkedOut, add_worked_out
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.model_api import ChatModel, TextDelta
from agenvoy_desktop.core.search import NOTHING_WITHHELD, Withheld
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.timeutil import local_date

log = logging.getLogger(__name__)

turn_withheld: ContextVar[Callable[[], Withheld]] = ContextVar(
    "turn_withheld", default=lambda: NOTHING_WITHHELD
)
"""What the running turn's lookup leaves out, asked on the event loop before each search.

Set around a turn by whoever knows what is in an undo window (the window's
services: ``agent/services.py``), as ``turn.current_session`` is set by the
agent: the turn builds its lookup itself."""


@dataclass(slots=True)
class Remembered:
    """What the lookup found for one message."""

    recall: RecallBlock = field(default_factory=RecallBlock)
    passages: DocumentPassages = field(default_factory=DocumentPassages)
    worked: WorkedOut | None = None
    """The result code worked out for a question about time (``agent/date_answers.py``)."""
    never_said: list[str] = field(default_factory=list)
    """Words of the question the user never said (``agent/never_said.py``)."""
    searched_as: str = ""
    """The translation recall searched with, when the message's own words found nothing."""
    searched_in: str = ""

    @property
    def text(self) -> str:
        """What proactive recall adds to the prompt: remembered messages, then passages."""
        return "\n\n".join(t for t in (self.recall.text, self.passages.text) if t)


@dataclass(frozen=True, slots=True)
class LookupSettings:
    """The agent's settings the lookup reads (``agent_config.AgentConfig``'s)."""

    small_model: bool
    floor: RecallFloor
    window_messages: int
    window_step: int


class MemoryLookup:
    """Searches conversation memory and documents for one message of one session."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        storage: Storage,
        model: ChatModel,
        documents: Callable[[str], DocumentPassages] | None,
        settings: LookupSettings,
        session_id: str,
        stop: asyncio.Event,
        withheld: Callable[[], Withheld] | None = None,
        translate: bool = True,
    ) -> None:
        self.store = store
        self.storage = storage
        self.model = model
        self.documents = documents
        self.settings = settings
        self.sid = session_id
        self.stop = stop
        self.translate = translate
        """Whether a question that finds nothing may ask the chat model for a translation
        (not while a draft's prompt is only being prepared: ``Agent.draft_changed``)."""
        self.withheld = turn_withheld.get() if withheld is None else withheld
        """Sessions and messages in an undo window (called on the event loop)."""
        self.found = Remembered()

    def wants_recall(self, user: Message) -> bool:
        """:func:`~agenvoy_desktop.agent.policy.wants_recall` for this agent's model."""
        return wants_recall(user.content, small_model=self.settings.small_model)

    async def look(self, user: Message) -> Remembered:
        """The conversation memory (storage thread) and the documents (a worker thread),
        searched at the same time."""
        self.found.recall, self.found.passages = await asyncio.gather(
            self._recall_messages(user), self._find_passages(user.content)
        )
        return self.found

    async def _find_passages(self, message: str) -> DocumentPassages:
        """Worker thread: the document passages for *message*; a failure only leaves them out."""
        if self.documents is None:
            return DocumentPassages()
        try:
            return await asyncio.to_thread(self.documents, message)
        except Exception:
            log.warning("document recall failed; answering without it", exc_info=True)
            return DocumentPassages()

    async def _recall_messages(self, user: Message) -> RecallBlock:
        """What the user said before that fits *user*; nothing for a small model's statement.

        :func:`~agenvoy_desktop.agent.policy.wants_recall` says why.  Document
        passages are not affected: they were not what the starter echoed.
        """
        if not self.wants_recall(user):
            return RecallBlock()
        withheld = self.withheld()
        if recap.asks_for_recap(user.content):
            said = await self.storage.run(self._last_conversation, withheld)
            if said:
                return recap.recap_block(said, user.content)
        found = await self.storage.run(self._find_recall, user, None, withheld)
        if found.items or not self.translate:
            return found
        for language in await self._translate_into(user):
            translated = await self._translate(user.content, language)
            if not translated:
                continue
            self.found.searched_as = translated
            self.found.searched_in = language
            found = await self.storage.run(self._find_recall, user, translated, withheld)
            if found.items:
                break
        return found

    def _last_conversation(self, withheld: Withheld) -> list[RecallItem]:
        """Storage thread: :func:`recap.last_conversation`; a failed read leaves it to
        recall's search (recall helps an answer but is no precondition for one)."""
        try:
            return recap.last_conversation(self.store, self.sid, withheld)
        except Exception:
            log.warning("could not read the last conversation", exc_info=True)
            return []

    async def _translate_into(self, user: Message) -> list[str]:
        """The languages to search a question about the user's own life in, besides its
        own: English for any other, the archive's other languages for English
        (:mod:`agent.query_translation`)."""
        if not query_translation.TRANSLATE or not asks_for_own_fact(user.content):
            return []
        if language_of(user.content) != "en":
            return ["en"]
        if not query_translation.FROM_ENGLISH:
            return []
        try:
            return await self.storage.run(query_translation.other_languages, self.store.archive)
        except Exception:  # recall helps an answer but is no precondition for one
            log.warning("could not read which languages the archive holds", exc_info=True)
            return []

    async def _translate(self, text: str, language: str) -> str:
        """The question in *language*, by the chat model ("" when it gives none usable)."""
        parts: list[str] = []
        try:
            async for event in self.model.chat(
                query_translation.translation_prompt(text, language),
                max_tokens=query_translation.MAX_TOKENS,
                temperature=0.0,
                stop=self.stop,
            ):
                if isinstance(event, TextDelta):
                    parts.append(event.text)
        except Exception:  # recall helps an answer but is no precondition for one
            log.warning("could not translate the question for recall", exc_info=True)
            return ""
        return query_translation.usable("".join(parts), language, text)

    def _find_recall(
        self, user: Message, searched: str | None = None, withheld: Withheld = NOTHING_WITHHELD
    ) -> RecallBlock:
        """Storage thread: search, floor and block, leaving *withheld* out.

        *searched*: the text to search with instead of the message (its English
        translation); the block's header still follows the message.  A failing
        search (a damaged index, a missing embedder) leaves the block empty.
        """
        with withholding(withheld):
            return self._find_recall_block(user, searched)

    def _find_recall_block(self, user: Message, searched: str | None) -> RecallBlock:
        """:meth:`_find_recall` inside its :func:`~agenvoy_desktop.agent.recall.withholding`."""
        settings = self.settings
        text = user.content if searched is None else searched
        floor = settings.floor
        if searched is not None:
            floor = query_translation.stricter(floor)
        header, now = header_for(user.content), self.store.clock()
        window, step = settings.window_messages, settings.window_step
        try:
            block = find_block(
                self.store,
                self.sid,
                text,
                window,
                floor,
                header=header,
                now_ns=now,
                window_step=step,
            )
            if searched is None:
                block, self.found.worked = add_worked_out(
                    self.store,
                    self.sid,
                    text,
                    block,
                    window_messages=window,
                    floor=floor,
                    header=header,
                    now_ns=now,
                    window_step=step,
                )
            if (
                searched is None
                and asks_about_own_past(user.content)
                and not said_at_named_time(text, block.items, local_date(now))
            ):
                # after the worked-out lines: a name one of them holds was told
                told = told_in_window(self.store.window(self.sid, window, step), user.id)
                self.found.never_said = never_said(
                    self.store, text, block.items, [line.text for line in told]
                )
        except Exception:
            log.warning("proactive recall failed; answering without it", exc_info=True)
            return RecallBlock()
        return block
