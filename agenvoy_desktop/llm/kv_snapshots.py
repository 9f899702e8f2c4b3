"""Saved KV states of earlier prompts, so alternating kinds of work do not re-read each other's.

The chat context keeps one KV cache, and a prompt reuses only the prefix it
shares with the previous one.  The app interleaves two kinds of prompt on the
same model: chat turns (system prompt, summary, history) and rolling-summary
passes (their own ~450-token instructions, then the messages to fold).  Each
pass wipes the chat's cache and each turn the pass's, so a pass after a turn
evaluates its instructions again (~5 s on two cores) and the turn after a pass
its whole stable prefix.

Before a prompt throws away a long stretch of the cache, the state of the
sequence is copied out (``llama_state_seq_get_data``: a memcpy of the cells,
12 KiB per token for the 0.5B starter); when a later prompt shares clearly more
with a saved state than with the live cache, that state is copied back first.
At most :data:`KEEP` states are held within :data:`BUDGET_BYTES`; a new state
replaces an older one of the same family (sharing most of its tokens), so a
chat turn replaces the previous turn's state instead of the summary's.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp

log = logging.getLogger(__name__)

KEEP = 2
"""States held: one per kind of prompt the app alternates between."""
BUDGET_BYTES = 64 << 20
"""All held states together (the starter: ~5,400 tokens); a bigger state is not kept."""
MIN_GAIN = 128
"""Tokens a save or restore must spare before it is worth its copy."""
SAME_FAMILY = 0.5
"""A saved state sharing at least this share of its tokens with a new one is replaced by it."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens *a* and *b* share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(slots=True)
class _State:
    tokens: list[int]
    data: Any
    """A ctypes byte array holding ``llama_state_seq_get_data`` of sequence 0."""
    size: int


class KvSnapshots:
    """Saved sequence-0 states of one chat context (worker thread only)."""

    def __init__(self) -> None:
        self._states: list[_State] = []
        self.restored = 0
        """States copied back so far (for tests and logs)."""

    def clear(self) -> None:
        """Forget every state (the context was rebuilt or wiped), zeroing its bytes first:
        they are a session's text in another form, and freed memory is not overwritten."""
        for state in self._states:
            ctypes.memset(state.data, 0, ctypes.sizeof(state.data))
        self._states.clear()

    @property
    def held(self) -> int:
        return len(self._states)

    def best(self, tokens: Sequence[int]) -> tuple[int, list[int] | None]:
        """The longest prefix of *tokens* a held state covers, and that state's tokens."""
        found, length = None, 0
        for state in self._states:
            shared = common_prefix(state.tokens, tokens)
            if shared > length:
                found, length = state, shared
        return length, (found.tokens if found else None)

    def save(self, context: Any, tokens: Sequence[int]) -> None:
        """Copy out sequence 0, whose cells hold *tokens*; skipped when over budget."""
        if len(tokens) < MIN_GAIN:
            return
        size = int(llama_cpp.llama_state_seq_get_size(context, 0))
        if size <= 0 or size > BUDGET_BYTES:
            return
        data = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(context, data, size, 0))
        if written <= 0:
            return
        state = _State(list(tokens), data, written)
        self._states = [s for s in self._states if not self._same_family(s, state)]
        self._states.append(state)
        while len(self._states) > KEEP or sum(s.size for s in self._states) > BUDGET_BYTES:
            self._states.pop(0)

    def restore(self, context: Any, tokens: list[int]) -> bool:
        """Copy the held state whose tokens are *tokens* back into sequence 0."""
        for state in self._states:
            if state.tokens is tokens:
                read = int(llama_cpp.llama_state_seq_set_data(context, state.data, state.size, 0))
                if read <= 0:
                    log.warning("a saved KV state could not be restored; evaluating instead")
                    self._states.remove(state)
                    return False
                self.restored += 1
                return True
        return False

    @staticmethod
    def _same_family(old: _State, new: _State) -> bool:
        return common_prefix(old.tokens, new.tokens) >= SAME_FAMILY * len(old.tokens)
