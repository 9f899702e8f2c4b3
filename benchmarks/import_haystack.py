"""A user's history from another app, imported as a person would: one CLI command.

A LongMemEval_S dev haystack (about 50 dated sessions, 500 messages) is written
as a ChatGPT data export (``conversations.json`` with its ``mapping`` tree, one
conversation per session) and imported with ``agenvoy-desktop import FOLDER``
in a fresh profile that holds only the prepared embedding model: process start,
reading, storing and embedding, all timed from outside.  Then the same command
again (everything "already there"), and ``--dry-run``.

Goal (issue 39): the whole import in ≤ 30 s on 2 cores, including embeddings.

    .venv/bin/python benchmarks/import_haystack.py [--quick] [--questions N]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import benchlib
from benchlib import verdict

GOAL_S = 30.0
EXE = [sys.executable, "-m", "agenvoy_desktop"]


def haystacks(count: int) -> list[dict[str, Any]]:
    """The first *count* dev questions (each a user's whole history)."""
    data = json.loads((benchlib.shared_data_dir() / "longmemeval_s_dev.json").read_text())
    return list(data[:count])


def chatgpt_export(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The haystack as ChatGPT's ``conversations.json``: one conversation per session."""
    out = []
    for number, (sid, date, session) in enumerate(
        zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        )
    ):
        start = datetime.strptime(
            date.split(" (")[0] + " " + date[-5:], "%Y/%m/%d %H:%M"
        ).timestamp()
        nodes: dict[str, Any] = {
            "root": {"id": "root", "message": None, "parent": None, "children": []}
        }
        parent = "root"
        for index, turn in enumerate(session):
            node = f"{sid}-{index}"
            nodes[parent]["children"].append(node)
            nodes[node] = {
                "id": node,
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": turn["role"]},
                    "create_time": start + 30 * index,
                    "content": {"content_type": "text", "parts": [turn["content"]]},
                    "metadata": {},
                },
            }
            parent = node
        out.append(
            {
                "title": f"Session {number + 1}",
                "create_time": start,
                "conversation_id": sid,
                "mapping": nodes,
                "current_node": parent,
            }
        )
    return out


def timed_cli(profile: Path, *args: str) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(
        [*EXE, "--data-dir", str(profile), *args], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"import failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=3, help="haystacks to import, one each")
    args = ap.parse_args()
    items = haystacks(1 if args.quick else args.questions)
    model = benchlib.embedding_model()
    rows = []
    for item in items:
        with benchlib.temp_profile("import-haystack") as paths:
            benchlib.install_model(paths, model)
            root = paths.config_dir.parent  # the --data-dir this profile was made for
            export = root / "export"
            export.mkdir()
            conversations = chatgpt_export(item)
            (export / "conversations.json").write_text(json.dumps(conversations), "utf-8")
            messages = sum(len(s) for s in item["haystack_sessions"])
            dry_s, _ = timed_cli(root, "import", "--dry-run", str(export))
            first_s, said = timed_cli(root, "import", str(export))
            again_s, said_again = timed_cli(root, "import", str(export))
        row = {
            "question": item["question_id"],
            "conversations": len(conversations),
            "messages": messages,
            "dry_run_s": round(dry_s, 2),
            "import_s": round(first_s, 2),
            "again_s": round(again_s, 2),
            "said": said,
            "said_again": said_again,
        }
        rows.append(row)
        print(
            f"  {row['question']}: {len(conversations)} conversations, {messages} messages: "
            f"import {first_s:.1f} s ({said}); again {again_s:.1f} s ({said_again}); "
            f"dry run {dry_s:.1f} s"
        )
    median = statistics.median(r["import_s"] for r in rows)
    ok = median <= GOAL_S
    print(f"{verdict(ok)}: median import {median:.1f} s (goal <= {GOAL_S:.0f} s)")
    benchlib.write_result(
        "import_haystack",
        {
            "rows": rows,
            "median_import_s": round(median, 2),
            "acceptance": {"criterion": f"median import <= {GOAL_S} s", "pass": ok},
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
