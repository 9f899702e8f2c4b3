"""Quality of the rolling summary against LoCoMo's reference session summaries.

Each round imports one LoCoMo session (all its turns) into a fresh session,
folds every message into the summary with the real starter model
(Qwen2.5-Coder-0.5B-Instruct Q4_K_M, context 8,192 as the app's default,
seed 0) and compares the result with that session's reference
``session_summary`` text:

* **entity coverage** — the reference's named entities that our summary
  mentions: capitalised words that are not stop words ("The", "She"),
  numbers and years, month names (clock times left out); compared
  case-insensitively, possessive "'s" dropped;
* **fact coverage** — a proxy for "the facts are there": the reference's
  sentences whose content terms (``core.summary.terms``: words of 3+ letters
  cut to 5-letter prefixes, numbers, CJK bigrams; stop words left out) are at
  least half present in our summary's terms;
* **repeated sentences** in the saved summary (goal 0);
* **decisions without a source message** (goal 0): key decisions whose
  ``source`` is missing or is not the id of a message of that session;
* **seconds per pass**, passes, retries (an answer that failed and was redone
  with half the chunk) and the decisions the tracing check dropped.

The first round also loads the model; its seconds are reported apart.

    .venv/bin/python benchmarks/summary_quality.py [--quick] [--sessions N]
        [--no-loop-stop] [--no-drafts]

The two switches turn a speed-up off (answers run past a repeated
discussion; JSON decoded without guessed tokens) and name the result file
after it (``summary_quality.no-loop-stop.json``), for a before/after pair.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import replace
from typing import Any

import benchlib
from benchlib import Conversation

from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summarizer import Summarizer
from agenvoy_desktop.core.summary import (
    Summary,
    load_summary,
    read_records,
    render_for_prompt,
    repeated_sentences,
    terms,
)
from agenvoy_desktop.core.summary_facts import merge_facts, pick_facts, render_facts
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.llm.starter import prepare_starter_model

CONTEXT = 8192
FACT_SHARE = 0.5
"""A reference sentence counts as covered when this share of its terms is in ours."""
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}\s*(?:[ap]\.?m\.?)?", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s$")
_MONTH_WORDS = (
    "january february march april may june july august september october november december"
)
_MONTHS = frozenset(_MONTH_WORDS.split())
_NOT_NAME_WORDS = """the a an and but or on in at of to for with from by as it its this that these
those he she they we i you his her their our my your when while after before during then also both
each every some all one two however although because since"""
_NOT_NAMES = frozenset(_NOT_NAME_WORDS.split())


# -- the measures ----------------------------------------------------------------------
def entities(text: str) -> set[str]:
    """Named entities, roughly: capitalised words, numbers, months (lower-cased).

    Clock times ("1:56 pm") are left out — a summary keeps dates, not the
    minute a chat began — and a possessive "'s" is dropped.
    """
    text = _CLOCK.sub(" ", text)
    found: set[str] = set()
    for word in _WORD.findall(text):
        lower = _normal(word)
        named = word[0].isupper() and lower not in _NOT_NAMES and len(lower) > 1
        if named or word.isdigit() or lower in _MONTHS:
            found.add(lower)
    return found


def _normal(word: str) -> str:
    return _POSSESSIVE.sub("", word.lower()).strip("'’-")


def summary_text(summary: Summary) -> str:
    """Everything the summary says, as one text (what the assistant's prompt gets)."""
    decisions = " ".join(d.decision for d in summary.key_decisions)
    return f"{render_for_prompt(summary)} {decisions}"


def coverage(reference: str, ours: str) -> dict[str, Any]:
    """Entity and fact coverage of *reference* by *ours* (module docstring)."""
    ref_entities = entities(reference)
    our_words = {_normal(w) for w in _WORD.findall(ours)}
    hit_entities = ref_entities & our_words
    our_terms = terms(ours)
    facts = [terms(s) for s in benchlib.split_sentences(reference)]
    facts = [f for f in facts if f]
    covered = sum(1 for f in facts if len(f & our_terms) >= FACT_SHARE * len(f))
    return {
        "entities": len(ref_entities),
        "entities_covered": len(hit_entities),
        "entity_coverage": round(len(hit_entities) / max(1, len(ref_entities)), 3),
        "missed_entities": sorted(ref_entities - our_words)[:20],
        "facts": len(facts),
        "facts_covered": covered,
        "fact_coverage": round(covered / max(1, len(facts)), 3),
    }


def untraced(summary: Summary, message_ids: set[str]) -> list[str]:
    """Decisions that do not point at a message of the session."""
    return [
        d.decision
        for d in summary.key_decisions
        if not d.by_user and (d.source is None or d.source not in message_ids)
    ]


# -- the sessions ------------------------------------------------------------------------
def pick_sessions(convs: list[Conversation], count: int) -> list[tuple[Conversation, int]]:
    """Session k+1 of conversation k (mod its sessions): different people, lengths, dates."""
    picked: list[tuple[Conversation, int]] = []
    for k in range(count):
        conv = convs[k % len(convs)]
        numbers = sorted({int(t.dia_id[1:].split(":")[0]) for t in conv.turns})
        picked.append((conv, numbers[(k // len(convs) + k) % len(numbers)]))
    return picked


def session_messages(conv: Conversation, number: int) -> list[Message]:
    prefix = f"D{number}:"
    return [m for m in benchlib.conversation_messages(conv) if (m.ref or "").startswith(prefix)]


def reference_summary(conv: Conversation, number: int) -> str:
    raw = json.loads(benchlib.locomo_path().read_text("utf-8"))
    item = next(i for i in raw if str(i["sample_id"]) == conv.sample_id)
    return str(item["session_summary"][f"session_{number}_summary"])


async def summarize_one(
    store: MemoryStore, engine: ChatEngine, conv: Conversation, number: int
) -> dict[str, Any]:
    messages = session_messages(conv, number)
    sid = store.create_session(f"locomo {conv.sample_id} session {number}")
    store.append(sid, messages, embed=False)
    started = time.perf_counter()
    result = await Summarizer(store, engine, window_messages=0).run(sid)
    seconds = time.perf_counter() - started
    records = [r for r in read_records(store.folder(sid)) if r.kind in ("pass", "failed")]
    summary = load_summary(store.folder(sid)) or Summary()
    ours = summary_text(summary)
    reference = reference_summary(conv, number)
    return {
        "conversation": conv.sample_id,
        "session": number,
        "messages": len(messages),
        "stopped": result.stopped,
        "error": result.error,
        "passes": result.passes,
        "seconds": round(seconds, 1),
        "seconds_per_pass": [r.duration_s for r in records if r.kind == "pass"],
        "completion_tokens": [r.completion_tokens for r in records if r.kind == "pass"],
        "retries": sum(1 for r in records if "retried_after" in r.extra),
        "retry_reasons": [
            str(r.extra["retried_after"]) for r in records if "retried_after" in r.extra
        ],
        "dropped_decisions": [d for r in records for d in r.extra.get("dropped_decisions", [])],
        "decisions": len(summary.key_decisions),
        "decisions_without_source": untraced(summary, {m.id for m in messages}),
        "repeated_sentences": repeated_sentences(summary),
        **coverage(reference, ours),
        "modes": mode_coverage(reference, summary),
        "facts_kept": len(summary.facts),
        "facts_left_out": sum(len(r.extra.get("facts_left_out", [])) for r in records),
        "summary_chars": len(render_for_prompt(summary)),
        "summary": summary.to_json(),
    }


MODES = ("abstractive", "extractive", "mixed")
"""What is compared: the model's part alone, the facts alone (code), both (what ships)."""


def mode_coverage(reference: str, summary: Summary) -> dict[str, dict[str, Any]]:
    """Coverage of *reference* by each part of the summary (see :data:`MODES`)."""
    texts = {
        "abstractive": summary_text(replace(summary, facts=())),
        "extractive": render_facts(summary.facts),
        "mixed": summary_text(summary),
    }
    return {mode: coverage(reference, text) for mode, text in texts.items()}


def mode_totals(rounds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Entity and fact coverage per mode over all rounds."""
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        parts = [r["modes"][mode] for r in rounds]
        out[mode] = {
            "entity_coverage": round(
                sum(p["entities_covered"] for p in parts)
                / max(1, sum(p["entities"] for p in parts)),
                3,
            ),
            "fact_coverage": round(
                sum(p["facts_covered"] for p in parts) / max(1, sum(p["facts"] for p in parts)), 3
            ),
        }
    return out


def extractive_everywhere() -> dict[str, Any]:
    """The facts alone on every session of every LoCoMo conversation (no model: seconds).

    The model's part needs about 20 s a pass; the facts are code, so the
    goal's "all 10 conversations, their session summaries" is measured in
    full for them.
    """
    raw = json.loads(benchlib.locomo_path().read_text("utf-8"))
    summaries = {str(item["sample_id"]): item["session_summary"] for item in raw}
    parts: list[dict[str, Any]] = []
    chars: list[int] = []
    for conv in benchlib.load_locomo():
        numbers = sorted({int(t.dia_id[1:].split(":")[0]) for t in conv.turns})
        for number in numbers:
            reference = summaries[conv.sample_id].get(f"session_{number}_summary")
            if not reference:
                continue
            facts, _ = merge_facts((), pick_facts(session_messages(conv, number)).facts)
            text = render_facts(facts)
            chars.append(len(text))
            parts.append(coverage(str(reference), text))
    return {
        "sessions": len(parts),
        "entity_coverage": round(
            sum(p["entities_covered"] for p in parts) / max(1, sum(p["entities"] for p in parts)), 3
        ),
        "fact_coverage": round(
            sum(p["facts_covered"] for p in parts) / max(1, sum(p["facts"] for p in parts)), 3
        ),
        "facts_chars_mean": round(sum(chars) / max(1, len(chars))),
        "facts_chars_max": max(chars, default=0),
    }


def totals(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    landed = [r for r in rounds if r["stopped"] == "done"]
    passes = [s for r in rounds for s in r["seconds_per_pass"]]
    return {
        "sessions": len(rounds),
        "summaries_landed": len(landed),
        "entity_coverage": round(
            sum(r["entities_covered"] for r in rounds) / max(1, sum(r["entities"] for r in rounds)),
            3,
        ),
        "fact_coverage": round(
            sum(r["facts_covered"] for r in rounds) / max(1, sum(r["facts"] for r in rounds)), 3
        ),
        "modes": mode_totals(rounds),
        "facts_kept": sum(r["facts_kept"] for r in rounds),
        "facts_left_out": sum(r["facts_left_out"] for r in rounds),
        "summary_chars_mean": round(sum(r["summary_chars"] for r in rounds) / max(1, len(rounds))),
        "repeated_sentences": sum(len(r["repeated_sentences"]) for r in rounds),
        "decisions": sum(r["decisions"] for r in rounds),
        "decisions_without_source": sum(len(r["decisions_without_source"]) for r in rounds),
        "dropped_decisions": sum(len(r["dropped_decisions"]) for r in rounds),
        "retries": sum(r["retries"] for r in rounds),
        "passes": len(passes),
        "pass_seconds": benchlib.stats_ms(passes) if passes else None,
    }


def main() -> None:
    ap = benchlib.parser(__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=None, help="LoCoMo sessions (default 4)")
    ap.add_argument(
        "--facts-only", action="store_true", help="only the facts, on every LoCoMo session"
    )
    benchlib.summary_switches(ap)
    args = ap.parse_args()
    everywhere = extractive_everywhere()
    print(f"facts alone, every session: {everywhere}", flush=True)
    if args.facts_only:
        benchlib.write_result("summary_quality.facts-only", everywhere, quick=args.quick)
        return
    suffix = benchlib.apply_summary_switches(args)
    count = args.sessions or (1 if args.quick else 4)
    models = benchlib.BENCH_CACHE / "models"
    models.mkdir(parents=True, exist_ok=True)
    model_path = prepare_starter_model(models)
    picked = pick_sessions(benchlib.load_locomo(), count)
    rounds: list[dict[str, Any]] = []
    with benchlib.temp_profile("summary-quality") as paths:
        store = MemoryStore(paths, None)
        engine = ChatEngine(model_path, context_size=CONTEXT, seed=0)
        try:

            async def run() -> None:
                for conv, number in picked:
                    rounds.append(await summarize_one(store, engine, conv, number))
                    shown = {k: v for k, v in rounds[-1].items() if k != "summary"}
                    print(f"{conv.sample_id} session {number}: {shown}", flush=True)

            asyncio.run(run())
        finally:
            engine.close()
            store.close()
    summary = totals(rounds)
    print(f"totals: {summary}")
    benchlib.write_result(
        f"summary_quality{suffix}",
        {
            "model": model_path.name,
            "context": CONTEXT,
            "fact_share": FACT_SHARE,
            "first_round_includes_model_load": True,
            "totals": summary,
            "facts_alone_every_session": everywhere,
            "rounds": rounds,
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
