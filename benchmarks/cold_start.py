"""Cold start at scale: process start to a usable window, and ``sessions``, on big profiles.

Two profiles, built once and cached under ``--work`` (default
``/tmp/agenvoy_coldstart``):

* ``s100``: 100 sessions x 10,000 archived messages (1,000,000 in all), each
  session's history.json holding its newest messages up to ~4.9 MiB (the app
  compacts at 5 MiB, so real histories sit between 4 and 5 MiB);
* ``s10``: the same sessions, 10 of them (100,000 messages): the growth.

Message text is LoCoMo dialogue, cycled.  The profiles are written through the
archive's own schema and row encoding (bulk inserts, then the archive's own
full-text rebuild), with exactly the rows, cut points and history files the
app would have after compacting each session, and a stored vector for every
history message (the rows only, random values).  No models:
``settings.json`` names model files that do not exist, so the window opens
without them and nothing waits for a model (without an embedding model the
start-up checks leave the vectors alone; the sessions list counts them).

Measured, rounds interleaved (every case once per round), medians and p95,
for ``s0`` (no sessions: the start's fixed cost), ``s10`` and ``s100`` as the
previous run of the app left them, and ``s10-unstamped``/``s100-unstamped``
with the start-up stamps deleted first (every history.json read, as before
the stamps or on an older app's profile):

* ``window``: process start to the window's "sessions listed" log line (the
  list filled, the composer taking input; ``AGENVOY_SMOKE=1`` closes the
  window right after), and to "window shown";
* ``sessions``: wall time of ``agenvoy-desktop --data-dir DIR sessions``.

Each profile is opened once, untimed, before the rounds.  ``--touch N``
appends one message to N sessions before every timed start, so those pay
the full read.

``--baseline TREE`` also times another version's code on the same profiles
(``-before`` cases), e.g. the last commit's::

    git archive HEAD agenvoy_desktop | tar -x -C /tmp/head   # plus the "sessions listed" line
    .venv/bin/python benchmarks/cold_start.py --baseline /tmp/head
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import benchlib

from agenvoy_desktop.core.archive import SCHEMA_VERSION, Archive, _row_values
from agenvoy_desktop.core.history import encode_history
from agenvoy_desktop.core.history_stamps import STAMPS_FILE
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.profile import write_stamp
from agenvoy_desktop.core.retrieval.fts_text import FTS_TEXT_VERSION
from agenvoy_desktop.paths import app_paths

BUILD_VERSION = 1
EXE = benchlib.ROOT / ".venv" / "bin" / "agenvoy-desktop"
FROZEN_EXE = benchlib.ROOT / "dist" / "agenvoy-desktop" / "agenvoy-desktop"
APP = [str(EXE)]
"""What is timed: the venv's entry point, or the frozen build with ``--frozen``."""
RUN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""An installed app has its bytecode cached; a shell that forbids writing it would time the
compiler (0.1 s for ``sessions`` alone), not the start."""
PER_SESSION = 10_000
HISTORY_TARGET = int(4.9 * 1024 * 1024)
MESSAGE_CHARS = 380
"""Messages of about this length make ~9,000 of the 10,000 fit a 4.9 MiB history."""
VECTOR_MODEL = "all-MiniLM-L6-v2"
VECTOR_DIM = 384
SHOWN = "window shown"
USABLE = "sessions listed"
GOAL_WINDOW_S = 1.5
GOAL_SESSIONS_S = 0.5
BASE_NS = 1_600_000_000 * 10**9


# -- building ---------------------------------------------------------------------------
def texts() -> list[str]:
    """LoCoMo turns joined into messages of about MESSAGE_CHARS characters."""
    out: list[str] = []
    current: list[str] = []
    for conv in benchlib.load_locomo():
        for turn in conv.turns:
            current.append(f"{turn.speaker}: {turn.text}")
            if sum(len(t) + 1 for t in current) >= MESSAGE_CHARS:
                out.append(" ".join(current))
                current = []
    return out


def session_messages(number: int, corpus: Sequence[str]) -> list[Message]:
    """Session *number*'s messages, oldest first (ids unique across the profile)."""
    t0 = BASE_NS + number * PER_SESSION * 10**9
    offset = number * 7919
    return [
        Message(
            f"{number:08x}{i:024x}",
            "user" if i % 2 == 0 else "assistant",
            corpus[(offset + i) % len(corpus)],
            t0 + i * 10**9,
        )
        for i in range(PER_SESSION)
    ]


