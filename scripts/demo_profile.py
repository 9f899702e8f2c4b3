"""Build a demo profile: realistic sessions for screenshots and window tests.

    python scripts/demo_profile.py FOLDER [--hashing]

FOLDER becomes a profile root (like ``--data-dir``): a few sessions with
English, Traditional Chinese, Japanese and Korean text, Markdown with code,
tool calls (one failed, with an error-memory hint, then fixed), an
interrupted answer, a long imported session that was compacted, a rolling
summary with its pass history, and error-memory records.  It never touches
the real profile.  The embedding model is the real MiniLM when it can be
prepared (so the Recall tab shows real scores); ``--hashing`` (and tests)
use a tiny bag-of-words embedder instead.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agenvoy_desktop.core.embedding import TextEmbedder  # noqa: E402
from agenvoy_desktop.core.messages import Message, new_message_id  # noqa: E402
from agenvoy_desktop.core.profile import write_stamp  # noqa: E402
from agenvoy_desktop.core.store import MemoryStore  # noqa: E402
from agenvoy_desktop.core.summary import (  # noqa: E402
    KeyDecision,
    PassRecord,
    PastDiscussion,
    Summary,
    SummaryMeta,
    append_record,
    save_meta,
    save_summary,
)
from agenvoy_desktop.paths import AppPaths, app_paths  # noqa: E402

MINUTE = 60 * 1_000_000_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
CHAT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"


class DemoClock:
    """The store's clock, set to the time of what is being written."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class HashingEmbedder:
    """Bag-of-words vectors (same idea as the test double), for ``--hashing``."""

    def __init__(self, dim: int = 256) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % self._dim] += 1.0
            out[row, 0] += 1e-3
            out[row] /= np.linalg.norm(out[row])
        return out

    def submit(self, texts: Sequence[str]) -> Future[npt.NDArray[np.float32]]:
        future: Future[npt.NDArray[np.float32]] = Future()
        future.set_result(self.embed(texts))
        return future


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class Writer:
    """Appends messages one minute-ish apart, with the store's clock following."""

    def __init__(self, store: MemoryStore, clock: DemoClock, session_id: str, start: int) -> None:
        self.store, self.clock, self.sid, self.t = store, clock, session_id, start
        self.written: list[Message] = []

    def add(self, role: str, content: str, *, gap_s: int = 50, **extra: Any) -> Message:
        self.t += gap_s * 1_000_000_000
        self.clock.now = self.t
        message = Message(new_message_id(), role, content, self.t, extra=extra)
        self.store.append(self.sid, [message])
        self.written.append(message)
        return message


# -- the sessions --------------------------------------------------------------------------
BIGRAM_CODE = '''```python
def bigrams(text: str) -> list[str]:
    """記憶系統 -> 記憶 憶系 系統 (CJK runs become overlapping pairs)."""
    return [text[i : i + 2] for i in range(len(text) - 1)]
```'''


