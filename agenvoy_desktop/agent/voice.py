"""The answer said to the person asking: "you", not "the user", nor their own "I".

The recall block tells the model what "the user said" and quotes them in the
first person.  The starter then answers right but in the wrong voice: "The
user attended yoga classes three times a week, which helps with his
anxiety." or, copying the quote, "I have been averaging around 2 hours of
screen time on Instagram per day." (13 of 64 LongMemEval answers).  Read in
the window, the first sounds like somebody else is meant and the second like
the assistant talking about itself.  Turning the recalled lines round before
the model sees them did not help (``agent/pronouns.py``), so the answer is
put right as it streams, sentence by sentence:

* "the user" as a person (not "the user interface") becomes "you", the verb
  after it agrees ("the user has" → "you have"), and he/she/they, his/her/
  their later in that sentence become "you"/"your";
* a sentence that opens in the first person and repeats the user's own words
  (a word of the question or of a remembered line of theirs, near its start;
  in Chinese a character pair: "我的妈妈的生日是十月三号" over "我妈妈的生日是哪天？")
  is turned round (``pronouns.swap_person``): "I waited over a year" → "You
  waited over a year".  A sentence where the assistant speaks for itself
  ("I don't know…", "I don't have any information…", "I recommend…", "I'm
  sorry…") is left alone — "No, I don't have a sister." is the user's and is
  turned round — and so is every sentence when the question asks what the
  assistant said, and whatever stands in quotation marks.

Everything is pure and word-level; :class:`VoiceStream` applies it to a
stream, holding back only what a later word could still change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agenvoy_desktop.agent.pronouns import swap_person
from agenvoy_desktop.agent.recall_lines import light_stem, related_words
from agenvoy_desktop.core.retrieval.fts_text import CJK_FUNCTION_BIGRAMS, STOPWORDS
from agenvoy_desktop.language import languages
from agenvoy_desktop.language.patterns import alternatives, compiled, group, spaced, unspaced

DECIDE_WORDS = 8
"""Words of a first-person sentence looked at for an echo of the user's words."""
HELD_WORDS = 2
"""Words held back while streaming: a rewrite looks one word ahead ("the" + "user")."""

_SENTENCE_END = re.compile(
    r"[.!?]+[\"'\u201d)\]]*\s+|[\u3002\uff01\uff1f]+[\u201d\u300d\u300f\uff09]*\s*|\n+"
)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_ZH_OPENER = compiled(
    group(r"\s*(?:", unspaced("voice.lead"), r"[，,。]\s*)?")
    + group("(", unspaced("voice.openers"), ")")
)
_ZH_ASSISTANT = compiled(alternatives(unspaced("voice.assistant_speech")))
"""What follows 我 when the assistant speaks for itself (我不知道, 我建议, 我是…)."""
DECIDE_CHARS = 10
"""Characters after 我 looked at for an echo of the user's words."""
_TOKEN = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?")
_LEAD = frozenset(spaced("voice.lead"))
_OPENERS = frozenset(spaced("voice.openers"))
_ASSISTANT_SPEECH = frozenset(spaced("voice.assistant_speech"))
"""The first words after "I" (or "I'm") that make a sentence the assistant's own."""
_MODALS = frozenset(spaced("voice.modals"))
"""Words whose verb decides: "I don't know" is the assistant's, "I don't have a sister" not."""
_ASSISTANT_VERBS = frozenset(spaced("voice.assistant_verbs"))
_NO_RECORD = frozenset(spaced("voice.no_record"))
"""After "I don't have": the assistant's lack ("any information"), not the user's ("a sister")."""


def _pairs(key: str) -> dict[str, str]:
    """The ``pairs`` under *key* of every language, as a table (the first language's wins)."""
    out: dict[str, str] = {}
    for lang in languages():
        for word, said in lang.pairs(key):
            out.setdefault(word, said)
    return out


_WEAK_AFTER_AM = frozenset(spaced("voice.weak_after_am"))
"""Words after "I'm" that decide nothing ("not", "a", "just"): the next word does."""
_NOT_ABLE = frozenset(spaced("voice.not_able"))
"""After "I'm not", the assistant's lack ("I'm not able to tell"); "I was able to finish
the run" is the user's."""
_NEGATIONS = frozenset({"not", "no"})
_SELF_NOUNS = frozenset(spaced("voice.self_nouns"))
"""What the assistant says it is ("I'm an AI language model", "I'm just a program")."""
SHORT_ASKED = 3
"""The question's own words count as an echo from three letters: "Do I have a cat?" →
"Yes, I have a cat." is the user's."""
_AGREE = _pairs("voice.agree")
_ADVERBS = frozenset(spaced("voice.adverbs"))
_NOT_A_PERSON = frozenset(spaced("voice.not_a_person"))
"""Words after "the user" that make it a thing ("the user interface"), not the person."""
_THIRD_PERSON = _pairs("voice.third_person")
_QUOTE = re.compile('["\u201c\u201d]')
_QUOTE_SPLIT = re.compile('(["\u201c\u201d])')
_NAME = re.compile(r"\b[A-Z][a-z]+")
_HER_OBJECT_NEXT = frozenset(spaced("voice.her_object_next"))


