"""Shared pieces of the kill -9 trials: a CLI launcher that dies on cue, and profile readers.

Run as ``python -m tests.reliability.torture ARGS...`` (from the repository
root) it is the real CLI — ``python -m agenvoy_desktop ARGS...`` — plus two
audit hooks that only watch:

- a *kill point* is every write the process asks for: a file opened for
  writing, a rename, an unlink, a folder made or removed, a SQLite statement
  other than a SELECT.  With ``AGENVOY_TORTURE_KILL_AT=k`` the process sends
  itself SIGKILL at the k-th one (``k:seconds`` instead arms a timer there,
  so the kill lands in the middle of whatever comes next); with
  ``AGENVOY_TORTURE_COUNT_FILE`` it writes the points it passed (a JSON list
  naming each), which is how a trial learns the range to draw from.  The
  product code is not changed: the hooks sit around it.
- any socket that is not AF_UNIX, and any name lookup, is reported on stderr
  (the app never reaches the network; a trial fails on the report).

Importing this module loads only the standard library, so the launcher
starts as fast as the CLI itself.
"""

from __future__ import annotations

import itertools
import json
import os
import runpy
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

KILL_AT_ENV = "AGENVOY_TORTURE_KILL_AT"
COUNT_FILE_ENV = "AGENVOY_TORTURE_COUNT_FILE"
SEEDS_ENV = "AGENVOY_TORTURE_SEEDS"
REPORT_ENV = "AGENVOY_TORTURE_REPORT"
"""A JSON Lines file each kill -9 trial appends its outcome to (read by scripts/torture.py)."""
NETWORK_MARK = "torture: network access:"
WRITE_EVENTS = frozenset(
    {
        "os.rename",  # os.replace too
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.truncate",
        "os.link",
        "os.symlink",
        "shutil.rmtree",
        "shutil.move",
    }
)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
NETWORK_LOOKUPS = frozenset(
    {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
)


# -- the launcher (runs in the child process) -----------------------------------------
class KillSwitch:
    """Counts kill points and fires SIGKILL at the chosen one."""

    def __init__(self, kill_at: int | None, delay_s: float) -> None:
        self.kill_at = kill_at
        self.delay_s = delay_s
        self._numbers = itertools.count(1)
        self.passed = 0
        self.seen: list[str] = []
        """What each point was (``open history.json``, ``INSERT INTO messages``, ...)."""

    def point(self, what: str) -> None:
        """The write *what* is about to happen."""
        self.passed = next(self._numbers)
        self.seen.append(what)
        if self.passed != self.kill_at:
            return
        if self.delay_s <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
        timer = threading.Timer(self.delay_s, os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()


def is_write_event(event: str, args: tuple[Any, ...]) -> bool:
    """Whether an audit event is a write (see the module docstring)."""
    if event in WRITE_EVENTS:
        return True
    if event != "open" or len(args) < 3:
        return False
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & WRITE_FLAGS)


def network_use(event: str, args: tuple[Any, ...]) -> str | None:
    """A description of *event* if it reaches beyond this machine's AF_UNIX sockets."""
    if event in NETWORK_LOOKUPS:
        return f"{event}{args!r}"
    if event == "socket.__new__" and len(args) >= 2:
        family = args[1]  # (self, family, type, proto), family already resolved
        if family != getattr(socket, "AF_UNIX", None):
            return f"{event} family={family!r}"
        return None
    if event in ("socket.connect", "socket.bind") and args:
        family = getattr(args[0], "family", None)
        if family != getattr(socket, "AF_UNIX", None):
            return f"{event} family={family!r} address={args[1:]!r}"
    return None


def _counting_connect(switch: KillSwitch) -> Any:
    """``sqlite3.connect`` whose connections count every non-SELECT statement."""

    class CountingConnection(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if not sql.lstrip()[:6].upper().startswith("SELECT"):
                switch.point(_sql_words(sql))
            return super().execute(sql, *args)

        def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
            switch.point(_sql_words(sql))
            return super().executemany(sql, *args)

        def executescript(self, script: str) -> sqlite3.Cursor:
            switch.point(_sql_words(script))
            return super().executescript(script)

        def commit(self) -> None:
            switch.point("COMMIT")
            super().commit()

    plain = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", CountingConnection)
        connection: sqlite3.Connection = plain(*args, **kwargs)
        return connection

    return connect


def _sql_words(sql: str) -> str:
    return " ".join(sql.split()[:4])


def _describe(event: str, args: tuple[Any, ...]) -> str:
    """``event`` and the file names it names (never the folders above them)."""
    names = [os.path.basename(os.fsdecode(a)) for a in args[:2] if isinstance(a, (str, bytes))]
    return " ".join([event, *names])


def _parse_kill_at(text: str | None) -> tuple[int | None, float]:
    if not text:
        return None, 0.0
    point, _, delay = text.partition(":")
    return int(point), float(delay or 0)


def launch(argv: Sequence[str]) -> None:
    """Run the CLI with *argv* under the kill switch and the network watch."""
    switch = KillSwitch(*_parse_kill_at(os.environ.get(KILL_AT_ENV)))
    count_file = os.environ.get(COUNT_FILE_ENV)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if is_write_event(event, args):
            switch.point(_describe(event, args))
        elif event.startswith("socket.") and (use := network_use(event, args)):
            sys.stderr.write(f"{NETWORK_MARK} {use}\n")

    sqlite3.connect = _counting_connect(switch)
    sys.addaudithook(hook)
    sys.argv = ["agenvoy-desktop", *argv]
    try:
        runpy.run_module("agenvoy_desktop", run_name="__main__", alter_sys=True)
    finally:
        if count_file:
            Path(count_file).write_text(json.dumps(switch.seen), "utf-8")


# -- the test side ----------------------------------------------------------------------
def locomo_turns(path: Path) -> list[str]:
    """Every dialogue turn of every LoCoMo conversation, in order (text only)."""
    data = json.loads(path.read_text("utf-8"))
    out: list[str] = []
    for sample in data:
        talk = sample["conversation"]
        for key in sorted(k for k in talk if k.startswith("session_") and k[8:].isdigit()):
            out.extend(str(turn["text"]) for turn in talk[key])
    return out


def jsonl_rows(texts: Sequence[str], *, tag: str, start_minute: int = 0) -> list[dict[str, Any]]:
    """Alternating user/assistant rows, one minute apart, each with ``ref`` = ``tag-i``."""
    start = datetime(2024, 3, 1, tzinfo=UTC)
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            "time": (start + timedelta(minutes=start_minute + i)).isoformat(),
            "ref": f"{tag}-{i}",
        }
        for i, text in enumerate(texts)
    ]


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


