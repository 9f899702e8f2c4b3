"""The result code works out for a question, added to the recall block (one place for every kind).

A question about time (``agent/date_answers.py``), a total or difference
of two remembered numbers (``agent/number_answers.py``) or which way a
remembered amount changed (``agent/change_answers.py``) gets its lines and
the result at the end of the block; the answer check then holds the answer
to the result (``agent/answer_check.py``).  The turn and the benchmarks
call this one function, so they show the model the same block.
"""

from __future__ import annotations

from agenvoy_desktop.agent import change_answers, date_answers, number_answers
from agenvoy_desktop.agent.recall import RecallBlock, RecallFloor, with_result
from agenvoy_desktop.core.store import MemoryStore

WorkedOut = (
    date_answers.WorkedOut | number_answers.NumbersWorkedOut | change_answers.ChangeWorkedOut
)


def add_worked_out(
    store: MemoryStore,
    session_id: str,
    text: str,
    block: RecallBlock,
    *,
    window_messages: int,
    floor: RecallFloor,
    header: str,
    now_ns: int,
    window_step: int = 0,
) -> tuple[RecallBlock, WorkedOut | None]:
    """Storage thread: *block* with the worked-out result for *text*, if it asks for one."""
    dated = date_answers.work_out(
        store,
        session_id,
        text,
        window_messages,
        floor=floor,
        now_ns=now_ns,
        window_step=window_step,
    )
    if dated is not None:
        dated = date_answers.with_dated_lines(dated, block)
        dated = date_answers.with_days_counted(text, dated)
        return date_answers.with_worked_out(text, block, dated, header=header, now_ns=now_ns), dated
    summed = number_answers.work_out(
        store, session_id, text, window_messages, floor=floor, window_step=window_step
    )
    if summed is not None:
        result = f"{number_answers.WORKED_OUT} {summed.sentence}"
        merged = with_result(text, block, summed.items, result, header=header, now_ns=now_ns)
        return merged, summed
    changed = change_answers.work_out(text, block.items)
    if changed is not None:
        result = f"{number_answers.WORKED_OUT} {changed.sentence}"
        merged = with_result(text, block, changed.items, result, header=header, now_ns=now_ns)
        return merged, changed
    return block, None