def memory_design(store: MemoryStore, clock: DemoClock, now: int) -> str:
    sid = store.create_session("記憶系統設計 · memory design")
    w = Writer(store, clock, sid, now - 3 * DAY)
    w.add("user", "我想設計一個桌面助理的記憶系統，需要記得過去的對話。可以從哪裡開始？")
    w.add(
        "assistant",
        "可以分成三層：\n\n1. **上下文視窗** — 最近 16 則訊息原文，加上較舊內容的滾動摘要；\n"
        "2. **語意檢索** — 每則訊息的向量（MiniLM，384 維），用 hnswlib 搜尋；\n"
        "3. **全文封存** — SQLite FTS5，保存所有訊息，即使 history.json 已被壓縮。",
    )
    w.add("user", "關鍵字搜尋要能找到「記憶系統」這種中文詞嗎？FTS5 預設做不到吧。")
    w.add(
        "assistant",
        "對，預設的 unicode61 分詞器會把整段中文當成一個詞。用 **CJK bigram** 就能在句子中"
        f"找到「記憶系統」：\n\n{BIGRAM_CODE}\n\n查詢時也切成 bigram，全部都要符合。",
    )
    w.add("user", "好，就決定用 SQLite FTS5 加 bigram。")
    w.add("assistant", "記下了：關鍵字搜尋採用 SQLite FTS5 + CJK bigram。")
    w.add("user", "Which vector index did we settle on last week? I forgot the parameters.")
    w.add(
        "assistant",
        "",
        tool_calls=[
            call("call_demo_1", "search_chat_history", query="vector index", mode="hybrid")
        ],
    )
    w.add(
        "tool",
        "1 excerpt (2023-11-09 21:14)\n[user] hnswlib or FAISS for 100k vectors?\n"
        "[assistant] hnswlib: M=16, ef=96 gives recall@10 0.997 at 0.2 ms.",
        tool_call_id="call_demo_1",
        name="search_chat_history",
        arguments={"query": "vector index", "mode": "hybrid"},
        duration_s=0.031,
    )
    w.add(
        "assistant",
        "We chose **hnswlib** with `M=16` and `ef=96`: recall@10 was 0.997 against exact "
        "search, at about 0.2 ms per query on 100k vectors.",
    )
    for question, answer in (
        (
            "What happens when history.json grows past 5 MiB?",
            "It is trimmed from the oldest "
            "end to 80 % at a user/assistant boundary; the archive keeps everything.",
        ),
        (
            "And the vectors of the trimmed messages?",
            "They are removed from the index at the "
            "same cut, so semantic recall only covers what is still in history.json.",
        ),
        (
            "摘要什麼時候更新？",
            "視窗外有尚未摘要的訊息時：每輪之後、閒置計時器，或按「立即摘要」。",
        ),
        (
            "Can I edit a key decision myself?",
            "Yes — in the Summary tab; the edit is saved like "
            "a summary pass and shows up in the timeline.",
        ),
        ("Does the error memory expire?", "Records live 90 days; every hit renews them."),
        (
            "錯誤記憶會跨工作階段嗎？",
            "會，錯誤記憶屬於所有工作階段，重設或刪除工作階段都不會影響它。",
        ),
        ("How big is the context window by default?", "The last 16 messages, verbatim."),
        ("And everything older?", "It lives in the rolling summary and stays searchable."),
    ):
        w.add("user", question, gap_s=120)
        w.add("assistant", answer)
    w.add("user", "最後一個問題：重設和刪除有什麼差別？", gap_s=300)
    w.add(
        "assistant",
        "| 操作 | history.json | 向量 | 封存 | 摘要 |\n|---|---|---|---|---|\n"
        "| 重設 | 刪除 | 清除 | 清除 | **保留** |\n| 刪除工作階段 | 刪除 | 清除 | 清除 | 刪除 |",
    )
    add_summary(store, sid, w.written, now)
    return sid


def add_summary(store: MemoryStore, sid: str, messages: list[Message], now: int) -> None:
    folder = store.folder(sid)
    summary = Summary(
        key_decisions=(
            KeyDecision("Keyword search uses SQLite FTS5 with CJK bigrams", "2023-11-12"),
            KeyDecision("Vectors: hnswlib, M=16, ef=96 (recall@10 0.997)", "2023-11-09"),
            KeyDecision("Summaries are schema-constrained JSON, merged per chunk", "2023-11-12"),
        ),
        past_discussions=(
            PastDiscussion("三層記憶", "上下文視窗、語意檢索、全文封存的分工", "2023-11-12"),
            PastDiscussion("Vector index", "hnswlib vs FAISS for 100k vectors", "2023-11-09"),
        ),
        current_discussion="How compaction, summaries and reset/remove interact.",
    )
    first = Summary(  # the first pass's summary: the tab shows what the second one changed
        key_decisions=summary.key_decisions[1:2],
        past_discussions=summary.past_discussions[1:],
        current_discussion="Which vector index to use.",
    )
    save_summary(folder, first)
    save_summary(folder, summary)
    rows = {r.message.id: r for r in store.archive.messages(sid)}

    def point(message: Message) -> dict[str, Any]:
        return {"message_id": message.id, "seq": rows[message.id].seq, "time_ns": message.time_ns}

    passes = [(messages[0], messages[5], None), (messages[6], messages[9], messages[5])]
    for number, (first, last, before) in enumerate(passes):
        record = PassRecord(
            kind="pass",
            time_ns=last.time_ns + 40 * 1_000_000_000,
            model=CHAT_MODEL,
            chunk_first=point(first),
            chunk_last=point(last),
            cursor_before=point(before) if before else None,
            cursor_after=point(last),
            messages=messages.index(last) - messages.index(first) + 1,
            duration_s=5.8 + number,
            prompt_tokens=812 + 300 * number,
            completion_tokens=164 + 40 * number,
        )
        append_record(folder, record)
        store.archive.add_event(sid, record.time_ns, "summary_pass", record.to_json())
    last = passes[-1][1]
    save_meta(
        folder,
        SummaryMeta(
            cursor_seq=rows[last.id].seq,
            cursor_message_id=last.id,
            cursor_time_ns=last.time_ns,
            summarized_messages=10,
            updated_ns=last.time_ns + 40 * 1_000_000_000,
            model=CHAT_MODEL,
            window_messages=16,
        ),
    )


