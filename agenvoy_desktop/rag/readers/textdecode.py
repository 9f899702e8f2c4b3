"""Bytes to text lines, and the "is this text at all?" decision.

Text files come in UTF-8 (with or without a BOM), UTF-16 with a BOM, and old
Windows code pages; binary files renamed ``.txt`` come too.  A NUL byte, or
bytes that decode to mostly control characters, mean "not a text file" —
a reason shown to the user rather than a page of mojibake in the index.
Lines split on ``\\n``, ``\\r\\n`` and ``\\r`` only (not the form feeds and
Unicode separators ``str.splitlines`` also splits on), so line numbers
match what an editor shows.
"""

from __future__ import annotations

import codecs

from agenvoy_desktop.rag.documents import Block
from agenvoy_desktop.rag.errors import UnreadableFileError

SNIFF_BYTES = 8192
MAX_CONTROL_RATIO = 0.05
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b")
_BOMS_16 = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def looks_binary(data: bytes) -> bool:
    """Whether *data* (a file's first bytes) is clearly not text: a NUL outside UTF-16."""
    return not data.startswith(_BOMS_16) and b"\x00" in data[:SNIFF_BYTES]


def decode_text(data: bytes, path: str) -> str:
    """*data* as text, or :class:`UnreadableFileError` ("not a text file")."""
    if data.startswith(_BOMS_16):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise UnreadableFileError(path, "not a text file (broken UTF-16)") from None
    if looks_binary(data):
        raise UnreadableFileError(path, "not a text file (binary content)")
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _control_ratio(text[:SNIFF_BYTES]) <= MAX_CONTROL_RATIO:
            return text
        break
    raise UnreadableFileError(path, "not a text file (unknown encoding or binary content)")


def _control_ratio(sample: str) -> float:
    if not sample:
        return 0.0
    controls = sum(1 for c in sample if ord(c) < 32 and c not in _ALLOWED_CONTROLS)
    return controls / len(sample)


def split_lines(text: str) -> tuple[str, ...]:
    """*text*'s lines without their ends; a final line end opens no extra line."""
    norm = text.replace("\r\n", "\n").replace("\r", "\n")
    if not norm:
        return ()
    return tuple(norm.removesuffix("\n").split("\n"))


def is_blank(line: str) -> bool:
    return not line.strip()


def paragraph_blocks(
    lines: tuple[str, ...], first: int = 1, last: int | None = None
) -> list[Block]:
    """Runs of non-blank lines in ``lines[first-1:last]`` as paragraph blocks (1-based)."""
    end = len(lines) if last is None else last
    blocks: list[Block] = []
    start: int | None = None
    for number in range(first, end + 1):
        if is_blank(lines[number - 1]):
            if start is not None:
                blocks.append(_paragraph(lines, start, number - 1))
                start = None
        elif start is None:
            start = number
    if start is not None:
        blocks.append(_paragraph(lines, start, end))
    return blocks


def _paragraph(lines: tuple[str, ...], start: int, end: int) -> Block:
    return Block("paragraph", "\n".join(lines[start - 1 : end]), start_line=start, end_line=end)
