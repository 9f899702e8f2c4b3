"""The inspector tests' prepared profile (the fixtures over it are in conftest.py).

The profile holds two sessions (one long enough to have a summary and
messages waiting to be summarised, one short), a ``summary.json`` with its
meta, pass history and the summary before its last pass, and error-memory
records of four tools.  Services get a scripted chat model (token counts), a
scripted JSON model for the summarizer, the hashing embedder and a fake
clock, so every test is deterministic and fast.

The screenshot script (``inspector_screenshots.py``) builds the same profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.error_memory import ErrorMemory, error_db_path
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import (
    KeyDecision,
    PassRecord,
    PastDiscussion,
    Summary,
    SummaryMeta,
    append_record,
    save_meta,
    save_summary,
)
from agenvoy_desktop.core.summary_facts import merge_facts, pick_facts
from agenvoy_desktop.paths import AppPaths
from tests.conftest import SECOND, T0, FakeClock, msg
from tests.fakes import HashingEmbedder
from tests.scripted_chat import ScriptedChatModel
from tests.scripted_model import ScriptedJsonModel, numbered_summary

DAY = 86_400 * SECOND
MAIN_TEXTS = [
    "I want to plan a trip to Kyoto in April for the cherry blossoms.",
    "Great idea. Early April is usually the peak; do you prefer hotels or a ryokan?",
    "A ryokan for two nights, then a business hotel near Kyoto station.",
    "Noted: two nights in a ryokan, then a hotel near the station.",
    "What about the budget? Let's keep it under 2000 euros including flights.",
    "Understood, a budget of 2000 euros including flights.",
    "Can you remind me which temples open early in the morning?",
    "Kiyomizu-dera opens at 6:00 and Fushimi Inari is open around the clock.",
    "Let's decide: we visit Fushimi Inari at sunrise on the first day.",
    "Decided: Fushimi Inari at sunrise on day one.",
    "Also, I need a vegetarian restaurant near Gion; let's book one.",
    "Shigetsu inside Tenryu-ji serves shojin ryori, Buddhist vegetarian cuisine.",
    "記憶系統 should remember that I am vegetarian.",
    "好的，我會記得你吃素。",
    "How do I get from Kansai airport to Kyoto?",
    "The Haruka limited express takes about 75 minutes to Kyoto station.",
    "Book the Haruka with the ICOCA discount then.",
    "I will note the ICOCA & Haruka discount ticket.",
    "What is the weather usually like in early April?",
    "Mild: around 8 to 18 °C, with occasional rain, so bring a light jacket.",
    "And the sakura forecast for this year?",
    "Forecasts say full bloom around April 3 in Kyoto.",
    "Let's move the trip to start on April 1.",
    "Okay: the trip now starts on April 1.",
    "Which day trip would you suggest, Nara or Osaka?",
    "Nara: the deer park and Todai-ji are an easy 45-minute train ride.",
    "Nara it is, on day three.",
    "Day three: Nara, with the deer park and Todai-ji.",
]
OTHER_TEXTS = [
    "Help me fix the bug in the parser of my notes app.",
    "Sure, what error do you see?",
    "It says KeyError: 'title' when a note has no front matter.",
    "Use dict.get('title') with a default instead of indexing.",
]


@dataclass
class Profile:
    """What the prepared profile holds, for assertions."""

    services: AppServices
    main: str
    other: str
    messages: dict[str, list[Message]]
    errors: ErrorMemory
    json_model: ScriptedJsonModel
    clock: FakeClock

    def folder(self, session_id: str) -> Path:
        return self.services.store.folder(session_id)


def _messages(texts: list[str], start: int) -> list[Message]:
    roles = ("user", "assistant")
    return [msg(roles[i % 2], text, start + i * 60 * SECOND) for i, text in enumerate(texts)]


LEFT_OUT = {"text": "Which day suits you?", "source": "m-left-out", "reason": "a question"}
"""What the fixture's last pass let go (the Summary tab lists it)."""


def _first_pass_decisions(messages: list[Message]) -> tuple[KeyDecision, ...]:
    """The decisions the first pass found; the second pass keeps them and adds more."""
    return (
        KeyDecision(
            "Stay two nights in a ryokan, then a hotel near Kyoto station",
            "2023-11-14",
            source=messages[2].id,
        ),
        KeyDecision(
            "Keep the budget under 2000 euros including flights",
            "2023-11-14",
            source=messages[4].id,
        ),
    )


def _write_earlier_summary(folder: Path, messages: list[Message]) -> None:
    """The summary after the first pass (messages 0-5): the second one's "before"."""
    earlier = Summary(
        key_decisions=_first_pass_decisions(messages),
        past_discussions=(
            PastDiscussion(
                "Lodging", "A ryokan for two nights, then a business hotel.", "2023-11-14"
            ),
            PastDiscussion("Temples", "Which temples open early.", "2023-11-14"),
        ),
        current_discussion="Planning a trip to Kyoto in April.",
        facts=merge_facts((), pick_facts(messages[:6]).facts)[0],
    )
    save_summary(folder, earlier)


