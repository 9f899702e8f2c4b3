"""Openings an answer may not start with: token bans at the start of a chat answer.

The starter answers about one statement in ten with a refusal — "My bike
lock code is 4417." → "I'm sorry, but I can't assist with that request." —
although the user asked for nothing.  A prompt line against it made the
model talk about the line instead (``benchmarks/statement_echo.py``), so the
caller names the openings and the sampler never completes one: while the
answer's text is still a proper prefix of a banned phrase, every token whose
text would complete the phrase gets a logit of minus infinity.  The model
then says what else it would have said ("I'm sorry to hear…" stays open
when only "I'm sorry," is banned).

Matching is on bytes, so a phrase and the tokens that spell it may split
anywhere (a CJK character across two tokens).  The tokens whose piece
starts with a given string form one range of the vocabulary sorted by
piece: :class:`Vocabulary` sorts once per model, and each ban is a bisect.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]


class Vocabulary:
    """A model's token pieces sorted by their bytes, for prefix lookups."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        """*pieces*: every token's bytes, by token id (control tokens empty)."""
        pairs = sorted((piece, token) for token, piece in enumerate(pieces) if piece)
        self._pieces = [piece for piece, _ in pairs]
        self._ids = np.array([token for _, token in pairs], dtype=np.int32)

    def starting_with(self, prefix: bytes) -> IntArray:
        """Ids of the tokens whose piece starts with *prefix* (non-empty)."""
        lo = bisect.bisect_left(self._pieces, prefix)
        after = _successor(prefix)
        hi = len(self._pieces) if after is None else bisect.bisect_left(self._pieces, after, lo)
        return self._ids[lo:hi]


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string that starts with *prefix*."""
    head = prefix.rstrip(b"\xff")
    if not head:
        return None
    return head[:-1] + bytes([head[-1] + 1])


@dataclass(slots=True)
class OpeningBan:
    """The bans of one answer: feed it each chosen token's piece, ask what to ban next."""

    vocabulary: Vocabulary
    phrases: tuple[bytes, ...]
    said: bytes = b""
    _done: bool = field(default=False)

    @classmethod
    def of(cls, vocabulary: Vocabulary, phrases: Sequence[str]) -> OpeningBan | None:
        encoded = tuple(p.encode("utf-8") for p in phrases if p)
        return cls(vocabulary, encoded) if encoded else None

    def banned(self) -> IntArray | None:
        """Tokens that would complete a banned phrase now (None once none can)."""
        if self._done:
            return None
        said = self.said.lstrip()  # a line break or space before the first word
        live = [p for p in self.phrases if len(p) > len(said) and p.startswith(said)]
        if not live:
            self._done = True
            return None
        rest = [self.vocabulary.starting_with(p[len(said) :]) for p in live]
        return np.unique(np.concatenate(rest)) if len(rest) > 1 else rest[0]

    def chose(self, piece: bytes) -> None:
        """Record the piece of the token just sampled."""
        if not self._done:
            self.said += piece
