"""Date arithmetic over remembered lines, done in code because a 0.5B model cannot.

Asked "How many days ago did I harvest my first batch of fresh herbs?", the
starter model sees the recalled line and its date and still guesses the
number.  So the arithmetic happens here and the model is handed one finished
sentence to phrase from ("You harvested your first batch of fresh herbs on
2023-04-14, 4 days ago."), which code can also show as it is when the model
fails.  Nothing here searches memory: the caller searches for each event of a
:class:`TemporalQuestion` and passes back the dates it found.

A package by responsibility, all pure and Qt-free; everything a caller needs
is importable from here.

- :mod:`.questions` — :func:`parse_temporal_question` recognises the few
  English question shapes that need date arithmetic (how long ago, how long
  between, which first, when, what on a given day) and cuts out the event
  phrases to search for; :func:`day_range` resolves the day an "on_day"
  question points at.
- :mod:`.mentions` — :func:`event_dates` finds the dates a message refers to
  ("yesterday", "last Saturday", "two weeks ago", "May 3rd"), resolved
  against the local day the message was said; :func:`best_mention` and
  :func:`when_it_happened` pick the one that dates the event.
- :mod:`.wording` — :func:`difference`, :func:`ago` and :func:`age_phrase`
  word spans of time; :func:`explain` writes the answer sentence in the
  second person (:func:`to_second_person`).
- :mod:`.days` — a timestamp's local day (:func:`local_date`) and calendar
  months, shared by mentions and wording.
- :mod:`.verbs` — English past and -ing forms, shared by questions and wording.

Imports run one way: wording → questions → mentions → days, with verbs below
questions and wording.
"""

from __future__ import annotations

from agenvoy_desktop.agent.date_reasoning.days import local_date
from agenvoy_desktop.agent.date_reasoning.mentions import (
    DatedMention,
    Precision,
    best_mention,
    event_dates,
    when_it_happened,
)
from agenvoy_desktop.agent.date_reasoning.questions import (
    Kind,
    TemporalQuestion,
    Unit,
    day_range,
    parse_temporal_question,
)
from agenvoy_desktop.agent.date_reasoning.wording import (
    FoundDate,
    age_phrase,
    ago,
    difference,
    explain,
    to_second_person,
)

__all__ = [
    "DatedMention",
    "FoundDate",
    "Kind",
    "Precision",
    "TemporalQuestion",
    "Unit",
    "age_phrase",
    "ago",
    "best_mention",
    "day_range",
    "difference",
    "event_dates",
    "explain",
    "local_date",
    "parse_temporal_question",
    "to_second_person",
    "when_it_happened",
]