def history_cut(messages: Sequence[Message]) -> int:
    """Index of the first message history.json keeps: the newest that fit, from a user message."""
    size = 4
    cut = len(messages)
    while cut > 0:
        size += len(encode_history([messages[cut - 1]])) - 4 + 2
        if size > HISTORY_TARGET:
            break
        cut -= 1
    while cut < len(messages) and messages[cut].role != "user":
        cut += 1
    return cut


def build_profile(home: Path, n_sessions: int, corpus: Sequence[str]) -> dict[str, Any]:
    """Write the profile (see the module docstring); returns what was built."""
    paths = app_paths(home).ensure()
    write_stamp(paths)  # a current profile: the first open backs nothing up
    archive = Archive(paths.archive_db)
    started = time.perf_counter()
    history_bytes = 0
    try:
        for number in range(n_sessions):
            sid = f"s{number:03d}"
            messages = session_messages(number, corpus)
            cut = history_cut(messages)
            kept = messages[cut:]
            with archive.transaction() as db:
                db.execute(
                    "INSERT INTO sessions (session_id, title, created_ns, updated_ns,"
                    " start_at_ns, cut_seq, next_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        sid,
                        f"Session {number}",
                        messages[0].time_ns,
                        messages[-1].time_ns,
                        kept[0].time_ns,
                        cut,
                        len(messages),
                    ),
                )
                db.executemany(
                    "INSERT INTO messages (msg_id, session_id, seq, role, content, time_ns,"
                    " ref, tool, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (_row_values(sid, seq, m) for seq, m in enumerate(messages)),
                )
                detail = {"dropped": cut, "kept": len(kept), "start_at_ns": kept[0].time_ns}
                db.execute(
                    "INSERT INTO events (session_id, time_ns, kind, detail) VALUES (?, ?, ?, ?)",
                    (sid, messages[-1].time_ns, "compaction", json.dumps(detail)),
                )
            folder = paths.sessions_dir / sid
            folder.mkdir(parents=True, exist_ok=True)
            data = encode_history(kept)
            (folder / "history.json").write_bytes(data)
            history_bytes += len(data)
        print(f"  rows written in {time.perf_counter() - started:.0f} s; full-text index ...")
        archive.rebuild_fts()
        archive._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        archive.close()
    models = {
        "chat_model": str(home / "none-chat.gguf"),
        "embedding_model": str(home / "none-embedding.gguf"),
    }
    settings = {"version": 1, "models": models}
    paths.settings_file.write_text(json.dumps(settings), "utf-8")
    return {
        "sessions": n_sessions,
        "archived_messages": n_sessions * PER_SESSION,
        "history_bytes_mean": history_bytes // n_sessions,
        "archive_bytes": paths.archive_db.stat().st_size,
        "build_s": round(time.perf_counter() - started, 1),
    }


