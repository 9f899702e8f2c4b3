"""Several processes writing one profile at once: nothing lost, nothing orphaned.

Every test starts real processes (``python -c`` running a MemoryStore with
the hashing embedder), lets them collide on one session and then checks the
three layers: history.json is valid JSON and holds every message exactly
once, the archive agrees, and there is one vector per history message.

``AGENVOY_TORTURE_SCALE`` (an integer, default 1) multiplies the message
counts for a longer nightly run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.lifecycle import reset_session
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import AppPaths, app_paths
from tests.fakes import HashingEmbedder

SCALE = max(1, int(os.environ.get("AGENVOY_TORTURE_SCALE", "1")))
ROOT = Path(__file__).resolve().parents[2]
DIM = 64

WORKER = """
import json, sys, time
from pathlib import Path
from agenvoy_desktop.core.lifecycle import remove_session, reset_session
from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.paths import app_paths
from tests.fakes import HashingEmbedder

job = json.loads(sys.argv[1])
go = Path(job["go"])
while not go.exists():  # start together: the point is to collide
    time.sleep(0.002)
time.sleep(job.get("delay", 0.0))
class Slow(HashingEmbedder):  # an import long enough for the other process to cut in
    def submit(self, texts):
        time.sleep(job.get("slow", 0.0))
        return super().submit(texts)
store = open_memory(app_paths(Path(job["profile"])), Slow(dim=DIM))
tag, n, sid = job["tag"], job["n"], job["session"]
out = {"ok": False, "ids": []}
try:
    def make(i):
        role = "user" if i % 2 == 0 else "assistant"
        return Message(new_message_id(), role, f"{tag} message {i}", 1_700_000_000_000_000_000 + i)
    if job["kind"] == "import":
        msgs = [make(i) for i in range(n)]
        out["session"] = store.import_messages(msgs, sid)
        out["ids"] = [m.id for m in msgs]
    elif job["kind"] == "append":
        for i in range(n):
            m = make(i)
            store.append(sid, [m])
            out["ids"].append(m.id)
    elif job["kind"] == "open":  # start-up reconciliation is the point
        pass
    elif job["kind"] in ("reset", "remove"):
        (reset_session if job["kind"] == "reset" else remove_session)(store, sid)
    out["ok"] = True
    out["end"] = time.time()
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
finally:
    store.close()
