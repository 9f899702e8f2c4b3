"""Questions about time, worked out by code from the dated lines recall finds.

"How many days passed between the gardening workshop and planting the
tomatoes?" needs two remembered lines, the day each describes, and a
subtraction.  Handed both dated lines, the 0.5B starter wrote the date tool's
JSON out as text and then said "7 days" (it was 4).  So for a question that
:func:`date_reasoning.parse_temporal_question` reads as date arithmetic, the
turn looks each event up on its own (one recall search per event phrase),
dates each line by what it says ("yesterday", "on the 10th of April") or,
failing that, by when it was said, and works the answer out
(:func:`date_reasoning.explain`).  The block shows the lines and ends with
the result ("Worked out from these dates: …"); the model only phrases it,
and the answer check holds it to the numbers (:class:`WorkedOut`).

A question that points at a day ("What did I do with Rachel on the
Wednesday two months ago?", "… in April?") searches the messages said on
that day or in the fortnight after (a line said later may tell of it: "last
Wednesday I …") and keeps those whose event falls in it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agenvoy_desktop.agent import recall
from agenvoy_desktop.agent.date_reasoning import (
    DatedMention,
    TemporalQuestion,
    best_mention,
    day_range,
    explain,
    local_date,
    parse_temporal_question,
)
from agenvoy_desktop.agent.date_reasoning.pointed import local_midnight_ns
from agenvoy_desktop.agent.recall import RecallBlock, RecallFloor, RecallItem
from agenvoy_desktop.agent.recall_lines import values_in
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.language.patterns import (
    alternatives,
    compiled,
    either,
    every,
    group,
    whole_words,
)

WORKED_OUT = "Worked out from these dates:"
EVENT_CANDIDATES = 20
LATER_TELLING_DAYS = 14
"""How long after a day a message may still tell of it ("last Wednesday …")."""
ON_DAY_ITEMS = 5
"""Lines said on the one day a question points at, shown even below the floor (the day
narrows them down more than any floor)."""
EVENT_SHARE = 0.5
"""The share of an event phrase's content words its line must hold to date it."""
_DAY_NS = 86_400 * 1_000_000_000


@dataclass(frozen=True, slots=True)
class WorkedOut:  # the answer check reads sentence, values and words (answer_check.Computed)
    """A question's dates and the result, as the block ends and the check holds it."""

    question: TemporalQuestion
    sentence: str
    """The result in one sentence (:func:`date_reasoning.explain`)."""
    items: tuple[RecallItem, ...]
    """The lines the dates came from (shown in the block, before any other)."""
    values: frozenset[str]
    """Numbers an answer must repeat one of ("6" for "6 days apart"; empty: no number)."""
    words: tuple[str, ...] = ()
    """For "which first": content words naming the event that came first."""
    later: tuple[str, ...] = ()
    """For "which first": content words naming the events that came after it."""
    days: tuple[dt.date, dt.date] | None = None
    """For "on_day": the first and last day the question points at."""


def work_out(
    store: MemoryStore,
    session_id: str,
    text: str,
    window_messages: int,
    *,
    floor: RecallFloor,
    now_ns: int,
    window_step: int = 0,
) -> WorkedOut | None:
    """Storage thread: the worked-out answer to a question about time (None: not one)."""
    question = parse_temporal_question(text)
    if question is None:
        return None
    today = local_date(now_ns)
    if question.kind == "on_day":
        return _on_day(
            store,
            session_id,
            text,
            question,
            window=(window_messages, window_step),
            floor=floor,
            today=today,
        )
    found: list[tuple[str, DatedMention]] = []
    items: list[RecallItem] = []
    for event in question.events:
        line = _line_for(store, session_id, event, (window_messages, window_step), floor)
        if line is None:
            continue
        items.append(line)
        found.append((event, best_mention(line.text, line.time_ns, event)))
    if not found:
        return None
    sentence = explain(question, found, today)
    complete = len(found) == len(question.events)
    first, later = _order_words(question, found) if complete else ((), ())
    return WorkedOut(
        question,
        sentence,
        tuple(items),
        _values(question, sentence) if complete else frozenset(),
        first,
        later=later,
    )


def _line_for(
    store: MemoryStore, session_id: str, event: str, window: tuple[int, int], floor: RecallFloor
) -> RecallItem | None:
    """The remembered line that tells of *event*: the strongest that holds half its words.

    *window* is the agent's (messages, step): what the prompt shows is not recalled."""
    candidates = recall.recall_candidates(
        store, session_id, event, window[0], EVENT_CANDIDATES, window_step=window[1]
    )
    for item in recall.apply_floor(candidates, floor, kind="personal"):
        if item.query_terms == 0 or item.matched_terms >= EVENT_SHARE * item.query_terms:
            return item
    return None


def _on_day(
    store: MemoryStore,
    session_id: str,
    text: str,
    question: TemporalQuestion,
    *,
    window: tuple[int, int],
    floor: RecallFloor,
    today: dt.date,
) -> WorkedOut | None:
    """Lines telling of what happened on the day (or days) the question points at."""
    days = day_range(question, today)
    if days is None:
        return None
    first, last = days
    start = local_midnight_ns(first)
    end = local_midnight_ns(last) + (LATER_TELLING_DAYS + 1) * _DAY_NS - 1
    # the event without the date phrase ("do with Rachel"): the range already holds the date
    query = " ".join(question.events) if recall.content_terms(" ".join(question.events)) else text
    found = recall.find_items(
        store, session_id, query, window[0], floor, time_range=(start, end), window_step=window[1]
    )
    if not found and first == last:  # one day asked about: what was said then is the answer
        found = recall.recall_candidates(
            store,
            session_id,
            text,
            window[0],
            ON_DAY_ITEMS,
            time_range=(start, end),
            window_step=window[1],
        )
    items = [
        item
        for item in found
        if first <= best_mention(item.text, item.time_ns).date <= last
        or first <= local_date(item.time_ns) <= last
    ]
    if not items:
        # told afterwards ("I attended a lecture on the 10th of April", said in May): the
        # date is in the line, not in when it was said
        later = recall.find_items(
            store,
            session_id,
            query,
            window[0],
            floor,
            time_range=(start, local_midnight_ns(today) + _DAY_NS - 1),
            window_step=window[1],
        )
        items = [i for i in later if first <= best_mention(i.text, i.time_ns).date <= last]
    sentence = explain(question, [], today)
    return WorkedOut(question, sentence, tuple(items), frozenset(), days=(first, last))


