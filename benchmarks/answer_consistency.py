"""Yes/no questions about facts said once: does the answer agree with what recall showed?

In the window, under "Remembered 1 thing you said before: I'm allergic to
penicillin." the starter answered "Am I allergic to anything?" with "No, I am
not allergic to anything."  A health fact denied under its own evidence is
the worst answer the product can give; this benchmark counts such answers.

Setup: exactly ``memory_qa.py``'s.  Each fact of ``consistency_facts.FACTS``
(16: health, diet, habits, possessions, places, family; English, Chinese,
Japanese; half of them negated — "I no longer smoke", 私は猫を飼っていません)
is said once by the user in its own earlier session of 60 LoCoMo turns
(``memory_qa.plant_facts``, real MiniLM).  Every question of
``consistency_facts.QUESTIONS`` (51 yes/no questions, "am I / do I / have I
/ did I / is my / can I" and their Chinese and Japanese forms, 2–4 per fact,
each with the polarity its fact settles) then runs one full turn in a NEW
session through ``AppServices`` with the real starter model, the app's
default settings and a fixed sampling seed (``memory_qa.ask``); the session
is removed after the turn.  All facts are planted for every run, so a
``--quick`` run (the first 10 questions: ten facts, three languages, both
polarities) asks under the same memory as a full one.

The judge (this file, no product code) reads the answer's polarity:

1. Empty, or a first sentence that says it does not know or cannot tell
   ("I don't know", "you haven't told me", "as an AI", 不知道, 没有提到,
   わかりません): ``unclear``.
2. An opening "Yes"/"No" (yeah, correct, of course / nope, not really;
   是的, 对, 没错, 可以 / 不, 不是, 没有, 不能; はい / いいえ) decides — unless
   a clause after it restates every word of the question and, read as in 3,
   says the opposite ("Yes, you don't drink coffee."): ``unclear`` (mixed).
   A clause with only some of them may name another value ("いいえ、今は
   大阪に住んでいます。" to 今も東京に住んでいますか), so the opener stands.
3. Otherwise the clause that restates the question decides: the answer's
   first two sentences are cut into clauses (at sentence ends, ; :, "and",
   "but", "so", "because", a comma before a new subject, after のに/けど,
   and at every CJK comma); the clause sharing most of the question's words
   (English words by their first four letters, Chinese/Japanese as character
   pairs, words near the end of the question — usually the object —
   weighing more) is read.  Its polarity is the parity of negations (not, n't, never, no,
   without; 不, 没, 未, 无; ません, ない) plus *reversing* words (allergic,
   quit, stopped, gave up, avoid, unsafe, former, coeliac; 过敏, 戒, 避免;
   アレルギー, やめ, 避け), compared with the parity of reversing words in
   the question: equal is ``yes``.  So "You are allergic to penicillin"
   answers "Am I allergic to penicillin?" yes and "Can I take penicillin
   safely?" no; "You no longer smoke" answers "Did I quit smoking?" yes.  An
   elliptic clause "only to shellfish" / "not nuts" (只, 仅) says yes / no
   by its first word.  No clause shares a word: the first sentence's clauses
   decide when they agree ("You are allergic to shellfish." to "Can I eat
   shrimp?"), else ``unclear``.

A row is *consistent* when the judged polarity is the expected one, a
*contradiction* when it is the opposite; ``unclear`` is neither.  Recorded
per question: expected, judged, the rule and clause that decided, whether
the fact reached the recall block (its message id in
``TurnResult.recall_ids`` or its sentence in ``recall_text``, as
``memory_qa.fact_in``), which other planted facts did, the answer, seconds;
the setup records the commit and the product files changed since it.
Totals: consistent overall and among questions whose fact was in the recall
block, contradictions (listed, question → answer), unclear, per language and
per expected polarity.  ``--self-test`` runs the judge over hand-written
answers and exits non-zero on a mismatch (no model loaded); ``--rejudge
FILE`` judges a result file's stored answers again after a judge change.

Goal (issue 36, starter model): among >= 40 questions, consistent >= 0.95
where the fact was in the recall block.

    .venv/bin/python benchmarks/answer_consistency.py [--quick] [--questions N] [--seed S]
        [--tag NAME] [--self-test] [--rejudge benchmarks/results/answer_consistency.X.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import memory_qa
from consistency_facts import FACTS, QUESTIONS, Polarity, YesNoFact, YesNoQuestion
from memory_facts import Fact

from agenvoy_desktop.agent import recall as recall_module
from agenvoy_desktop.agent.context import DEFAULT_SYSTEM_PROMPT
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.paths import AppPaths

QUICK_QUESTIONS = 10
ACCEPT_CONSISTENT = 0.95
ACCEPT_MIN_QUESTIONS = 40

Judged = Literal["yes", "no", "unclear"]


# -- the judge -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verdict:
    polarity: Judged
    rule: str
    """What decided: ``empty``, ``dont-know``, ``opener``, ``mixed``, ``clause``,
    ``ellipsis``, ``first-sentence``, ``no-echo``."""
    clause: str = ""
    """The text the polarity was read from."""


DONT_KNOW = re.compile(
    r"\b(?:i|we)\s+(?:don't|do not|can't|cannot|am not able to|am unable to)\s+"
    r"(?:know|tell|say|recall|remember|find|determine|be sure|access|confirm)\b"
    r"|\bnot sure\b|\bunable to\b|\bno (?:information|record|records|data|details)\b"
    r"|\b(?:don't|do not) have (?:any )?(?:information|access|records?|data|details|way)\b"
    r"|\b(?:haven't|have not|didn't|did not) (?:told|tell|mention|mentioned|share|shared|said|say"
    r"|provide|provided)\b"
    r"|\bas an ai\b|\blanguage model\b|\bi'm sorry, but\b|\bi am sorry, but\b"
    r"|不知道|不清楚|不确定|不確定|无法|無法|没有提到|沒有提到|没有告诉|沒有告訴|没有提供|沒有提供"
    r"|わかりません|分かりません|知りません|わからない|分からない",
    re.IGNORECASE,
)
"""A first sentence that does not answer: not knowing, not being told, talking about itself."""

_END = r"(?=[\s,.;:!?。、！？]|$)"
OPENERS: tuple[tuple[re.Pattern[str], Polarity], ...] = (
    (
        re.compile(
            r"^(?:yes|yeah|yep|yup|correct|indeed|absolutely|definitely|certainly|of course|sure"
            r"|true|that's (?:right|correct|true)|that is (?:right|correct|true)|right)\b",
            re.IGNORECASE,
        ),
        "yes",
    ),
    (
        re.compile(
            r"^(?:no|nope|nah|not at all|not really|negative|incorrect|false"
            r"|that's (?:not (?:right|correct|true)|wrong|incorrect|false))\b"
            r"(?!\s+(?:longer|one|more|need)\b)",
            re.IGNORECASE,
        ),
        "no",
    ),
    (re.compile(r"^(?:是的|是啊|对的|對的|没错|沒錯|嗯|当然|當然|确实|確實)"), "yes"),
    (re.compile(r"^(?:是|对|對|有的?|会的?|會的?|可以的?|能)" + _END), "yes"),
    (
        re.compile(r"^(?:不是|不对|不對|不会|不會|不能|不可以|不行|没有|沒有|没|沒|否|不)" + _END),
        "no",
    ),
    (re.compile(r"^(?:はい|ええ|そうです|その通り)"), "yes"),
    (re.compile(r"^(?:いいえ|いえ|いや)" + _END), "no"),
)
"""An answer's first word that says yes or no (CJK ones that are also the start of a
sentence — 不, 有, 会 — only when punctuation follows)."""

NEGATION = re.compile(
    r"\b(?:not|never|no|none|nothing|neither|nor|nobody|without|cannot)\b|n't\b"
    r"|[不没沒未无無别別]|ません|ない|なかっ",
    re.IGNORECASE,
)
NOT_NEGATION = re.compile(
    r"不过|不過|不错|不錯|没错|沒錯|不仅|不僅|不但|不管|无论|無論|不少|别人|別人|无聊|無聊"
    r"|特别|特別|区别|區別|分别|分別|告别|告別|未来|未來"
)
"""CJK words that contain a negation character but deny nothing ("however", "correct")."""
REVERSING = re.compile(
    r"\ballerg\w*|\bquit\w*|\bstop(?:s|ped|ping)?\b|\b(?:gave|give|given|giving) up\b"
    r"|\bused to\b|\bavoid\w*|\bunsafe\b|\bdangerous\b|\bharmful\b|\brisky\b|\bformer(?:ly)?\b"
    r"|\bnon-?(?:smoker|drinker)\w*|\bcoeliac\b|\bceliac\b|\bintoleran\w*"
    r"|过敏|過敏|戒|停止|避免|危险|危險"
    r"|アレルギー|やめ|止め|辞め|禁煙|避け|危険|控え",
    re.IGNORECASE,
)
"""Words that deny the plain proposition when the question does not carry them: "You are
allergic to penicillin" answers "Can I take penicillin safely?" no, "You quit" answers
"Do I smoke?" no."""
ELLIPSIS = re.compile(r"^(?:but\s+|and\s+)?(?:(not|except)|(only|just))\b|^(?:(并非)|(只|仅|僅))")

_SENTENCES = re.compile(r"(?<=[.!?])\s+|[。！？!?\n]+")
_CLAUSES = re.compile(
    r"[;:；：，、,](?=\s*(?:so|but|and|because|as|since|though|although|while|which|only"
    r"|you|i|it|they|she|he|this|that|not|except)\b)"
    r"|\s+(?:and|but|so|because|although|though|while)\s+"
    r"|,(?=\s*[\u3040-\u30ff\u4e00-\u9fff])|[;:；：，、]"
    r"|(?<=のに)|(?<=けど)|(?<=けれど)|(?=虽然|雖然|尽管|儘管)",
    re.IGNORECASE,
)
"""Clause ends; a concessive one ("…のに大丈夫です", although) too, so that the reversing
word before it ("アレルギーを食べているのに") does not turn the clause after it round."""
_WORD = re.compile(r"[a-z][a-z']*")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff\u30a0-\u30ff]+")
_FUNCTION_WORDS = (
    "am i i'm do does did have has had is are was were my me mine can could may should "
    "a an the to of in on at by for any anything ever still before now really been be get "
    "you your it"
)
EN_STOP = frozenset(_FUNCTION_WORDS.split())
"""Words a question shares with any answer; they say nothing about which clause restates it."""
CJK_STOP = "我你您他她私吗嗎么麼的是了在吧呢都"


def normalised(text: str) -> str:
    """NFKC (full-width to ASCII), curly apostrophes straightened, markdown and quotes off."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")
    return re.sub(r"^[\s*#>\"'「『“-]+", "", text).strip()


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.split(text) if s.strip()]