print(json.dumps(out))
""".replace("DIM", str(DIM))


def _start(tmp_path: Path, jobs: Sequence[dict[str, object]]) -> list[dict[str, Any]]:
    """Run one process per job, released together; their JSON reports."""
    go = tmp_path / "go"
    go.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps({**job, "go": str(go)})],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job in jobs
    ]
    go.touch()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _history_ids(paths: AppPaths, sid: str) -> list[str]:
    path = paths.sessions_dir / sid / "history.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text("utf-8"))  # raises if not valid JSON
    return [str(item["id"]) for item in data]


def _check_layers(paths: AppPaths, sid: str) -> list[str]:
    """History ids after a consistency check of all three layers (opened without repair)."""
    ids = _history_ids(paths, sid)
    assert len(ids) == len(set(ids)), "a message is in history.json twice"
    store = MemoryStore(paths, HashingEmbedder(dim=DIM))
    try:
        archived = store.archive.all_msg_ids(sid) if store.archive.session(sid) else {}
        assert set(ids) <= set(archived), "history messages missing from the archive"
        live = set(store.archive.rowids_for(ids).values())
        vectors = store.archive.vector_rowids(sid)
        assert vectors == live, f"{len(vectors - live)} orphan / {len(live - vectors)} missing"
    finally:
        store.close()
    return ids


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    return tmp_path / "profile"


def test_two_importers_into_one_session(tmp_path: Path, profile: Path) -> None:
    open_memory(app_paths(profile), HashingEmbedder(dim=DIM)).close()  # the profile exists
    n = 300 * SCALE
    reports = _start(
        tmp_path,
        [
            {"kind": "import", "profile": str(profile), "tag": tag, "n": n, "session": "shared"}
            for tag in ("a", "b")
        ],
    )
    assert all(r["ok"] for r in reports), reports
    ids = _check_layers(app_paths(profile), "shared")
    assert sorted(ids) == sorted(i for r in reports for i in r["ids"])


def test_two_appenders_into_one_session(tmp_path: Path, profile: Path) -> None:
    with open_memory(app_paths(profile), HashingEmbedder(dim=DIM)) as store:
        store.create_session(session_id="chat")
    n = 150 * SCALE
    reports = _start(
        tmp_path,
        [
            {"kind": "append", "profile": str(profile), "tag": tag, "n": n, "session": "chat"}
            for tag in ("a", "b")
        ],
    )
    assert all(r["ok"] for r in reports), reports
    ids = _check_layers(app_paths(profile), "chat")
    assert sorted(ids) == sorted(i for r in reports for i in r["ids"])


def _import_vs(tmp_path: Path, profile: Path, op: str) -> None:
    """An import and a reset/remove of the same session, the second a moment later.

    Whatever the order the two end up in, the story must be consistent: the
    import's messages are all there or all gone, and gone only if the
    reset/remove finished after the import did (it ran second); no vector
    outlives its message.
    """
    with open_memory(app_paths(profile), HashingEmbedder(dim=DIM)) as store:
        sid = store.create_session(session_id="victim")
        store.append(sid, [Message("seed", "user", "seed", 1_700_000_000_000_000_000)])
    importer, other = _start(
        tmp_path,
        [
            {
                "kind": "import",
                "profile": str(profile),
                "tag": "i",
                "n": 400 * SCALE,
                "session": sid,
                "slow": 0.05,
            },
            {"kind": op, "profile": str(profile), "session": sid, "delay": 0.15, "tag": "", "n": 0},
        ],
    )
    assert importer["ok"], importer
    ids = set(_check_layers(app_paths(profile), sid))
    imported = set(importer["ids"])
    assert imported <= ids or not imported & ids, "part of the import is missing"
    if not imported & ids:
        assert other["ok"], other
        assert other["end"] > importer["end"], "the import reported success for lost messages"
    if other["ok"]:
        assert "seed" not in ids
    else:
        assert "is in use by" in str(other["error"]), other
        assert {"seed", *imported} <= ids


def test_reset_vs_import(tmp_path: Path, profile: Path) -> None:
    _import_vs(tmp_path, profile, "reset")


def test_remove_vs_import(tmp_path: Path, profile: Path) -> None:
    _import_vs(tmp_path, profile, "remove")


def test_start_up_check_skips_a_session_another_process_is_writing(
    tmp_path: Path, profile: Path
) -> None:
    """Stores opened (reconciling) while another process imports: no repair collides."""
    paths = app_paths(profile)
    with open_memory(paths, HashingEmbedder(dim=DIM)) as store:
        store.create_session(session_id="busy")
    opener = {"kind": "open", "profile": str(profile), "session": "busy", "tag": "", "n": 0}
    openers = [{**opener, "delay": delay} for delay in (0.05, 0.15, 0.3)]
    reports = _start(
        tmp_path,
        [
            {
                "kind": "import",
                "profile": str(profile),
                "tag": "i",
                "n": 400 * SCALE,
                "session": "busy",
                "slow": 0.05,
            },
            *openers,
        ],
    )
    assert all(r["ok"] for r in reports), reports
    ids = _check_layers(paths, "busy")
    assert sorted(ids) == sorted(reports[0]["ids"])


def test_a_summary_pass_over_messages_reset_meanwhile_is_discarded(
    tmp_path: Path, profile: Path
) -> None:
    import asyncio

    from agenvoy_desktop.core.summarizer import Summarizer
    from agenvoy_desktop.core.summary import load_meta, load_summary
    from tests.conftest import conversation
    from tests.scripted_model import ScriptedJsonModel, numbered_summary

    paths = app_paths(profile)
    store = open_memory(paths, HashingEmbedder(dim=DIM))
    other = open_memory(paths, HashingEmbedder(dim=DIM))  # stands in for the CLI
    try:
        sid = store.import_messages(conversation([f"message {i}" for i in range(40)]), "s")

        def answer(index: int, messages: list[Any]) -> Any:
            reset_session(other, sid)  # while the model is thinking
            return numbered_summary(index, messages)

        result = asyncio.run(Summarizer(store, ScriptedJsonModel(answer)).run(sid))
        assert result.stopped == "cancelled"
        assert "reset during the summary" in str(result.error)
        assert load_summary(store.folder(sid)) is None
        meta = load_meta(store.folder(sid))
        assert meta is None or meta.cursor_message_id is None
    finally:
        other.close()
        store.close()
