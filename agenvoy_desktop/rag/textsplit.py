"""Cutting text that is too long for one chunk at the least harmful places.

Lines are kept whole where possible; a single line that is itself too long
(a soft-wrapped paragraph, a PDF page without line breaks) is cut between
sentences, then between words, and only as a last resort inside a word.
"""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"\S.*?(?:[.!?…。！？]+(?=\s)|$)")
_WORD = re.compile(r"\S+")


def split_line(line: str, max_chars: int) -> list[str]:
    """*line* as pieces of at most *max_chars*, each a slice of it without outer spaces."""
    pieces: list[str] = []
    current: tuple[int, int] | None = None
    for start, end in _units(line, max_chars):
        if current is not None and end - current[0] <= max_chars:
            current = (current[0], end)
            continue
        if current is not None:
            pieces.append(line[current[0] : current[1]].rstrip())
        current = (start, end)
    if current is not None:
        pieces.append(line[current[0] : current[1]].rstrip())
    return pieces


def _units(line: str, max_chars: int) -> list[tuple[int, int]]:
    """Spans of sentences, or of the words of a sentence too long, or slices of a huge word."""
    units: list[tuple[int, int]] = []
    for sentence in _SENTENCE.finditer(line):
        if sentence.end() - sentence.start() <= max_chars:
            units.append(sentence.span())
            continue
        for word in _WORD.finditer(line, sentence.start(), sentence.end()):
            start, end = word.span()
            units.extend((s, min(s + max_chars, end)) for s in range(start, end, max_chars))
    return units


def split_text(text: str, max_chars: int) -> list[str]:
    """Multi-line *text* as pieces of at most *max_chars*, cut between lines where possible."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        if len(line) > max_chars:
            if current:
                pieces.append("\n".join(current))
                current, size = [], 0
            pieces.extend(split_line(line, max_chars))
            continue
        added = len(line) + (1 if current else 0)
        if current and size + added > max_chars:
            pieces.append("\n".join(current))
            current, size = [line], len(line)
        else:
            current.append(line)
            size += added
    if current:
        pieces.append("\n".join(current))
    return [p.strip("\n") for p in pieces if p.strip()]


def pack_texts(texts: list[str], max_chars: int, sep: str = "\n\n") -> list[str]:
    """Join consecutive *texts* with *sep* into pieces of at most *max_chars*; split long ones."""
    pieces: list[str] = []
    current = ""
    for text in texts:
        parts = [text] if len(text) <= max_chars else split_text(text, max_chars)
        for part in parts:
            if current and len(current) + len(sep) + len(part) <= max_chars:
                current = f"{current}{sep}{part}"
            else:
                if current:
                    pieces.append(current)
                current = part
    if current:
        pieces.append(current)
    return pieces
