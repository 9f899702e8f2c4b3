"""English verb forms: the simple past and the -ing form of a verb.

The question parser turns "How many days did it take me to knit X?" into
"start knitting X" (:func:`gerund`) and tells a past "which ... first"
question by its verbs (:data:`PAST_FORMS`); the wording says an event back
in the past tense (:func:`past_tense`).  Kept apart because the wording
imports the question parser, so the parser cannot import them from there.
"""

from __future__ import annotations

import re

_IRREGULAR: dict[str, str] = dict(
    re.findall(
        r"(\w+):(\w+)",
        "be:was become:became begin:began bleed:bled break:broke bring:brought build:built "
        "buy:bought catch:caught choose:chose come:came cost:cost cut:cut do:did draw:drew "
        "drink:drank drive:drove eat:ate fall:fell feed:fed feel:felt fight:fought find:found "
        "fly:flew forget:forgot get:got give:gave go:went grow:grew have:had hear:heard "
        "hit:hit hold:held hurt:hurt keep:kept know:knew lead:led leave:left lend:lent "
        "let:let lose:lost make:made meet:met pay:paid put:put quit:quit read:read ride:rode "
        "ring:rang rise:rose run:ran say:said see:saw sell:sold send:sent set:set shut:shut "
        "sing:sang sit:sat sleep:slept speak:spoke spend:spent stand:stood steal:stole "
        "swim:swam take:took teach:taught tell:told think:thought throw:threw "
        "understand:understood wake:woke wear:wore win:won write:wrote",
    )
)
PAST_FORMS = frozenset(_IRREGULAR.values()) | {"were", "had", "was"}


def past_tense(verb: str) -> str:
    """The simple past of an English verb: the irregular ones listed, the rest by rule."""
    low = verb.lower()
    if low in PAST_FORMS or (low.endswith("ed") and not low.endswith("eed")):
        return verb
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith("e"):
        return verb + "d"
    if re.fullmatch(r"\w*[^aeiou]y", low):
        return verb[:-1] + "ied"
    if re.fullmatch(r"[^aeiou]{1,2}[aeiou][^aeiouwxy]", low):
        return verb + verb[-1] + "ed"
    return verb + "ed"


def gerund(verb: str) -> str:
    """The -ing form ("read" -> "reading", "knit" -> "knitting", "bake" -> "baking")."""
    low = verb.lower()
    if low.endswith("ie"):
        return verb[:-2] + "ying"
    if low.endswith("e") and not low.endswith(("ee", "ye", "oe")) and low != "be":
        return verb[:-1] + "ing"
    if re.fullmatch(r"[^aeiou]{1,2}[aeiou][^aeiouwxy]", low):
        return verb + verb[-1] + "ing"
    return verb + "ing"