@dataclass(frozen=True, slots=True)
class Said:
    """One sentence of an answer as the user is to read it."""

    text: str
    length: int
    """Characters of the answer it stands for."""
    quoted: bool
    """Whether what follows it starts inside quotation marks."""
    final: bool = True
    """False while an unfinished first-person sentence may still turn out to echo the user."""
    complete: bool = True
    """False for the last sentence of an answer still streaming."""


@dataclass(frozen=True, slots=True)
class Voice:
    """What a rewrite needs to know: the question and the user's own remembered lines."""

    echo_words: frozenset[str]
    """Four-letter stems of the content words the user said (question, their lines)."""
    turn_first_person: bool
    """False when the question asks what the assistant said (its "I" is its own)."""

    @classmethod
    def for_turn(cls, question: str, user_lines: Iterable[str], *, about_assistant: bool) -> Voice:
        words: set[str] = set()
        for text, shortest in ((question, SHORT_ASKED), *((line, 4) for line in user_lines)):
            words.update(_stem(w) for w in _content_words(text, shortest=shortest))
            words.update(_bigrams(text))
        # "Do I have any pets?" → "Yes, I do have a cat.": a thing of the kind asked about
        # (or another name for it, ``recall.kinds``) is the user's too
        for word in _content_words(question, shortest=SHORT_ASKED):
            words.update(_stem(w) for w in related_words(light_stem(word)))
        return cls(frozenset(words), not about_assistant)

    def sentences(self, text: str, *, quoted: bool = False, ended: bool = False) -> list[Said]:
        """*text* rewritten sentence by sentence (see :class:`Said`), *quoted* telling
        whether it starts inside quotation marks.  Unless *ended*, the last sentence may
        still grow: if it opens in the first person and is still too short to tell whether
        it echoes the user, it is given as written and marked not final.  What stands in
        quotation marks is the user's or a source's own words and stays as written."""
        out: list[Said] = []
        start = 0
        for end_match in _SENTENCE_END.finditer(text):
            piece = text[start : end_match.end()]
            after = quoted ^ (len(_QUOTE.findall(piece)) % 2 == 1)
            out.append(Said(self._sentence(piece, complete=True, quoted=quoted), len(piece), after))
            quoted, start = after, end_match.end()
        if start < len(text):
            tail = text[start:]
            decided = ended or quoted or self._echoes(tail, complete=False) is not None
            said = self._sentence(tail, complete=ended, quoted=quoted) if decided else tail
            out.append(Said(said, len(tail), quoted, final=decided, complete=ended))
        return out

    def rewrite(self, text: str) -> str:
        """The whole answer in the right voice."""
        return "".join(said.text for said in self.sentences(text, ended=True))

    def _sentence(self, sentence: str, *, complete: bool, quoted: bool) -> str:
        echoes = not quoted and self.turn_first_person and self._echoes(sentence, complete=complete)
        turn = swap_person if echoes else _without_the_user
        out = ""
        for part in _QUOTE_SPLIT.split(sentence):
            if _QUOTE.fullmatch(part):
                quoted = not quoted
                out += part
            else:
                out += part if quoted else turn(part)
        return out

    def _echoes(self, sentence: str, *, complete: bool) -> bool | None:
        """Whether a first-person sentence repeats the user's words (None: not yet known)."""
        if _CJK.search(sentence[:12]):
            return self._echoes_zh(sentence, complete=complete)
        words = [w.lower().replace("\u2019", "'") for w in _TOKEN.findall(sentence)]
        while words and words[0] in _LEAD:
            words = words[1:]
        if not words:
            return False if complete else None
        if words[0] not in _OPENERS:
            return False
        rest = words[1 : 1 + DECIDE_WORDS]
        if words[0] != "my":
            own = _assistant_speaks(words[0], rest, complete=complete)
            if own is not False:
                return None if own is None else False
        echoed = [w for w in rest if len(w) >= SHORT_ASKED and w not in STOPWORDS]
        if any(_stem(word) in self.echo_words for word in echoed):
            return True
        if complete or len(rest) >= DECIDE_WORDS:
            return False
        return None

    def _echoes_zh(self, sentence: str, *, complete: bool) -> bool | None:
        """The same for Chinese: "我的妈妈的生日是十月三号" over "我妈妈的生日是哪天？"."""
        opener = _ZH_OPENER.match(sentence)
        if opener is None:
            return False
        rest = sentence[opener.end() : opener.end() + DECIDE_CHARS]
        if not rest:
            return False if complete else None
        if not rest.startswith("的") and _ZH_ASSISTANT.match(rest):
            return False
        if any(gram in self.echo_words for gram in _bigrams(rest)):
            return True
        if complete or len(rest) >= DECIDE_CHARS:
            return False
        return None


