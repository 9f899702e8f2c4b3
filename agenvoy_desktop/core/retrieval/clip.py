"""Cutting text to a length, marking the cut (hints, prompts, embeddings, queries)."""

from __future__ import annotations

ELLIPSIS = "…"


def clip_end(text: str, limit: int) -> str:
    """*text*, or its first ``limit - 1`` characters and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def clip_line(text: str, limit: int) -> str:
    """*text* on one line (runs of whitespace become one space), clipped at its end."""
    return clip_end(" ".join(text.split()), limit)


def keep_ends(text: str, limit: int, gap: str) -> str:
    """*text*, or its first and last ``limit // 2`` characters joined by *gap*.

    For error texts and tracebacks, whose message is at the end.
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}{gap}{text[-half:]}"
