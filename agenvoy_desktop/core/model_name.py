"""Which embedding model made a vector: the name stored with it.

Vectors of two models are not comparable, even when both are 384 wide (MiniLM
and multilingual-e5-small are), so every store that keeps vectors records the
name of the model that made them and embeds again under another name.  No
numpy here: the stores import this at start-up, before any model loads.
"""

from __future__ import annotations

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
"""The prepared model's name (its converter writes it into the GGUF), and the
name of an embedder that has none (a test double)."""


def embedding_model_name(embedder: object) -> str:
    """The embedder's own name (``llm.embedder.Embedder.model_name``: GGUF ``general.name``).

    Profiles made before names were read recorded :data:`DEFAULT_MODEL_NAME`, which is
    also the prepared MiniLM's own name, so they keep their vectors.  A model chosen in
    Settings of the same width used to be recorded under that name too: its questions
    were then compared with MiniLM's stored vectors.
    """
    name = getattr(embedder, "model_name", None)
    return name if isinstance(name, str) and name else DEFAULT_MODEL_NAME