def kyoto_trip(store: MemoryStore, clock: DemoClock, now: int) -> str:
    sid = store.create_session("Kyoto trip in April")
    w = Writer(store, clock, sid, now - 26 * HOUR)
    w.add("user", "Read my notes for the Kyoto trip and suggest a day plan.")
    w.add("assistant", "", tool_calls=[call("call_demo_2", "read_file", path="~/notes/kyoto.md")])
    w.add(
        "tool",
        "error: no such file: ~/notes/kyoto.md",
        tool_call_id="call_demo_2",
        name="read_file",
        arguments={"path": "~/notes/kyoto.md"},
        is_error=True,
        duration_s=0.002,
        error_hint="Error memory: past failures of the tool `read_file` that resemble this one.\n"
        "1. [resolved, record #1, read_file] Symptom: no such file: ~/notes/kyoto.md. "
        "Cause: the file tool does not expand '~'. → apply this fix: use the absolute path "
        "/home/mei/notes/kyoto.md\n"
        "Apply a resolved fix when it fits this failure; never repeat a failed or abandoned one.",
        error_hint_ids=[1],
    )
    w.add(
        "assistant",
        "",
        tool_calls=[call("call_demo_3", "read_file", path="/home/mei/notes/kyoto.md")],
        gap_s=3,
    )
    w.add(
        "tool",
        "# Kyoto\n- 伏見稲荷大社 early morning\n- lunch: 錦市場\n- 清水寺 at sunset\n"
        "- budget ¥12,000",
        tool_call_id="call_demo_3",
        name="read_file",
        arguments={"path": "/home/mei/notes/kyoto.md"},
        duration_s=0.003,
    )
    w.add(
        "assistant",
        "Here is a relaxed day built from your notes:\n\n"
        "| time | place | note |\n|---|---|---|\n"
        "| 07:00 | 伏見稲荷大社 (Fushimi Inari) | before the crowds |\n"
        "| 12:00 | 錦市場 (Nishiki Market) | lunch while walking |\n"
        "| 17:30 | 清水寺 (Kiyomizu-dera) | sunset from the stage |\n\n"
        "That stays well inside your **¥12,000** budget.",
        gap_s=8,
    )
    w.add("user", "ありがとう！ 한국어로도 인사말을 알려줘.", gap_s=600)
    w.add(
        "assistant",
        "どういたしまして。한국어 인사말: **안녕하세요** (hello), **감사합니다** (thank you).",
    )
    w.add("user", "Also list every temple in Kyoto with opening hours.", gap_s=90)
    w.add(
        "assistant",
        "Kyoto has over 1,600 temples, so here are the best known ones:\n\n"
        "- 金閣寺 (Kinkaku-ji): 9:00–17:00\n- 銀閣寺 (Ginkaku-ji): 8:30–17:00\n- 東寺",
        interrupted=True,
    )
    return sid


