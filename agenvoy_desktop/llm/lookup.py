"""Drafts for speculative decoding, looked up in the text so far ("prompt lookup").

A rolling summary copies names, phrases and JSON keys from the transcript it
summarises and from itself.  When the last few tokens already occurred
earlier in the prompt or the answer, the tokens that followed them then are
a good guess for what follows now.  :meth:`LlamaModel.generate` evaluates the
guess in the same ``llama_decode`` call as the token just sampled, samples
each position as usual, and keeps the guess up to the first token the
sampler did not choose.  Every emitted token is still a sample of the model's
own distribution (a guess only saves the decode of the tokens it got right),
so drafts change the speed, not what may be said.

No model and no library: a dictionary from each n-gram to the position that
followed its latest occurrence, updated as tokens are appended.
"""

from __future__ import annotations

from collections.abc import Sequence

NGRAM_SIZES = (4, 3)
"""The suffix lengths looked up, longest first (a 2-token match guessed wrong too often)."""
MAX_DRAFT = 4
"""Tokens guessed per decode at most.  On 2 CPU cores a decode of 5 tokens costs ~2×
one of 1 (the weights are read once for all of them); longer guesses fail more often."""


class NgramDrafts:
    """The tokens of one generation (prompt, then answer) and their n-gram index."""

    def __init__(self, tokens: Sequence[int], *, max_draft: int = MAX_DRAFT) -> None:
        self.max_draft = max_draft
        self._size = max_draft
        self._tokens: list[int] = []
        self._next: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in NGRAM_SIZES}
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append *tokens*; each n-gram that now has a follower points at it."""
        seq = self._tokens
        for token in tokens:
            seq.append(token)
            end = len(seq) - 1  # index of the follower of the n-grams ending just before it
            for n, index in self._next.items():
                if end >= n:
                    index[tuple(seq[end - n : end])] = end

    def settle(self, kept: int) -> None:
        """Size the next guess by how much of the last one the sampler kept.

        A refused guess (kept 0) makes the next one a single token, so new
        prose, where guesses mostly fail, pays for a 2-token decode rather
        than a 5-token one; each guess kept whole lets the next grow by one.
        """
        self._size = max(1, min(self.max_draft, kept + 1))

    def draft(self, limit: int | None = None) -> list[int]:
        """Up to *limit* tokens (and the size :meth:`settle` allows) that followed the
        current suffix the last time it occurred; [] when no suffix was seen before."""
        size = self._size if limit is None else min(limit, self._size)
        seq = self._tokens
        if size <= 0:
            return []
        for n, index in self._next.items():
            if len(seq) < n:
                continue
            start = index.get(tuple(seq[-n:]))
            if start is not None:
                return seq[start : start + size]
        return []