def ensure_vectors(home: Path) -> int:
    """Give every history message a (random) stored vector, as the app's embedding would.

    Only the archive's rows: no embedding model runs here, and without one the
    app never opens the index files.  Returns the vectors stored.
    """
    from agenvoy_desktop.core.archive import vector_label

    paths = app_paths(home)
    archive = Archive(paths.archive_db)
    blob = bytes(range(256)) * (VECTOR_DIM * 4 // 256)
    try:
        with archive.transaction() as db:
            if db.execute("SELECT count(*) FROM vectors").fetchone()[0]:
                return int(db.execute("SELECT count(*) FROM vectors").fetchone()[0])
            rows = db.execute(
                "SELECT m.id, m.session_id FROM messages m JOIN sessions s"
                " ON s.session_id = m.session_id AND m.seq >= s.cut_seq"
            ).fetchall()
            db.executemany(
                "INSERT INTO vectors (label, message_rowid, session_id, model, vec)"
                " VALUES (?, ?, ?, ?, ?)",
                ((vector_label(rowid), rowid, sid, VECTOR_MODEL, blob) for rowid, sid in rows),
            )
            for key, value in (
                ("vector_model", f"{VECTOR_MODEL}:{VECTOR_DIM}:text1"),
                ("vector_dim", str(VECTOR_DIM)),
            ):
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
        archive._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        archive.close()  # its PRAGMA optimize gathers the statistics an app's close would
    return len(rows)


def cached_profile(work: Path, name: str, n_sessions: int, corpus: Sequence[str]) -> Path:
    """The profile *name* under *work*, built unless a build of the same recipe is there."""
    folder = work / name
    home = folder / "profile"
    recipe = {
        "build": BUILD_VERSION,
        "sessions": n_sessions,
        "per_session": PER_SESSION,
        "history_target": HISTORY_TARGET,
        "schema": SCHEMA_VERSION,
        "fts": FTS_TEXT_VERSION,
    }
    stamp = folder / "recipe.json"
    if stamp.exists() and json.loads(stamp.read_text("utf-8")).get("recipe") == recipe:
        print(f"{name}: {ensure_vectors(home):,} vectors")
        return home
    shutil.rmtree(folder, ignore_errors=True)
    print(f"building {name}: {n_sessions} sessions x {PER_SESSION:,} messages ...")
    built = build_profile(home, n_sessions, corpus)
    stamp.write_text(json.dumps({"recipe": recipe, "built": built}, indent=2), "utf-8")
    print(f"  {built}; {ensure_vectors(home):,} vectors")
    return home


# -- measuring ----------------------------------------------------------------------------
def log_times(log: Path, began: float) -> dict[str, float]:
    """Seconds from *began* to each of the window's start-up log lines."""
    found: dict[str, float] = {}
    for line in log.read_text("utf-8").splitlines():
        for key, text in (("shown_s", SHOWN), ("usable_s", USABLE)):
            if key not in found and text in line:
                stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                found[key] = stamp.timestamp() - began
    return found


def program(tree: Path | None) -> list[str]:
    """The command that runs the app: this checkout's, or the code in *tree* (a baseline)."""
    if tree is None:
        return APP
    if tree == FROZEN_EXE:
        return [str(FROZEN_EXE)]
    launch = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in str(f)]\n"
        f"sys.path.insert(0, {str(tree)!r})\n"
        "from agenvoy_desktop.cli import main\n"
        "sys.exit(main())\n"
    )
    return [sys.executable, "-c", launch]


def window_start(home: Path, tree: Path | None = None) -> dict[str, float]:
    """Launch the window (smoke mode: it closes once loaded); its start-up times."""
    log = home / "config" / "logs" / "agenvoy-desktop.log"
    log.unlink(missing_ok=True)
    env = {**RUN_ENV, "AGENVOY_SMOKE": "1", "QT_QPA_PLATFORM": "offscreen"}
    began = time.time()
    subprocess.run([*program(tree), "--data-dir", str(home)], env=env, check=True, timeout=300)
    found = log_times(log, began)
    if "shown_s" not in found:
        raise SystemExit(f"no '{SHOWN}' line in {log}")
    return found


def sessions_cli(home: Path, tree: Path | None = None) -> float:
    """Wall seconds of ``agenvoy-desktop --data-dir HOME sessions``."""
    began = time.perf_counter()
    subprocess.run(
        [*program(tree), "--data-dir", str(home), "sessions"],
        check=True,
        stdout=subprocess.DEVNULL,
        env=RUN_ENV,
        timeout=300,
    )
    return time.perf_counter() - began


def touch_sessions(home: Path, count: int, round_no: int) -> None:
    """Append one message to the first *count* sessions (the app's own append path)."""
    if not count:
        return
    from agenvoy_desktop.core.store import MemoryStore

    with MemoryStore(app_paths(home)) as store:
        for number in range(count):
            sid = f"s{number:03d}"
            store.append(sid, [store.new_message("user", f"touched in round {round_no}")])


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "median": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "min": round(ordered[0], 3),
    }


def empty_profile(work: Path) -> Path:
    """A profile without sessions, set up like the others: the start's fixed cost."""
    home = work / "s0" / "profile"
    paths = app_paths(home).ensure()
    write_stamp(paths)
    models = {"chat_model": str(home / "none.gguf"), "embedding_model": str(home / "none.gguf")}
    paths.settings_file.write_text(json.dumps({"version": 1, "models": models}), "utf-8")
    return home


def drop_stamps(home: Path) -> None:
    """Forget the start-up stamps: every history.json is read again (an older app's profile)."""
    (app_paths(home).memory_dir / STAMPS_FILE).unlink(missing_ok=True)


