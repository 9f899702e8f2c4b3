"""Clock talk: does the time in the system prompt make the starter talk about it unasked?

The profile is the one ``memory_qa.py`` builds (earlier LoCoMo sessions with
planted facts, real MiniLM, the starter model with the app's settings and a
fixed seed).  Every message opens a new session and runs once per variant of
the system prompt's clock line, the variants interleaved message by message:

* ``time``: "Current local time: 2026-12-01 15:05 (Tuesday, UTC+00:00)" on
  every turn, as the app sent it before;
* ``date``: "Today is Tuesday, 2026-12-01." where the shipped rule gives
  no clock line;
* ``none``: shipped for small models (``agent/policy.clock_in_prompt``): no
  clock line unless the message asks about the time or a date (a statement
  that only mentions "today" does not ask).

Messages: the statements, greetings and memory questions of
``memory_facts`` and :data:`TIME_QUESTIONS` below.  Reported per variant and
set: **clock talk** (an answer to a message without a time cue that names
the hour, a zone, "local time", today's date or today's weekday), memory
answers right, time questions answered right, tool calls per turn, median
model seconds.

    .venv/bin/python benchmarks/lab/clock_talk.py [--quick] [--tag NAME]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import _lab_path  # noqa: F401  (benchmarks/ on sys.path: benchlib and the suite's modules)
import memory_qa
from memory_facts import CHITCHAT, FACTS, STATEMENTS, answer_matches

from agenvoy_desktop.agent import turn as turn_module
from agenvoy_desktop.agent.context import Clock
from agenvoy_desktop.agent.policy import clock_in_prompt, needed_tools
from agenvoy_desktop.agent.services import AppServices

VARIANTS: tuple[str, ...] = ("time", "date", "none")
QUICK_PER_SET = 4
ZH_WEEKDAYS = ("一", "二", "三", "四", "五", "六", "日")
DE_WEEKDAYS = ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag")

Check = Callable[[str, datetime], bool]


def _hour_near(answer: str, now: datetime) -> bool:
    """A ``HH:MM`` within ten minutes of *now* (the turn takes seconds)."""
    for hh, mm in re.findall(r"\b(\d{1,2})[:.](\d{2})\b", answer):
        stamp = now.replace(hour=int(hh) % 24, minute=int(mm) % 60)
        if abs((stamp - now).total_seconds()) <= 600:
            return True
    return False


def _weekday(answer: str, now: datetime) -> bool:
    day = now.weekday()
    return (
        now.strftime("%A").lower() in answer.lower()
        or DE_WEEKDAYS[day].lower() in answer.lower()
        or any(f"{p}{ZH_WEEKDAYS[day]}" in answer for p in ("星期", "周", "禮拜", "礼拜"))
    )


def _date(answer: str, day: datetime) -> bool:
    text = answer.lower()
    return (
        day.strftime("%Y-%m-%d") in text
        or f"{day:%B} {day.day}".lower() in text
        or f"{day.day} {day:%B}".lower() in text
        or f"{day.month}月{day.day}" in answer
    )


TIME_QUESTIONS: tuple[tuple[str, Check], ...] = (
    ("What time is it?", _hour_near),
    ("What day of the week is it today?", _weekday),
    ("今天星期几？", _weekday),
    ("What's today's date?", _date),
    ("Wie spät ist es gerade?", _hour_near),
    ("Which month is it?", lambda a, now: now.strftime("%B").lower() in a.lower()),
    ("What is the date tomorrow?", lambda a, now: _date(a, now + timedelta(days=1))),
    ("现在几点了？", lambda a, now: _hour_near(a, now) or f"{now.hour}点" in a),
)


def clock_talk(answer: str, now: datetime) -> str:
    """What in *answer* speaks of the clock ("" if nothing)."""
    patterns = (
        r"\b\d{1,2}:\d{2}\b",
        r"\bUTC\b|\bGMT\b|time ?zone|local time|current time|current date|today is",
        r"当前时间|现在时间|現在時間|今天是",
    )
    for pattern in patterns:
        found = re.search(pattern, answer, re.IGNORECASE)
        if found:
            return found.group(0)
    if _date(answer, now):
        return "today's date"
    if _weekday(answer, now):
        return "today's weekday"
    return ""


def has_time_cue(text: str) -> bool:
    return bool(needed_tools(text, recalled=True) & {"current_time", "date_calc"})


@contextmanager
def variant(name: str) -> Iterator[None]:
    """Patch the turn's clock choice for one variant."""
    shipped = turn_module.__dict__["clock_in_prompt"]

    def choose(text: str, *, small_model: bool) -> Clock:
        clock = clock_in_prompt(text, small_model=small_model)
        if name == "time" or (name == "date" and clock == "time"):
            return "time"
        return "date" if name == "date" else clock

    setattr(turn_module, "clock_in_prompt", choose)  # noqa: B010 (the module does not export it)
    try:
        yield
    finally:
        setattr(turn_module, "clock_in_prompt", shipped)  # noqa: B010


def message_sets(quick: bool) -> list[tuple[str, str, Check | None, tuple[Any, ...]]]:
    """(set, text, time check, accepted memory answers) per message."""
    n = QUICK_PER_SET if quick else None
    rows: list[tuple[str, str, Check | None, tuple[Any, ...]]] = []
    rows += [("statement", s.text, None, ()) for s in STATEMENTS[:n]]
    rows += [("chitchat", text, None, ()) for text in CHITCHAT[:n]]
    rows += [("memory", f.question, None, f.accept) for f in FACTS[:n]]
    rows += [("time", text, check, ()) for text, check in TIME_QUESTIONS[:n]]
    return rows


async def ask_all(services: AppServices, args: argparse.Namespace) -> list[dict[str, Any]]:
    messages = message_sets(args.quick)
    rows = []
    for index, (kind, text, check, accept) in enumerate(messages):
        order = VARIANTS[index % len(VARIANTS) :] + VARIANTS[: index % len(VARIANTS)]
        for name in order:
            with variant(name):
                now = datetime.now().astimezone()
                turn = await memory_qa.ask(services, text)
            talk = "" if has_time_cue(text) else clock_talk(turn.answer, now)
            turn.extra = {"variant": name, "set": kind, "clock_talk": talk}
            if check is not None:
                turn.extra["time_right"] = check(turn.answer, now)
            if accept:
                turn.extra["answered"] = answer_matches(turn.answer, accept)
            verdict = "TALK" if talk else "-"
            memory_qa.progress(f"{name:4s} {kind}", index, len(messages), turn, verdict)
            rows.append(turn.row())
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        unasked = [r for r in mine if r["set"] != "time"]
        memory = [r for r in mine if r["set"] == "memory"]
        timed = [r for r in mine if r["set"] == "time"]
        out[name] = {
            "clock_talk": f"{sum(1 for r in unasked if r['clock_talk'])}/{len(unasked)}",
            "clock_talk_by_set": {
                kind: sum(1 for r in unasked if r["set"] == kind and r["clock_talk"])
                for kind in ("statement", "chitchat", "memory")
            },
            "memory_answered": f"{sum(1 for r in memory if r.get('answered'))}/{len(memory)}",
            "time_right": f"{sum(1 for r in timed if r.get('time_right'))}/{len(timed)}",
            **memory_qa.turn_costs(mine),
        }
    return out


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    run = memory_qa.run_variants("clock talk", ask_all, totals)
    memory_qa.run_in_profile("clock_talk", ap.parse_args(), run)


if __name__ == "__main__":
    main()
