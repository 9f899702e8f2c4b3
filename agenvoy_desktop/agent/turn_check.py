"""A turn's answer-check stage: the final answer held against what memory showed the model.

What counts as wrong is ``agent/answer_check.py``'s to say; this stage is
what the turn does with its verdict.  A failed check retracts what was
streamed (:class:`~agenvoy_desktop.agent.turn_events.AnswerRetracted`) and
asks the model once more with a sharper instruction; when that fails too,
the remembered line, quoted and dated (or the worked-out result), is the
answer.  An answer that claims what memory does not hold is not asked
again: it is replaced by saying so at once, since a second round would
cost the user seconds to say the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from agenvoy_desktop.agent import answer_check, date_answers
from agenvoy_desktop.agent.answer_check import Evidence, Verdict
from agenvoy_desktop.agent.document_recall import DocumentPassages
from agenvoy_desktop.agent.not_remembered import asks_for_own_fact
from agenvoy_desktop.agent.recall import RecallBlock, content_terms
from agenvoy_desktop.agent.turn_events import (
    AnswerDelta,
    AnswerRetracted,
    EventSink,
    TurnStatus,
)
from agenvoy_desktop.agent.worked_out import WorkedOut
from agenvoy_desktop.core.summary_facts import Fact

log = logging.getLogger(__name__)

AskAgain = Callable[[Verdict], Awaitable[tuple[str, bool]]]
"""A second model round with the verdict's instruction: its text, and whether it called tools."""


@dataclass(frozen=True, slots=True)
class Shown:
    """What the model was shown this turn, which its answer must agree with."""

    question: str
    recall: RecallBlock
    passages: DocumentPassages
    facts: tuple[Fact, ...] = ()
    """The summary's facts: checked like remembered lines (a fact folded away is still one)."""
    worked: WorkedOut | None = None
    never_said: Sequence[str] = ()
    example: bool = False
    """The model was shown how to say "I don't know" (``agent/not_remembered.py``)."""
    search_found: bool = False
    """This turn's history search found something."""
    tool_results: bool = False
    """A tool call of this turn gave a result."""
    window: tuple[Evidence, ...] = ()
    """What the user told in the conversation's window (``agent/told_in_window.py``)."""

    def remembered(self) -> list[Evidence]:
        """Every line memory showed the model."""
        return [*self._recalled(), *self._passages(), *map(fact_evidence, self.facts)]

    def evidence(self, remembered: Sequence[Evidence]) -> list[Evidence]:
        """The lines an answer is checked against: what memory showed, and what the user
        told in the window besides, which the model read too.  The window counts only
        where memory showed something: a question memory was not asked about (a request,
        small talk) is no question about what the user told."""
        return [*remembered, *self.window] if remembered else []

    def unknown(self, evidence: Sequence[Evidence]) -> bool:
        """Nothing in memory answers the question: an answer that claims to know is wrong."""
        shown_nothing = self.example and not evidence and not self.search_found
        return shown_nothing or self._nothing_on_the_day()

    def _recalled(self) -> list[Evidence]:
        """The remembered messages, each followed by the neighbours shown with it."""
        lines: list[Evidence] = []
        for item in self.recall.items:
            latest = item.message_id in self.recall.latest
            lines.append(
                Evidence(
                    item.text, item.time_ns, item.role, latest=latest, closeness=item.closeness
                )
            )
            lines.extend(
                Evidence(near.text, item.time_ns, near.role, context=True)
                for near in item.neighbours
            )
        return lines

    def _passages(self) -> list[Evidence]:
        """The document passages, each with its source."""
        passages = self.passages
        return [
            Evidence(passage, role="document", source=citation)
            for citation, passage in zip(passages.citations, passages.texts, strict=False)
        ]

    def _nothing_on_the_day(self) -> bool:
        """A question about the user's own life on a day or month nothing was told of."""
        worked = self.worked
        return (
            isinstance(worked, date_answers.WorkedOut)
            and worked.question.kind == "on_day"
            and worked.days is not None
            and not worked.items
            and asks_for_own_fact(self.question)
        )