Case = tuple[Path, bool, Path | None]
"""(profile, stamps dropped first, code tree to run: None for this checkout)."""


def measure(cases: dict[str, Case], rounds: int, touch: int) -> dict[str, dict[str, list[float]]]:
    """Every case once per round, in turn."""
    samples: dict[str, dict[str, list[float]]] = {
        name: {"shown_s": [], "usable_s": [], "sessions_s": []} for name in cases
    }
    for number in range(rounds):
        for name, (home, unstamped, tree) in cases.items():
            touch_sessions(home, touch, number)
            if unstamped:
                drop_stamps(home)
            for key, value in window_start(home, tree).items():
                samples[name][key].append(value)
            touch_sessions(home, touch, number)
            if unstamped:
                drop_stamps(home)
            samples[name]["sessions_s"].append(sessions_cli(home, tree))
            done = ", ".join(f"{k} {v[-1]:.2f}" for k, v in samples[name].items() if v)
            print(f"  round {number} {name}: {done}")
    return samples


def main() -> int:
    ap = benchlib.parser(__doc__ or "")
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy_coldstart"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--touch", type=int, default=0, help="sessions appended to before each round")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--frozen", action="store_true", help="time dist/ (make dist) instead of .venv")
    ap.add_argument(
        "--with-frozen",
        action="store_true",
        help="also time dist/ on the same profiles, interleaved, as '-frozen'",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a tree with another version's agenvoy_desktop/ (git archive): timed as '-before'",
    )
    args = ap.parse_args()
    if (args.frozen or args.with_frozen) and not FROZEN_EXE.is_file():
        raise SystemExit(f"no frozen build at {FROZEN_EXE}: run `make dist` first")
    if args.frozen:
        APP[:] = [str(FROZEN_EXE)]
    sizes = {"s10": 10, "s100": 100} if not args.quick else {"s3": 3, "s10": 10}
    rounds = 2 if args.quick else args.rounds
    corpus = texts()
    homes = {name: cached_profile(args.work, name, n, corpus) for name, n in sizes.items()}
    if args.build_only:
        return 0
    homes = {"s0": empty_profile(args.work), **homes}
    cases: dict[str, Case] = {name: (home, False, None) for name, home in homes.items()}
    sized = {name: home for name, home in homes.items() if name != "s0"}
    cases |= {f"{name}-unstamped": (home, True, None) for name, home in sized.items()}
    if args.baseline is not None:
        cases |= {f"{name}-before": (home, True, args.baseline) for name, home in sized.items()}
    if args.with_frozen:
        cases |= {f"{name}-frozen": (home, False, FROZEN_EXE) for name, home in homes.items()}
    for home in homes.values():  # what the previous run of the app leaves
        window_start(home)
        sessions_cli(home)
    samples = measure(cases, rounds, args.touch)
    stats = {n: {k: summary(v) for k, v in parts.items() if v} for n, parts in samples.items()}
    big = list(homes)[-1]
    print(f"{'':16} {'shown':>14} {'usable':>14} {'sessions':>14}   (median / p95, s)")
    for name, parts in stats.items():
        cells = [
            f"{parts[k]['median']:6.2f}/{parts[k]['p95']:<6.2f}" if k in parts else f"{'-':>13}"
            for k in ("shown_s", "usable_s", "sessions_s")
        ]
        print(f"{name:16} " + " ".join(f"{c:>14}" for c in cells))
    usable = stats[big].get("usable_s", stats[big]["shown_s"])["median"]
    built = {
        name: json.loads((args.work / name / "recipe.json").read_text("utf-8"))["built"]
        for name in sizes
    }
    benchlib.write_result(
        "cold_start.frozen" if args.frozen else "cold_start",
        {
            "rounds": rounds,
            "program": APP[0],
            "touched_per_round": args.touch,
            "baseline": str(args.baseline) if args.baseline else None,
            "profiles": built,
            "samples": samples,
            "stats": stats,
            "goal_window_usable_s": GOAL_WINDOW_S,
            "goal_sessions_s": GOAL_SESSIONS_S,
            "window_ok": usable <= GOAL_WINDOW_S,
            "sessions_ok": stats[big]["sessions_s"]["median"] <= GOAL_SESSIONS_S,
        },
        quick=args.quick,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