def _values(question: TemporalQuestion, sentence: str) -> frozenset[str]:
    """The numbers of the result an answer must repeat (none for "which first" and "when")."""
    if question.kind not in ("between", "ago"):
        return frozenset()
    tail = sentence.rsplit(":", 1)[-1] if question.kind == "between" else sentence
    return values_in(_without_dates(tail))


def _without_dates(text: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2}", " ", text)


def _order_words(
    question: TemporalQuestion, found: Sequence[tuple[str, DatedMention]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Words naming the event that came first and not the others, and words naming the
    others and not the first (kind "first" only; empty when the order is not known)."""
    if question.kind != "first" or len(found) < 2:
        return (), ()
    ordered = sorted(found, key=lambda pair: pair[1].date)
    if ordered[0][1].date == ordered[1][1].date:
        return (), ()
    first = recall.content_terms(ordered[0][0])
    others = [t for event, _ in ordered[1:] for t in recall.content_terms(event)]
    return (
        tuple(t for t in first if t not in others),
        tuple(dict.fromkeys(t for t in others if t not in first)),
    )


def with_dated_lines(worked: WorkedOut, block: RecallBlock) -> WorkedOut:
    """*worked* with the block's lines whose date falls in its days, where its own search
    found none: the event search may miss a line recall found ("a 2-day workshop I attended
    on the 17th and 18th of April"), and the month is then not empty."""
    if worked.question.kind != "on_day" or worked.items or worked.days is None:
        return worked
    first, last = worked.days
    dated = [i for i in block.items if first <= best_mention(i.text, i.time_ns).date <= last]
    return replace(worked, items=tuple(dated)) if dated else worked


_DAYS_ASKED = compiled(whole_words(every("dates.days_asked")), re.IGNORECASE)
_SPAN_COUNT = either(r"\d{1,2}", alternatives(every("dates.span_counts")))
_SPAN = compiled(group(rf"\b({_SPAN_COUNT})[\s-]", every("dates.span_days"), r"\b"), re.IGNORECASE)
"""A line's own span of days ("a 2-day workshop", "three days"): the count is group 1."""
_DAY_OF_MONTH = compiled(
    group(r"\b(?:[12]?\d|3[01])", every("numbers.ordinal_suffixes"), r"\b"), re.IGNORECASE
)


def with_days_counted(text: str, worked: WorkedOut) -> WorkedOut:
    """*worked* with the days its lines tell of added up, for "How many days did I spend
    … in April?": a line's own span ("a 2-day workshop"), else the days of the month it
    names ("on the 17th and 18th"), else one day — a 0.5B model handed "the 10th of April"
    and "a 2-day workshop" answered with the dates, not with 3."""
    if (
        worked.question.kind != "on_day"
        or not worked.items
        or worked.days is None
        or worked.days[0] == worked.days[1]
        or _DAYS_ASKED.search(text) is None
    ):
        return worked
    counts = [_days_told(item.text) for item in worked.items]
    total = sum(counts)
    each = " + ".join(
        f"{n} ({best_mention(item.text, item.time_ns).date.isoformat()})"
        for n, item in zip(counts, worked.items, strict=True)
    )
    unit = "day" if total == 1 else "days"
    sentence = f"the lines above tell of {each} = {total} {unit}."
    return replace(worked, sentence=sentence, values=frozenset({str(total)}))


def _days_told(line: str) -> int:
    """The days one line tells of: its span, else the days of the month it names, else 1."""
    if span := _SPAN.search(line):
        value = values_in(span.group(1))
        return int(next(iter(value))) if value else 1
    return max(1, len({m.group(0).casefold() for m in _DAY_OF_MONTH.finditer(line)}))


def with_worked_out(
    text: str,
    block: RecallBlock,
    worked: WorkedOut,
    *,
    header: str,
    now_ns: int,
) -> RecallBlock:
    """*block* with the lines the dates came from and the result as its last line."""
    if worked.question.kind == "on_day":
        if not worked.items and worked.days is not None:
            # "How many museums did I visit in December?" with nothing told of December
            first, last = worked.days
            span = first.isoformat() if first == last else f"{first} to {last}"
            nothing = f"{WORKED_OUT} nothing the user told you happened on {span}."
            return recall.with_result(text, block, [], nothing, header=header, now_ns=now_ns)
        # a month or a week needs no sentence, unless its days were counted; one day does
        # ("… was Wednesday, 2023-02-01")
        one_day = worked.days is not None and worked.days[0] == worked.days[1]
        footer = f"{WORKED_OUT} {worked.sentence}" if one_day or worked.values else ""
        return recall.with_result(text, block, worked.items, footer, header=header, now_ns=now_ns)
    return recall.with_result(
        text, block, worked.items, f"{WORKED_OUT} {worked.sentence}", header=header, now_ns=now_ns
    )