def packaging(store: MemoryStore, clock: DemoClock, now: int) -> str:
    sid = store.create_session("Python packaging questions")
    w = Writer(store, clock, sid, now - 5 * HOUR)
    w.add("user", "How do I expose a console command from my package?")
    w.add(
        "assistant",
        "Declare it under `[project.scripts]` in `pyproject.toml`:\n\n```toml\n[project.scripts]\n"
        'agenvoy-desktop = "agenvoy_desktop.cli:main"\n```\n\nThen install in editable mode:\n\n'
        '```bash\npython -m pip install -e ".[dev]"\nagenvoy-desktop --help\n```',
    )
    w.add("user", "What time is it in Taipei right now?", gap_s=400)
    w.add("assistant", "", tool_calls=[call("call_demo_4", "current_time", timezone="Asia/Taipei")])
    w.add(
        "tool",
        "2023-11-15 09:41 (Wednesday, UTC+08:00)",
        tool_call_id="call_demo_4",
        name="current_time",
        arguments={"timezone": "Asia/Taipei"},
        duration_s=0.001,
    )
    w.add("assistant", "It is **09:41** on Wednesday in Taipei (UTC+8).", gap_s=2)
    return sid


def weekly_planning(store: MemoryStore, clock: DemoClock, now: int) -> str:
    """A long imported session; the small history limit makes it compact once."""
    start = now - 40 * DAY
    topics = ["groceries", "gym", "reading", "taxes", "garden", "bike repair", "piano", "mail"]
    messages: list[Message] = []
    for week in range(60):
        t = start + week * 14 * HOUR
        topic = topics[week % len(topics)]
        messages.append(
            Message(
                new_message_id(),
                "user",
                f"Week {week + 1}: plan for {topic}? " + "Keep it short. " * 12,
                t,
            )
        )
        messages.append(
            Message(
                new_message_id(),
                "assistant",
                f"Plan for {topic}: Monday prepare,"
                " Wednesday do the main part, Saturday review. " + "Note. " * 20,
                t + 40 * 1_000_000_000,
            )
        )
    clock.now = now - 2 * DAY
    return store.import_messages(messages, title="Weekly planning (imported)")


def error_records(paths: AppPaths, embedder: TextEmbedder | None, now: int) -> None:
    try:
        from agenvoy_desktop.core.error_memory import ErrorMemory, error_db_path
    except ImportError:  # the error memory is not part of this checkout yet
        return
    with ErrorMemory(error_db_path(paths), embedder, clock=lambda: now) as errors:
        errors.add(
            "read_file",
            "no such file: ~/notes/kyoto.md",
            cause="the file tool does not expand '~'",
            action="use the absolute path /home/mei/notes/kyoto.md",
            outcome="resolved",
            keywords=["path", "tilde"],
        )
        errors.add(
            "search_chat_history",
            "no results for an exact phrase in semantic mode",
            cause="semantic mode matches meaning, not exact wording",
            action="retried in semantic mode with a longer query",
            outcome="failed",
            keywords=["search", "exact phrase"],
        )
        errors.add(
            "list_dir",
            "permission denied: /root",
            cause="the folder is outside the allowed folders",
            action="asked the user to add the folder in Settings",
            outcome="abandoned",
            keywords=["permission"],
            source="user",
        )


def build_demo_profile(
    folder: Path, *, embedder: TextEmbedder | None = None, now_ns: int | None = None
) -> AppPaths:
    """Create the demo profile in *folder* (which must not hold one yet)."""
    paths = app_paths(folder).ensure()
    if any(paths.sessions_dir.iterdir()):
        raise FileExistsError(f"{folder} already holds a profile; choose an empty folder")
    now = now_ns or time.time_ns()
    clock = DemoClock(now)
    write_stamp(paths)  # made by this version: the window must not report an upgrade
    with MemoryStore(paths, embedder, max_history_bytes=30_000, clock=clock) as store:
        weekly_planning(store, clock, now)
        memory_design(store, clock, now)
        kyoto_trip(store, clock, now)
        packaging(store, clock, now)
    error_records(paths, embedder, now)
    return paths


def _real_embedder(paths: AppPaths) -> TextEmbedder:
    from agenvoy_desktop.llm.embedder import Embedder
    from agenvoy_desktop.llm.model_prep import prepare_embedding_model

    return Embedder(prepare_embedding_model(paths.models_dir))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--hashing", action="store_true", help="no model: hashing embedder")
    args = parser.parse_args(argv)
    embedder = HashingEmbedder() if args.hashing else _real_embedder(app_paths(args.folder))
    try:
        build_demo_profile(args.folder, embedder=embedder)
    finally:
        close = getattr(embedder, "close", None)
        if close is not None:
            close()
    print(f"demo profile ready in {args.folder}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
