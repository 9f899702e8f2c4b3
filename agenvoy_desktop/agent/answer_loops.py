"""An answer that goes round in circles ends where the circle starts.

The starter's sampling defaults (DRY and a repeat penalty, ``llm.catalogue``)
keep it from repeating itself word for word, but not from writing an earlier
paragraph again with a few words changed: asked for a long bedtime story, it
wrote "She decided to face the darkness with determination and courage, but
it was not easy." and then, paragraph after paragraph, "She decided to face
the dark with determination and courage once again, …" until the answer limit
(``benchmarks/sampling_loops.py`` at the app's 1,024 tokens: 2 of 10 long
answers; RESULTS §17).  A person reads one loop and then scrolls through
hundreds of tokens of it.

:class:`LoopWatch` reads the answer as it streams and measures each finished
prose paragraph by the share of its four-word sequences the answer has already
written.  Half of them, or a third in two paragraphs running, is a loop: the
turn stops the model and keeps the answer up to that paragraph.  In the
starter's long answers without a loop no paragraph went past a quarter; in its
loops the shares climbed past 0.3 within a few paragraphs and stayed there.
Verse and lists (short lines: a refrain is meant to come back) and code are
never measured; nor are short paragraphs, which repeat by chance.
"""

from __future__ import annotations

import re

REPEAT_SHARE = 0.5
"""Share of a paragraph's 4-word sequences already written that makes it a repeat."""
DRIFT_SHARE = 0.3
"""A lower share that makes a repeat when the paragraph before reached it too."""
MIN_WORDS = 10
"""Shorter paragraphs are neither checked nor remembered ("Day 3: Practice loops.")."""
SHORT_LINE_WORDS = 10
"""A paragraph of three or more lines averaging at most this many words is verse or a list."""
_WORD = re.compile(r"\w+(?:'\w+)?")
_BREAK = re.compile(r"\n[ \t]*\n")
_FENCE = "```"

Gram = tuple[str, ...]


class LoopWatch:
    """Fed the answer piece by piece; :meth:`feed` says where a repeating paragraph starts."""

    def __init__(self) -> None:
        self._text = ""
        self._done = 0
        """Offset up to which paragraphs have been read."""
        self._written: set[Gram] = set()
        self._drifting = False
        self._in_code = False
        self._found = False

    def feed(self, piece: str) -> int | None:
        """Add *piece*; the offset in the whole answer where a repeated paragraph begins,
        or None (also for every piece after the first repeat is found)."""
        if self._found:
            return None
        self._text += piece
        while (end := _BREAK.search(self._text, self._done)) is not None:
            start, self._done = self._done, end.end()
            if self._repeats(self._text[start : end.start()]):
                self._found = True
                return start
        return None

    def _repeats(self, paragraph: str) -> bool:
        if paragraph.count(_FENCE) % 2:
            self._in_code = not self._in_code
            return False
        if self._in_code or _FENCE in paragraph or is_verse(paragraph):
            return False
        words = [w.lower() for w in _WORD.findall(paragraph)]
        if len(words) < MIN_WORDS:
            return False
        grams = {tuple(words[i : i + 4]) for i in range(len(words) - 3)}
        share = len(grams & self._written) / len(grams)
        if share >= REPEAT_SHARE or (share >= DRIFT_SHARE and self._drifting):
            return True
        self._drifting = share >= DRIFT_SHARE
        self._written |= grams
        return False


def is_verse(paragraph: str) -> bool:
    """Three or more short lines: a poem's stanza or a list, where repeats are meant."""
    lines = [line for line in paragraph.splitlines() if line.strip()]
    if len(lines) < 3:
        return False
    return sum(len(_WORD.findall(line)) for line in lines) <= SHORT_LINE_WORDS * len(lines)


def loop_start(text: str) -> int | None:
    """Where the first repeated paragraph of a whole *text* begins (None: no loop)."""
    return LoopWatch().feed(text)
