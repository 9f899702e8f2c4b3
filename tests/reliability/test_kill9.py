"""kill -9 in the middle of import, compaction, reset and remove loses nothing.

Each trial copies a prepared profile (two sessions of LoCoMo turns, embedded
with the real MiniLM model, a summary on the first), runs one operation as a
real CLI process and kills it with SIGKILL at a seeded moment: at the k-th
write the process makes (see ``torture.py``), or after a random delay within
the operation's measured duration.  Fresh processes then open the profile
(``sessions``, ``doctor``, ``doctor --repair``, ``doctor``) and the trial
checks, reading the files itself:

- no crash: every follow-up exits as documented, no "internal error";
- no data lost: every message archived before the operation is still there,
  unchanged (for reset/remove: those of the other session), and an import
  is all in or all out;
- reset and remove are fully done or not done at all;
- every history.json is valid JSON, each of its messages is archived and has
  a vector, and doctor finds nothing left after the repair;
- the profile is still private (nothing readable by group or others).

``AGENVOY_TORTURE_SEEDS`` sets the trials per operation (3 by default, 20
for the nightly run); ``AGENVOY_TORTURE_REPORT`` collects the outcomes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.torture import (
    COUNT_FILE_ENV,
    KILL_AT_ENV,
    NETWORK_MARK,
    SEEDS_ENV,
    ProfileState,
    jsonl_rows,
    locomo_turns,
    minilm_or_skip,
    read_profile,
    record_outcome,
    write_jsonl,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX"),
]

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"
OPERATIONS = ("import", "compaction", "reset", "remove")
SEEDS = int(os.environ.get(SEEDS_ENV, "3"))
SMALL_HISTORY = 16 * 1024
"""The smallest ``memory.max_history_bytes`` settings accept: compaction on every import."""
HANG_GUARD_S = 300.0
"""Only so a hung process fails the trial instead of the suite; not a timing claim."""
BASE_MESSAGES = {"s1": 100, "s2": 20}
IMPORTED = 40


@dataclass(frozen=True, slots=True)
class Run:
    """One finished CLI process."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def trouble(self, allowed: tuple[int, ...] = (0,)) -> list[str]:
        """What makes this run a crash (empty when it exited as documented)."""
        out = []
        if self.returncode not in allowed:
            out.append(f"`{' '.join(self.args)}` exited {self.returncode}: {self.stderr[-300:]}")
        for mark in ("internal error", "Traceback", NETWORK_MARK):
            if mark in self.stderr:
                out.append(f"`{' '.join(self.args)}` printed {mark!r}: {self.stderr[-300:]}")
        return out


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (KILL_AT_ENV, COUNT_FILE_ENV)}
    return {**env, **extra}


def launcher(data_dir: Path, *args: str) -> list[str]:
    """The CLI under the kill switch and network watch of ``torture.py``."""
    return [sys.executable, "-m", "tests.reliability.torture", "--data-dir", str(data_dir), *args]