def clauses(sentence: str) -> list[str]:
    return [c.strip(" ,.") for c in _CLAUSES.split(sentence) if c.strip(" ,.")]


def units(text: str) -> list[str]:
    """A text's content units in order: English words (not function words), CJK character
    pairs (a lone character where a run has one), function characters taken out first."""
    lowered = text.lower()
    found = [w for w in _WORD.findall(lowered) if w not in EN_STOP]
    stripped = re.sub(f"[{CJK_STOP}]", " ", text)
    for run in _CJK_RUN.findall(stripped):
        found.extend(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return found


def _same_word(a: str, b: str) -> bool:
    if a.isascii() and b.isascii():
        k = min(4, len(a), len(b))
        return k >= 3 and a[:k] == b[:k]
    return a == b


def echo_score(question_units: Sequence[str], clause: str) -> int:
    """How much of the question the clause restates, later question words weighing more."""
    mine = units(clause)
    return sum(
        weight
        for weight, unit in enumerate(question_units, start=1)
        if any(_same_word(unit, other) for other in mine)
    )


def parity(text: str) -> int:
    """Negations plus reversing words, mod 2 (1: the text denies its plain proposition)."""
    cleaned = NOT_NEGATION.sub(" ", text)
    return (len(NEGATION.findall(cleaned)) + len(REVERSING.findall(cleaned))) % 2


def clause_polarity(question: str, clause: str) -> tuple[Judged, str]:
    """The polarity of one clause against the question, and the rule that read it."""
    lowered = clause.lower()
    elliptic = ELLIPSIS.match(lowered)
    if elliptic:
        denies = elliptic.group(1) or elliptic.group(3)
        return ("no" if denies else "yes"), "ellipsis"
    same = parity(clause) == parity(question)
    return ("yes" if same else "no"), "clause"


def judge(question: str, answer: str) -> Verdict:
    """The polarity of *answer* to the yes/no *question* (rules in the module docstring)."""
    text = normalised(answer)
    parts = sentences(text)
    if not parts:
        return Verdict("unclear", "empty")
    if DONT_KNOW.search(parts[0]):
        return Verdict("unclear", "dont-know", parts[0])
    opener: Polarity | None = None
    for pattern, polarity in OPENERS:
        found = pattern.match(parts[0])
        if found:
            opener = polarity
            parts[0] = parts[0][found.end() :].lstrip(" ,.!:;、，。")
            break
    wanted = units(question)
    candidates = [c for s in parts[:2] for c in clauses(s)]
    scored = [(echo_score(wanted, c), -i, c) for i, c in enumerate(candidates)]
    best = max(scored, default=(0, 0, ""))
    if opener is not None:
        whole = sum(range(1, len(wanted) + 1))
        if wanted and best[0] == whole:
            polarity, _rule = clause_polarity(question, best[2])
            if polarity != opener:
                return Verdict("unclear", "mixed", best[2])
        return Verdict(opener, "opener", parts[0])
    if best[0] > 0:
        polarity, rule = clause_polarity(question, best[2])
        return Verdict(polarity, rule, best[2])
    first = clauses(parts[0])
    read = {clause_polarity(question, c)[0] for c in first}
    if len(read) == 1:
        return Verdict(read.pop(), "first-sentence", parts[0])
    return Verdict("unclear", "no-echo", parts[0])


SELF_TEST: tuple[tuple[str, str, Judged], ...] = (
    ("Am I allergic to anything?", "No, I am not allergic to anything.", "no"),
    ("Am I allergic to anything?", "Yes, you are allergic to penicillin.", "yes"),
    ("Am I allergic to anything?", "You are allergic to penicillin.", "yes"),
    (
        "Can I take penicillin safely?",
        "You are allergic to penicillin, so you should avoid it.",
        "no",
    ),
    ("Can I take penicillin safely?", "No, you are allergic to penicillin.", "no"),
    ("Can I take penicillin safely?", "Yes, you can take penicillin safely.", "yes"),
    ("Do I have any allergies?", "You have no allergies.", "no"),
    ("Do I smoke?", "You quit smoking two years ago.", "no"),
    ("Did I quit smoking?", "You no longer smoke.", "yes"),
    ("Did I quit smoking?", "Yes, you quit two years ago.", "yes"),
    ("Am I a smoker?", "You are a non-smoker.", "no"),
    ("Have I ever been to Japan?", "You have never been to Japan.", "no"),
    ("Have I ever been to Japan?", "I don't know, you haven't told me.", "unclear"),
    ("Have I stopped eating meat?", "You don't eat meat anymore.", "yes"),
    ("Do I still eat meat?", "Yes, you don't eat meat anymore.", "unclear"),
    ("Am I allergic to shellfish?", "You are not allergic to nuts, only to shellfish.", "yes"),
    ("Am I allergic to nuts?", "You are not allergic to nuts, only to shellfish.", "no"),
    ("Can I eat shrimp?", "You are allergic to shellfish.", "no"),
    ("Do I have a sister?", "You have two brothers and no sisters.", "no"),
    ("Do I have any brothers?", "You have two brothers and no sisters.", "yes"),
    ("Can I eat gluten?", "You have coeliac disease.", "no"),
    ("Do I have coeliac disease?", "You have coeliac disease, so you can't eat gluten.", "yes"),
    ("Do I get around by bike?", "You don't own a car, you cycle everywhere.", "unclear"),
    ("我喝咖啡吗？", "你不喝咖啡。", "no"),
    ("我喝咖啡吗？", "是的，你喝咖啡。", "yes"),
    ("我喝咖啡吗？", "不，你不喝咖啡。", "no"),
    ("我对青霉素过敏吗？", "是的，你对青霉素过敏。", "yes"),
    ("我对青霉素过敏吗？", "你对青霉素过敏。", "yes"),
    ("我可以用青霉素吗？", "你对青霉素过敏，不能使用青霉素。", "no"),
    ("我可以用青霉素吗？", "可以。", "yes"),
    ("我会说日语吗？", "你会说粤语，但是不会说日语。", "no"),
    ("我会说粤语吗？", "你会说粤语，但是不会说日语。", "yes"),
    ("我喝咖啡吗？", "我不知道你是否喝咖啡。", "unclear"),
    ("私は猫を飼っていますか？", "いいえ、あなたは猫を飼っていません。", "no"),
    ("私は猫を飼っていますか？", "あなたは猫を飼っていません。", "no"),
    ("私は猫を飼っていますか？", "はい、猫を飼っています。", "yes"),
    (
        "私はそばを食べても大丈夫ですか？",
        "あなたはそばアレルギーがあるので、食べないでください。",
        "no",
    ),
    ("私はそばアレルギーですか？", "はい、そうです。", "yes"),
    ("私は今も東京に住んでいますか？", "いいえ、今は大阪に住んでいます。", "no"),
    ("私は何かアレルギーがありますか？", "わかりません。", "unclear"),
    ("Is my tortoise called Fennel?", "Yes, her name is Fennel.", "yes"),
    ("Do I eat meat?", "", "unclear"),
    ("Am I allergic to nuts?", "Yes, you are not allergic to nuts.", "unclear"),
    ("Am I allergic to penicillin?", "No, you are not allergic to penicillin.", "no"),
    ("Do I smoke?", "You used to smoke.", "no"),
    ("Do I own a car?", "I'm sorry, but I can't help with that.", "unclear"),
    ("私は今も東京に住んでいますか？", "あなたはもう東京には住んでいません。", "no"),
    (
        "私はそばを食べても大丈夫ですか？",
        "それは私の現在の状況です。私はアレルギーを食べているのに大丈夫です。",
        "yes",
    ),
)
"""(question, answer, the polarity the judge must read)."""


def self_test() -> int:
    """Run the judge over :data:`SELF_TEST`; the number of mismatches (each printed)."""
    wrong = 0
    for question, answer, want in SELF_TEST:
        verdict = judge(question, answer)
        ok = verdict.polarity == want
        wrong += not ok
        mark = "ok  " if ok else "FAIL"
        print(
            f"{mark} {want:7s} {verdict.polarity:7s} {verdict.rule:14s} "
            f"{question!r} -> {answer!r}  [{verdict.clause!r}]"
        )
    print(f"\n{len(SELF_TEST) - wrong}/{len(SELF_TEST)} judged as written")
    return wrong


# -- the run -------------------------------------------------------------------------------
def code_state() -> dict[str, Any]:
    """The commit and the product files changed since it (others edit the tree while
    benchmarks run: a figure must say which code it measured)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.rstrip() if done.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "agenvoy_desktop").splitlines()
    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "changed_product_files": [line[3:] for line in changed],
    }


def as_fact(fact: YesNoFact) -> Fact:
    """memory_qa plants ``memory_facts.Fact``s; only ``said`` matters there."""
    return Fact(fact.key, fact.said, fact.questions[0][0], (), fact.kind, fact.lang)


def opposite(polarity: Polarity) -> Polarity:
    return "no" if polarity == "yes" else "yes"


def judged_fields(question: str, expected: Polarity, answer: str) -> dict[str, Any]:
    """What a row records of the judge's reading of *answer*."""
    verdict = judge(question, answer)
    return {
        "judged": verdict.polarity,
        "rule": verdict.rule,
        "judged_from": verdict.clause[:200],
        "consistent": verdict.polarity == expected,
        "contradiction": verdict.polarity == opposite(expected),
    }


async def ask_all(
    services: AppServices,
    planted: Sequence[memory_qa.Planted],
    questions: Sequence[YesNoQuestion],
) -> list[dict[str, Any]]:
    by_key = {p.fact.key: p for p in planted}
    rows = []
    for index, question in enumerate(questions):
        turn = await memory_qa.ask(services, question.text)
        mine = by_key[question.fact.key]
        in_recall = mine.message_id in turn.recall_ids or memory_qa.fact_in(
            mine, [turn.recall_text]
        )
        shown = [
            p.fact.key
            for p in planted
            if p.message_id in turn.recall_ids or memory_qa.fact_in(p, [turn.recall_text])
        ]
        judged = judged_fields(question.text, question.expected, turn.answer)
        turn.extra = {
            "fact": question.fact.key,
            "kind": question.fact.kind,
            "lang": question.fact.lang,
            "expected": question.expected,
            **judged,
            "in_recall": in_recall,
            "facts_in_recall": shown,
            "load": memory_qa.load_text(),
        }
        consistent, contradiction = judged["consistent"], judged["contradiction"]
        label = "OK" if consistent else "CONTRA" if contradiction else "unclear"
        memory_qa.progress(
            f"{question.expected:3s}", index, len(questions), turn, f"{label} {judged['judged']}"
        )
        rows.append(turn.row())
    return rows


def _share(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return memory_qa.rate(rows, key)


def group(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """n, consistent (share), contradictions, unclear, fact in the recall block."""
    return {
        "n": len(rows),
        "consistent": _share(rows, "consistent"),
        "contradictions": sum(1 for r in rows if r["contradiction"]),
        "unclear": sum(1 for r in rows if r["judged"] == "unclear"),
        "in_recall": sum(1 for r in rows if r["in_recall"]),
    }


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    held = [r for r in rows if r["in_recall"]]
    return {
        "questions": len(rows),
        "consistent_rate": _share(rows, "consistent"),
        "in_recall_block": len(held),
        "consistent_when_in_recall": _share(held, "consistent"),
        "consistent_when_in_recall_n": f"{sum(r['consistent'] for r in held)}/{len(held)}",
        "contradictions": sum(1 for r in rows if r["contradiction"]),
        "contradictions_when_in_recall": sum(1 for r in held if r["contradiction"]),
        "unclear": sum(1 for r in rows if r["judged"] == "unclear"),
        "by_lang": {
            lang: group([r for r in rows if r["lang"] == lang])
            for lang in sorted({r["lang"] for r in rows})
        },
        "by_expected": {
            want: group([r for r in rows if r["expected"] == want])
            for want in ("yes", "no")
            if any(r["expected"] == want for r in rows)
        },
        "median_turn_s": memory_qa.median([r["turn_s"] for r in rows]),
        "median_first_token_s": memory_qa.median([r["first_token_s"] for r in rows]),
        "questions_turn_s": round(sum(r["turn_s"] for r in rows), 1),
        "tool_calls_per_turn": memory_qa.turn_costs(list(rows))["tool_calls_per_turn"],
    }


def contradiction_list(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "question": r["question"],
            "expected": r["expected"],
            "answer": r["answer"],
            "in_recall": r["in_recall"],
            "fact": r["fact"],
        }
        for r in rows
        if r["contradiction"]
    ]


def print_totals(total: dict[str, Any], contradictions: Sequence[dict[str, Any]]) -> None:
    print("\n=== answer consistency")
    for key, value in total.items():
        print(f"  {key:30s} {value}")
    for item in contradictions:
        where = "in recall" if item["in_recall"] else "NOT in recall"
        print(
            f"  CONTRADICTION ({where}, expected {item['expected']}): "
            f"{item['question']!r} -> {item['answer'][:160]!r}"
        )


async def run(args: argparse.Namespace, paths: AppPaths) -> dict[str, Any]:
    code = code_state()
    count = args.questions or (QUICK_QUESTIONS if args.quick else len(QUESTIONS))
    questions = QUESTIONS[:count]
    seed = None if args.seed < 0 else args.seed
    services = await asyncio.to_thread(memory_qa.open_services, paths, seed)
    if args.capable_prompt:
        assert services.agent is not None
        services.agent.config.system_prompt = DEFAULT_SYSTEM_PROMPT
    if args.english_header:
        recall_module.LOCALISED_HEADER = False
    try:
        planted, setup = await memory_qa.prepare(services, [as_fact(f) for f in FACTS], seed)
        rows = await ask_all(services, planted, questions)
    finally:
        await asyncio.to_thread(services.close)
    return {"setup": {**setup, "questions": len(questions), "code": code}, **summary(rows)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals, contradictions and acceptance of the judged *rows* (printed too)."""
    total = totals(rows)
    contradictions = contradiction_list(rows)
    print_totals(total, contradictions)
    rate = total["consistent_when_in_recall"]
    return {
        "totals": total,
        "contradiction_list": contradictions,
        "questions": rows,
        "acceptance": {
            "criterion": (
                f"consistent >= {ACCEPT_CONSISTENT} where the fact was in the recall block, "
                f">= {ACCEPT_MIN_QUESTIONS} questions"
            ),
            "consistent_when_in_recall": rate,
            "questions": len(rows),
            "pass": len(rows) >= ACCEPT_MIN_QUESTIONS
            and rate is not None
            and rate >= ACCEPT_CONSISTENT,
        },
    }


def rejudge(path: Path) -> None:
    """Judge a result file's stored answers again (a judge change needs no model run).

    Rows keep the first 400 characters of an answer; the judge reads two sentences."""
    data = json.loads(path.read_text("utf-8"))
    rows = data["questions"]
    for row in rows:
        row.update(judged_fields(row["question"], row["expected"], row["answer"]))
    data.update(summary(rows))
    data["rejudged_utc"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"\nrejudged {path}")


def main() -> None:
    ap = memory_qa.arguments(__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=0, help="ask only the first N questions")
    ap.add_argument(
        "--self-test",
        action="store_true",
        help="run the judge over hand-written answers (no model) and exit non-zero on a mismatch",
    )
    ap.add_argument(
        "--rejudge",
        type=Path,
        metavar="RESULT",
        help="judge the answers stored in a result file again and rewrite its totals",
    )
    args = ap.parse_args()
    if args.rejudge:
        rejudge(args.rejudge)
        return
    if args.self_test:
        sys.exit(1 if self_test() else 0)
    memory_qa.run_in_profile("answer_consistency", args, run)


if __name__ == "__main__":
    main()
