"""Write a small profile with every kind of memory, as a released version writes it.

The upgrade tests (``tests/upgrade/``) open such a profile with the current
code and check that nothing was lost.  A fixture must be *made by the release
it stands for*, never edited by hand, so this script uses only APIs that
release has and is run against its code:

    git worktree add /tmp/release-0.1.0 <release commit>
    PYTHONPATH=/tmp/release-0.1.0 .venv/bin/python scripts/make_profile_fixture.py \\
        tests/upgrade/profiles/0.1.0 --embedding-model MODELS/all-MiniLM-L6-v2-f32.gguf

What it writes: two sessions (one with a tool call and its result), a
rolling summary with a decision, two error records (one resolved), settings
that differ from the defaults, a user entry in the model catalogue (a tiny
GGUF written beside it) and a document collection with its index, all
embedded with the real MiniLM model so the vectors are the ones a user has.
``expected.json`` next to it lists what the tests must find.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_793_000_000_000_000_000  # 2026-10-26, a fixed clock: the same times on every run
STEP = 60_000_000_000

TRIP = [
    ("user", "We are planning the trip to Graz in May. My sister Lena comes too."),
    ("assistant", "Noted: a trip to Graz in May, with your sister Lena."),
    ("user", "Book the Hotel Daniel, it is next to the station."),
    ("assistant", "I will remember the Hotel Daniel next to the station."),
    ("user", "My bike lock code is 4721."),
    ("assistant", "Got it: your bike lock code is 4721."),
]
NOTES = {
    "bike.md": (
        "# Bike\n\nTyre pressure: 4.5 bar front, 5 bar rear.\n\n"
        "## Lock\n\nThe D-lock key is in the drawer.\n"
    ),
    "graz.md": "# Graz\n\nHotel Daniel, Europaplatz 1. Check-in from 14:00.\n",
}


class Clock:
    """A clock that moves one minute per call, from :data:`T0`."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += STEP
        return self.now


def main(argv: list[str]) -> int:  # noqa: PLR0915 - one linear recipe, read top to bottom
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path, help="folder to write (replaced)")
    ap.add_argument("--embedding-model", type=Path, required=True)
    args = ap.parse_args(argv)

    import agenvoy_desktop
    from agenvoy_desktop.agent.services import AppServices
    from agenvoy_desktop.core.messages import Message, new_message_id
    from agenvoy_desktop.core.summary import KeyDecision, PastDiscussion, Summary, save_summary
    from agenvoy_desktop.llm.catalogue import ModelCatalogue
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.paths import app_paths
    from agenvoy_desktop.settings import Settings, save_settings

    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    paths = app_paths(out / "home").ensure()
    settings = Settings()
    settings.memory.window_messages = 12
    settings.models.temperature = 0.4
    settings.allowed_folders = [str(out / "home" / "notes")]
    save_settings(paths.settings_file, settings)

    clock = Clock()
    embedder = Embedder(args.embedding_model, n_threads=2)
    services = AppServices.open(paths, embedder=embedder, clock=clock)
    store, storage = services.store, services.storage

    def message(role: str, content: str, **extra: Any) -> Message:
        return Message(new_message_id(), role, content, clock(), extra=extra)

    trip = [message(role, text) for role, text in TRIP]
    call_id = "call_1"
    tools = [
        message("user", "What time is it?"),
        message(
            "assistant",
            "",
            tool_calls=[
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "current_time", "arguments": {}},
                }
            ],
        ),
        message(
            "tool", "2026-10-26 10:00", tool_call_id=call_id, name="current_time", arguments={}
        ),
        message("assistant", "It is ten o'clock."),
    ]
    trip_sid = storage.run_sync(store.import_messages, trip, None, title="Trip to Graz")
    time_sid = storage.run_sync(store.import_messages, tools, None, title="What time")
    summary = Summary(
        key_decisions=(
            KeyDecision("Stay at the Hotel Daniel", "2026-10-26", source="m2", by_user=False),
        ),
        past_discussions=(PastDiscussion("Trip", "Graz in May with Lena", "2026-10-26"),),
        current_discussion="Packing for the trip.",
    )
    save_summary(store.folder(trip_sid), summary)

    errors = services.errors
    failed = storage.run_sync(
        lambda: errors.add(
            tool="read_file",
            symptom="permission denied: /etc/shadow",
            action="",
            outcome="failed",
            source="user",
            session_id=trip_sid,
        )
    )
    resolved = storage.run_sync(
        lambda: errors.add(
            tool="current_time",
            symptom="unknown timezone 'CEST'",
            action="use the IANA name Europe/Vienna",
            outcome="resolved",
            source="user",
            session_id=time_sid,
        )
    )

    sys.path.insert(0, str(ROOT))
    from tests.tiny_gguf import write_tiny_llama

    tiny = write_tiny_llama(out / "home" / "tiny-chat.gguf")
    entry = ModelCatalogue(paths.models_dir).add(tiny, name="tiny-chat", role="chat")

    notes = out / "home" / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    from agenvoy_desktop.rag.indexer import index_collection
    from agenvoy_desktop.rag.registry import CollectionRegistry

    collection = CollectionRegistry(paths).add("notes", [notes], ["*.md"], [])
    index_collection(paths, collection, embedder)

    storage.run_sync(store.archive.checkpoint)
    storage.run_sync(errors.checkpoint)
    services.close()
    embedder.close()
    for lock in out.rglob("*.lock"):  # lock files of the writer that just exited
        lock.unlink()

    expected = {
        "written_by": agenvoy_desktop.__version__,
        "sessions": {
            trip_sid: {"title": "Trip to Graz", "messages": [m.id for m in trip]},
            time_sid: {"title": "What time", "messages": [m.id for m in tools]},
        },
        "summary_session": trip_sid,
        "summary": summary.to_json(),
        "error_records": {str(failed.id): "failed", str(resolved.id): "resolved"},
        "settings": {"window_messages": 12, "temperature": 0.4},
        "catalogue_entry": entry.name,
        "collection": {"name": "notes", "files": sorted(NOTES)},
    }
    # Paths inside the profile (a collection's folder, a catalogued model) are absolute, as
    # the release writes them; the tests open a copy elsewhere, where they point nowhere.
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