def _assistant_speaks(opener: str, rest: list[str], *, complete: bool) -> bool | None:
    """Whether "I …" with *rest* after it is the assistant speaking for itself ("I don't
    know", "I'm sorry", "I have no record"); None while too few words have come."""
    if not rest:
        return True if complete else None
    if rest[0] in _MODALS:
        said = _modal_says(rest[1:], complete=complete)
        return None if said is None else not said
    if opener == "i'm":
        return _what_i_am(rest, complete=complete)
    if opener == "i" and rest[0] in {"am", "was"}:
        return _what_i_am(rest[1:], complete=complete)
    if rest[0] in _ASSISTANT_SPEECH:
        return True
    return rest[0] == "have" and rest[1:2] == ["no"]  # "I have no record of…"


def _what_i_am(after: list[str], *, complete: bool) -> bool | None:
    """After "I'm" / "I am": the assistant's own state ("sorry", "not sure", "an AI
    language model") or, past "not", "a", "just" …, something the user is ("not a
    smoker"), which the echo then decides; None while too few words have come."""
    rest = list(after)
    negated = False
    while rest and rest[0] in _WEAK_AFTER_AM:
        negated = negated or rest[0] in _NEGATIONS
        rest = rest[1:]
    if not rest:
        return True if complete else None
    if negated and rest[0] in _NOT_ABLE:
        return True
    return rest[0] in _ASSISTANT_SPEECH or rest[0] in _SELF_NOUNS


def _modal_says(after: list[str], *, complete: bool) -> bool | None:
    """After "I don't / can't …": False when the verb is the assistant's own ("know",
    "have any information"), True when it may be the user's, None when not yet known."""
    if after[:1] == ["not"]:
        after = after[1:]
    if not after:
        return False if complete else None
    if after[0] in _ASSISTANT_VERBS:
        return False
    if after[0] == "have":
        if len(after) < 2:
            return False if complete else None
        if after[1] in _NO_RECORD:
            return False
    return True


def _bigrams(text: str) -> set[str]:
    """The Chinese character pairs of *text* (function pairs such as 我的 left out)."""
    grams: set[str] = set()
    for run in re.findall(r"[\u3400-\u4dbf\u4e00-\u9fff]+", text):
        grams.update(run[i : i + 2] for i in range(len(run) - 1))
    return grams - CJK_FUNCTION_BIGRAMS - {"我们", "我們", "我的", "你的"}


def _content_words(text: str, *, shortest: int = 4) -> list[str]:
    return [
        w
        for w in (t.lower().replace("\u2019", "'") for t in _TOKEN.findall(text))
        if len(w) >= shortest and w not in STOPWORDS
    ]


def _stem(word: str) -> str:
    return word[:4]


_THE_USER = re.compile(
    r"\b(?P<the>[Tt]he) user(?P<poss>['\u2019]s\b)?(?P<rest>"
    + rf"(?:\s+(?:{'|'.join(sorted(_ADVERBS))})\b)?(?:\s+[A-Za-z'\u2019]+)?)",
    re.IGNORECASE,
)
""""the user", then an adverb if one comes, then the word whose form follows "you"."""


def _without_the_user(sentence: str) -> str:
    """ "the user" as a person made "you" (see the module docstring)."""
    match = _THE_USER.search(sentence)
    if match is None:
        return sentence
    after = match.group("rest").split()
    if not match.group("poss") and after and after[0].lower() in _NOT_A_PERSON:
        return sentence
    upper = match.group("the")[0] == "T" and not sentence[: match.start()].strip()
    if match.group("poss"):
        said = ("Your" if upper else "your") + match.group("rest")
        rest_start = match.end()
    else:
        said = ("You" if upper else "you") + _agreeing(match.group("rest"))
        rest_start = match.end()
    tail = sentence[rest_start:]
    if not _NAME.search(match.group("rest")):
        tail = _third_person_after(tail)
    return sentence[: match.start()] + said + _without_the_user(tail)


