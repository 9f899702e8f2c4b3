"""Test doubles for logic tests (the real model is tested in tests/llm)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import numpy.typing as npt

DIM = 64


class HashingEmbedder:
    """Bag-of-words hashing vectors: texts sharing words are similar.

    Deterministic and instant; runs on the caller's thread (futures are
    completed at once), which is fine for logic tests.
    """

    def __init__(self, dim: int = DIM) -> None:
        self._dim = dim
        self.calls = 0

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % self._dim] += 1.0
            out[row, 0] += 1e-3
            out[row] /= np.linalg.norm(out[row])
        return out

    def submit(self, texts: Sequence[str]) -> Future[npt.NDArray[np.float32]]:
        future: Future[npt.NDArray[np.float32]] = Future()
        future.set_result(self.embed(texts))
        return future


class OtherHashingEmbedder(HashingEmbedder):
    """Another embedding model of the same width (MiniLM and multilingual-e5-small are both
    384): its vectors must never be compared with :class:`HashingEmbedder`'s."""
