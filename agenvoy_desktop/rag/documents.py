"""What a reader makes of a file: an ordered list of blocks, each with where it came from.

Readers only say what the structure is (a heading, a paragraph, a code
block, a mail message) and where it is (a line range, or a page); how that
is cut into chunks of a useful size is :mod:`~agenvoy_desktop.rag.chunking`'s
business.  Line-based formats (Markdown, plain text, code) also carry their
source lines, so every chunk's text can be the exact text of its range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BlockKind = Literal["heading", "paragraph", "code", "message"]
Format = Literal["markdown", "text", "code", "pdf", "docx", "mail"]


@dataclass(frozen=True, slots=True)
class Block:
    """One structural piece of a document.

    ``start_line``/``end_line`` are 1-based and inclusive (text formats, and
    a mail message's span in its file); ``page`` is 1-based (PDF).  ``level``
    is a heading's depth; ``title`` is a message's subject.
    """

    kind: BlockKind
    text: str
    start_line: int | None = None
    end_line: int | None = None
    page: int | None = None
    level: int = 0
    title: str = ""


@dataclass(frozen=True, slots=True)
class Document:
    """A readable file: its collection-relative path, format and blocks.

    ``lines`` are the decoded source lines (without line ends) for Markdown,
    plain text and code; empty for formats whose text is extracted.
    ``language`` names a code file's language (``python``, ``rust``...).
    """

    path: str
    format: Format
    blocks: tuple[Block, ...]
    lines: tuple[str, ...] = ()
    language: str = ""
