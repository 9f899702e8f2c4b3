"""What the core needs from an embedding model (implemented in ``llm/``).

The core never imports the llama.cpp engine: the composition root (CLI,
agent, UI) hands it any object with this shape.  Vectors are float32 rows,
L2-normalised, so inner product is cosine similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

import numpy as np
import numpy.typing as npt


class TextEmbedder(Protocol):
    """An embedding model running on its own worker thread."""

    @property
    def dim(self) -> int: ...

    def submit(self, texts: Sequence[str]) -> Future[npt.NDArray[np.float32]]: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
