"""Markdown as headings, paragraphs and fenced code, each with its line range.

Only the structure chunking needs is parsed: ATX headings (``## Title``),
setext headings (a line underlined with ``===`` or ``---``), fenced code
(so a ``#`` comment inside a fence is not a heading) and YAML front matter.
Everything else — lists, quotes, tables — is paragraph text, kept verbatim.
"""

from __future__ import annotations

import re

from agenvoy_desktop.rag.documents import Block, Document
from agenvoy_desktop.rag.readers.textdecode import decode_text, is_blank, split_lines

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")


def read_markdown(data: bytes, path: str) -> Document:
    """A Markdown file as structural blocks (see the module docstring)."""
    lines = split_lines(decode_text(data, path))
    return Document(path, "markdown", tuple(_blocks(lines)), lines=lines)


def _blocks(lines: tuple[str, ...]) -> list[Block]:
    blocks: list[Block] = []
    number = _front_matter_end(lines, blocks) + 1
    para_start: int | None = None
    while number <= len(lines):
        line = lines[number - 1]
        fence = _FENCE.match(line)
        atx = _ATX.fullmatch(line)
        setext = _SETEXT.fullmatch(line) if para_start is not None else None
        if setext and para_start is not None and number - 1 == para_start:
            text = lines[para_start - 1].strip()
            level = 1 if setext.group(1).startswith("=") else 2
            blocks.append(Block("heading", text, para_start, number, level=level))
            para_start = None
        elif fence or atx or is_blank(line):
            if para_start is not None:
                blocks.append(_block("paragraph", lines, para_start, number - 1))
                para_start = None
            if fence:
                number = _fenced(lines, number, fence.group(1), blocks)
            elif atx:
                title = (atx.group(2) or "").strip()
                blocks.append(Block("heading", title, number, number, level=len(atx.group(1))))
        elif para_start is None:
            para_start = number
        number += 1
    if para_start is not None:
        blocks.append(_block("paragraph", lines, para_start, len(lines)))
    return blocks


def _front_matter_end(lines: tuple[str, ...], blocks: list[Block]) -> int:
    """The last line of a leading ``---`` ... ``---`` block (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    for number in range(2, len(lines) + 1):
        if lines[number - 1].strip() in ("---", "..."):
            blocks.append(_block("paragraph", lines, 1, number))
            return number
    return 0


def _fenced(lines: tuple[str, ...], start: int, opener: str, blocks: list[Block]) -> int:
    """Append the fenced block opened at *start*; return its last line number."""
    closer = re.compile(rf" {{0,3}}{re.escape(opener[0])}{{{len(opener)},}}[ \t]*")
    end = len(lines)
    for number in range(start + 1, len(lines) + 1):
        if closer.fullmatch(lines[number - 1]):
            end = number
            break
    blocks.append(_block("code", lines, start, end))
    return end


def _block(kind: str, lines: tuple[str, ...], start: int, end: int) -> Block:
    text = "\n".join(lines[start - 1 : end])
    if kind == "code":
        return Block("code", text, start, end)
    return Block("paragraph", text, start, end)