def run_cli(data_dir: Path, *args: str, **env: str) -> Run:
    proc = subprocess.run(
        launcher(data_dir, *args),
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    return Run(args, proc.returncode, proc.stdout, proc.stderr)


def kill_after(data_dir: Path, args: tuple[str, ...], delay_s: float) -> Run:
    """The plain CLI, SIGKILLed from outside after *delay_s* (if still running)."""
    command = [sys.executable, "-m", "agenvoy_desktop", "--data-dir", str(data_dir), *args]
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            proc.wait(timeout=delay_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    return Run(args, proc.returncode, out, err)


# -- prepared profiles -----------------------------------------------------------------
@dataclass(slots=True)
class Base:
    """A prepared profile for one operation, and how long / how many writes the operation takes."""

    operation: str
    data_dir: Path
    args: tuple[str, ...]
    kill_points: list[str] = field(default_factory=list)
    """What each write of an uninterrupted run was, in order (kill point k is [k - 1])."""
    seconds: float = 0.0


@dataclass(slots=True)
class Lab:
    """Everything the trials share: the texts, the converted model, the prepared profiles."""

    root: Path
    model: Path
    turns: list[str]
    bases: dict[str, Base] = field(default_factory=dict)

    def base(self, operation: str) -> Base:
        if operation not in self.bases:
            self.bases[operation] = self._prepare(operation)
        return self.bases[operation]

    def _prepare(self, operation: str) -> Base:
        data_dir = self.root / f"base-{operation}"
        shutil.rmtree(data_dir, ignore_errors=True)  # what an earlier failed attempt left
        memory: dict[str, Any] = {}
        if operation == "compaction":
            memory["max_history_bytes"] = SMALL_HISTORY
        settings = {"version": 1, "models": {"embedding_model": str(self.model)}, "memory": memory}
        (data_dir / "config").mkdir(parents=True)
        (data_dir / "config" / "settings.json").write_text(json.dumps(settings), "utf-8")
        start = 0
        for sid, count in BASE_MESSAGES.items():
            rows = jsonl_rows(self.turns[start : start + count], tag=sid, start_minute=start)
            source = write_jsonl(self.root / f"{sid}.jsonl", rows)
            run = run_cli(data_dir, "import", str(source), "--session", sid)
            assert not run.trouble(), run
            start += count
        _save_summary(data_dir, "s1")
        new = jsonl_rows(self.turns[start : start + IMPORTED], tag="new", start_minute=start)
        new_file = write_jsonl(self.root / "new.jsonl", new)
        args = {
            "import": ("import", str(new_file), "--session", "s1"),
            "compaction": ("import", str(new_file), "--session", "s1"),
            "reset": ("reset", "s1"),
            "remove": ("remove", "s1"),
        }[operation]
        return self._calibrated(Base(operation, data_dir, args))

    def _calibrated(self, base: Base) -> Base:
        """Run the operation once, uninterrupted, to learn its kill points and duration."""
        trial = self.root / f"calibrate-{base.operation}"
        shutil.rmtree(trial, ignore_errors=True)
        shutil.copytree(base.data_dir, trial)
        count_file = self.root / f"count-{base.operation}"
        began = time.monotonic()
        run = run_cli(trial, *base.args, **{COUNT_FILE_ENV: str(count_file)})
        base.seconds = time.monotonic() - began
        assert not run.trouble(), run
        base.kill_points = json.loads(count_file.read_text("utf-8"))
        if base.operation == "compaction":
            assert _events(trial, "compaction") > _events(base.data_dir, "compaction")
        return base


def _save_summary(data_dir: Path, session_id: str) -> None:
    from agenvoy_desktop.core.summary import Summary, save_summary

    folder = data_dir / "config" / "memory" / "sessions" / session_id
    save_summary(folder, Summary(current_discussion="catching up about family and painting"))


def _events(data_dir: Path, kind: str) -> int:
    import sqlite3

    db = sqlite3.connect(data_dir / "config" / "memory" / "archive.sqlite3")
    try:
        return int(db.execute("SELECT count(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0])
    finally:
        db.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    root = tmp_path_factory.mktemp("kill9")
    model = minilm_or_skip(root)
    yield Lab(root=root, model=model, turns=locomo_turns(LOCOMO))
    shutil.rmtree(root, ignore_errors=True)  # ~90 MB of model and copies per run


# -- one trial -----------------------------------------------------------------------------
@dataclass(slots=True)
class Trial:
    """The moment a trial kills the operation, drawn from its seed."""

    mode: str
    kill_point: int = 0
    delay_s: float = 0.0

    @classmethod
    def draw(cls, base: Base, seed: int) -> Trial:
        rng = random.Random(f"{base.operation}:{seed}")
        if seed % 4 == 3:  # one in four: from outside, at a random time
            return cls("timer", delay_s=rng.uniform(0.0, base.seconds))
        point = rng.randint(1, len(base.kill_points))
        delay = rng.choice([0.0, 0.0, rng.uniform(0.0, 0.02)])  # sometimes mid-write
        return cls("write", kill_point=point, delay_s=delay)

    def run(self, base: Base, data_dir: Path) -> Run:
        if self.mode == "timer":
            return kill_after(data_dir, base.args, self.delay_s)
        return run_cli(data_dir, *base.args, **{KILL_AT_ENV: f"{self.kill_point}:{self.delay_s}"})


def recover(data_dir: Path) -> list[str]:
    """Open the profile the way a user would after the crash; what went wrong (crashes)."""
    problems: list[str] = []
    listing = run_cli(data_dir, "sessions", "--json")
    problems += listing.trouble()
    problems += run_cli(data_dir, "doctor", "--json").trouble(allowed=(0, 3))
    problems += run_cli(data_dir, "doctor", "--repair", "--json").trouble()
    final = run_cli(data_dir, "doctor", "--json")
    problems += final.trouble()
    if not final.returncode and json.loads(final.stdout or "null") != []:
        problems.append(f"doctor still finds problems after --repair: {final.stdout[:300]}")
    return problems


def check_layers(after: ProfileState) -> list[str]:
    """Every history message is archived (in its session) and has a vector."""
    problems = []
    for sid, ids in after.history.items():
        for msg_id in ids or []:
            row = after.messages.get(msg_id)
            if row is None or row[0] != sid:
                problems.append(f"{sid}: history message {msg_id} not in the archive")
        if set(ids or []) != after.vectors.get(sid, set()):
            problems.append(
                f"{sid}: {len(ids or [])} history messages but "
                f"{len(after.vectors.get(sid, set()))} with vectors"
            )
    return problems


def lost_messages(before: ProfileState, after: ProfileState, sessions: set[str]) -> list[str]:
    """Messages of *sessions* archived before that are gone or changed now."""
    return [
        msg_id
        for msg_id, row in before.messages.items()
        if row[0] in sessions and after.messages.get(msg_id) != row
    ]


def check_import(after: ProfileState, killed: bool) -> list[str]:
    new = [row for row in after.of("s1").values() if (row[4] or "").startswith("new-")]
    if len(new) not in ((0, IMPORTED) if killed else (IMPORTED,)):
        return [f"import half done: {len(new)} of {IMPORTED} imported messages archived"]
    return []


def _unchanged(before: ProfileState, after: ProfileState, session_id: str) -> bool:
    """The session's archive, history.json and summary are exactly as before."""
    return (
        after.of(session_id) == before.of(session_id)
        and after.history.get(session_id) == before.history.get(session_id)
        and after.summaries.get(session_id) == before.summaries.get(session_id)
    )


def check_reset(before: ProfileState, after: ProfileState, killed: bool) -> list[str]:
    """Reset: s1 as before, or s1 empty with its summary kept; nothing in between."""
    left = after.of("s1")
    if left and killed:
        same = _unchanged(before, after, "s1")
        return [] if same else ["reset half done: s1 changed but not cleared"]
    problems = []
    if left:
        problems.append(f"reset left {len(left)} archived messages")
    if after.history.get("s1"):
        problems.append("reset left history.json messages")
    if after.vectors.get("s1"):
        problems.append("reset left vectors")
    if after.summaries.get("s1") != before.summaries["s1"]:
        problems.append("reset lost the summary")
    return problems


def check_remove(before: ProfileState, after: ProfileState, killed: bool) -> list[str]:
    """Remove: s1 entirely as before, or entirely gone."""
    traces = {
        "folder": "s1" in after.folders,
        "archive session": "s1" in after.sessions,
        "messages": bool(after.of("s1")),
        "vectors": bool(after.vectors.get("s1")),
    }
    if not any(traces.values()):
        return []
    if killed and all(traces.values()):
        same = _unchanged(before, after, "s1")
        return [] if same else ["remove half done: s1 changed but still there"]
    return [f"remove half done: left {', '.join(k for k, v in traces.items() if v)}"]


def judge(
    operation: str, before: ProfileState, after: ProfileState, killed: bool
) -> tuple[list[str], list[str]]:
    """(lost message ids, other problems) of one recovered trial."""
    problems = check_layers(after)
    if operation in ("import", "compaction"):
        lost = lost_messages(before, after, before.sessions)
        problems += check_import(after, killed)
    else:
        lost = lost_messages(before, after, before.sessions - {"s1"})
        if after.of("s1"):  # not reset or removed: then all of it must be there
            lost += lost_messages(before, after, {"s1"})
        checker = check_reset if operation == "reset" else check_remove
        problems += checker(before, after, killed)
    return lost, problems


def loose(root: Path) -> list[str]:
    """What group or others may access under *root* (the folder itself is the user's choice)."""
    return [
        f"{path.relative_to(root)} {stat.S_IMODE(path.lstat().st_mode):o}"
        for path in root.rglob("*")
        if not path.is_symlink() and stat.S_IMODE(path.lstat().st_mode) & 0o077
    ]


def _done(operation: str, before: ProfileState, after: ProfileState) -> bool:
    """Whether the operation took effect (the trial's other outcome: not at all)."""
    if operation == "reset":
        return not after.of("s1")
    if operation == "remove":
        return "s1" not in after.sessions
    return len(after.of("s1")) > len(before.of("s1"))


@pytest.mark.parametrize("seed", range(SEEDS))
@pytest.mark.parametrize("operation", OPERATIONS)
def test_kill9_loses_nothing(lab: Lab, operation: str, seed: int, tmp_path: Path) -> None:
    base = lab.base(operation)
    data_dir = tmp_path / "profile"
    shutil.copytree(base.data_dir, data_dir)
    before = read_profile(data_dir)
    trial = Trial.draw(base, seed)
    run = trial.run(base, data_dir)
    killed = run.returncode == -signal.SIGKILL
    crashes = [] if killed else run.trouble()
    crashes += recover(data_dir)
    try:
        after = read_profile(data_dir)
        lost, problems = judge(operation, before, after, killed)
        problems += [f"readable by others after the crash: {p}" for p in loose(data_dir)]
        litter, done = after.litter, _done(operation, before, after)
    except (ValueError, KeyError) as exc:
        lost, problems = [], [f"profile unreadable after recovery: {exc!r}"]
        litter, done = [], None
    record_outcome(
        {
            "operation": operation,
            "seed": seed,
            "mode": trial.mode,
            "kill_point": trial.kill_point,
            "kill_points": len(base.kill_points),
            "kill_write": base.kill_points[trial.kill_point - 1] if trial.kill_point else None,
            "delay_s": round(trial.delay_s, 4),
            "killed": killed,
            "done": done,
            "lost": len(lost),
            "crash": bool(crashes),
            "problems": crashes + problems,
            "litter": litter,
        }
    )
    assert not crashes, crashes
    assert not lost, f"{len(lost)} messages lost or changed: {lost[:5]}"
    assert not problems, problems


def _state(s1: int, s2: int = 2, *, history: bool = True) -> ProfileState:
    """A made-up profile: *s1* and *s2* messages, embedded, in history.json (s1 if *history*)."""
    state = ProfileState(sessions={"s1", "s2"}, folders={"s1", "s2"})
    for sid, count in (("s1", s1), ("s2", s2)):
        ids = [f"{sid}-{i}" for i in range(count)]
        state.messages.update({i: (sid, "user", i, 0, None) for i in ids})
        state.history[sid] = ids if history or sid == "s2" else None
        state.vectors[sid] = set(ids)
        state.summaries[sid] = b"{}"
    return state


def test_the_judge_is_not_blind() -> None:
    """The checks above catch a lost message, a half reset, a half remove, a missing vector."""
    before = _state(3)
    assert judge("reset", before, _state(3), killed=True) == ([], [])
    assert judge("reset", before, _state(0, history=False), killed=True) == ([], [])
    lost = _state(3)
    del lost.messages["s2-0"]
    lost.history["s2"] = ["s2-1"]
    lost.vectors["s2"] = {"s2-1"}
    assert judge("import", before, lost, killed=True)[0] == ["s2-0"]
    half_reset = _state(3)
    half_reset.history["s1"] = None
    assert judge("reset", before, half_reset, killed=True)[1]
    half_remove = _state(0)
    half_remove.sessions.discard("s1")
    assert judge("remove", before, half_remove, killed=True)[1]
    unembedded = _state(3)
    unembedded.vectors["s1"].discard("s1-0")
    assert judge("import", before, unembedded, killed=True)[1]