ArchivedRow = tuple[str, str, str, int, str | None]
"""(session, role, content, time_ns, ref) of one archived message."""


@dataclass(slots=True)
class ProfileState:
    """What a profile holds, read with sqlite3 and json only (not the app's code)."""

    messages: dict[str, ArchivedRow] = field(default_factory=dict)
    """Archived messages by message id."""
    sessions: set[str] = field(default_factory=set)
    """Sessions the archive knows."""
    folders: set[str] = field(default_factory=set)
    """Session folders on disk."""
    history: dict[str, list[str] | None] = field(default_factory=dict)
    """Message ids of each folder's history.json (None: no file; unreadable raises)."""
    vectors: dict[str, set[str]] = field(default_factory=dict)
    """Message ids that have at least one vector, by session."""
    summaries: dict[str, bytes] = field(default_factory=dict)
    litter: list[str] = field(default_factory=list)
    """Temp files a killed write left behind (harmless, but worth counting)."""

    def of(self, session_id: str) -> dict[str, ArchivedRow]:
        return {k: v for k, v in self.messages.items() if v[0] == session_id}


def read_profile(data_dir: Path) -> ProfileState:
    """Snapshot *data_dir*'s memory; a history.json that is not JSON raises ValueError."""
    memory = data_dir / "config" / "memory"
    state = ProfileState()
    db = sqlite3.connect(memory / "archive.sqlite3")
    try:
        for msg_id, sid, role, content, time_ns, ref in db.execute(
            "SELECT msg_id, session_id, role, content, time_ns, ref FROM messages"
        ):
            state.messages[msg_id] = (sid, role, content, time_ns, ref)
        state.sessions = {sid for (sid,) in db.execute("SELECT session_id FROM sessions")}
        for sid, msg_id in db.execute(
            "SELECT DISTINCT v.session_id, m.msg_id FROM vectors v "
            "JOIN messages m ON m.id = v.message_rowid"
        ):
            state.vectors.setdefault(sid, set()).add(msg_id)
    finally:
        db.close()
    sessions_dir = memory / "sessions"
    for folder in sorted(p for p in sessions_dir.iterdir() if p.is_dir()):
        if folder.name.startswith("."):
            state.litter.append(folder.name)
            continue
        state.folders.add(folder.name)
        state.history[folder.name] = _history_ids(folder / "history.json")
        summary = folder / "summary.json"
        if summary.exists():
            state.summaries[folder.name] = summary.read_bytes()
        state.litter += [f"{folder.name}/{p.name}" for p in folder.glob(".*.tmp")]
    return state


def _history_ids(path: Path) -> list[str] | None:
    if not path.exists():
        return None
    items = json.loads(path.read_bytes())
    if not isinstance(items, list):
        raise ValueError(f"{path} is not a JSON array")
    return [str(item["id"]) for item in items]


def minilm_or_skip(folder: Path) -> Path:
    """The real embedding model, converted into *folder*; skips the test if not installed."""
    import pytest

    from agenvoy_desktop.llm.minilm_convert import convert_minilm
    from agenvoy_desktop.llm.model_prep import (
        EMBEDDING_MODEL_FILENAME,
        ModelUnavailableError,
        find_source_dir,
    )

    try:
        source = find_source_dir()
    except ModelUnavailableError as exc:
        pytest.skip(f"embedding model package not installed: {exc}")
    return convert_minilm(source, folder / EMBEDDING_MODEL_FILENAME)


def record_outcome(outcome: Mapping[str, Any]) -> None:
    """Append one trial's outcome to ``$AGENVOY_TORTURE_REPORT`` (when set)."""
    target = os.environ.get(REPORT_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(outcome, sort_keys=True) + "\n")


if __name__ == "__main__":
    launch(sys.argv[1:])