@dataclass(slots=True)
class Checked:
    """The answer the turn keeps, and how the check came to it."""

    answer: str
    answer_from: str = "model"
    """``model``, ``second try``, ``quote`` or ``not known`` (``TurnResult.answer_from``)."""
    problem: str = ""
    """What the check found wrong with the first answer ("" when nothing)."""
    replaced: list[str] = field(default_factory=list)
    """The answers retracted, in order."""


class AnswerChecker:
    """Checks one turn's final answer and, when it fails, corrects it in front of the user."""

    def __init__(
        self,
        shown: Shown,
        *,
        tool_names: Sequence[str],
        in_voice: Callable[[str], str],
        ask_again: AskAgain,
        emit: EventSink,
        stop: asyncio.Event,
    ) -> None:
        self.shown = shown
        remembered = shown.remembered()
        self.evidence = shown.evidence(remembered)
        self.tool_names = tool_names
        self.unknown = shown.unknown(remembered)
        self.in_voice = in_voice
        """The answer as said to the user (``agent/voice.py``); a quote is shown as it is."""
        self.ask_again = ask_again
        self.emit = emit
        self.stop = stop

    async def check(self, text: str) -> Checked:
        """*text* if it passes; else what replaces it: a second try, or a quote."""
        verdict = self._verdict(text)
        if verdict.ok:
            return Checked(self.in_voice(text))
        checked = Checked(text, problem=verdict.problem, replaced=[text])
        self.emit(AnswerRetracted(verdict.problem))
        if verdict.problem == "never told":
            # nothing to ask again about: what is not in memory is not known (and a second
            # round would cost the user seconds to say the same)
            log.info("the answer claimed what memory does not hold; saying so")
            self.emit(AnswerDelta(verdict.fallback))
            checked.answer, checked.answer_from = verdict.fallback, "not known"
            return checked
        return await self._second_try(text, verdict, checked)

    async def _second_try(self, text: str, verdict: Verdict, checked: Checked) -> Checked:
        """The model asked once more; its answer if that passes, else the quoted line."""
        log.info("the answer failed its check (%s); asking again", verdict.problem)
        self.emit(TurnStatus("checking"))
        second, called = await self.ask_again(verdict)
        if self.stop.is_set():
            checked.answer = self.in_voice(second)
            return checked
        again = self._verdict(second)
        if again.ok and not called and second.strip() and not _bare(second, verdict):
            checked.answer, checked.answer_from = self.in_voice(second), "second try"
            return checked
        fallback = verdict.fallback or again.fallback
        if not fallback:
            checked.answer = self.in_voice(second if second.strip() else text)
            return checked
        checked.replaced.append(second)
        self.emit(AnswerRetracted(again.problem or "no answer"))
        self.emit(AnswerDelta(fallback))
        checked.answer, checked.answer_from = fallback, "quote"
        return checked

    def _verdict(self, answer: str) -> Verdict:
        """:func:`answer_check.check` of *answer*, with everything this turn showed."""
        shown = self.shown
        return answer_check.check(
            shown.question,
            answer,
            self.evidence,
            tool_names=self.tool_names,
            computed=shown.worked,
            never_said=shown.never_said,
            unknown=self.unknown,
            tool_results=shown.tool_results,
        )


def _bare(second: str, verdict: Verdict) -> bool:
    """A second try at a contradicted yes or no that says nothing but the word ("No, not.",
    "Yes."): the quoted line tells the user the same and where it comes from."""
    return verdict.problem == "contradicts" and bool(verdict.fallback) and not content_terms(second)


def fact_evidence(fact: Fact) -> Evidence:
    """A summary fact as a line an answer is checked against, dated at noon of its day."""
    try:
        day = datetime.fromisoformat(fact.said_on).replace(hour=12).astimezone()
        when = int(day.timestamp() * 1e9)
    except ValueError:
        when = 0
    return Evidence(fact.text, when, fact.role)
