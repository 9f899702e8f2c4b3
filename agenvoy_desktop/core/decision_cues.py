"""Whether a message states a decision: the words people settle a choice with.

The summary's key decisions are binding: they go into every system prompt of
the session.  The summary prompt defines a decision by its wording (a choice
someone settled: "we will use…", "let's go with…", "I booked…", "agreed"),
but the starter model copies any line it finds notable: on LoCoMo sessions
every decision it kept was a greeting or a remark ("Jon: Hey Gina! Whoa,
your store looks great!", "I was trying to squeeze in some me-time").  So a
decision is kept only when the message it cites says something of the kind
:func:`states_decision` looks for.  The list errs towards keeping: "I'll" and
"we'll" count, as they settle most plans in chat.
"""

from __future__ import annotations

import re

_DECISION_CUE = re.compile(
    r"\b(?:"
    r"decid(?:e|ed|es|ing)|decision|chose|choose|chosen|agreed?|settled?"
    r"|booked|booking|reserved|reservation|picked|(?:go|going|went) with"
    r"|we'?ll|we will|we're going to|i'?ll|i will|i'm going to|let'?s|let us"
    r"|plan(?:ned)? to|confirmed?|signed up|scheduled|switch(?:ed)? to|instead"
    r"|from now on|(?:it|that) is settled|deal"
    r"|entschieden|entscheiden|beschlossen|gebucht|reserviert|abgemacht|einverstanden"
    r"|wir nehmen|ich nehme|nehmen wir|machen wir|lass uns|lasst uns|wir werden"
    r"|ich werde|stattdessen"
    r")\b"
    r"|决定|定了|选了|选定|订了|预订|预定|就这么|说好|约好|确定|決定|決め|予約",
    re.IGNORECASE,
)


def states_decision(text: str) -> bool:
    """True when *text* holds words that settle a choice (English, German, Chinese, Japanese)."""
    return _DECISION_CUE.search(text.replace("’", "'")) is not None
