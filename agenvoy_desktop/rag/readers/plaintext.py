"""Plain text (paragraphs between blank lines) and source code (one block, its lines kept)."""

from __future__ import annotations

from agenvoy_desktop.rag.documents import Block, Document
from agenvoy_desktop.rag.readers.formats import language_of
from agenvoy_desktop.rag.readers.textdecode import decode_text, paragraph_blocks, split_lines


def read_text(data: bytes, path: str) -> Document:
    """A text file as paragraph blocks with their line ranges."""
    lines = split_lines(decode_text(data, path))
    return Document(path, "text", tuple(paragraph_blocks(lines)), lines=lines)


def read_code(data: bytes, path: str) -> Document:
    """A source file as one code block; the chunker finds its top-level definitions."""
    lines = split_lines(decode_text(data, path))
    blocks = (Block("code", "\n".join(lines), 1, len(lines)),) if lines else ()
    return Document(path, "code", blocks, lines=lines, language=language_of(path))