def _agreeing(rest: str) -> str:
    """The verb after "the user" as after "you": "has" → "have", "usually goes" → "usually go"."""
    words = re.match(r"(\s*)(\S+)(.*)", rest, re.DOTALL)
    if words is None:
        return rest
    if words.group(2).lower() in _ADVERBS and words.group(3).strip():
        return words.group(1) + words.group(2) + _agreeing(words.group(3))
    word = words.group(2)
    if not word:
        return rest
    lead, after = words.group(1), words.group(3)
    key = word.lower().replace("\u2019", "'")
    if key in _AGREE:
        return lead + _AGREE[key].replace("'", "\u2019" if "\u2019" in word else "'") + after
    if key in _ADVERBS or key in STOPWORDS or not key.endswith("s") or key.endswith("ss"):
        return rest
    return lead + _plain_verb(word) + after


def _plain_verb(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if re.search(r"(?:ch|sh|ss|x|z|o)es$", word):
        return word[:-2]
    return word[:-1]


_PRONOUN = re.compile(
    group(r"\b(?P<word>", [*_THIRD_PERSON, "her"], ")")
    + r"\b(?!['\u2019])(?P<next>\s+[A-Za-z'\u2019]+)?",
    re.IGNORECASE,
)
"""A third person's word (``voice.third_person``, and "her", which is "you" or "your" by
what follows), then the next word."""


def _third_person_after(text: str) -> str:
    """He/she/they (and their forms) in the rest of a sentence about the user: "you"."""

    def swap(match: re.Match[str]) -> str:
        word, following = match.group("word"), match.group("next") or ""
        key = word.lower()
        if key == "her":
            nxt = following.strip().lower()
            said = "you" if not nxt or nxt in _HER_OBJECT_NEXT else "your"
        else:
            said = _THIRD_PERSON[key]
        if word[0].isupper():
            said = said.capitalize()
        if key in {"he", "she"}:
            following = _agreeing(following)  # after "they" it agrees with "you" already
        return said + following

    # a person named after "the user" may be who a later "he" or "her" means
    name = _NAME.search(text)
    limit = name.start() if name else len(text)
    return _PRONOUN.sub(swap, text[:limit]) + text[limit:]


class VoiceStream:
    """An answer's text, rewritten by a :class:`Voice` while it streams.

    ``feed`` returns what may be shown now: the rewrite of the text so far
    but for its last :data:`HELD_WORDS` words and an unfinished first-person
    sentence that is not yet known to echo the user.  A finished sentence is
    not looked at again, so each piece costs the length of the sentence it
    ends, not of the answer.  Should a later word change what was shown
    (rare: a rewrite that looks further), nothing more streams and the saved
    answer, rewritten whole, replaces the bubble.
    """

    def __init__(self, voice: Voice | None) -> None:
        self._voice = voice
        self._tail = ""
        """What came after the last finished sentence."""
        self._quoted = False
        """Whether the tail starts inside quotation marks."""
        self._shown = ""
        """What of the tail's rewrite was shown."""
        self._diverged = False

    def feed(self, text: str) -> str:
        if self._voice is None:
            return text
        self._tail += text
        out = ""
        for said in self._voice.sentences(self._tail, quoted=self._quoted):
            if not said.complete:
                if said.final:
                    out += self._advance(_held_back(said.text))
                break
            out += self._advance(said.text)
            self._tail, self._quoted, self._shown = self._tail[said.length :], said.quoted, ""
        return out

    def flush(self) -> str:
        if self._voice is None:
            return ""
        rest = self._voice.sentences(self._tail, quoted=self._quoted, ended=True)
        return self._advance("".join(said.text for said in rest))

    def _advance(self, ready: str) -> str:
        if self._diverged or self._shown.startswith(ready):
            return ""  # nothing new ("the user" became "you": fewer words are ready)
        if not ready.startswith(self._shown):
            self._diverged = True
            return ""
        new, self._shown = ready[len(self._shown) :], ready
        return new


def _held_back(text: str) -> str:
    """*text* without its last words (they may still be rewritten); in Chinese, which
    has no spaces, its last two characters (我 before 们)."""
    if _CJK.search(text[-4:]):
        return text[:-HELD_WORDS]
    cut = len(text)
    for _ in range(HELD_WORDS):
        cut = text.rstrip().rfind(" ", 0, cut)
        if cut <= 0:
            return ""
    return text[: cut + 1]
