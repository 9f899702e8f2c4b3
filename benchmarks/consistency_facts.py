"""The facts and yes/no questions of ``answer_consistency.py`` (data only).

Each :class:`YesNoFact` is something the user says once in an earlier
conversation — health, diet, habits, possessions, places, family; in
English, Chinese and Japanese; about half of them NEGATED ("I don't eat
meat anymore", "I've never been to Japan", 私は猫を飼っていません) — and the
yes/no questions asked about it later in a new session, each with the
polarity the recalled sentence settles ("yes" or "no").

Why these: the starter answered "Am I allergic to anything?" with "No, I am
not allergic to anything." under a recall block that read "I'm allergic to
penicillin."  A model that says "yes" to everything would pass questions
about affirmative facts, so a good share of the expected answers are "no",
and a negated fact is asked both ways ("Do I smoke?" no, "Did I quit
smoking?" yes).  Every question is settled by its fact alone (no "Do I have
a dog?" under "I have a tortoise"), and a question names no value the
answer would have to replace ("Is my tortoise called Basil?" is left out:
"Your tortoise is called Fennel." has no polarity a word-list judge can
read).  The facts are things a model cannot know from priors: a yes or a no
that agrees with them comes from the recalled line or from luck, and the
question set is balanced so luck scores about half.

:data:`QUESTIONS` flattens them round-robin (every fact's first question,
then every second one…), so the first ten (``--quick``) span ten facts,
three languages and both polarities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Polarity = Literal["yes", "no"]


@dataclass(frozen=True, slots=True)
class YesNoFact:
    key: str
    said: str
    """What the user says, once, in an earlier conversation."""
    kind: str
    lang: str
    questions: tuple[tuple[str, Polarity], ...]
    """(question asked in a new session, the answer the fact settles)."""


FACTS: tuple[YesNoFact, ...] = (
    YesNoFact(
        "penicillin",
        "I'm allergic to penicillin.",
        "health",
        "en",
        (
            ("Am I allergic to anything?", "yes"),
            ("Am I allergic to penicillin?", "yes"),
            ("Do I have any allergies?", "yes"),
            ("Can I take penicillin safely?", "no"),
        ),
    ),
    YesNoFact(
        "coffee-zh",
        "我不喝咖啡。",
        "diet",
        "zh",
        (
            ("我喝咖啡吗？", "no"),
            ("我平时喝咖啡吗？", "no"),
            ("我每天早上都喝咖啡吗？", "no"),
        ),
    ),
    YesNoFact(
        "meat",
        "I don't eat meat anymore, I stopped last spring.",
        "diet",
        "en",
        (
            ("Do I eat meat?", "no"),
            ("Have I stopped eating meat?", "yes"),
            ("Do I still eat meat?", "no"),
        ),
    ),
    YesNoFact(
        "cat-ja",
        "私は猫を飼っていません。",
        "possession",
        "ja",
        (
            ("私は猫を飼っていますか？", "no"),
            ("家に猫はいますか？", "no"),
            ("猫を飼っていますか？", "no"),
        ),
    ),
    YesNoFact(
        "japan",
        "I've never been to Japan, though I'd love to go one day.",
        "place",
        "en",
        (
            ("Have I ever been to Japan?", "no"),
            ("Did I visit Japan before?", "no"),
            ("Have I been to Japan?", "no"),
        ),
    ),
    YesNoFact(
        "shellfish",
        "I'm not allergic to nuts, only to shellfish.",
        "health",
        "en",
        (
            ("Am I allergic to nuts?", "no"),
            ("Am I allergic to shellfish?", "yes"),
            ("Can I eat shrimp?", "no"),
            ("Can I eat walnuts?", "yes"),
        ),
    ),
    YesNoFact(
        "penicillin-zh",
        "我对青霉素过敏。",
        "health",
        "zh",
        (
            ("我对青霉素过敏吗？", "yes"),
            ("我可以用青霉素吗？", "no"),
            ("我有药物过敏吗？", "yes"),
        ),
    ),
    YesNoFact(
        "smoking",
        "I no longer smoke, I quit two years ago.",
        "habit",
        "en",
        (
            ("Do I smoke?", "no"),
            ("Did I quit smoking?", "yes"),
            ("Am I a smoker?", "no"),
            ("Have I given up smoking?", "yes"),
        ),
    ),
    YesNoFact(
        "soba-ja",
        "私はそばアレルギーがあります。",
        "health",
        "ja",
        (
            ("私はそばアレルギーですか？", "yes"),
            ("私はそばを食べても大丈夫ですか？", "no"),
            ("私は何かアレルギーがありますか？", "yes"),
        ),
    ),
    YesNoFact(
        "car",
        "I don't own a car, I cycle everywhere.",
        "possession",
        "en",
        (
            ("Do I own a car?", "no"),
            ("Do I get around by bike?", "yes"),
            ("Do I have a car?", "no"),
        ),
    ),
    YesNoFact(
        "cantonese-zh",
        "我会说粤语，但是不会说日语。",
        "skill",
        "zh",
        (
            ("我会说粤语吗？", "yes"),
            ("我会说日语吗？", "no"),
            ("我会讲广东话吗？", "yes"),
        ),
    ),
    YesNoFact(
        "siblings",
        "I have two brothers and no sisters.",
        "family",
        "en",
        (
            ("Do I have a sister?", "no"),
            ("Do I have any brothers?", "yes"),
            ("Do I have siblings?", "yes"),
        ),
    ),
    YesNoFact(
        "osaka-ja",
        "私は去年東京から大阪に引っ越したので、もう東京には住んでいません。",
        "place",
        "ja",
        (
            ("私は今も東京に住んでいますか？", "no"),
            ("私は大阪に住んでいますか？", "yes"),
            ("私は引っ越しましたか？", "yes"),
        ),
    ),
    YesNoFact(
        "coeliac",
        "I have coeliac disease, so I can't eat gluten.",
        "health",
        "en",
        (
            ("Can I eat gluten?", "no"),
            ("Do I have coeliac disease?", "yes"),
            ("Can I eat normal wheat bread?", "no"),
        ),
    ),
    YesNoFact(
        "tortoise",
        "I have a tortoise called Fennel, she is 31 years old.",
        "possession",
        "en",
        (
            ("Do I have a pet?", "yes"),
            ("Is my tortoise called Fennel?", "yes"),
            ("Do I have a tortoise?", "yes"),
        ),
    ),
    YesNoFact(
        "mongolia",
        "I've been to Mongolia twice, both times in winter.",
        "place",
        "en",
        (
            ("Have I been to Mongolia?", "yes"),
            ("Did I ever visit Mongolia?", "yes"),
            ("Have I been to Mongolia in winter?", "yes"),
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class YesNoQuestion:
    fact: YesNoFact
    text: str
    expected: Polarity


def round_robin(facts: tuple[YesNoFact, ...]) -> tuple[YesNoQuestion, ...]:
    """Every fact's first question, then every second one…: any prefix spans many facts."""
    longest = max(len(f.questions) for f in facts)
    return tuple(
        YesNoQuestion(fact, *fact.questions[i])
        for i in range(longest)
        for fact in facts
        if i < len(fact.questions)
    )


QUESTIONS: tuple[YesNoQuestion, ...] = round_robin(FACTS)