def _write_summary(folder: Path, messages: list[Message]) -> None:
    _write_earlier_summary(folder, messages)
    summary = Summary(
        key_decisions=(
            *_first_pass_decisions(messages),
            KeyDecision(
                "Visit Fushimi Inari at sunrise on day one", "2023-11-14", source=messages[8].id
            ),
        ),
        past_discussions=(
            PastDiscussion(
                "Temples", "Which temples open early: Kiyomizu-dera at 6:00.", "2023-11-14"
            ),
            PastDiscussion(
                "Food", "Vegetarian options near Gion: Shigetsu at Tenryu-ji.", "2023-11-14"
            ),
        ),
        current_discussion="Planning a cherry-blossom trip to Kyoto in early April.",
        facts=merge_facts((), pick_facts(messages[:10]).facts)[0],
    )
    save_summary(folder, summary)
    last = messages[9]
    save_meta(
        folder,
        SummaryMeta(
            cursor_seq=9,
            cursor_message_id=last.id,
            cursor_time_ns=last.time_ns,
            summarized_messages=10,
            updated_ns=last.time_ns + SECOND,
            model="scripted-json",
            window_messages=16,
        ),
    )

    def cursor(index: int) -> dict[str, Any] | None:
        if index < 0:
            return None
        m = messages[index]
        return {"message_id": m.id, "seq": index, "time_ns": m.time_ns}

    for kind, first, last_i, before, error in (
        ("pass", 0, 5, -1, None),
        ("failed", 6, 9, 5, "model answer: empty summary for 4 messages with content"),
        ("pass", 6, 9, 5, None),
    ):
        append_record(
            folder,
            PassRecord(
                kind=kind,  # type: ignore[arg-type]
                time_ns=messages[last_i].time_ns + 30 * SECOND,
                model="scripted-json",
                chunk_first=cursor(first),
                chunk_last=cursor(last_i),
                cursor_before=cursor(before),
                cursor_after=cursor(before if kind == "failed" else last_i),
                messages=last_i - first + 1,
                duration_s=2.5,
                prompt_tokens=812 if kind == "pass" else 0,
                completion_tokens=164 if kind == "pass" else 0,
                error=error,
                extra={"facts_left_out": [LEFT_OUT]} if kind == "pass" and first == 6 else {},
            ),
        )


def _add_errors(errors: ErrorMemory) -> None:
    for tool, symptom, cause, action, outcome, words in (
        (
            "read_text_file",
            "FileNotFoundError: [Errno 2] No such file or directory: 'notes/todo.txt'",
            "The file lives in the Documents folder, not in notes/",
            "Call list_files on the allowed folder first, then read the exact path",
            "resolved",
            ["todo", "notes"],
        ),
        (
            "list_files",
            "PermissionError: /etc is outside the allowed folders",
            "Only folders allowed in Settings can be listed",
            "Retry with the same path",
            "failed",
            ["permission"],
        ),
        (
            "search_chat_history",
            "no results for the query 'hotel booking reference'",
            "",
            "Searched again with keyword mode and a date range",
            "abandoned",
            [],
        ),
        (
            "read_text_file",
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff",
            "The file is a binary PDF",
            "Tell the user the file is not text",
            "resolved",
            ["pdf"],
        ),
    ):
        errors.add(tool, symptom, cause=cause, action=action, outcome=outcome, keywords=words)


def open_profile(
    paths: AppPaths, *, with_chat_model: bool = True, json_answers: Any = numbered_summary
) -> Profile:
    """Build services over a freshly prepared profile (call ``close_profile`` after)."""
    clock = FakeClock(start=T0 + 10 * DAY)
    chat = ScriptedChatModel([["Hello!"]]) if with_chat_model else None
    services = AppServices.open(paths, embedder=HashingEmbedder(64), chat_model=chat, clock=clock)
    store = services.store
    main = services.storage.run_sync(store.create_session, "Kyoto trip")
    other = services.storage.run_sync(store.create_session, "Parser bug")
    messages = {
        main: _messages(MAIN_TEXTS, T0),
        other: _messages(OTHER_TEXTS, T0 + DAY),
    }
    for sid, items in messages.items():
        services.storage.run_sync(store.append, sid, items)
    _write_summary(store.folder(main), messages[main])
    errors = services.storage.run_sync(
        ErrorMemory, error_db_path(paths), HashingEmbedder(64), clock=clock
    )
    services.storage.run_sync(_add_errors, errors)
    json_model = ScriptedJsonModel(json_answers)
    services.errors = errors  # type: ignore[attr-defined]
    services.summarizer = Summarizer(  # type: ignore[attr-defined]
        store, json_model, window_messages=16, clock=clock, storage=services.storage
    )
    return Profile(services, main, other, messages, errors, json_model, clock)


def close_profile(profile: Profile) -> None:
    storage = profile.services.storage
    storage.run_sync(profile.errors.close)
    profile.services.close()
